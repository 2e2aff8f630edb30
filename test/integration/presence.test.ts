/**
 * Issue 43, the class view's presence (api/proxy/presence.ts, src/store/presence.ts): what each
 * replica's proxy sees of a workspace now, written under its `servers` row and summed over the live
 * replicas by `ofLiveServers`. On real PostgreSQL, the real app in host mode (where a coach may open
 * a student's editor) with its `servers` row, and real containers of the test image: the owner's
 * editor WebSocket makes the student online and its end offline, a coach's does not; a poll of the
 * workspace page does, for two of its periods; a NetworkTables client and a Driver Station show, the
 * robot as the Driver Station set it, in one write however many messages say the same; a replica
 * that stops takes its presence with it, and a stale replica's is not read.
 */
import { randomUUID } from 'node:crypto';
import { jest } from '@jest/globals';
import WebSocket from 'ws';
import type { RunController } from '../../controllers/runs.ts';
import type { Presence, PresenceEntry } from '../../src/store/presence.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, eventually, removeEverything, testRunController, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { handOver, loopback } from '../helpers/host-mode.ts';
import { freePort } from '../helpers/server.ts';
import { robotHeard } from '../helpers/stand-ins.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let harness: Harness;
let app: TestApp;
let runs: RunController;
let port: number;
let publicOrigin: string;
let ada: Student;
let coach: Student;
let runId: string;

const originOf = (student: Student) => `http://${student.workspace.slug}.ws.localhost:${port}`;

beforeAll(async () => {
  harness = createHarness(db.dataSource, { environmentCap: 50 });
  await harness.controller.start();
  port = await freePort();
  publicOrigin = `http://127.0.0.1:${port}`;
  app = await startApp(
    db.dataSource,
    { PUBLIC_URL: publicOrigin, WORKSPACE_HOST: `*.ws.localhost:${port}` },
    // The relay's watchdog (400 ms of a silent driver disables its robot, halsim-proxy.test.ts) at 10 s:
    // on a busy machine, the test's wait after its driver's last message would otherwise pass 400 ms,
    // and the relay's own disable would be counted with what the Driver Station set.
    { port, changes: harness.changes, parts: ['http', 'presence'], tuning: { driverWatchdogMs: 10_000 } },
  );
  runs = testRunController(harness, 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100 node /app/sim.mjs').controller;
  await runs.start();
  coach = await newStudent(harness.store, 'coach', tag, 'admin');
  ada = await newStudent(harness.store, 'ada', tag);
  ada.workspace = await openAndWait(harness.store, ada.workspace);
  const answer = await fetch(`${publicOrigin}/u/${ada.workspace.slug}/api/runs`, { method: 'POST', headers: { cookie: ada.cookie, origin: publicOrigin } });
  if (answer.status !== 202) throw new Error(`the run was not started: ${answer.status} ${await answer.text()}`);
  runId = ((await answer.json()) as { run: { id: string } }).run.id;
  await eventually('the run running', async () => (await harness.store.runs.get(runId))?.status.phase === 'running', 30_000);
}, 90_000);
afterAll(async () => {
  await runs?.stop();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

/** Ada's presence over the live replicas (undefined: none). */
const adaNow = async (): Promise<Presence | undefined> => (await app.store.presence.ofLiveServers()).get(ada.workspace.id);

/** Waits until Ada's presence passes `test`, and gives it. */
const adaBecomes = (what: string, test: (presence: Presence | undefined) => boolean) =>
  eventually(what, async () => {
    const now = await adaNow();
    return test(now) && { now };
  }).then(({ now }) => now);

/** Opens a WebSocket on Ada's host (her editor at `path`) with the workspace cookie `grant`; resolves once it is open. */
function onAdasHost(grant: string, path: string): Promise<WebSocket> {
  const socket = new WebSocket(`${originOf(ada).replace('http', 'ws')}${path}`, {
    lookup: loopback,
    headers: { origin: originOf(ada), cookie: `cp_ws=${grant}` },
  });
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, answer) => reject(new Error(`upgrade refused with ${answer.statusCode}`)));
  });
}

/** Closes a WebSocket and waits until it closed. */
async function closed(socket: WebSocket): Promise<void> {
  const done = new Promise((resolve) => socket.once('close', resolve));
  socket.close();
  await done;
}

describe('online', () => {
  it("is the owner's editor WebSocket open: online while it is, offline once it closed", async () => {
    expect(await adaNow()).toBeUndefined();
    const editor = await onAdasHost(await handOver(originOf(ada), ada.cookie), '/ws');
    expect(await adaBecomes('Ada online', (now) => now?.online === true)).toEqual({ online: true, ntConnected: false, robot: null });
    await closed(editor);
    await adaBecomes('Ada offline', (now) => now === undefined);
  }, 30_000);

  it("is not a coach's WebSocket to the student's editor (nor a coach's NetworkTables client)", async () => {
    const grant = await handOver(originOf(ada), coach.cookie);
    const editor = await onAdasHost(grant, '/ws');
    // The coach's NetworkTables client counts (as anyone's): written with, or after, the editor's tunnel.
    const nt = await onAdasHost(grant, '/.cp/nt4/nt/coach');
    expect(await adaBecomes('an NT client', (now) => now?.ntConnected === true)).toEqual({ online: false, ntConnected: true, robot: null });
    await Promise.all([closed(editor), closed(nt)]);
    await adaBecomes('nothing', (now) => now === undefined);
  }, 30_000);

  it('is a workspace page of the owner polling its workspace: online for two of its polls after the last', async () => {
    const poll = await fetch(`${publicOrigin}/u/${ada.workspace.slug}/api/workspace`, { headers: { cookie: ada.cookie } });
    expect(poll.status).toBe(200);
    expect(await adaBecomes('Ada online', (now) => now?.online === true)).toEqual({ online: true, ntConnected: false, robot: null });
    const [row] = (await db.dataSource.query('SELECT pages, editors FROM workspace_presence WHERE workspace_id = $1', [ada.workspace.id])) as {
      pages: number;
      editors: number;
    }[];
    expect(row).toEqual({ pages: 1, editors: 0 });
    // No poll since: the page is taken as closed.
    await adaBecomes('Ada offline', (now) => now === undefined);
  }, 30_000);
});

describe('the robot', () => {
  /** How often the relay disabled a robot whose driver went silent (halsim_robot_disables_total{reason="silence"}). */
  const silences = async () => (await app.metrics.halsimDisables.get()).values.find((value) => value.labels.reason === 'silence')?.value ?? 0;
  const ENABLE_AUTONOMOUS = '{"type":"DriverStation","device":"","data":{">enabled":true,">autonomous":true,">test":false,">new_data":true}}';
  const DISABLE = '{"type":"DriverStation","device":"","data":{">enabled":false,">autonomous":true,">test":false,">new_data":true}}';

  it('is as its Driver Station set it (one write for 50 messages that say the same), and none once it disconnected', async () => {
    const writes = jest.spyOn(app.store.presence, 'write');
    let driver: WebSocket | undefined;
    try {
      const socket = await onAdasHost(await handOver(originOf(ada), ada.cookie), '/.cp/halsim/wpilibws');
      driver = socket;
      // The robot's state comes first: the relay's connection to it is open.
      await new Promise((resolve) => socket.once('message', resolve));
      expect(await adaBecomes('a driver', (now) => now?.robot !== null && now?.robot !== undefined)).toEqual({
        online: false,
        ntConnected: false,
        robot: { enabled: false, mode: 'teleop' },
      });
      const silencesBefore = await silences();
      // The same state 50 times over at once, then again every 50 ms, as a Driver Station keeps sending it.
      for (let sent = 0; sent < 50; sent++) socket.send(ENABLE_AUTONOMOUS);
      const beat = setInterval(() => socket.send(ENABLE_AUTONOMOUS), 50);
      try {
        await eventually('the robot to hear the 50', async () => {
          const heard = await robotHeard(harness.runtime, { workspaceId: ada.workspace.id, runId });
          return heard.received.filter(({ text }) => text === ENABLE_AUTONOMOUS).length >= 50;
        });
        expect(await adaBecomes('the robot enabled', (now) => now?.robot?.enabled === true)).toEqual({
          online: false,
          ntConnected: false,
          robot: { enabled: true, mode: 'autonomous' },
        });
      } finally {
        clearInterval(beat);
      }
      socket.send(DISABLE);
      expect(await adaBecomes('the robot disabled', (now) => now?.robot?.enabled === false)).toEqual({
        online: false,
        ntConnected: false,
        robot: { enabled: false, mode: 'autonomous' },
      });
      const ofAda = writes.mock.calls.flatMap(([, entries]) => (entries as PresenceEntry[]).filter((entry) => entry.workspaceId === ada.workspace.id));
      // Enabled in autonomous written once for all those messages; then disabled. (The watchdog never
      // disabled it meanwhile: that would be a second state.)
      expect((await silences()) - silencesBefore).toBe(0);
      const enabled = ofAda.filter((entry) => entry.robotEnabled);
      expect(enabled).toHaveLength(1);
      expect(enabled[0]).toEqual({
        workspaceId: ada.workspace.id,
        editors: 0,
        pages: 0,
        ntClients: 0,
        driver: true,
        robotEnabled: true,
        robotMode: 'autonomous',
      });
      expect(ofAda.at(-1)).toMatchObject({ robotEnabled: false, robotMode: 'autonomous' });
      // Gone without a word: the relay disables the robot, and the class view has no driver.
      socket.terminate();
      await adaBecomes('no driver', (now) => now === undefined);
    } finally {
      writes.mockRestore();
      driver?.terminate();
    }
  }, 60_000);
});

describe('replicas', () => {
  it("takes a replica's presence with it when it stops", async () => {
    const other = await startApp(db.dataSource, {}, { changes: harness.changes, parts: ['http', 'presence'] });
    let stopped = false;
    try {
      const editor = new WebSocket(`${other.url.replace('http', 'ws')}/u/${ada.workspace.slug}/ws`, { headers: { cookie: ada.cookie, origin: other.url } });
      await new Promise((resolve, reject) => {
        editor.once('open', resolve);
        editor.once('error', reject);
      });
      await adaBecomes('Ada online through the other replica', (now) => now?.online === true);
      // Its clearing at stop announces it (the cascade when its `servers` row goes would not).
      const announced: string[] = [];
      const unsubscribe = harness.changes.subscribe((change) => change.kind === 'status' && announced.push(change.id));
      await other.close();
      stopped = true;
      unsubscribe();
      expect(announced).toContain(ada.workspace.id);
      expect(await adaNow()).toBeUndefined();
      expect(await db.dataSource.query('SELECT workspace_id FROM workspace_presence WHERE workspace_id = $1', [ada.workspace.id])).toEqual([]);
    } finally {
      if (!stopped) await other.close();
    }
  }, 30_000);

  it('ignores the presence of a replica whose row is stale (it died), and drops it with that row', async () => {
    const dead = randomUUID();
    await db.dataSource.query(`INSERT INTO servers (id, public_url, hostname, pid, pid_namespace) VALUES ($1, 'http://dead.test', 'dead', 1, '')`, [dead]);
    const entry = { workspaceId: ada.workspace.id, editors: 1, pages: 0, ntClients: 0, driver: false, robotEnabled: false, robotMode: null };
    await app.store.presence.write(dead, [entry]);
    expect(await adaNow()).toEqual({ online: true, ntConnected: false, robot: null });
    await db.dataSource.query(`UPDATE servers SET seen_at = now() - interval '1 hour' WHERE id = $1`, [dead]);
    expect(await adaNow()).toBeUndefined();
    expect(await db.dataSource.query('SELECT editors FROM workspace_presence WHERE server_id = $1', [dead])).toEqual([{ editors: 1 }]);
    await db.dataSource.query('DELETE FROM servers WHERE id = $1', [dead]);
    expect(await db.dataSource.query('SELECT editors FROM workspace_presence WHERE server_id = $1', [dead])).toEqual([]);
  });
});
