import { RunController } from '../../controllers/runs.ts';
import { names } from '../../src/docker/runtime.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { RunRecord } from '../../src/store/runs.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { captureLogger, createHarness, docker, eventually, removeEverything, TEST_ENV, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { startApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let harness: Harness;
let runs: RunController | undefined;
let metrics: Metrics;
let records: Record<string, unknown>[];
let counter = 0;
const tag = Date.now().toString(36);

beforeAll(async () => {
  harness = createHarness(db.dataSource);
  await harness.controller.start();
});
afterAll(async () => {
  await harness.stop();
  await removeEverything(harness.controlPlaneId);
});
afterEach(async () => {
  await runs?.stop();
  runs = undefined;
});

/** A running workspace and a run controller whose simulator runs `sim` (the stand-in, with SIM_* settings). */
async function setUp(sim: string, buildTimeoutMs = 30_000): Promise<WorkspaceRecord> {
  const student = await newStudent(harness.store, `runner${counter++}`, tag);
  const workspace = await openAndWait(harness.store, student.workspace);
  metrics = createMetrics();
  const logger = captureLogger();
  records = logger.records;
  runs = new RunController({
    store: harness.store,
    runtime: harness.runtime,
    metrics,
    log: categoryLogger(logger.root, 'runs'),
    buildTimeoutMs,
    probeIntervalMs: 100,
    runningCheckMs: 500,
    template: { image: TEST_IMAGE, memoryBytes: 64 * 1024 * 1024, network: TEST_ENV.WORKSPACE_NETWORK, nt4Port: 5810, command: `${sim} node /app/sim.mjs` },
  });
  await runs.start();
  return workspace;
}

const FAST = 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100';

async function waitForStatus(id: string, status: string, timeoutMs = 20_000): Promise<RunRecord> {
  return eventually(
    `run ${status}`,
    async () => {
      const run = await harness.store.runs.get(id);
      return run?.status.phase === status ? run : undefined;
    },
    timeoutMs,
  );
}

/** The sim containers of a run, as Docker lists them. */
async function simContainers(runId: string) {
  return docker.listContainers({ all: true, filters: { label: [`service.run-id=${runId}`] } });
}

/** The value of one series in the metrics text, e.g. `runs_total{terminal_status="stopped"}`; 0 when absent. */
async function value(series: string): Promise<number> {
  const line = (await metrics.registry.metrics()).split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

/**
 * A series' value once it equals `expected`, else its value after 5 s. Metrics are updated just
 * after the status write a test waits for, so they are polled, not read once.
 */
async function settled(series: string, expected: number): Promise<number> {
  await eventually(series, async () => (await value(series)) === expected, 5000).catch(() => undefined);
  return value(series);
}

/** Every control.runs record of a run carries its workspaceId and runId. */
function expectRunLogs(run: RunRecord): void {
  const mine = records.filter((record) => record.runId === run.id);
  expect(mine.length).toBeGreaterThan(0);
  for (const record of mine) expect(record).toEqual(expect.objectContaining({ category: 'control.runs', workspaceId: run.workspaceId, runId: run.id }));
}

describe('a run', () => {
  it('goes queued → running at the first nt4 answer, then stopped on request; the container is removed', async () => {
    const workspace = await setUp(FAST);
    const run = await harness.store.runs.create(workspace.id);
    expect(run.status.phase).toBe('queued');
    const ready = await waitForStatus(run.id, 'running');
    expect(ready.status.readyAt!.getTime()).toBeGreaterThan(run.status.queuedAt.getTime());
    expect(ready.status.simEndpoint).toMatch(/^\d+\.\d+\.\d+\.\d+:5810$/);
    expect(await settled('run_build_duration_seconds_count', 1)).toBe(1);
    expect(await simContainers(run.id)).toHaveLength(1);
    await harness.store.runs.requestStop(workspace.id, run.id);
    const stopped = await waitForStatus(run.id, 'stopped');
    expect(stopped.status.reason).toBe('stopped by request');
    expect(stopped.status.output).toContain('compiling');
    await eventually('sim container removed', async () => (await simContainers(run.id)).length === 0);
    expect(await settled('runs_total{terminal_status="stopped"}', 1)).toBe(1);
    expect(await settled('run_active_duration_seconds_count{terminal_status="stopped"}', 1)).toBe(1);
    expect(await settled('run_build_duration_seconds_count', 1)).toBe(1);
    expectRunLogs(run);
  });

  it('is canceled when stopped during compile', async () => {
    const workspace = await setUp('SIM_COMPILE_MS=20000');
    const run = await harness.store.runs.create(workspace.id);
    await eventually('sim container', async () => (await simContainers(run.id)).length === 1);
    await harness.store.runs.requestStop(workspace.id, run.id);
    const canceled = await waitForStatus(run.id, 'canceled');
    expect(canceled.status.readyAt).toBeNull();
    await eventually('sim container removed', async () => (await simContainers(run.id)).length === 0);
    expect(await settled('runs_total{terminal_status="canceled"}', 1)).toBe(1);
    expect(await settled('run_build_duration_seconds_count', 0)).toBe(0);
    expect(await settled('run_active_duration_seconds_count{terminal_status="canceled"}', 0)).toBe(0);
    expectRunLogs(run);
  });

  it('fails when compile exits non-zero, keeping the output that says why', async () => {
    const workspace = await setUp('SIM_COMPILE_MS=200 SIM_COMPILE_EXIT=2');
    const run = await harness.store.runs.create(workspace.id);
    const failed = await waitForStatus(run.id, 'failed');
    expect(failed.status.exitCode).toBe(2);
    expect(failed.status.reason).toBe('compile or boot failed (exit code 2)');
    expect(failed.status.output).toContain('compilation failed');
    await eventually('sim container removed', async () => (await simContainers(run.id)).length === 0);
    expect(await settled('runs_total{terminal_status="failed"}', 1)).toBe(1);
    expect(await settled('run_build_duration_seconds_count', 0)).toBe(0);
    expectRunLogs(run);
  });

  it('fails when the simulator never answers within the build timeout', async () => {
    const workspace = await setUp('SIM_COMPILE_MS=100 SIM_NEVER_READY=1', 2000);
    const run = await harness.store.runs.create(workspace.id);
    const failed = await waitForStatus(run.id, 'failed');
    expect(failed.status.reason).toBe('the simulator was not ready within the build timeout (2 s)');
    expect(failed.status.endedAt!.getTime() - failed.status.queuedAt.getTime()).toBeGreaterThanOrEqual(2000);
    await eventually('sim container removed', async () => (await simContainers(run.id)).length === 0);
    expect(await settled('runs_total{terminal_status="failed"}', 1)).toBe(1);
  });

  it('fails when the simulator crashes while running', async () => {
    const workspace = await setUp(`${FAST} SIM_CRASH_AFTER_MS=3000`);
    const run = await harness.store.runs.create(workspace.id);
    await waitForStatus(run.id, 'running');
    const failed = await waitForStatus(run.id, 'failed');
    expect(failed.status.exitCode).toBe(3);
    expect(failed.status.reason).toBe('the simulator crashed (exit code 3)');
    expect(failed.status.output).toContain('sim crashed');
    expect(await settled('runs_total{terminal_status="failed"}', 1)).toBe(1);
    expect(await settled('run_active_duration_seconds_count{terminal_status="failed"}', 1)).toBe(1);
    expect(await settled('run_build_duration_seconds_count', 1)).toBe(1);
  });

  it('is stopped when the simulator exits 0 on its own after ready', async () => {
    const workspace = await setUp(`${FAST} SIM_EXIT_AFTER_MS=3000`);
    const run = await harness.store.runs.create(workspace.id);
    const stopped = await waitForStatus(run.id, 'stopped');
    expect(stopped.status.exitCode).toBe(0);
    expect(stopped.status.reason).toBe('the simulator exited on its own');
    expect(await settled('runs_total{terminal_status="stopped"}', 1)).toBe(1);
  });

  it('ends when its workspace is stopped', async () => {
    const workspace = await setUp(FAST);
    const run = await harness.store.runs.create(workspace.id);
    await waitForStatus(run.id, 'running');
    await harness.store.workspaces.stop(SYSTEM_ACTOR, workspace.id, 'coach');
    const stopped = await waitForStatus(run.id, 'stopped');
    expect(stopped.status.reason).toBe('the workspace was stopped');
    await eventually('sim container removed', async () => (await simContainers(run.id)).length === 0);
    expect(await settled('runs_total{terminal_status="stopped"}', 1)).toBe(1);
  });

  it('is one run when two requests come at once', async () => {
    const workspace = await setUp('SIM_COMPILE_MS=20000');
    const results = await Promise.allSettled([harness.store.runs.create(workspace.id), harness.store.runs.create(workspace.id)]);
    const made = results.filter((result): result is PromiseFulfilledResult<RunRecord> => result.status === 'fulfilled');
    const refused = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
    expect(made).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.reason).toMatchObject({ status: 409, code: 'run_active', message: `Run ${made[0]!.value.id} is still active; stop it first.` });
    await eventually(
      'one sim container',
      async () => (await docker.listContainers({ all: true, filters: { label: [`service.workspace-id=${workspace.id}`, 'service.role=sim'] } })).length === 1,
    );
  });

  it('is refused while the workspace is not wanted running', async () => {
    const student = await newStudent(harness.store, `idle${counter++}`, tag);
    await expect(harness.store.runs.create(student.workspace.id)).rejects.toMatchObject({ status: 409, code: 'workspace_not_running' });
  });

  it('leaves no simulator container behind whose run is finished or unknown', async () => {
    const workspace = await setUp(FAST);
    const orphanRun = '00000000-0000-4000-8000-0000000000aa';
    const orphan = await harness.runtime.createSimContainer({
      workspaceId: workspace.id,
      slug: workspace.slug,
      homeVolume: names.volume(workspace.slug),
      runId: orphanRun,
      image: TEST_IMAGE,
      memoryBytes: 64 * 1024 * 1024,
      nanoCpus: 0,
      pidsLimit: 1024,
      network: 'bridge',
      command: 'sleep 60',
      nt4Port: 5810,
      halsimPort: 3300,
    });
    await runs!.resyncAll();
    await eventually('orphan sim removed', async () => (await simContainers(orphanRun)).length === 0);
    expect(orphan.role).toBe('sim');
  });
});

describe('the run API', () => {
  it('starts, lists, shows and stops runs, and refuses what it must', async () => {
    const workspace = await setUp(FAST);
    const app = await startApp(db.dataSource, {}, { changes: harness.changes });
    try {
      // The workspace's user gets the session.
      const [row] = (await db.dataSource.query('SELECT user_id FROM workspaces WHERE id = $1', [workspace.id])) as { user_id: string }[];
      const { sessionFor } = await import('../helpers/session.ts');
      const cookie = (await sessionFor(harness.store.sessions, row!.user_id)).cookie;
      const stranger = await newStudent(harness.store, `stranger${counter++}`, tag);
      const base = `${app.url}/u/${workspace.slug}/api`;
      const call = (method: string, path: string, who = cookie) =>
        fetch(`${base}${path}`, { method, headers: { cookie: who, origin: app.url, accept: 'application/json' } });

      const started = await call('POST', '/runs');
      expect(started.status).toBe(202);
      const { run } = (await started.json()) as { run: { id: string; status: string } };
      expect(run.status).toBe('queued');
      const again = await call('POST', '/runs');
      expect(again.status).toBe(409);
      expect(await again.json()).toEqual({ error: { code: 'run_active', message: `Run ${run.id} is still active; stop it first.` } });

      await waitForStatus(run.id, 'running');
      const alive = (await (await call('GET', '/sim/status')).json()) as { alive: boolean; runId: string };
      expect(alive).toEqual(expect.objectContaining({ alive: true, runId: run.id }));
      const one = (await (await call('GET', `/runs/${run.id}`)).json()) as { run: { status: string; readyAt: string | null } };
      expect(one.run).toEqual(expect.objectContaining({ status: 'running', readyAt: expect.any(String) }));

      expect((await call('POST', `/runs/${run.id}/stop`)).status).toBe(202);
      await waitForStatus(run.id, 'stopped');
      const idempotent = await call('POST', `/runs/${run.id}/stop`);
      expect(idempotent.status).toBe(200);
      expect(((await idempotent.json()) as { run: { status: string } }).run.status).toBe('stopped');

      const second = (await (await call('POST', '/runs')).json()) as { run: { id: string } };
      const list = (await (await call('GET', '/runs')).json()) as { runs: { id: string }[] };
      expect(list.runs.map((entry) => entry.id)).toEqual([second.run.id, run.id]);

      for (const unknown of ['00000000-0000-4000-8000-000000000000', 'not-a-run']) {
        const missing = await call('GET', `/runs/${unknown}`);
        expect(missing.status).toBe(404);
        expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('run_not_found');
        expect((await call('POST', `/runs/${unknown}/stop`)).status).toBe(404);
      }
      // Another student's run is not theirs to see or stop, whichever way they ask.
      const strangersWorkspace = `${app.url}/u/${stranger.workspace.slug}/api`;
      expect((await fetch(`${strangersWorkspace}/runs/${run.id}`, { headers: { cookie: stranger.cookie } })).status).toBe(404);
      expect((await call('GET', `/runs/${run.id}`, stranger.cookie)).status).toBe(403);
      expect((await call('POST', `/runs/${run.id}/stop`, stranger.cookie)).status).toBe(403);
      // A workspace that is not running takes no runs.
      const idle = await fetch(`${strangersWorkspace}/runs`, { method: 'POST', headers: { cookie: stranger.cookie, origin: app.url } });
      expect(idle.status).toBe(409);
      expect(((await idle.json()) as { error: { code: string } }).error.code).toBe('workspace_not_running');
    } finally {
      await app.close();
    }
  });
});
