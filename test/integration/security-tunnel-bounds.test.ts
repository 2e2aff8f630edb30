/**
 * Issue 39, findings 1 and 2: one student cannot hurt the class through the proxy.
 * - A student's program that accepts WebSockets and never closes them (the test image's `/hold`,
 *   on the editor and on the simulator) cannot make the control plane keep descriptors: a few
 *   hundred upgrades, each dropped by its client on its 101, leave its open descriptors where they
 *   were, through the editor's path and `.cp/nt4/`, in path mode and in host mode.
 * - Open tunnels are bounded per workspace and in all, with a clear refusal past them (counted,
 *   logged once), and an upstream that never answers an upgrade is given up.
 * - A recorded address that is not the workspace's (or run's) live container is never connected
 *   to: another student's editor and simulator hear nothing of it.
 * Real PostgreSQL, real Docker (the test image's editor and simulator), the real app in-process (so
 * its descriptors are this process's: /proc/self/fd).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import type { RunController } from '../../controllers/runs.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, docker, eventually, removeEverything, type Harness, testRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { handOver, send } from '../helpers/host-mode.ts';
import { freePort } from '../helpers/server.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
/** Upgrades dropped on their 101 in each flood: enough that a leak of 2 descriptors each is plain. */
const CYCLES = 300;
/** Upgrades in flight at once during a flood. */
const PARALLEL = 10;
/** Tunnels one workspace, and everyone, may hold in the bounded app (small, so the bounds are quick to reach). */
const PER_WORKSPACE = 4;
const TOTAL = 3 * PER_WORKSPACE - 2;

let harness: Harness;
let runs: RunController;
let pathApp: TestApp;
let hostApp: TestApp;
let boundedApp: TestApp;
let hostPort: number;
let ada: Student;
let bob: Student;
let cyd: Student;
/** Ada's and Bob's runs in progress. */
let adaRun: string;
let bobRun: string;

beforeAll(async () => {
  harness = createHarness(db.dataSource, { environmentCap: 20 });
  await harness.controller.start();
  runs = testRunController(harness, 'SIM_COMPILE_MS=100 SIM_BOOT_MS=100 node /app/sim.mjs').controller;
  await runs.start();
  // The default bounds in both modes (a flood goes PARALLEL at a time, well within them); small ones in a third app.
  pathApp = await startApp(db.dataSource, { PROXY_TIMEOUT_SECONDS: '2' }, { changes: harness.changes });
  hostPort = await freePort();
  hostApp = await startApp(
    db.dataSource,
    { PUBLIC_URL: `http://127.0.0.1:${hostPort}`, WORKSPACE_HOST: `*.ws.localhost:${hostPort}` },
    { port: hostPort, changes: harness.changes },
  );
  boundedApp = await startApp(
    db.dataSource,
    { PROXY_MAX_TUNNELS_PER_WORKSPACE: String(PER_WORKSPACE), PROXY_MAX_TUNNELS: String(TOTAL) },
    { changes: harness.changes },
  );
  [ada, bob, cyd] = (await Promise.all(['ada', 'bob', 'cyd'].map((name) => newStudent(harness.store, name, tag)))) as [Student, Student, Student];
  await Promise.all(
    [ada, bob, cyd].map(async (student) => {
      student.workspace = await openAndWait(harness.store, student.workspace);
    }),
  );
  [adaRun, bobRun] = (await Promise.all([ada, bob].map(startRun))) as [string, string];
}, 120_000);
afterAll(async () => {
  await pathApp?.close();
  await hostApp?.close();
  await boundedApp?.close();
  await runs?.stop();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

/** Starts a run of `student`'s and waits until its simulator answers. */
async function startRun(student: Student): Promise<string> {
  const answer = await fetch(`${pathApp.url}/u/${student.workspace.slug}/api/runs`, {
    method: 'POST',
    headers: { cookie: student.cookie, origin: pathApp.url },
  });
  expect(answer.status).toBe(202);
  const runId = ((await answer.json()) as { run: { id: string } }).run.id;
  await eventually('the run is running', async () => (await harness.store.runs.get(runId))?.status.phase === 'running', 30_000);
  return runId;
}

/** This process's open descriptors (the in-process apps' among them). */
const openDescriptors = () => readdirSync('/proc/self/fd').length;

/** Where an upgrade is sent: the app's port, the Host header, and the request target. */
interface Place {
  port: number;
  host: string;
  target: string;
  cookie: string;
  origin: string;
}

/** `student`'s editor (or, with `rest` under `.cp/nt4/`, simulator) in path mode, on `app`. */
function onPath(student: Student, rest: string, app = pathApp): Place {
  const port = Number(new URL(app.url).port);
  return { port, host: `127.0.0.1:${port}`, target: `/u/${student.workspace.slug}${rest}`, cookie: student.cookie, origin: app.url };
}

/** `student`'s editor (or simulator) on its own host, with its workspace cookie. */
async function onHost(student: Student, rest: string): Promise<Place> {
  const host = `${student.workspace.slug}.ws.localhost:${hostPort}`;
  const grant = await handOver(`http://${host}`, student.cookie);
  return { port: hostPort, host, target: rest, cookie: `cp_ws=${grant}`, origin: `http://${host}` };
}

/**
 * Sends a WebSocket upgrade to `place` over a raw socket; resolves with the answer's status line and
 * body once its head came (and the socket: still open on a 101, for the caller to keep or drop).
 */
function upgrade(place: Place): Promise<{ status: number; body: string; socket: net.Socket }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: place.port });
    let received = Buffer.alloc(0);
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const text = received.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      if (status !== 101 && text.length < end + 4 + length) return;
      socket.removeAllListeners('data');
      resolve({ status, body: text.slice(end + 4, end + 4 + length), socket });
    });
    socket.write(
      [
        `GET ${place.target} HTTP/1.1`,
        `Host: ${place.host}`,
        'Connection: Upgrade',
        'Upgrade: websocket',
        'Sec-WebSocket-Version: 13',
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
        `Origin: ${place.origin}`,
        `Cookie: ${place.cookie}`,
        '',
        '',
      ].join('\r\n'),
    );
  });
}

/** CYCLES upgrades to `place`, PARALLEL at a time, each dropped by its client on its 101. */
async function flood(place: Place): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (next++ < CYCLES) {
        const { status, socket } = await upgrade(place);
        socket.destroy();
        expect(status).toBe(101);
      }
    }),
  );
}

/**
 * Floods `place`, then waits until `app` has no tunnel open and this process's descriptors are back
 * where they were (a few more allowed: pooled connections of the apps and the engine client come
 * and go): what it had before, what it has then, and the tunnels open then.
 */
async function flooded(app: TestApp, place: Place): Promise<{ before: number; after: number; open: number }> {
  const before = openDescriptors();
  await flood(place);
  // Each tunnel ends as its client's FIN arrives: wait for that (every tunnel closed, the descriptors back), not for a clock.
  return eventually(
    `no tunnel open and the descriptors back to ${before} (+5)`,
    async () => {
      const [after, open] = [openDescriptors(), await gauge(app, 'proxy_tunnels_open')];
      return open === 0 && after <= before + 5 && { before, after, open };
    },
    20_000,
  );
}

/** A metric's value as the app exposes it (`series` with its labels, or a bare name). */
async function gauge(app: TestApp, series: string): Promise<number> {
  const text = await app.metrics.registry.metrics();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return Number(line?.split(' ')[1] ?? NaN);
}

describe('a program that never closes its WebSockets', () => {
  it("leaves no descriptor behind through the editor's path, in path mode", async () => {
    const { before, after, open } = await flooded(pathApp, onPath(ada, '/hold'));
    expect(after).toBeLessThanOrEqual(before + 5);
    expect(open).toBe(0);
  });

  it('leaves no descriptor behind through .cp/nt4/, in path mode', async () => {
    const { before, after, open } = await flooded(pathApp, onPath(ada, '/.cp/nt4/hold'));
    expect(after).toBeLessThanOrEqual(before + 5);
    expect(open).toBe(0);
  });

  it("leaves no descriptor behind through the editor's path, in host mode", async () => {
    const { before, after, open } = await flooded(hostApp, await onHost(ada, '/hold'));
    expect(after).toBeLessThanOrEqual(before + 5);
    expect(open).toBe(0);
  });

  it('leaves no descriptor behind through .cp/nt4/, in host mode', async () => {
    const { before, after, open } = await flooded(hostApp, await onHost(ada, '/.cp/nt4/hold'));
    expect(after).toBeLessThanOrEqual(before + 5);
    expect(open).toBe(0);
  });

  it('has its held tunnel ended when the client only half-closes (sends its FIN, keeps reading)', async () => {
    const { status, socket } = await upgrade(onPath(ada, '/hold'));
    expect(status).toBe(101);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.resume();
    socket.end();
    // The proxy ends its side too (a FIN back, then the socket goes), though the editor never closes.
    await closed;
    await eventually('no tunnel is open', async () => (await gauge(pathApp, 'proxy_tunnels_open')) === 0, 10_000);
  });
});

describe('the bounds on open tunnels', () => {
  it("refuses a workspace's tunnel past PROXY_MAX_TUNNELS_PER_WORKSPACE with a clear error, and takes one again once one closes", async () => {
    const refusalsBefore = await gauge(boundedApp, 'proxy_tunnel_refusals_total{bound="workspace"}');
    const logsBefore = boundedApp.logs.length;
    const held = await Promise.all(Array.from({ length: PER_WORKSPACE }, () => upgrade(onPath(cyd, '/hold', boundedApp))));
    expect(held.map((answer) => answer.status)).toEqual(Array(PER_WORKSPACE).fill(101));
    // Past it: refused, twice, both counted, and said once in the log.
    for (let i = 0; i < 2; i++) {
      const refused = await upgrade(onPath(cyd, '/hold', boundedApp));
      expect(refused.status).toBe(429);
      expect(JSON.parse(refused.body)).toEqual({
        error: { code: 'too_many_connections', message: expect.stringContaining(`${PER_WORKSPACE} connections open`) },
      });
      refused.socket.destroy();
    }
    expect(await gauge(boundedApp, 'proxy_tunnel_refusals_total{bound="workspace"}')).toBe(refusalsBefore + 2);
    const lines = boundedApp.logs.slice(logsBefore).filter((record) => String(record.message).includes('PROXY_MAX_TUNNELS_PER_WORKSPACE'));
    expect(lines).toEqual([expect.objectContaining({ level: 'warning', workspaceId: cyd.workspace.id })]);
    // Another workspace is not held back by Cyd's.
    const other = await upgrade(onPath(ada, '/ws', boundedApp));
    expect(other.status).toBe(101);
    other.socket.destroy();
    // One of Cyd's closes: its slot is free again.
    held[0]!.socket.destroy();
    const again = await eventually('a slot is free again', async () => {
      const answer = await upgrade(onPath(cyd, '/hold', boundedApp));
      if (answer.status === 101) return answer;
      answer.socket.destroy();
      return undefined;
    });
    for (const { socket } of [...held.slice(1), again]) socket.destroy();
    await eventually('no tunnel is open', async () => (await gauge(boundedApp, 'proxy_tunnels_open')) === 0, 10_000);
  });

  it('refuses any tunnel past PROXY_MAX_TUNNELS with 503, whoever asks', async () => {
    const held = [
      ...(await Promise.all(Array.from({ length: PER_WORKSPACE }, () => upgrade(onPath(ada, '/hold', boundedApp))))),
      ...(await Promise.all(Array.from({ length: PER_WORKSPACE }, () => upgrade(onPath(bob, '/hold', boundedApp))))),
      ...(await Promise.all(Array.from({ length: TOTAL - 2 * PER_WORKSPACE }, () => upgrade(onPath(cyd, '/hold', boundedApp))))),
    ];
    expect(held.every((answer) => answer.status === 101)).toBe(true);
    const refused = await upgrade(onPath(cyd, '/hold', boundedApp));
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toEqual({ error: { code: 'server_busy', message: expect.any(String) } });
    refused.socket.destroy();
    for (const { socket } of held) socket.destroy();
    await eventually('no tunnel is open', async () => (await gauge(boundedApp, 'proxy_tunnels_open')) === 0, 10_000);
  });

  it('gives up an upstream that never answers an upgrade (504) and keeps nothing of it', async () => {
    const before = openDescriptors();
    const answer = await upgrade(onPath(ada, '/hang'));
    expect(answer.status).toBe(504);
    expect(JSON.parse(answer.body)).toEqual({ error: { code: 'upstream_timeout', message: 'The editor did not answer in time.' } });
    answer.socket.destroy();
    await eventually('the descriptors are back', async () => openDescriptors() <= before + 2 && (await gauge(pathApp, 'proxy_tunnels_open')) === 0, 10_000);
  });
});

describe("a recorded address that is not the live container's", () => {
  /** How many lines a container has printed so far (its requests, for the stand-ins). */
  async function linesOf(name: string): Promise<number> {
    const logs = await docker.getContainer(name).logs({ stdout: true, stderr: true, follow: false });
    return logs.toString('latin1').split('\n').length;
  }

  it("is never connected to: Ada's record pointing at Bob's simulator reaches nothing of Bob's", async () => {
    const bobsSim = (await harness.runtime.listContainers({ workspaceId: bob.workspace.id })).find((container) => container.runId === bobRun)!;
    const bobsRecord = (await harness.store.runs.get(bobRun))!;
    // What a run whose end could not be recorded leaves: its record names an address that is now another's.
    await db.dataSource.query('UPDATE runs SET sim_endpoint = $2 WHERE id = $1', [adaRun, bobsRecord.status.simEndpoint]);
    const heard = await linesOf(bobsSim.name);
    const nt4 = await upgrade(onPath(ada, '/.cp/nt4/nt/ada'));
    expect(nt4.status).toBe(503);
    expect(JSON.parse(nt4.body)).toEqual({ error: { code: 'no_simulator', message: expect.stringContaining('not running any more') } });
    nt4.socket.destroy();
    const status = await fetch(`${pathApp.url}/u/${ada.workspace.slug}/api/sim/status`, { headers: { cookie: ada.cookie } });
    expect(await status.json()).toMatchObject({ alive: false, runId: adaRun, reason: 'unreachable' });
    // Ada's attempts reached nothing of Bob's (his simulator logs every request and upgrade)...
    expect(await linesOf(bobsSim.name)).toBe(heard);
    // ...while his own still work, and are heard.
    const own = await upgrade(onPath(bob, '/.cp/nt4/ws'));
    expect(own.status).toBe(101);
    own.socket.destroy();
    await eventually('Bob is heard', async () => (await linesOf(bobsSim.name)) > heard, 5000);
    expect(await gauge(pathApp, 'proxy_upstream_unverified_total{upstream="nt4"}')).toBeGreaterThanOrEqual(2);
  });

  it("is never connected to: Ada's editor record pointing at Bob's editor reaches nothing of Bob's, over HTTP or WebSocket", async () => {
    const bobsEditor = (await harness.runtime.listContainers({ workspaceId: bob.workspace.id })).find((container) => container.role === 'code')!;
    const { editorEndpoint } = (await harness.store.workspaces.get(bob.workspace.id))!.status;
    // A status change, as a controller's write is: the proxy looks again (the controller itself is not woken, or it would mend the record).
    await db.dataSource.query('UPDATE workspaces SET editor_endpoint = $2 WHERE id = $1', [ada.workspace.id, editorEndpoint]);
    harness.changes.publish({ kind: 'status', id: ada.workspace.id });
    const heard = await linesOf(bobsEditor.name);
    const page = await fetch(`${pathApp.url}/u/${ada.workspace.slug}/echo-headers`, { headers: { cookie: ada.cookie } });
    expect(page.status).toBe(502);
    expect(((await page.json()) as { error: { code: string } }).error.code).toBe('editor_gone');
    const socket = await upgrade(onPath(ada, '/ws'));
    expect(socket.status).toBe(502);
    expect(JSON.parse(socket.body)).toEqual({ error: { code: 'editor_gone', message: expect.any(String) } });
    socket.socket.destroy();
    const onItsHost = await send(`http://${ada.workspace.slug}.ws.localhost:${hostPort}/echo-headers`, {
      headers: { cookie: `cp_ws=${await handOver(`http://${ada.workspace.slug}.ws.localhost:${hostPort}`, ada.cookie)}` },
    });
    expect(onItsHost.status).toBe(502);
    expect(await linesOf(bobsEditor.name)).toBe(heard);
    expect(await gauge(pathApp, 'proxy_upstream_unverified_total{upstream="vscode"}')).toBeGreaterThanOrEqual(2);
  });
});
