import { DEFAULT_HALSIM_PORT, DEFAULT_PIDS_LIMIT, endpointOf, engineAway, names, type ManagedContainer, type WorkspaceRuntime } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { probeHttp, ProbeWaits, type Probe } from '../src/probe.ts';
import type { Store } from '../src/store/index.ts';
import { isTerminal, type RunRecord } from '../src/store/runs.ts';
import type { TerminalRunStatus } from '../src/wire/vocabulary.ts';
import type { WorkspaceRecord } from '../src/store/workspaces.ts';
import { Controller } from './controller.ts';
import { RunOutputCollector } from './run-output.ts';
import type { ReconcileResult } from './workqueue.ts';
import type { Fence } from '../src/store/leases.ts';

/** The longest wait between two probes of a compiling run (probeInterval). */
const RUN_PROBE_MAX_MS = 500;
/** How long a run's end waits for the rest of its output to be kept. */
const OUTPUT_DRAIN_MS = 10_000;
/** How long a run's end waits before following its output again after a follower failed. */
const OUTPUT_RETRY_MS = 250;

/** What a run's simulator container is made from (configuration). */
export interface SimTemplate {
  image: string;
  /** RUN_MEMORY_LIMIT (by default CODE_MEMORY_LIMIT). */
  memoryBytes: number;
  /** CPUs a run may use, in billionths (RUN_CPUS, by default CODE_CPUS); 0 or absent: no limit. */
  nanoCpus?: number;
  /** The most processes and threads a run may hold at once (CONTAINER_PIDS_LIMIT); absent: DEFAULT_PIDS_LIMIT. */
  pidsLimit?: number;
  network: string;
  nt4Port: number;
  /** Where the robot serves WPILib's HALSim WebSocket (HALSIM_PORT); absent: DEFAULT_HALSIM_PORT. */
  halsimPort?: number;
  /** SIM_COMMAND: compile, then boot the simulator. */
  command: string;
}

export interface RunControllerOptions {
  store: Pick<Store, 'runs' | 'workspaces' | 'changes'>;
  /** A leader's fence (its store writes under the same one); none when driven directly. */
  fence?: Fence;
  runtime: WorkspaceRuntime;
  metrics: Metrics;
  /** Logger of `control.runs`. */
  log: Logger;
  template: SimTemplate;
  /** RUN_BUILD_TIMEOUT: how long compile and boot may take before the run fails. */
  buildTimeoutMs: number;
  /** RUN_MAX_MINUTES: how long a run may be running (after its build) before it is stopped. */
  maxRunMs?: number;
  /** How often a compiling run's nt4 port is probed, at first (then less often: probeInterval). */
  probeIntervalMs?: number;
  /** How often a running run is looked at besides its container's events. */
  runningCheckMs?: number;
  resyncIntervalMs?: number;
  /** How many lines of the simulator's output a finished run keeps. */
  outputLines?: number;
  /**
   * How long an exit by SIGKILL (137) not marked out of memory is looked at again before it is
   * called a crash (default 5 s): the engine marks an out-of-memory kill when the kernel's event
   * reaches it, which can be a moment after the exit, and on a busy machine was more than 2 s after.
   */
  oomGraceMs?: number;
  /** Asks a simulator's nt4 port whether it answers (an HTTP GET with the 500 ms probe timeout). */
  probe?: (endpoint: string) => Promise<Probe>;
  /** Reconciles at once (default 32): a class pressing Run within seconds does not wait for each other's simulator starts. */
  concurrency?: number;
}

/**
 * Drives each run from queued to a terminal status on a simulator container of its own
 * (`ws-<slug>-sim-<runId8>`, the workspace image and home volume, running SIM_COMMAND). Triggers
 * only enqueue run ids: committed run and workspace changes, engine events on sim containers, and
 * a periodic resync; a compiling run is re-examined every probe interval.
 */
export class RunController extends Controller {
  private readonly options: Required<Omit<RunControllerOptions, 'concurrency' | 'fence' | 'template'>> & { template: Required<SimTemplate> };
  /** Keeps each run's whole output as it is written. */
  private readonly output: RunOutputCollector;
  /** Runs whose container was seen exited by SIGKILL, not (yet) marked out of memory: since when (oomGraceMs). */
  private readonly killedAt = new Map<string, number>();
  /** Since when each compiling run's simulator has not answered its probe. */
  private readonly probeWaits = new ProbeWaits();

  constructor(options: RunControllerOptions) {
    super(
      {
        name: 'runs',
        metrics: options.metrics,
        log: options.log,
        concurrency: options.concurrency ?? 32,
        saidElsewhere: (error) => engineAway(options.runtime, error),
      },
      options.fence,
    );
    this.options = {
      probeIntervalMs: 100,
      runningCheckMs: 5000,
      resyncIntervalMs: 30_000,
      outputLines: 50,
      oomGraceMs: 5000,
      probe: probeHttp,
      maxRunMs: 60 * 60_000,
      ...options,
      template: { nanoCpus: 0, pidsLimit: DEFAULT_PIDS_LIMIT, halsimPort: DEFAULT_HALSIM_PORT, ...options.template },
      // Reconciles' engine calls end when the queue shuts down (the output followers stop on their own).
      runtime: options.runtime.scoped({ signal: this.queue.signal }),
    };
    this.output = new RunOutputCollector({ runtime: options.runtime, runs: options.store.runs, changes: options.store.changes, log: options.log });
  }

  /** Stops the triggers, then the output followers (what they read is kept). */
  override async stop(): Promise<void> {
    await super.stop();
    await this.output.stop();
  }

  /** Follows every trigger, which enqueues every unfinished run and the run of every sim container (adoption). */
  override async start(): Promise<void> {
    const { store, runtime } = this.options;
    this.follow({
      changes: store.changes,
      // A workspace stopped or deleted ends its runs.
      keysOfChange: (change) => (change.kind === 'runs' ? [change.id] : change.kind === 'workspaces' ? store.runs.activeIds(change.id) : []),
      runtime,
      keyOfEvent: (event) => event.runId,
      storedKeys: () => store.runs.activeIds(),
      engineKeys: async () =>
        (await runtime.listContainers()).filter((container) => container.role === 'sim' && container.runId).map((container) => container.runId!),
      resyncIntervalMs: this.options.resyncIntervalMs,
      log: this.options.log,
    });
  }

  /**
   * Compares a run with its simulator container and takes the one step that moves the run on,
   * writing its status: queued → `running` when the nt4 probe first answers, or to an end (a
   * `running` run past RUN_MAX_MINUTES is `stopped`). While a run has a container its output is
   * followed and kept (RunOutputCollector). Whenever a run ends, its whole output is kept first,
   * then its last lines, and its container removed.
   */
  override async reconcile(runId: string): Promise<ReconcileResult | void> {
    const { store, runtime } = this.options;
    const run = await store.runs.get(runId);
    const containers = await this.simContainers(runId, run?.workspaceId);
    // Record gone or finished: its containers go.
    if (!run || isTerminal(run.status.phase)) {
      this.probeWaits.forget(runId);
      for (const container of containers) await runtime.remove(container.id);
      if (!run && containers.length > 0)
        this.options.log.warning({ runId, containers: containers.map((container) => container.name) }, 'removed simulator containers of an unknown run');
      return;
    }
    const log = this.options.log.child({ workspaceId: run.workspaceId, runId: run.id }) as Logger;
    const [container, ...extra] = containers;
    for (const duplicate of extra) await runtime.remove(duplicate.id);

    // Workspace no longer wanted running, or a stop requested: `stopped` once it was ready, `canceled` before.
    const workspace = await store.workspaces.get(run.workspaceId);
    const wasReady = run.status.phase === 'running';
    if (!workspace || workspace.spec.desiredState !== 'running')
      return this.end(run, container, wasReady ? 'stopped' : 'canceled', 'the workspace was stopped', log);
    if (run.spec.desiredState === 'stopped')
      return this.end(run, container, wasReady ? 'stopped' : 'canceled', run.spec.stoppedBy === 'coach' ? 'stopped by a coach' : 'stopped by request', log);

    // No container: create and start it, unless it ran and vanished or the build time is up (both `failed`).
    if (!container) {
      if (wasReady) return this.end(run, undefined, 'failed', 'the simulator container disappeared', log);
      if (this.pastBuildTimeout(run)) return this.end(run, undefined, 'failed', this.timeoutReason(), log);
      return this.createSim(run, workspace, log);
    }

    void this.output.follow(run.id, container.id);
    // Exited: `failed` before ready or on a non-zero exit (out of memory named), `stopped` on exit 0 after ready.
    const exit = await runtime.exitOf(container.id);
    if (!exit) return { requeueAfterMs: 100 };
    if (!exit.running) {
      const code = exit.exitCode;
      // Killed, and not marked out of memory yet: the engine may mark it in a moment (oomGraceMs).
      if (code === 137 && !exit.oomKilled) {
        const since = this.killedAt.get(run.id) ?? Date.now();
        this.killedAt.set(run.id, since);
        if (Date.now() - since < this.options.oomGraceMs) return { requeueAfterMs: 200 };
      }
      if (!wasReady) {
        const reason = exit.oomKilled
          ? 'compile or boot ran out of memory'
          : code === 0
            ? 'the simulator exited before it was ready'
            : `compile or boot failed (exit code ${code})`;
        return this.end(run, container, 'failed', reason, log, code);
      }
      if (code === 0) return this.end(run, container, 'stopped', 'the simulator exited on its own', log, code);
      return this.end(run, container, 'failed', exit.oomKilled ? 'the simulator ran out of memory' : `the simulator crashed (exit code ${code})`, log, code);
    }
    // Running and ready: stopped past its time, else looked at again later. Compiling: probe.
    if (wasReady) {
      const left = run.status.readyAt!.getTime() + this.options.maxRunMs - Date.now();
      if (left <= 0) return this.end(run, container, 'stopped', this.maxRunReason(), log);
      return { requeueAfterMs: Math.min(this.options.runningCheckMs, left) };
    }
    return this.probe(run, container, log);
  }

  /** A compiling run: fail it past the build timeout, mark it ready when the nt4 port answers, else look again soon. */
  private async probe(run: RunRecord, container: ManagedContainer, log: Logger): Promise<ReconcileResult | void> {
    if (this.pastBuildTimeout(run)) return this.end(run, container, 'failed', this.timeoutReason(), log);
    const endpoint = endpointOf(container, this.options.template.nt4Port);
    if (!endpoint) return { requeueAfterMs: this.options.probeIntervalMs };
    if (run.status.simEndpoint !== endpoint) await this.options.store.runs.recordSimEndpoint(run.id, endpoint);
    const probe = await this.options.probe(endpoint);
    // Asked less often the longer it has not answered (a robot program's build takes half a minute).
    if (probe.outcome !== 'ok') return { requeueAfterMs: this.probeWaits.next(run.id, this.options.probeIntervalMs, RUN_PROBE_MAX_MS) };
    this.probeWaits.forget(run.id);
    const ready = await this.options.store.runs.markReady(run.id);
    if (ready?.status.readyAt) {
      const seconds = (ready.status.readyAt.getTime() - ready.status.queuedAt.getTime()) / 1000;
      this.options.metrics.runBuildDuration.observe(seconds);
      log.info({ buildSeconds: Math.round(seconds * 1000) / 1000 }, 'simulator ready: run is running');
    }
    return { requeueAfterMs: this.options.runningCheckMs };
  }

  private async createSim(run: RunRecord, workspace: WorkspaceRecord, log: Logger): Promise<ReconcileResult> {
    const { runtime, template } = this.options;
    const slug = workspace.slug;
    // The code container's home: the one a restore put in, else the default.
    const homeVolume = names.home(workspace);
    await runtime.ensureVolume({ workspaceId: run.workspaceId, slug }, homeVolume);
    const container = await runtime.createSimContainer({ ...template, workspaceId: run.workspaceId, slug, runId: run.id, homeVolume });
    await runtime.start(container.id);
    void this.output.follow(run.id, container.id);
    log.info({ container: container.name }, 'simulator container started: compiling and booting');
    return { requeueAfterMs: this.options.probeIntervalMs };
  }

  /** Ends a run: keeps the container's last output, removes the container, records the terminal status and counts it. */
  private async end(
    run: RunRecord,
    container: ManagedContainer | undefined,
    status: TerminalRunStatus,
    reason: string,
    log: Logger,
    exitCode: number | null = null,
  ): Promise<void> {
    const { runtime, metrics, store } = this.options;
    // However it ends (an exit, a stop while a kill awaited its out-of-memory mark), nothing is kept of it.
    this.killedAt.delete(run.id);
    this.probeWaits.forget(run.id);
    let output = '';
    if (container) {
      await runtime.stop(container.id, 5);
      // Its whole output kept before the run is recorded as ended (a stopped container's output
      // ends); a follower that fails follows again from what it kept. Past the drain time, what was
      // read is kept and nothing more: no output is added to a run recorded as ended.
      const deadline = Date.now() + OUTPUT_DRAIN_MS;
      let whole = false;
      for (;;) {
        whole = (await within(this.output.follow(run.id, container.id), deadline - Date.now())) === true;
        if (whole || Date.now() >= deadline - OUTPUT_RETRY_MS) break;
        await new Promise((resolve) => setTimeout(resolve, OUTPUT_RETRY_MS));
      }
      if (!whole) {
        await this.output.abandon(run.id);
        log.warning({ drainMs: OUTPUT_DRAIN_MS }, "the run's output was not all kept before it ended");
      }
      output = (await runtime.logsTail(container.id, this.options.outputLines)).slice(-16_000);
    }
    // The end is recorded (and counted) before the container goes: if recording fails, the next pass still finds it.
    const finished = await store.runs.finish(run.id, { status, reason, exitCode, output });
    if (finished) {
      metrics.runsTotal.inc({ terminal_status: status });
      if (finished.status.readyAt && finished.status.endedAt) {
        metrics.runActiveDuration.observe({ terminal_status: status }, (finished.status.endedAt.getTime() - finished.status.readyAt.getTime()) / 1000);
      }
      log[status === 'failed' ? 'warning' : 'info']({ status, reason, exitCode }, `run ${status}: ${reason}`);
    }
    if (container) await runtime.remove(container.id);
    this.output.forget(run.id);
  }

  private async simContainers(runId: string, workspaceId: string | undefined): Promise<ManagedContainer[]> {
    const containers = await this.options.runtime.listContainers(workspaceId ? { workspaceId } : {});
    return containers.filter((container) => container.role === 'sim' && container.runId === runId);
  }

  private pastBuildTimeout(run: RunRecord): boolean {
    return Date.now() - run.status.queuedAt.getTime() > this.options.buildTimeoutMs;
  }

  private maxRunReason(): string {
    return `stopped after ${Math.round(this.options.maxRunMs / 60_000)} minutes, the longest a run may last (RUN_MAX_MINUTES); press Run to start it again`;
  }

  private timeoutReason(): string {
    return `the simulator was not ready within the build timeout (${Math.round(this.options.buildTimeoutMs / 1000)} s)`;
  }
}

/** Waits for `promise`, or `ms` at most (whichever comes first; the timer goes with it). */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const result = await Promise.race([promise, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)))]);
  clearTimeout(timer);
  return result;
}
