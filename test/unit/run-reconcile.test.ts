/**
 * Each branch of the run controller's reconcile, sample-controller style: a fixture preloads the
 * run and its workspace (the real store on the test PostgreSQL) and the simulator container (the
 * in-memory runtime), one reconcile runs, and the test compares the engine actions and the run's
 * recorded status with what it expects. The same controller against the real engine and the stand-in
 * simulator is in test/integration/runs.test.ts.
 */
import { RunController, type RunControllerOptions } from '../../controllers/runs.ts';
import { names } from '../../src/docker/runtime.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import type { Probe } from '../../src/probe.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import type { RunRecord } from '../../src/store/runs.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { onHeldClock } from '../helpers/clock.ts';
import { captureLogger } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { MemoryRuntime } from '../helpers/memory-runtime.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
const TEMPLATE = { image: 'classroom-workspace:test', memoryBytes: 64 * 1024 * 1024, network: 'bridge', nt4Port: 5810, command: './gradlew simulateJava' };

let store: Store;
let runtime: MemoryRuntime;
let metrics: Metrics;
let records: Record<string, unknown>[];
let simAnswers: boolean;
let counter = 0;

beforeEach(() => {
  store = testStore(db.dataSource);
  runtime = new MemoryRuntime();
  metrics = createMetrics();
  simAnswers = false;
});

function controller(options: Partial<RunControllerOptions> = {}): RunController {
  const logger = captureLogger();
  records = logger.records;
  const probe = async (): Promise<Probe> => ({ outcome: simAnswers ? 'ok' : 'error', seconds: 0.001 });
  return new RunController({
    store,
    runtime,
    metrics,
    log: categoryLogger(logger.root, 'runs'),
    template: TEMPLATE,
    buildTimeoutMs: 60_000,
    probe,
    probeIntervalMs: 100,
    runningCheckMs: 5000,
    ...options,
  });
}

/** A running workspace with a queued run (and, with `ready`, a run the simulator already answered for). */
async function queuedRun(ready = false): Promise<{ workspace: WorkspaceRecord; run: RunRecord }> {
  const { workspace } = await store.users.create({ email: `r${counter++}@school.test` });
  await store.workspaces.open(workspace.id);
  let run = await store.runs.create(workspace.id);
  if (ready) run = (await store.runs.markReady(run.id))!;
  return { workspace, run };
}

/** The run's simulator container, preloaded in the engine (running, with its last output). */
function simContainer(workspace: WorkspaceRecord, run: RunRecord, state = 'running') {
  return runtime.preload({
    name: names.sim(workspace.slug, run.id),
    role: 'sim',
    workspaceId: workspace.id,
    slug: workspace.slug,
    runId: run.id,
    state,
    output: 'BUILD SUCCESSFUL\nsimulator up',
  });
}

const current = async (id: string) => (await store.runs.get(id))!;
const total = async (status: string) => (await metrics.runsTotal.get()).values.find((value) => value.labels.terminal_status === status)?.value ?? 0;

describe('RunController.reconcile', () => {
  it('removes the containers of a run that is unknown, and says so', async () => {
    const { workspace, run } = await queuedRun();
    const unknown = { ...run, id: '00000000-0000-4000-8000-0000000000bb' };
    simContainer(workspace, unknown);
    await controller().reconcile(unknown.id);
    expect(runtime.actions).toEqual([`remove ${names.sim(workspace.slug, unknown.id)}`]);
    expect(records).toContainEqual(expect.objectContaining({ level: 'warning', message: 'removed simulator containers of an unknown run' }));
  });

  it('removes the container of a run that has already ended, recording nothing new', async () => {
    const { workspace, run } = await queuedRun();
    await store.runs.finish(run.id, { status: 'failed', reason: 'earlier', exitCode: 1, output: '' });
    simContainer(workspace, run, 'exited');
    await controller().reconcile(run.id);
    expect(runtime.actions).toEqual([`remove ${names.sim(workspace.slug, run.id)}`]);
    expect((await current(run.id)).status.reason).toBe('earlier');
  });

  it('creates and starts the simulator of a queued run (volume first), then probes again shortly', async () => {
    const { workspace, run } = await queuedRun();
    await expect(controller().reconcile(run.id)).resolves.toEqual({ requeueAfterMs: 100 });
    const name = names.sim(workspace.slug, run.id);
    expect(runtime.actions).toEqual([`create volume ${names.volume(workspace.slug)}`, `create ${name}`, `start ${name}`]);
    expect((await current(run.id)).status.phase).toBe('queued');
  });

  it('records the endpoint and looks again while the simulator does not answer yet', async () => {
    const { workspace, run } = await queuedRun();
    const container = simContainer(workspace, run);
    await expect(controller().reconcile(run.id)).resolves.toEqual({ requeueAfterMs: 100 });
    expect(await current(run.id)).toMatchObject({ status: { phase: 'queued', simEndpoint: `${container.address}:5810` } });
  });

  it('probes a simulator less often the longer it has not answered: a tenth of the wait, 500 ms at most', async () => {
    const { workspace, run } = await queuedRun();
    simContainer(workspace, run);
    const runs = controller();
    await onHeldClock(async (at) => {
      await expect(runs.reconcile(run.id)).resolves.toEqual({ requeueAfterMs: 100 });
      at(3000);
      await expect(runs.reconcile(run.id)).resolves.toEqual({ requeueAfterMs: 300 });
      at(20_000);
      await expect(runs.reconcile(run.id)).resolves.toEqual({ requeueAfterMs: 500 });
    });
  });

  it('marks a compiling run running when the nt4 probe answers, observing the build duration', async () => {
    const { workspace, run } = await queuedRun();
    simContainer(workspace, run);
    simAnswers = true;
    await expect(controller().reconcile(run.id)).resolves.toEqual({ requeueAfterMs: 5000 });
    expect(await current(run.id)).toMatchObject({ status: { phase: 'running', readyAt: expect.any(Date) } });
    expect((await metrics.runBuildDuration.get()).values.find((value) => value.metricName?.endsWith('_count'))?.value).toBe(1);
    expect(runtime.actions).toEqual([]);
  });

  it('looks at a running run again later, touching nothing', async () => {
    const { workspace, run } = await queuedRun(true);
    simContainer(workspace, run);
    await expect(controller().reconcile(run.id)).resolves.toEqual({ requeueAfterMs: 5000 });
    expect(runtime.actions).toEqual([]);
  });

  it('waits a moment when the container is gone between the listing and the inspection', async () => {
    const { workspace, run } = await queuedRun();
    const container = simContainer(workspace, run);
    runtime.exitOf = async () => (runtime.containers.delete(container.id), undefined);
    await expect(controller().reconcile(run.id)).resolves.toEqual({ requeueAfterMs: 100 });
  });

  it.each([
    ['a stop asked before it was ready', false, 'student', 'canceled', 'stopped by request'],
    ['a stop asked once it ran', true, 'student', 'stopped', 'stopped by request'],
    ["a coach's stop", true, 'coach', 'stopped', 'stopped by a coach'],
    // A replica of the release before WidenRunStoppedBy, during a rolling upgrade, still writes a coach's stop as `admin`.
    ["a coach's stop written by the previous release", true, 'admin', 'stopped', 'stopped by a coach'],
  ])('ends the run on %s, keeping its output and removing its container', async (_name, ready, by, status, reason) => {
    const { workspace, run } = await queuedRun(ready);
    simContainer(workspace, run);
    if (by === 'coach') await store.runs.stopByAdmin(SYSTEM_ACTOR, run.id);
    else if (by === 'admin') await db.dataSource.query("UPDATE runs SET desired_state = 'stopped', stopped_by = 'admin' WHERE id = $1", [run.id]);
    else await store.runs.requestStop(workspace.id, run.id);
    await controller().reconcile(run.id);
    const name = names.sim(workspace.slug, run.id);
    expect(runtime.actions).toEqual([`stop ${name}`, `remove ${name}`]);
    expect(await current(run.id)).toMatchObject({ status: { phase: status, reason, output: 'BUILD SUCCESSFUL\nsimulator up', endedAt: expect.any(Date) } });
    expect(await total(status)).toBe(1);
  });

  it.each([
    ['before it was ready', false, 'canceled'],
    ['once it ran', true, 'stopped'],
  ])('ends the run when its workspace is no longer wanted running (%s)', async (_name, ready, status) => {
    const { workspace, run } = await queuedRun(ready);
    simContainer(workspace, run);
    await store.workspaces.stop(SYSTEM_ACTOR, workspace.id, 'coach');
    await controller().reconcile(run.id);
    expect(await current(run.id)).toMatchObject({ status: { phase: status, reason: 'the workspace was stopped' } });
    expect(runtime.containers.size).toBe(0);
  });

  it('fails a running run whose container disappeared', async () => {
    const { run } = await queuedRun(true);
    await controller().reconcile(run.id);
    expect(runtime.actions).toEqual([]);
    expect(await current(run.id)).toMatchObject({ status: { phase: 'failed', reason: 'the simulator container disappeared' } });
  });

  it('fails a queued run past the build timeout, with or without its container', async () => {
    const { workspace, run } = await queuedRun();
    await db.dataSource.query("UPDATE runs SET queued_at = now() - interval '2 minutes' WHERE id = $1", [run.id]);
    const other = await queuedRun();
    await db.dataSource.query("UPDATE runs SET queued_at = now() - interval '2 minutes' WHERE id = $1", [other.run.id]);
    simContainer(workspace, run);
    const subject = controller();
    await subject.reconcile(run.id);
    await subject.reconcile(other.run.id);
    const reason = 'the simulator was not ready within the build timeout (60 s)';
    expect(await current(run.id)).toMatchObject({ status: { phase: 'failed', reason } });
    expect(await current(other.run.id)).toMatchObject({ status: { phase: 'failed', reason } });
    expect(runtime.actions).toEqual([`stop ${names.sim(workspace.slug, run.id)}`, `remove ${names.sim(workspace.slug, run.id)}`]);
  });

  it.each([
    ['a compile failure', false, 1, false, 'failed', 'compile or boot failed (exit code 1)'],
    ['an exit 0 before ready', false, 0, false, 'failed', 'the simulator exited before it was ready'],
    ['running out of memory while compiling', false, 137, true, 'failed', 'compile or boot ran out of memory'],
    ['an exit 0 once it ran', true, 0, false, 'stopped', 'the simulator exited on its own'],
    ['a crash once it ran', true, 2, false, 'failed', 'the simulator crashed (exit code 2)'],
    ['running out of memory once it ran', true, 137, true, 'failed', 'the simulator ran out of memory'],
  ])('ends the run after %s', async (_name, ready, exitCode, oomKilled, status, reason) => {
    const { workspace, run } = await queuedRun(ready);
    const container = simContainer(workspace, run);
    runtime.exit(container.id, exitCode, { oomKilled, output: 'last words' });
    await controller().reconcile(run.id);
    expect(await current(run.id)).toMatchObject({ status: { phase: status, reason, exitCode, output: 'last words' } });
    expect(runtime.actions).toEqual([`remove ${container.name}`]);
    expect(records).toContainEqual(
      expect.objectContaining({
        level: status === 'failed' ? 'warning' : 'info',
        runId: run.id,
        workspaceId: workspace.id,
        message: `run ${status}: ${reason}`,
      }),
    );
  });

  it('looks again at an exit by SIGKILL not marked out of memory, and names the memory once the engine marks it', async () => {
    const { workspace, run } = await queuedRun();
    const container = simContainer(workspace, run);
    runtime.exit(container.id, 137, { output: 'last words' });
    const subject = controller({ oomGraceMs: 60_000 });
    expect(await subject.reconcile(run.id)).toEqual({ requeueAfterMs: 200 });
    expect(await current(run.id)).toMatchObject({ status: { phase: 'queued' } });
    expect(runtime.actions).toEqual([]);
    runtime.exit(container.id, 137, { oomKilled: true, output: 'last words' });
    await subject.reconcile(run.id);
    expect(await current(run.id)).toMatchObject({ status: { phase: 'failed', reason: 'compile or boot ran out of memory', exitCode: 137 } });
  });

  it('calls an exit by SIGKILL never marked out of memory a failure with its exit code, once the grace is past', async () => {
    const { workspace, run } = await queuedRun();
    const container = simContainer(workspace, run);
    runtime.exit(container.id, 137, { output: 'last words' });
    await controller({ oomGraceMs: 0 }).reconcile(run.id);
    expect(await current(run.id)).toMatchObject({ status: { phase: 'failed', reason: 'compile or boot failed (exit code 137)', exitCode: 137 } });
  });

  it('records the active time of a run that ran, by its terminal status', async () => {
    const { workspace, run } = await queuedRun(true);
    const container = simContainer(workspace, run);
    runtime.exit(container.id, 0);
    await controller().reconcile(run.id);
    const observed = (await metrics.runActiveDuration.get()).values.find(
      (value) => value.metricName?.endsWith('_count') && value.labels.terminal_status === 'stopped',
    );
    expect(observed?.value).toBe(1);
  });
});
