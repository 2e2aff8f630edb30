/**
 * Issue 40: a run's robot driven through the proxy's HALSim relay (api/proxy/halsim.ts) at
 * `<editor address>/.cp/halsim/wpilibws`, against the test image's stand-in robot
 * (test/fixtures/workspace/halsim.mjs: WPILib's HALSim WebSocket, one client at a time, which says
 * what it heard) in real run containers, on real PostgreSQL and the real app: the owner only, as
 * for NetworkTables (path mode and host mode); each bad message closes the browser's connection and
 * disables the robot, the run unharmed; a flood is held to 100 messages a second; a silent driver,
 * a driver that leaves, one that another tab takes over from and one whose access ends each leave
 * the robot disabled; a second replica's driver is refused by the robot, and told so. The workspace
 * page's Driver Station page (api/driver-station.ts) is its owner's only, and framed by this origin only.
 */
import { createHash } from 'node:crypto';
import WebSocket from 'ws';
import type { RunController } from '../../controllers/runs.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, eventually, removeEverything, testRunController, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { handOver, loopback } from '../helpers/host-mode.ts';
import { freePort } from '../helpers/server.ts';
import { robotHeard, type RobotHeard } from '../helpers/stand-ins.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let harness: Harness;
let app: TestApp;
let runs: RunController;
let bob: Student;
let coach: Student;
let counter = 0;

beforeAll(async () => {
  harness = createHarness(db.dataSource, { environmentCap: 50 });
  await harness.controller.start();
  app = await startApp(db.dataSource, {}, { changes: harness.changes });
  runs = testRunController(harness, 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100 node /app/sim.mjs').controller;
  await runs.start();
  coach = await newStudent(harness.store, 'coach', tag, 'admin');
  bob = await newStudent(harness.store, 'bob', tag);
}, 60_000);
afterAll(async () => {
  await runs?.stop();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

/** What the stand-in robot sends on connection, as it sends it. */
const ROBOT_STATE =
  '{"type":"DriverStation","device":"","data":{">enabled":false,">autonomous":false,">test":false,">estop":false,">fms":false,">ds":false,">station":"red1",">match_time":-1,">game_data":""}}';
/** What the relay sends a robot to disable it. */
const DISABLE = '{"type":"DriverStation","device":"","data":{">enabled":false,">new_data":true}}';
const ENABLE = '{"type":"DriverStation","device":"","data":{">enabled":true,">new_data":true}}';
const HEARTBEAT = '{"type":"DriverStation","device":"","data":{">new_data":true}}';

/** A student whose workspace runs, and the run whose robot is up. */
interface Robot {
  student: Student;
  runId: string;
}

async function runningStudent(): Promise<Student> {
  const student = await newStudent(harness.store, `ada${counter++}`, tag);
  student.workspace = await openAndWait(harness.store, student.workspace);
  return student;
}

async function robotRunning(): Promise<Robot> {
  const student = await runningStudent();
  const answer = await fetch(`${app.url}/u/${student.workspace.slug}/api/runs`, { method: 'POST', headers: { cookie: student.cookie, origin: app.url } });
  expect(answer.status).toBe(202);
  const runId = ((await answer.json()) as { run: { id: string } }).run.id;
  await eventually('the run running', async () => (await harness.store.runs.get(runId))?.status.phase === 'running', 30_000);
  return { student, runId };
}

const heard = (robot: Robot) => robotHeard(harness.runtime, { workspaceId: robot.student.workspace.id, runId: robot.runId });

/** What the robot heard, once `test` holds of it. */
const hears = (robot: Robot, what: string, test: (seen: RobotHeard) => boolean) =>
  eventually(`the robot to hear ${what}`, async () => {
    const now = await heard(robot);
    return test(now) && now;
  });

/** The texts the robot heard on its connection `connection`, in order. */
const on = (seen: RobotHeard, connection: number) => seen.received.filter((message) => message.connection === connection).map(({ text }) => text);

/** A browser's open connection: what it received, and how it was closed. */
interface Tab {
  socket: WebSocket;
  messages: string[];
  closed: Promise<{ code: number; reason: string }>;
}

/** A refused upgrade: its status and error. */
interface Refusal {
  status: number;
  error: { code: string; message: string };
}

/** Opens the HALSim WebSocket of `owner`'s workspace as `as` would from a browser at `base` (the app's address, by default). */
function connect(owner: Student, as: Pick<Student, 'cookie'> = owner, base = app.url, origin = base): Promise<Tab | Refusal> {
  // A cookie of the browser's own besides the session: nothing of it may reach the robot.
  const socket = new WebSocket(`${base.replace('http', 'ws')}/u/${owner.workspace.slug}/.cp/halsim/wpilibws`, {
    headers: { cookie: `${as.cookie}; theme=dark`, origin },
  });
  return opened(socket);
}

function opened(socket: WebSocket): Promise<Tab | Refusal> {
  const messages: string[] = [];
  socket.on('message', (data: Buffer) => messages.push(data.toString()));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve({ socket, messages, closed }));
    socket.once('unexpected-response', (_request, answer) => {
      let body = '';
      answer.on('data', (chunk: Buffer) => (body += chunk.toString()));
      answer.on('end', () => resolve({ status: answer.statusCode ?? 0, error: (JSON.parse(body) as { error: Refusal['error'] }).error }));
    });
    socket.once('error', reject);
  });
}

/** Drives `robot` through a new connection: resolves once the robot's state came through it, with the number of the robot's connection it is. */
async function drive(robot: Robot, connection: Promise<Tab | Refusal> = connect(robot.student)): Promise<Tab & { number: number }> {
  const tab = await connection;
  if (!('socket' in tab)) throw new Error(`refused: ${tab.status} ${tab.error.code}`);
  await eventually("the robot's state", async () => tab.messages.length > 0);
  return { ...tab, number: (await heard(robot)).connections };
}

/** The count of halsim_messages_total{direction="to_robot",outcome}, and of halsim_robot_disables_total{reason}. */
async function sent(outcome: string): Promise<number> {
  const { values } = await app.metrics.halsimMessages.get();
  return values.find((value) => value.labels.direction === 'to_robot' && value.labels.outcome === outcome)?.value ?? 0;
}
async function disables(reason: string): Promise<number> {
  const { values } = await app.metrics.halsimDisables.get();
  return values.find((value) => value.labels.reason === reason)?.value ?? 0;
}

describe('who may drive', () => {
  it("lets the owner drive: the robot's state reaches the browser as the robot sent it, and its DriverStation and Joystick messages reach the robot, with no cookie or origin of the browser's", async () => {
    const robot = await robotRunning();
    const tab = await drive(robot);
    expect(tab.messages[0]).toBe(ROBOT_STATE);
    const joystick = JSON.stringify({ type: 'Joystick', device: '0', data: { '>axes': [0.5, -1, 0, 1], '>buttons': [true, false], '>povs': [90, -1] } });
    tab.socket.send(ENABLE);
    tab.socket.send(joystick);
    const now = await hears(robot, 'the joystick', (seen) => on(seen, tab.number).includes(joystick));
    // A new driver starts disabled; then what the browser sent, as sent.
    expect(on(now, tab.number).slice(0, 3)).toEqual([DISABLE, ENABLE, joystick]);
    expect(now.upgrades).toEqual([{ cookie: null, origin: null }]);
    expect((await app.metrics.halsimDrivers.get()).values[0]?.value).toBe(1);
    tab.socket.close();
    await tab.closed;
    await eventually('no driver left', async () => (await app.metrics.halsimDrivers.get()).values[0]?.value === 0);
  }, 60_000);

  it('refuses another student, an admin (path mode, as for the editor), another site and no session, and a workspace with no run; none reaches the robot', async () => {
    const idle = await runningStudent();
    expect(await connect(idle)).toEqual({
      status: 503,
      error: { code: 'no_simulator', message: 'No simulator is running in this workspace: press Run first.' },
    });
    const robot = await robotRunning();
    const status = async (answer: Promise<Tab | Refusal>) => {
      const tab = await answer;
      if ('socket' in tab) tab.socket.close();
      return 'status' in tab ? tab.status : 101;
    };
    expect(await status(connect(robot.student, bob))).toBe(403);
    expect(await status(connect(robot.student, coach))).toBe(403);
    expect(await status(connect(robot.student, robot.student, app.url, 'http://evil.example'))).toBe(403);
    expect(await status(connect(robot.student, { cookie: '' }))).toBe(401);
    expect((await heard(robot)).upgrades).toEqual([]);
  }, 60_000);

  it("is the workspace's own on its host (host mode): its cookie, from its own origin", async () => {
    const port = await freePort();
    const hostApp = await startApp(
      db.dataSource,
      { PUBLIC_URL: `http://127.0.0.1:${port}`, WORKSPACE_HOST: `*.ws.localhost:${port}` },
      { port, changes: harness.changes },
    );
    try {
      const robot = await robotRunning();
      const origin = `http://${robot.student.workspace.slug}.ws.localhost:${port}`;
      const other = await runningStudent();
      const [grant, otherGrant] = [
        await handOver(origin, robot.student.cookie),
        await handOver(`http://${other.workspace.slug}.ws.localhost:${port}`, other.cookie),
      ];
      const onHost = (cookie: string, from = origin) =>
        opened(
          new WebSocket(`${origin.replace('http', 'ws')}/.cp/halsim/wpilibws`, { lookup: loopback, headers: { origin: from, cookie: `cp_ws=${cookie}` } }),
        );
      expect(await onHost(otherGrant)).toMatchObject({ status: 401 });
      expect(await onHost(grant, `http://${other.workspace.slug}.ws.localhost:${port}`)).toMatchObject({ status: 403 });
      const tab = await drive(robot, onHost(grant));
      expect(tab.messages[0]).toBe(ROBOT_STATE);
      tab.socket.send(ENABLE);
      await hears(robot, 'the enable', (seen) => on(seen, tab.number).includes(ENABLE));
      tab.socket.close();
    } finally {
      await hostApp.close();
    }
  }, 60_000);
});

describe("the workspace page's Driver Station (path mode)", () => {
  it('is served at /u/<slug>/.cp/driver-station to its owner only, framed by this origin only, with its script and style by their hashes', async () => {
    const url = `${app.url}/u/${bob.workspace.slug}/.cp/driver-station`;
    const get = (cookie: string, init: { method?: string; headers?: Record<string, string> } = {}) =>
      fetch(url, { redirect: 'manual', method: init.method, headers: { accept: 'text/html', cookie, ...init.headers } });
    const page = await get(bob.cookie, { headers: { 'accept-encoding': 'gzip' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-encoding')).toBe('gzip');
    const html = await page.text();
    expect(html).toContain('<main id="ds">');
    expect(html).toContain('<body class="vscode-light"');
    const policy = page.headers.get('content-security-policy')!;
    expect(policy).toMatch(/^default-src 'none'; script-src 'sha256-[\w+/=]+'; style-src 'sha256-[\w+/=]+'; connect-src 'self'; .*frame-ancestors 'self'$/);
    // Each hash is of what the page holds (the browser runs nothing else).
    const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
    expect(policy).toContain(hash(/<script>([\s\S]*)<\/script>/.exec(html)![1]!));
    expect(policy).toContain(hash(/<style>([\s\S]*)<\/style>/.exec(html)![1]!));
    // Another student, an admin who is not the owner (as for the editor), no session, another method.
    expect((await get(coach.cookie)).status).toBe(403);
    const other = await newStudent(harness.store, 'dsother', tag);
    expect((await get(other.cookie)).status).toBe(403);
    const signedOut = await get('');
    expect(signedOut.status).toBe(302);
    expect(signedOut.headers.get('location')).toContain('/auth/sign-in');
    const posted = await get(bob.cookie, { method: 'POST', headers: { origin: app.url } });
    expect(posted.status).toBe(405);
    expect(((await posted.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed');
  });
});

describe('bad input', () => {
  it('closes the connection on each bad message with the reason, disables the robot, and leaves the run running', async () => {
    const robot = await robotRunning();
    const rejected = await sent('rejected');
    const cases: [string, string | Buffer, { code: number; reason: string }][] = [
      ['malformed JSON', '{"type":"DriverStation",', { code: 1008, reason: 'A HALSim message must be JSON; this was not.' }],
      ['an unknown type', '{"type":"PWM","device":"1","data":{"<speed":1}}', { code: 1008, reason: 'type must be DriverStation or Joystick.' }],
      ["a robot's key", '{"type":"Joystick","device":"0","data":{"<rumble_left":1}}', { code: 1008, reason: 'data may not hold "<rumble_left".' }],
      ['an axis out of range', '{"type":"Joystick","device":"0","data":{">axes":[0,1.5]}}', { code: 1008, reason: 'data/>axes/1 must be <= 1.' }],
      ['a seventh joystick', '{"type":"Joystick","device":"6","data":{}}', { code: 1008, reason: 'device must be equal to one of the allowed values.' }],
      ['a binary frame', Buffer.from(ENABLE), { code: 1008, reason: 'HALSim messages are JSON text; a binary frame was sent.' }],
      // Refused by `ws` as it reads the frame: 1007, Invalid Frame Payload Data.
      ['text that is no UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), { code: 1007, reason: '' }],
      // Refused by `ws` at the frame's header, before any of it is read: 1009, Message Too Big.
      ['a frame over 4 KiB', JSON.stringify({ type: 'DriverStation', device: '', data: { '>game_data': 'x'.repeat(5000) } }), { code: 1009, reason: '' }],
    ];
    for (const [what, message, close] of cases) {
      const tab = await drive(robot);
      tab.socket.send(ENABLE);
      tab.socket.send(message, { binary: what === 'a binary frame' });
      expect([what, await tab.closed]).toEqual([what, close]);
      const now = await hears(robot, `the disable after ${what}`, (seen) => on(seen, tab.number).length === 3);
      expect([what, on(now, tab.number)]).toEqual([what, [DISABLE, ENABLE, DISABLE]]);
    }
    expect((await harness.store.runs.get(robot.runId))?.status.phase).toBe('running');
    expect((await sent('rejected')) - rejected).toBe(cases.length);
    // One line for all of them (a minute's repeats are folded).
    expect(app.logs.filter((record) => String(record.message).startsWith(`closed the HALSim connection of ${robot.student.workspace.slug}'s driver`))).toEqual([
      expect.objectContaining({ level: 'warning', workspaceId: robot.student.workspace.id, runId: robot.runId, reason: cases[0]![2].reason, repeats: 0 }),
    ]);
    // The robot drives on.
    const tab = await drive(robot);
    tab.socket.send(ENABLE);
    await hears(robot, 'the enable', (seen) => on(seen, tab.number).includes(ENABLE));
    tab.socket.close();
  }, 90_000);

  it('lets at most 100 messages a second of a flood reach the robot (a burst of 100), drops and counts the rest, and keeps the connection', async () => {
    const robot = await robotRunning();
    const tab = await drive(robot);
    const before = { relayed: await sent('relayed'), dropped: await sent('dropped_rate'), robot: await sent('dropped_robot') };
    const started = performance.now();
    const flood = Array.from({ length: 2000 }, (_, i) => JSON.stringify({ type: 'Joystick', device: '0', data: { '>axes': [i / 2000] } }));
    for (const message of flood) tab.socket.send(message);
    const handled = async () => (await sent('relayed')) - before.relayed + (await sent('dropped_rate')) - before.dropped;
    await eventually('the relay to take the whole flood', async () => (await handled()) === flood.length, 30_000);
    const seconds = (performance.now() - started) / 1000;
    const relayed = (await sent('relayed')) - before.relayed;
    expect(relayed).toBeGreaterThanOrEqual(100);
    expect(relayed).toBeLessThanOrEqual(100 + Math.ceil(100 * seconds));
    expect((await sent('dropped_rate')) - before.dropped).toBe(flood.length - relayed);
    expect((await sent('dropped_robot')) - before.robot).toBe(0);
    // What passed reached the robot, in order: the burst first.
    const now = await hears(robot, 'what passed', (seen) => on(seen, tab.number).filter((text) => text !== DISABLE).length === relayed);
    const passed = on(now, tab.number).filter((text) => text !== DISABLE);
    expect(passed.slice(0, 100)).toEqual(flood.slice(0, 100));
    expect(passed.every((text, i) => i === 0 || flood.indexOf(text) > flood.indexOf(passed[i - 1]!))).toBe(true);
    expect(tab.socket.readyState).toBe(WebSocket.OPEN);
    expect(app.logs.filter((record) => String(record.message).startsWith(`dropped HALSim messages of ${robot.student.workspace.slug}'s driver`))).toHaveLength(
      1,
    );
    tab.socket.close();
  }, 60_000);
});

describe('the robot is disabled', () => {
  it('once, when its driver says nothing for 400 ms; not while it speaks every 100 ms', async () => {
    const robot = await robotRunning();
    const tab = await drive(robot);
    const silences = await disables('silence');
    tab.socket.send(ENABLE);
    // The Driver Station's heartbeat: a message every 100 ms, ten times.
    for (let beat = 0; beat < 10; beat++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      tab.socket.send(HEARTBEAT);
    }
    const now = await hears(robot, 'the disable after the last heartbeat', (seen) => on(seen, tab.number).slice(-2).join() === [HEARTBEAT, DISABLE].join());
    const messages = now.received.filter((message) => message.connection === tab.number);
    const disable = messages.at(-1)!;
    // As the robot's clock saw it: 400 ms after the driver's last word (a little less: the last heartbeat may have been held up on its way).
    expect(disable.at - messages.at(-2)!.at).toBeGreaterThanOrEqual(300);
    // While the driver spoke, no disable but where the driver itself was late (a busy machine may hold the test's own timer).
    const texts = messages.map(({ text }) => text);
    const early = messages.filter(
      (message, i) => i > texts.indexOf(ENABLE) && i < texts.length - 1 && message.text === DISABLE && message.at - messages[i - 1]!.at < 300,
    );
    expect(early).toEqual([]);
    // Once per silence: nothing more for three watchdog periods.
    const later = await eventually("1.5 s of silence on the robot's clock", async () => {
      const seen = await heard(robot);
      return seen.now - disable.at >= 1500 && seen;
    });
    expect(on(later, tab.number)).toEqual(texts);
    expect((await disables('silence')) - silences).toBeGreaterThanOrEqual(1);
    // The driver is still connected; its next word and silence disable it again.
    expect(tab.socket.readyState).toBe(WebSocket.OPEN);
    tab.socket.send(ENABLE);
    await hears(robot, 'the disable after the next silence', (seen) => on(seen, tab.number).slice(-2).join() === [ENABLE, DISABLE].join());
    tab.socket.close();
  }, 60_000);

  it('when its driver closes the connection, or drops it without a word', async () => {
    const robot = await robotRunning();
    const closing = await drive(robot);
    closing.socket.send(ENABLE);
    closing.socket.close();
    const now = await hears(robot, 'the disable after the close', (seen) => on(seen, closing.number).length === 3);
    expect(on(now, closing.number)).toEqual([DISABLE, ENABLE, DISABLE]);

    const dropping = await drive(robot);
    const ended = await disables('ended');
    dropping.socket.send(ENABLE);
    await hears(robot, 'the enable', (seen) => on(seen, dropping.number).includes(ENABLE));
    dropping.socket.terminate();
    const after = await hears(robot, 'its driver gone', (seen) => !seen.connected && seen.connections === dropping.number);
    expect(on(after, dropping.number).at(-1)).toBe(DISABLE);
    expect((await disables('ended')) - ended).toBe(1);
  }, 60_000);

  it('when a second tab takes over: the first is closed with 4001, and the robot lets it go before it takes the second', async () => {
    const robot = await robotRunning();
    const first = await drive(robot);
    first.socket.send(ENABLE);
    await hears(robot, 'the enable', (seen) => on(seen, first.number).includes(ENABLE));
    // A robot slow to let go: it answers the first's close a second late, and meanwhile refuses anyone else.
    await robotHeard(harness.runtime, { workspaceId: robot.student.workspace.id, runId: robot.runId }, 1000);
    const second = await drive(robot);
    expect(await first.closed).toEqual({ code: 4001, reason: 'Another tab took over driving' });
    expect(second.messages[0]).toBe(ROBOT_STATE);
    const now = await heard(robot);
    expect(on(now, first.number).at(-1)).toBe(DISABLE);
    // Its next connection, and never one refused: the relay waited for the first to be gone before it made the second.
    expect(second.number).toBe(first.number + 1);
    expect(now.refused).toBe(0);
    second.socket.send(ENABLE);
    await hears(robot, "the second's enable", (seen) => on(seen, second.number).slice(0, 2).join() === [DISABLE, ENABLE].join());
    second.socket.close();
  }, 60_000);

  it('when its driver may no longer drive (the workspace given to someone else): closed with 1008 at once, the run unharmed', async () => {
    const robot = await robotRunning();
    const tab = await drive(robot);
    tab.socket.send(ENABLE);
    await hears(robot, 'the enable', (seen) => on(seen, tab.number).includes(ENABLE));
    const [other] = (await db.dataSource.query("INSERT INTO users (email, name) VALUES ($1, '') RETURNING id", [`other-${counter++}-${tag}@school.test`])) as {
      id: string;
    }[];
    await db.dataSource.query('UPDATE workspaces SET user_id = $2 WHERE id = $1', [robot.student.workspace.id, other!.id]);
    const revoked = performance.now();
    app.store.changes.publish({ kind: 'workspaces', id: robot.student.workspace.id });
    expect(await tab.closed).toEqual({
      code: 1008,
      reason: 'No longer allowed to drive this robot (signed out, or the workspace stopped or changed hands).',
    });
    expect(performance.now() - revoked).toBeLessThan(1000);
    const now = await hears(robot, 'its driver gone', (seen) => !seen.connected);
    expect(on(now, tab.number).at(-1)).toBe(DISABLE);
    expect((await harness.store.runs.get(robot.runId))?.status.phase).toBe('running');
  }, 60_000);

  it('and the browser told, when the workspace is stopped (its run with it), or the run ends', async () => {
    const stopped = await robotRunning();
    const tab = await drive(stopped);
    await app.store.workspaces.stop(SYSTEM_ACTOR, stopped.student.workspace.id, 'coach');
    // The proxy's revocation, or the robot's end if the run went first: closed either way.
    expect([
      { code: 1008, reason: 'No longer allowed to drive this robot (signed out, or the workspace stopped or changed hands).' },
      { code: 1001, reason: 'The robot program ended (the run stopped or restarted).' },
    ]).toContainEqual(await tab.closed);

    const ending = await robotRunning();
    const driving = await drive(ending);
    const stop = await fetch(`${app.url}/u/${ending.student.workspace.slug}/api/runs/${ending.runId}/stop`, {
      method: 'POST',
      headers: { cookie: ending.student.cookie, origin: app.url },
    });
    expect(stop.status).toBeLessThan(300);
    expect(await driving.closed).toEqual({ code: 1001, reason: 'The robot program ended (the run stopped or restarted).' });
  }, 60_000);
});

describe('two replicas', () => {
  it("refuses a tab through the second while the first's drives (the robot takes one driver), says so, and the first drives on", async () => {
    const second = await startApp(db.dataSource, {}, { changes: harness.changes });
    try {
      const robot = await robotRunning();
      const first = await drive(robot);
      const other = await connect(robot.student, robot.student, second.url);
      if (!('socket' in other)) throw new Error(`refused: ${other.status}`);
      expect(await other.closed).toEqual({
        code: 1013,
        reason: 'The robot already has a driver (another tab, through another server): close it and try again.',
      });
      expect(other.messages).toEqual([]);
      first.socket.send(ENABLE);
      const now = await hears(robot, "the first's enable", (seen) => on(seen, first.number).includes(ENABLE));
      expect(now.refused).toBe(1);
      expect(first.socket.readyState).toBe(WebSocket.OPEN);
      first.socket.close();
    } finally {
      await second.close();
    }
  }, 60_000);
});
