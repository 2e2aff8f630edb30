/**
 * Issue 43 item 3, the robot's field in a coach's look (api/proxy/robot-fields.ts), against
 * NetworkTables 4 servers on 127.0.0.1 that send what each test says (a simulator is student code:
 * some send too much). The connection is made as Upstreams makes it; here `connect` is a plain TCP
 * connection to the server, or a refusal as Upstreams refuses an address that is not the run's.
 * Each branch: a Field2d read and kept up to date; an unverified address (nothing sent, tried again
 * later); a frame too large; too many frames a second; what is kept bounded (topics, arrays,
 * strings); an idle reader let go; the readers per process bounded.
 */
import net from 'node:net';
import { encode } from '@msgpack/msgpack';
import { WebSocketServer, type WebSocket } from 'ws';
import { MAX_FRAME_BYTES, MAX_FRAMES_PER_SECOND, MAX_NUMBERS, MAX_READERS, MAX_TOPICS, RobotFields, type FieldReading } from '../../api/proxy/robot-fields.ts';
import { UnverifiedUpstreamError } from '../../api/proxy/upstreams.ts';
import { eventually } from '../helpers/controllers.ts';

interface Server {
  endpoint: string;
  /** Connections now open. */
  clients: Set<WebSocket>;
  /** Connections made so far. */
  connections: () => number;
  /** What clients sent (text frames, parsed). */
  heard: unknown[];
  close: () => Promise<void>;
}

/** A NetworkTables 4 server on 127.0.0.1 that calls `connected` with each client once it subscribed. */
async function ntServer(connected: (socket: WebSocket) => void): Promise<Server> {
  const clients = new Set<WebSocket>();
  const heard: unknown[] = [];
  let connections = 0;
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    handleProtocols: (offered) => (offered.has('v4.1.networktables.first.wpi.edu') ? 'v4.1.networktables.first.wpi.edu' : false),
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  wss.on('connection', (socket) => {
    clients.add(socket);
    connections += 1;
    socket.on('close', () => clients.delete(socket));
    socket.once('message', (data) => {
      heard.push(JSON.parse(String(data)));
      connected(socket);
    });
  });
  const { port } = wss.address() as net.AddressInfo;
  return {
    endpoint: `127.0.0.1:${port}`,
    clients,
    connections: () => connections,
    heard,
    close: () =>
      new Promise((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close(() => resolve());
      }),
  };
}

/** Announces topics (name → id) in one text frame. */
const announce = (socket: WebSocket, topics: Record<string, number>) =>
  socket.send(JSON.stringify(Object.entries(topics).map(([name, id]) => ({ method: 'announce', params: { name, id, type: 'double[]', properties: {} } }))));
/** Sends values (`[id, time, type, value]` each) in one binary frame. */
const values = (socket: WebSocket, ...each: [number, unknown][]) =>
  socket.send(Buffer.concat(each.map(([id, value]) => encode([id, 0, typeof value === 'string' ? 4 : 17, value]))));

/** Upstreams' connect, as it connects once the address is verified: a TCP connection. */
const plain = {
  connect: (_target: unknown, _upstream: unknown, endpoint: string) =>
    new Promise<net.Socket>((resolve, reject) => {
      const at = endpoint.lastIndexOf(':');
      const socket = net.connect({ host: endpoint.slice(0, at), port: Number(endpoint.slice(at + 1)) });
      socket.once('connect', () => resolve(socket));
      socket.once('error', reject);
    }),
};

let server: Server | undefined;
let fields: RobotFields | undefined;
afterEach(async () => {
  fields?.close();
  fields = undefined;
  await server?.close();
  server = undefined;
});

const target = (runId = 'run-1') => ({ workspaceId: 'ws-1', runId, simEndpoint: server!.endpoint });
const robotOf = (reading: FieldReading) => reading.fields[0]?.objects.find((object) => object.drawn === 'robot')?.poses[0];

/** A server publishing one Field2d: its type, the robot's pose and a trajectory; `robot` sends a new pose. */
async function fieldServer(): Promise<{ robot: (x: number) => void }> {
  let client: WebSocket | undefined;
  server = await ntServer((socket) => {
    client = socket;
    announce(socket, { '/SmartDashboard/Field/.type': 1, '/SmartDashboard/Field/Robot': 2, '/SmartDashboard/Field/traj': 3, '/other/speed': 4 });
    const trajectory = Array.from({ length: 10 }, (_, i) => [i, i, 0]).flat();
    values(socket, [1, 'Field2d'], [2, [1.5, 2.5, 90]], [3, trajectory], [4, [3]]);
  });
  return { robot: (x) => values(client!, [2, [x, 2.5, 90]]) };
}

describe("the robot's field, read from a run's NetworkTables", () => {
  it('subscribes, reads the Field2d (the robot first, a trajectory as a line) and keeps it up to date', async () => {
    const { robot } = await fieldServer();
    fields = new RobotFields(plain);
    const first = await fields.read(target());
    expect(server!.heard).toEqual([[{ method: 'subscribe', params: { topics: [''], subuid: 1, options: { prefix: true, periodic: 0.1 } } }]]);
    expect(first.state).toBe('live');
    expect(first.fields).toEqual([
      {
        table: '/SmartDashboard/Field',
        name: 'Field',
        objects: [
          { name: 'Robot', poses: [{ x: 1.5, y: 2.5, degrees: 90 }], drawn: 'robot' },
          { name: 'traj', poses: Array.from({ length: 10 }, (_, i) => ({ x: i, y: i, degrees: 0 })), drawn: 'line' },
        ],
      },
    ]);
    robot(7);
    await eventually('the new pose', async () => robotOf(await fields!.read(target()))?.x === 7 || undefined);
    // One connection however often it is read.
    expect(server!.clients.size).toBe(1);
  });

  it('connects to nothing the upstreams do not verify (unreachable), and tries again a while later', async () => {
    await fieldServer();
    let verified = false;
    const upstreams = {
      connect: (...args: Parameters<typeof plain.connect>) => (verified ? plain.connect(...args) : Promise.reject(new UnverifiedUpstreamError(args[2]))),
    };
    // Within the retry time (a minute here) it says why, and connects to nothing.
    fields = new RobotFields(upstreams, { retryMs: 60_000 });
    expect(await fields.read(target())).toEqual({ state: 'unreachable', fields: [] });
    verified = true;
    expect(await fields.read(target())).toEqual({ state: 'unreachable', fields: [] });
    expect(server!.clients.size).toBe(0);
    expect(server!.heard).toEqual([]);
    fields.close();
    // Past it, a read opens it again.
    verified = false;
    fields = new RobotFields(upstreams, { retryMs: 0 });
    expect((await fields.read(target())).state).toBe('unreachable');
    verified = true;
    await eventually('read again', async () => (await fields!.read(target())).state === 'live' || undefined);
    expect(robotOf(await fields.read(target()))).toEqual({ x: 1.5, y: 2.5, degrees: 90 });
  });

  it('ends a reader sent a frame over MAX_FRAME_BYTES (too_much), and says so until it is let go', async () => {
    server = await ntServer((socket) => {
      announce(socket, { '/SmartDashboard/Field/.type': 1 });
      socket.send(Buffer.alloc(MAX_FRAME_BYTES + 1));
    });
    fields = new RobotFields(plain);
    await eventually('too much', async () => (await fields!.read(target())).state === 'too_much' || undefined);
    await eventually('its connection closed', async () => server!.clients.size === 0 || undefined);
    expect(await fields.read(target())).toEqual({ state: 'too_much', fields: [] });
    expect(server.clients.size).toBe(0);
  });

  it('ends a reader sent more than MAX_FRAMES_PER_SECOND frames (a flood of small values)', async () => {
    server = await ntServer((socket) => {
      announce(socket, { '/SmartDashboard/Field/Robot': 2 });
      for (let i = 0; i <= MAX_FRAMES_PER_SECOND + 10; i++) values(socket, [2, [i, 0, 0]]);
    });
    fields = new RobotFields(plain);
    await eventually('too much', async () => (await fields!.read(target())).state === 'too_much' || undefined);
    await eventually('its connection closed', async () => server!.clients.size === 0 || undefined);
  });

  it('keeps what a field needs within bounds: topics past MAX_TOPICS, and arrays past MAX_NUMBERS are dropped', async () => {
    server = await ntServer((socket) => {
      const many: Record<string, number> = {};
      for (let i = 0; i < MAX_TOPICS; i++) many[`/noise/${i}`] = 1000 + i;
      announce(socket, many);
      // Announced past the bound: ignored.
      announce(socket, { '/Late/.type': 1, '/Late/Robot': 2 });
      values(socket, [1, 'Field2d'], [2, [1, 1, 0]]);
    });
    fields = new RobotFields(plain);
    await fields.read(target());
    await eventually('the frames read', async () => (await fields!.read(target())).state === 'live' || undefined);
    expect((await fields.read(target())).fields).toEqual([]);
    await server.close();

    server = await ntServer((socket) => {
      announce(socket, { '/A/.type': 1, '/A/Robot': 2, '/A/huge': 3, '/A/map': 5 });
      values(socket, [1, 'Field2d'], [2, [2, 2, 45]], [3, Array.from({ length: MAX_NUMBERS + 3 }, () => 1)]);
      // An unannounced id, and a map (not a NetworkTables value): ignored.
      socket.send(Buffer.concat([encode([99, 0, 17, [5, 5, 5]]), encode([5, 0, 17, { x: 1 }])]));
    });
    fields.close();
    fields = new RobotFields(plain);
    const reading = await eventually('the field', async () => {
      const now = await fields!.read(target('run-2'));
      return now.fields.length > 0 ? now : undefined;
    });
    expect(reading.fields).toEqual([{ table: '/A', name: 'A', objects: [{ name: 'Robot', poses: [{ x: 2, y: 2, degrees: 45 }], drawn: 'robot' }] }]);
  });

  it('lets a reader go once nobody read it for the idle time (its connection closed)', async () => {
    await fieldServer();
    fields = new RobotFields(plain, { idleMs: 300 });
    expect((await fields.read(target())).state).toBe('live');
    expect(server!.heard).toHaveLength(1);
    await eventually('the reader let go', async () => (fields!.size === 0 && server!.clients.size === 0) || undefined);
  });

  it(`keeps at most MAX_READERS (${MAX_READERS}) readers, letting the least recently read go first`, async () => {
    await fieldServer();
    fields = new RobotFields(plain);
    for (let i = 0; i < MAX_READERS; i++) await fields.read(target(`run-${i}`));
    // run-0 read again: run-1 is now the least recently read.
    await fields.read(target('run-0'));
    await fields.read(target('run-new'));
    expect(fields.size).toBe(MAX_READERS);
    await eventually('one connection closed', async () => server!.clients.size === MAX_READERS || undefined);
    expect(server!.connections()).toBe(MAX_READERS + 1);
    // run-0 was kept (read again, it opens nothing); run-1 went (read again, it opens a connection).
    expect((await fields.read(target('run-0'))).state).toBe('live');
    expect(server!.connections()).toBe(MAX_READERS + 1);
    expect((await fields.read(target('run-1'))).state).toBe('live');
    expect(server!.connections()).toBe(MAX_READERS + 2);
    expect(fields.size).toBe(MAX_READERS);
  }, 30_000);
});
