/**
 * The Driver Station's link to the robot (images/workspace/extension/src/halsim.ts) against a real
 * WebSocket server on loopback that stands where the control plane's `.cp/halsim/wpilibws` is: what
 * it sends (the heartbeat, joystick 0 with `>new_data`, the state on each change), and how it takes
 * a connection that ends (lost: retried and disabled, never enabled again by itself; 4001: another
 * tab took over, not retried until "Drive from here"). Node's own WebSocket is the browser's.
 */
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket as ServerSocket } from 'ws';
import { NEUTRAL } from '../../images/workspace/extension/src/ds-input.ts';
import type { HalSimMessage } from '../../images/workspace/extension/src/ds-state.ts';
import { DriverStationLink, TAKEN_OVER, type LinkUpdate } from '../../images/workspace/extension/src/halsim.ts';
import { eventually } from '../helpers/controllers.ts';

/** A connection the server accepted: what it received, with when. */
interface Connection {
  socket: ServerSocket;
  received: { at: number; message: HalSimMessage }[];
}

let server: WebSocketServer;
let url: string;
const connections: Connection[] = [];
const links: DriverStationLink[] = [];

beforeAll(async () => {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/.cp/halsim/wpilibws' });
  await new Promise((resolve) => server.once('listening', resolve));
  url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/.cp/halsim/wpilibws`;
  server.on('connection', (socket) => {
    const connection: Connection = { socket, received: [] };
    connections.push(connection);
    socket.on('message', (data: Buffer) => connection.received.push({ at: performance.now(), message: JSON.parse(data.toString()) as HalSimMessage }));
  });
});

afterEach(() => {
  for (const link of links.splice(0)) link.dispose();
  for (const { socket } of connections.splice(0)) socket.terminate();
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

/** A link, its updates, connected to run `run-1`, and the server's side of its connection. */
async function open(): Promise<{ link: DriverStationLink; updates: LinkUpdate[]; connection: Connection }> {
  const updates: LinkUpdate[] = [];
  const link = new DriverStationLink(url, (update) => updates.push(update));
  links.push(link);
  const before = connections.length;
  link.setRun('run-1');
  await eventually('the link connected', async () => link.current.link === 'connected' && connections.length > before, 10_000);
  return { link, updates, connection: connections.at(-1)! };
}

const driverStation = (connection: Connection) => connection.received.filter(({ message }) => message.type === 'DriverStation');
const joystick = (connection: Connection) => connection.received.filter(({ message }) => message.type === 'Joystick');

it('opens disabled and beats: a DriverStation message with >new_data at least every 100 ms, never enabled', async () => {
  const { connection } = await open();
  await eventually('20 heartbeats', async () => driverStation(connection).length >= 20, 10_000);
  const beats = driverStation(connection).slice(0, 20);
  for (const { message } of beats) expect(message.data).toMatchObject({ '>enabled': false, '>new_data': true, '>ds': true });
  const gaps = beats.slice(1).map((beat, index) => beat.at - beats[index]!.at);
  // 50 ms apart when the machine keeps up (100 on average is the contract's), and never near the
  // 500 ms of silence after which the control plane disables the robot, even on a busy machine.
  expect(gaps.reduce((sum, gap) => sum + gap, 0) / gaps.length).toBeLessThan(100);
  expect(Math.max(...gaps)).toBeLessThan(400);
});

it('tells the robot at once when it is enabled, and sends joystick 0 about 40 times a second while an input is live, each followed by >new_data', async () => {
  const { link, connection } = await open();
  link.enable();
  await eventually('an enabled message', async () => driverStation(connection).some(({ message }) => message.data['>enabled'] === true), 5000);
  const forward = { ...NEUTRAL, axes: [0, -1, 0, 0, 0, 0] };
  link.setInput(forward, true);
  const from = connection.received.length;
  await eventually('20 joystick messages', async () => joystick(connection).length >= 20, 10_000);
  const sent = connection.received.slice(from);
  const sticks = sent.filter(({ message }) => message.type === 'Joystick');
  expect(sticks[0]!.message).toEqual({ type: 'Joystick', device: '0', data: { '>axes': [0, -1, 0, 0, 0, 0], '>buttons': NEUTRAL.buttons, '>povs': [-1] } });
  // Each joystick message is followed by the Driver Station's, whose >new_data makes it visible to robot code.
  const followers = sent.flatMap(({ message }, index) => (message.type === 'Joystick' && index + 1 < sent.length ? [sent[index + 1]!.message] : []));
  expect(followers.length).toBeGreaterThanOrEqual(19);
  for (const follower of followers) expect(follower).toMatchObject({ type: 'DriverStation', data: { '>new_data': true, '>enabled': true } });
  const span = sticks.at(-1)!.at - sticks[0]!.at;
  expect(span / (sticks.length - 1)).toBeLessThan(60);
  // Not live and unchanged: no more joystick messages, only the heartbeat.
  link.setInput(forward, false);
  const sticksBefore = joystick(connection).length;
  const beatsBefore = driverStation(connection).length;
  await eventually('10 more heartbeats', async () => driverStation(connection).length >= beatsBefore + 10, 10_000);
  // (At most the one a tick under way had sent.)
  expect(joystick(connection).length - sticksBefore).toBeLessThanOrEqual(1);
  // Changed while not live: sent once.
  link.setInput(NEUTRAL, false);
  await eventually('the neutral joystick', async () => joystick(connection).at(-1)!.message.data['>axes']!.toString() === '0,0,0,0,0,0', 5000);
});

it('shows disabled at once when the connection is lost, connects again, and starts disabled', async () => {
  const { link, updates, connection } = await open();
  link.enable();
  link.setMode('autonomous');
  expect(link.current.enabled).toBe(false);
  link.enable();
  expect(link.current).toMatchObject({ enabled: true, mode: 'autonomous' });
  connection.socket.terminate();
  await eventually('the link lost', async () => updates.some((update) => update.state.link === 'lost'), 5000);
  expect(updates.find((update) => update.state.link === 'lost')!.state.enabled).toBe(false);
  await eventually('connected again', async () => link.current.link === 'connected' && connections.length === 2, 10_000);
  const again = connections[1]!;
  await eventually('a message on the new connection', async () => driverStation(again).length > 0, 5000);
  expect(driverStation(again)[0]!.message.data).toMatchObject({ '>enabled': false, '>autonomous': true });
  expect(link.current.enabled).toBe(false);
});

it('stays off after another tab took over (4001), says so, and drives again, disabled, on "Drive from here"', async () => {
  const first = await open();
  first.link.enable();
  // A second link closed otherwise at the same moment: its retry marks when the first would have connected again.
  const second = await open();
  first.connection.socket.close(TAKEN_OVER, 'Another tab took over driving');
  second.connection.socket.close(1012, 'restarting');
  await eventually('the second connected again', async () => second.link.current.link === 'connected' && connections.length === 3, 10_000);
  expect(first.link.current).toMatchObject({ link: 'taken-over', enabled: false });
  expect(first.updates.at(-1)!.detail).toBe('Another tab took over driving');
  // The extension's look at the run (every 2 s) does not connect it either.
  first.link.setRun('run-1');
  expect(first.link.current.link).toBe('taken-over');
  first.link.enable();
  expect(first.link.current.enabled).toBe(false);

  first.link.driveFromHere();
  await eventually('the first connected again', async () => first.link.current.link === 'connected' && connections.length === 4, 10_000);
  await eventually('a message on it', async () => driverStation(connections[3]!).length > 0, 5000);
  expect(driverStation(connections[3]!)[0]!.message.data['>enabled']).toBe(false);
});

it('disables the robot before it closes: when the run ends and when the Driver Station is closed', async () => {
  const { link, connection } = await open();
  link.enable();
  await eventually('enabled', async () => driverStation(connection).some(({ message }) => message.data['>enabled'] === true), 5000);
  const closed = new Promise<number>((resolve) => connection.socket.once('close', resolve));
  link.dispose();
  expect(await closed).toBe(1000);
  expect(driverStation(connection).at(-1)!.message.data['>enabled']).toBe(false);

  const other = await open();
  other.link.enable();
  const ended = new Promise<number>((resolve) => other.connection.socket.once('close', resolve));
  other.link.setRun(null);
  expect(await ended).toBe(1000);
  expect(driverStation(other.connection).at(-1)!.message.data['>enabled']).toBe(false);
  expect(other.link.current).toMatchObject({ link: 'no-run', enabled: false });
});

it('connects anew, disabled, when another run runs (another robot program)', async () => {
  const { link, connection } = await open();
  link.enable();
  const closed = new Promise<number>((resolve) => connection.socket.once('close', resolve));
  link.setRun('run-2');
  expect(link.current.enabled).toBe(false);
  expect(await closed).toBe(1000);
  await eventually('connected to the new run', async () => link.current.link === 'connected' && connections.length === 2, 10_000);
  await eventually('a message on the new connection', async () => driverStation(connections[1]!).length > 0, 5000);
  expect(driverStation(connections[1]!)[0]!.message.data['>enabled']).toBe(false);
});
