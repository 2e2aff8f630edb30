/**
 * Issue 43 item 3, the robot's field in a coach's look (api/proxy/robot-fields.ts), against
 * NetworkTables 4 servers on 127.0.0.1 that send what each test says (a simulator is student code:
 * some send too much). The connection is made as Upstreams makes it; here `connect` is a plain TCP
 * connection to the server, or a refusal as Upstreams refuses an address that is not the run's.
 * The servers here send every value they have whatever was asked (the subscriptions are checked as
 * sent): the reader keeps only what a field needs. Each branch: a Field2d read and kept up to date,
 * names asked first and then only what a field needs; an unverified address (nothing sent, tried
 * again later); a frame too large; past each rate (frames, values' bytes, names' bytes); hostile
 * MessagePack survived; what is kept and answered bounded (topics, arrays, numbers in all, tables,
 * objects, poses); an idle reader let go; the readers per process bounded.
 */
import net from 'node:net';
import { encode } from '@msgpack/msgpack';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  FRAMES_PER_SECOND,
  MAX_FRAME_BYTES,
  MAX_KEPT_NUMBERS,
  MAX_NUMBERS,
  MAX_OBJECTS,
  MAX_POSES,
  MAX_READERS,
  MAX_TABLES,
  MAX_TOPICS,
  RobotFields,
  TEXT_BYTES_PER_10S,
  VALUE_BYTES_PER_SECOND,
  type FieldReading,
} from '../../api/proxy/robot-fields.ts';
import { UnverifiedUpstreamError } from '../../api/proxy/upstreams.ts';
import { eventually } from '../helpers/controllers.ts';

interface Server {
  endpoint: string;
  /** Connections now open. */
  clients: Set<WebSocket>;
  /** Connections made so far. */
  connections: () => number;
  /** What clients sent (text frames, parsed), in order. */
  heard: unknown[];
  close: () => Promise<void>;
}

/** A NetworkTables 4 server on 127.0.0.1 that calls `connected` with each client once it sent its first message (its subscription of names). */
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
    let first = true;
    socket.on('message', (data) => {
      heard.push(JSON.parse(String(data)));
      if (first) connected(socket);
      first = false;
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
/** `count` poses along a line. */
const line = (count: number, from = 0) => Array.from({ length: count }, (_, i) => [from + i, i, 0]).flat();

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
const robotOf = (reading: FieldReading, table = '/SmartDashboard/Field') =>
  reading.fields.find((each) => each.table === table)?.objects.find((object) => object.drawn === 'robot')?.poses[0];
/** Reads until `test` holds of the reading, and answers it. */
const readUntil = (what: string, test: (reading: FieldReading) => boolean, runId?: string) =>
  eventually(what, async () => {
    const now = await fields!.read(target(runId));
    return test(now) ? now : undefined;
  });

/** A server publishing one Field2d: its type, the robot's pose and a trajectory; `robot` sends a new pose. */
async function fieldServer(): Promise<{ robot: (x: number) => void }> {
  let client: WebSocket | undefined;
  server = await ntServer((socket) => {
    client = socket;
    announce(socket, { '/SmartDashboard/Field/.type': 1, '/SmartDashboard/Field/Robot': 2, '/SmartDashboard/Field/traj': 3, '/other/speed': 4 });
    values(socket, [1, 'Field2d'], [2, [1.5, 2.5, 90]], [3, line(10)], [4, [3]]);
  });
  return { robot: (x) => values(client!, [2, [x, 2.5, 90]]) };
}

describe("the robot's field, read from a run's NetworkTables", () => {
  it('asks for the names, then only for what a field needs; reads the Field2d (the robot first, a trajectory as a line) and keeps it up to date', async () => {
    const { robot } = await fieldServer();
    fields = new RobotFields(plain);
    const first = await fields.read(target());
    expect(server!.heard[0]).toEqual([{ method: 'subscribe', params: { topics: [''], subuid: 1, options: { prefix: true, topicsonly: true } } }]);
    await eventually('the values asked for', async () => server!.heard.length === 2 || undefined);
    // The .types and the Field2d's objects, by name: not /other/speed.
    expect(server!.heard[1]).toEqual([
      {
        method: 'subscribe',
        params: { topics: ['/SmartDashboard/Field/.type', '/SmartDashboard/Field/Robot', '/SmartDashboard/Field/traj'], subuid: 2, options: { periodic: 0.1 } },
      },
    ]);
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
    await readUntil('the new pose', (now) => robotOf(now)?.x === 7);
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
    expect(server!.connections()).toBe(0);
    fields.close();
    // Past it, a read opens it again.
    verified = false;
    fields = new RobotFields(upstreams, { retryMs: 0 });
    expect((await fields.read(target())).state).toBe('unreachable');
    verified = true;
    await readUntil('read again', (now) => now.state === 'live' && robotOf(now) !== undefined);
  });

  it('ends a reader sent a frame over MAX_FRAME_BYTES (too_much), says so until it is let go, and logs it', async () => {
    server = await ntServer((socket) => socket.send(Buffer.alloc(MAX_FRAME_BYTES + 1)));
    const logged: string[] = [];
    const log = { warning: (_fields: unknown, message: string) => logged.push(message) } as never;
    fields = new RobotFields(plain, { log });
    await readUntil('too much', (now) => now.state === 'too_much');
    await eventually('its connection closed', async () => server!.clients.size === 0 || undefined);
    expect(await fields.read(target())).toEqual({ state: 'too_much', fields: [] });
    expect(server.connections()).toBe(1);
    expect(logged).toEqual(["stopped reading a run's NetworkTables for a coach's look: its simulator sent more than a look reads"]);
  });

  it.each([
    [
      'more than FRAMES_PER_SECOND frames (a flood of small values)',
      (socket: WebSocket) => {
        announce(socket, { '/F/.type': 1 });
        for (let i = 0; i < 5 * FRAMES_PER_SECOND; i++) values(socket, [1, 'Field2d']);
      },
    ],
    [
      'more than VALUE_BYTES_PER_SECOND of values',
      (socket: WebSocket) => {
        for (let i = 0; i < 4; i++) socket.send(Buffer.alloc(VALUE_BYTES_PER_SECOND / 2));
      },
    ],
    [
      'more than TEXT_BYTES_PER_10S of names',
      (socket: WebSocket) => {
        const junk = JSON.stringify([{ method: 'noise', params: { text: 'x'.repeat(TEXT_BYTES_PER_10S / 3) } }]);
        for (let i = 0; i < 4; i++) socket.send(junk);
      },
    ],
  ])('ends a reader sent %s', async (_what, send) => {
    server = await ntServer(send);
    fields = new RobotFields(plain);
    await readUntil('too much', (now) => now.state === 'too_much');
    await eventually('its connection closed', async () => server!.clients.size === 0 || undefined);
  });

  it('survives MessagePack a general decoder would build gigabytes of, and reads on', async () => {
    const nested = Buffer.alloc(30_000 * 3);
    for (let at = 0; at < nested.length; at += 3) nested.set([0xdc, 0x3f, 0xff], at);
    let client: WebSocket | undefined;
    server = await ntServer((socket) => {
      client = socket;
      announce(socket, { '/F/.type': 1, '/F/Robot': 2 });
      values(socket, [1, 'Field2d']);
      socket.send(Buffer.concat([Buffer.from([0x94, 2, 0, 17]), nested]));
    });
    fields = new RobotFields(plain);
    await readUntil('the table', (now) => now.fields.length === 1);
    values(client!, [2, [4, 5, 6]]);
    expect(robotOf(await readUntil('the robot', (now) => robotOf(now, '/F') !== undefined), '/F')).toEqual({ x: 4, y: 5, degrees: 6 });
  });

  it('keeps no more than MAX_TOPICS names, MAX_NUMBERS numbers an array and MAX_KEPT_NUMBERS in all', async () => {
    server = await ntServer((socket) => {
      // /Early fills the names to the bound; /Late comes past it.
      const many: Record<string, number> = { '/Early/.type': 1, '/Early/Robot': 2 };
      for (let i = 2; i < MAX_TOPICS; i++) many[`/noise/${i}`] = 1000 + i;
      announce(socket, many);
      announce(socket, { '/Late/.type': 3, '/Late/Robot': 4 });
      values(socket, [1, 'Field2d'], [3, 'Field2d'], [2, [1, 1, 0]], [4, [2, 2, 0]]);
    });
    fields = new RobotFields(plain);
    const early = await readUntil('the early field', (now) => robotOf(now, '/Early') !== undefined);
    expect(early.fields.map((each) => each.table)).toEqual(['/Early']);
    await server.close();

    // Arrays of a table that is not a Field2d (/Other) are not kept; /Z's paths fill MAX_KEPT_NUMBERS;
    // /A's robot comes after them, and a path past MAX_NUMBERS; /B's type last, to know all came.
    const paths = MAX_KEPT_NUMBERS / MAX_NUMBERS;
    const topics: Record<string, number> = { '/A/.type': 1, '/A/Robot': 2, '/A/huge': 3, '/Z/.type': 4, '/B/.type': 5 };
    for (let i = 0; i < paths + 1; i++) {
      topics[`/Z/path${String(i).padStart(2, '0')}`] = 10 + i;
      topics[`/Other/path${i}`] = 100 + i;
    }
    let client: WebSocket | undefined;
    server = await ntServer((socket) => {
      client = socket;
      announce(socket, topics);
      values(socket, [1, 'Field2d'], [4, 'Field2d'], [3, line(MAX_NUMBERS / 3 + 1)]);
      for (let i = 0; i < paths + 1; i++) values(socket, [100 + i, line(MAX_NUMBERS / 3)]);
      for (let i = 0; i < paths + 1; i++) values(socket, [10 + i, line(MAX_NUMBERS / 3)]);
      values(socket, [2, [1, 1, 0]]);
      values(socket, [5, 'Field2d']);
    });
    const full = await readUntil('every value', (now) => now.fields.some((each) => each.table === '/B'), 'run-2');
    expect(full.fields.find((each) => each.table === '/Z')!.objects.length).toBeGreaterThan(0);
    expect(full.fields.find((each) => each.table === '/A')!.objects).toEqual([]);
    // A path made short frees its numbers: the robot is kept then.
    values(client!, [10, [0, 0, 0]]);
    values(client!, [2, [1, 1, 0]]);
    const kept = await readUntil('the robot', (now) => robotOf(now, '/A') !== undefined, 'run-2');
    expect(kept.fields.find((each) => each.table === '/A')!.objects.map((object) => object.name)).toEqual(['Robot']);
  });

  it('answers at most MAX_TABLES tables (their own objects, not nested tables), MAX_OBJECTS objects a table and MAX_POSES poses in all', async () => {
    const topics: Record<string, number> = {};
    const sent: [number, unknown][] = [];
    let id = 1;
    for (const table of ['/A', '/A/inner', '/B', '/C', '/D', '/E']) {
      topics[`${table}/.type`] = id;
      sent.push([id++, 'Field2d']);
      topics[`${table}/Robot`] = id;
      sent.push([id++, [1, 1, 0]]);
    }
    for (let i = 0; i < MAX_OBJECTS + 5; i++) {
      topics[`/B/box${String(i).padStart(2, '0')}`] = id;
      sent.push([id++, [i, 1, 0]]);
    }
    for (let i = 0; i < 8; i++) {
      topics[`/C/path${i}`] = id;
      sent.push([id++, line(1000)]);
    }
    server = await ntServer((socket) => {
      announce(socket, topics);
      values(socket, ...sent);
    });
    fields = new RobotFields(plain);
    const reading = await readUntil('every table', (now) => now.fields.length === MAX_TABLES && (now.fields[2]?.objects.length ?? 0) > 1);
    expect(reading.fields.map((each) => each.table)).toEqual(['/A', '/A/inner', '/B', '/C']);
    // /A's objects are its own: its Robot, not /A/inner's.
    expect(reading.fields[0]!.objects.map((object) => object.name)).toEqual(['Robot']);
    expect(reading.fields[2]!.objects).toHaveLength(MAX_OBJECTS);
    const poses = reading.fields.flatMap((each) => each.objects).reduce((sum, object) => sum + object.poses.length, 0);
    expect(poses).toBe(MAX_POSES);
  });

  it('lets a reader go once nobody read it for the idle time (its connection closed)', async () => {
    await fieldServer();
    fields = new RobotFields(plain, { idleMs: 300 });
    expect((await fields.read(target())).state).toBe('live');
    expect(server!.connections()).toBe(1);
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
