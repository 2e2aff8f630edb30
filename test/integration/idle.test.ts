/**
 * The idle sweep end to end, on real PostgreSQL and Docker: what the student does keeps a
 * workspace running (here the editor extension's `keep`, through the editor's own address); a
 * workspace whose student does nothing is stopped by the sweep and then by the controller, even
 * while its editor stays connected and chatty (VS Code's keep-alives are no activity); and a
 * workspace goes idle once its student stops.
 */
import WebSocket from 'ws';
import { IdleSweep } from '../../controllers/idle-sweep.ts';
import { categoryLogger } from '../../src/log.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { captureLogger, createHarness, eventually, inspectByName, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let app: TestApp;
let harness: Harness;
let ada: Student;
let bob: Student;
let idleSweep: IdleSweep;
let idleRecords: Record<string, unknown>[];
const tag = Date.now().toString(36);
/** IDLE_STOP_MINUTES of this test: 3 s. */
const IDLE_MINUTES = 0.05;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  app = await startApp(db.dataSource);
  harness = createHarness(db.dataSource, { changes: app.store.changes });
  await harness.controller.start();
  ada = await newStudent(harness.store, 'ada', tag);
  bob = await newStudent(harness.store, 'bob', tag);
  [ada.workspace, bob.workspace] = await Promise.all([openAndWait(harness.store, ada.workspace), openAndWait(harness.store, bob.workspace)]);
  // Built as the control plane builds it, over the app's store, activity and metrics, with its log captured.
  const { root, records } = captureLogger();
  idleRecords = records;
  idleSweep = new IdleSweep({
    workspaces: app.store.workspaces,
    activity: app.activity,
    metrics: app.metrics,
    log: categoryLogger(root, 'idle'),
    idleMinutes: IDLE_MINUTES,
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 30_000);

const stopsTotal = async () => (await app.metrics.idleSweepStops.get()).values[0]?.value ?? 0;
const idleLines = () => idleRecords.filter((record) => record.category === 'control.idle' && record.message === 'stopping idle workspace');

/** Bob's editor tab: a WebSocket through the proxy with a message every 500 ms, as VS Code's keep-alives. */
let socket: WebSocket | undefined;
let ticker: NodeJS.Timeout | undefined;
let echoed = 0;

afterAll(() => {
  clearInterval(ticker);
  socket?.terminate();
});

it('stops a workspace whose student does nothing, even with its editor connected, and keeps the one whose student works', async () => {
  // The container runs a moment before the editor in it listens: wait until it answers through the proxy.
  await eventually('the editor to answer', async () => (await fetch(`${app.url}/u/${ada.workspace.slug}/healthz`, { headers: { cookie: ada.cookie } })).ok);
  // Bob's editor tab stays connected and busy, as VS Code's keep-alives keep it: that is no activity.
  const tab = new WebSocket(`${app.url.replace('http', 'ws')}/u/${bob.workspace.slug}/ws`, { headers: { cookie: bob.cookie, origin: app.url } });
  socket = tab;
  await new Promise((resolve, reject) => (tab.once('open', resolve), tab.once('error', reject)));
  tab.on('message', () => echoed++);
  let sent = 0;
  ticker = setInterval(() => tab.send(`keep-alive ${sent++}`), 500);
  // Ada works: her editor's extension says so (at most once a minute in real life; every 500 ms here).
  const working = setInterval(
    () => void fetch(`${app.url}/u/${ada.workspace.slug}/.cp/api/workspace/keep`, { method: 'POST', headers: { cookie: ada.cookie, origin: app.url } }),
    500,
  );
  try {
    // Eight echoes take at least 4 s of ticks: more than the idle limit (3 s), whatever the machine's load.
    await eventually('8 echoes', async () => echoed >= 8, 15_000);
    expect(await idleSweep.sweep()).toEqual([bob.workspace.id]);
  } finally {
    clearInterval(working);
  }
  expect((await harness.store.workspaces.get(bob.workspace.id))?.spec.desiredState).toBe('stopped');
  await waitForState(harness.store, bob.workspace.id, 'stopped');
  expect((await inspectByName(`ws-${bob.workspace.slug}-code`))?.State.Running).toBe(false);
  // Stopping it ended the editor's connection too.
  await eventually('the tab closed', async () => tab.readyState === WebSocket.CLOSED, 5000);

  expect(await harness.store.workspaces.get(ada.workspace.id)).toMatchObject({ spec: { desiredState: 'running' }, status: { observedState: 'running' } });
  expect((await inspectByName(`ws-${ada.workspace.slug}-code`))?.State.Running).toBe(true);
  expect(await stopsTotal()).toBe(1);
  expect(idleLines()).toEqual([expect.objectContaining({ category: 'control.idle', level: 'info', workspaceId: bob.workspace.id, slug: bob.workspace.slug })]);
}, 60_000);

it('lets a workspace go idle once its student stops working', async () => {
  // Right after Ada's last sign of work, her workspace is not idle yet...
  expect(await idleSweep.sweep()).toEqual([]);
  // ...but once the idle limit passes without any, it is stopped too.
  await sleep(3500);
  expect(await idleSweep.sweep()).toEqual([ada.workspace.id]);
  expect((await harness.store.workspaces.get(ada.workspace.id))?.spec.desiredState).toBe('stopped');
  await waitForState(harness.store, ada.workspace.id, 'stopped');
  expect((await inspectByName(`ws-${ada.workspace.slug}-code`))?.State.Running).toBe(false);
  expect(await stopsTotal()).toBe(2);
  expect(idleLines().map((record) => record.workspaceId)).toEqual([bob.workspace.id, ada.workspace.id]);
}, 40_000);
