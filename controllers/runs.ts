import type { DataSource } from 'typeorm';
import type { ChangeFeed } from '../src/db/changes.ts';
import type { EventSubscription, ManagedContainer, WorkspaceRuntime } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { probeHttp } from '../src/probe.ts';
import {
  finishRun,
  getRun,
  isTerminal,
  listActiveRunIds,
  listActiveRunIdsOf,
  markRunReady,
  recordSimEndpoint,
  type RunRecord,
  type TerminalStatus,
} from '../src/store/runs.ts';
import { getWorkspace } from '../src/store/workspaces.ts';
import { everyWithJitter } from './periodic.ts';
import { WorkQueue, type ReconcileResult } from './workqueue.ts';

/** What a run's simulator container is made from (configuration). */
export interface SimTemplate {
  image: string;
  memoryBytes: number;
  network: string;
  nt4Port: number;
  /** SIM_COMMAND: compile, then boot the simulator. */
  command: string;
}

export interface RunControllerOptions {
  db: DataSource;
  runtime: WorkspaceRuntime;
  changes: ChangeFeed;
  metrics: Metrics;
  /** Logger of `control.runs`. */
  log: Logger;
  template: SimTemplate;
  /** RUN_BUILD_TIMEOUT: how long compile and boot may take before the run fails. */
  buildTimeoutMs: number;
  /** How often a compiling run's nt4 port is probed. */
  probeIntervalMs?: number;
  /** How often a running run is looked at besides its container's events. */
  runningCheckMs?: number;
  resyncIntervalMs?: number;
  /** How many lines of the simulator's output a finished run keeps. */
  outputLines?: number;
  concurrency?: number;
}

/**
 * Drives each run from queued to a terminal status on a simulator container of its own
 * (`ws-<slug>-sim-<runId8>`, the workspace image and home volume, running SIM_COMMAND). Triggers
 * only enqueue run ids: committed run and workspace changes, engine events on sim containers, and
 * a periodic resync; a compiling run is re-examined every probe interval.
 */
export class RunController {
  readonly queue: WorkQueue;
  private readonly options: Required<RunControllerOptions>;
  private subscriptions: (() => void)[] = [];

  constructor(options: RunControllerOptions) {
    this.options = { probeIntervalMs: 100, runningCheckMs: 5000, resyncIntervalMs: 30_000, outputLines: 50, concurrency: 8, ...options };
    this.queue = new WorkQueue({ name: 'runs', reconcile: (id) => this.reconcile(id), metrics: options.metrics, log: options.log, concurrency: this.options.concurrency });
  }

  /** Subscribes to every trigger and enqueues every unfinished run and every sim container (adoption). */
  async start(): Promise<void> {
    const { changes, runtime, db } = this.options;
    this.subscriptions.push(
      changes.subscribe((change) => {
        if (change.kind === 'runs') this.queue.add(change.id);
        // A workspace stopped or deleted ends its runs.
        if (change.kind === 'workspaces') void listActiveRunIdsOf(db, change.id).then((ids) => ids.forEach((id) => this.queue.add(id)), () => undefined);
      }),
      changes.onReconnect(() => void this.resyncAll()),
    );
    const watch: EventSubscription = runtime.watch({
      onEvent: (event) => event.runId && this.queue.add(event.runId),
      onConnect: () => void this.resyncAll(),
      onDisconnect: () => undefined,
    });
    this.subscriptions.push(() => watch.close());
    this.subscriptions.push(everyWithJitter(() => this.resyncAll(), this.options.resyncIntervalMs));
  }

  /** Stops the triggers and waits for running reconciles; simulator containers are left as they are. */
  async stop(): Promise<void> {
    for (const unsubscribe of this.subscriptions.splice(0)) unsubscribe();
    await this.queue.shutdown();
  }

  /** Enqueues every unfinished run and the run of every simulator container. */
  async resyncAll(): Promise<void> {
    try {
      const [ids, containers] = await Promise.all([listActiveRunIds(this.options.db), this.options.runtime.listContainers()]);
      const fromContainers = containers.filter((container) => container.role === 'sim' && container.runId).map((container) => container.runId!);
      for (const id of new Set([...ids, ...fromContainers])) this.queue.add(id);
    } catch (error) {
      this.options.log.warning({ error: (error as Error).message }, 'run resync failed; the next one will retry');
    }
  }

  /**
   * Compares a run with its simulator container and takes one step, writing the run's status:
   * record gone or finished → remove its container; workspace no longer wanted running, or a stop
   * requested → end it (`stopped` once it was ready, `canceled` before); no container → create and
   * start it (a running run whose container vanished fails); container exited → `failed` (non-zero,
   * or exit before ready) or `stopped` (exit 0 after ready), keeping its last output; compiling
   * past RUN_BUILD_TIMEOUT → `failed`; compiling and the nt4 probe answers → `running`, observing
   * the build duration. The container is removed whenever the run ends.
   */
  async reconcile(runId: string): Promise<ReconcileResult | void> {
    const { db, runtime } = this.options;
    const run = await getRun(db, runId);
    const containers = await this.simContainers(runId, run?.workspaceId);
    if (!run || isTerminal(run.status)) {
      for (const container of containers) await runtime.remove(container.id);
      if (!run && containers.length > 0) this.options.log.warning({ runId, containers: containers.map((container) => container.name) }, 'removed simulator containers of an unknown run');
      return;
    }
    const log = this.options.log.child({ workspaceId: run.workspaceId, runId: run.id }) as Logger;
    const [container, ...extra] = containers;
    for (const duplicate of extra) await runtime.remove(duplicate.id);

    const workspace = await getWorkspace(db, run.workspaceId);
    const wasReady = run.status === 'running';
    if (!workspace || workspace.desiredState !== 'running') return this.end(run, container, wasReady ? 'stopped' : 'canceled', 'the workspace was stopped', log);
    if (run.desiredState === 'stopped') return this.end(run, container, wasReady ? 'stopped' : 'canceled', 'stopped by request', log);

    if (!container) {
      if (wasReady) return this.end(run, undefined, 'failed', 'the simulator container disappeared', log);
      if (this.pastBuildTimeout(run)) return this.end(run, undefined, 'failed', this.timeoutReason(), log);
      return this.createSim(run, workspace.slug, log);
    }

    const exit = await runtime.exitOf(container.id);
    if (!exit) return { requeueAfterMs: 100 };
    if (!exit.running) {
      const code = exit.exitCode;
      if (!wasReady) {
        const reason = exit.oomKilled ? 'compile or boot ran out of memory' : code === 0 ? 'the simulator exited before it was ready' : `compile or boot failed (exit code ${code})`;
        return this.end(run, container, 'failed', reason, log, code);
      }
      if (code === 0) return this.end(run, container, 'stopped', 'the simulator exited on its own', log, code);
      return this.end(run, container, 'failed', exit.oomKilled ? 'the simulator ran out of memory' : `the simulator crashed (exit code ${code})`, log, code);
    }
    if (wasReady) return { requeueAfterMs: this.options.runningCheckMs };
    return this.probe(run, container, log);
  }

  /** A compiling run: fail it past the build timeout, mark it ready when the nt4 port answers, else look again soon. */
  private async probe(run: RunRecord, container: ManagedContainer, log: Logger): Promise<ReconcileResult | void> {
    if (this.pastBuildTimeout(run)) return this.end(run, container, 'failed', this.timeoutReason(), log);
    const endpoint = container.address ? `${container.address}:${this.options.template.nt4Port}` : undefined;
    if (!endpoint) return { requeueAfterMs: this.options.probeIntervalMs };
    if (run.simEndpoint !== endpoint) await recordSimEndpoint(this.options.db, run.id, endpoint);
    const probe = await probeHttp(endpoint);
    if (probe.outcome !== 'ok') return { requeueAfterMs: this.options.probeIntervalMs };
    const ready = await markRunReady(this.options.db, run.id);
    if (ready?.readyAt) {
      const seconds = (ready.readyAt.getTime() - ready.queuedAt.getTime()) / 1000;
      this.options.metrics.runBuildDuration.observe(seconds);
      log.info({ buildSeconds: Math.round(seconds * 1000) / 1000 }, 'simulator ready: run is running');
    }
    return { requeueAfterMs: this.options.runningCheckMs };
  }

  private async createSim(run: RunRecord, slug: string, log: Logger): Promise<ReconcileResult> {
    const { runtime, template } = this.options;
    await runtime.ensureVolume({ workspaceId: run.workspaceId, slug });
    const container = await runtime.createSimContainer({ ...template, workspaceId: run.workspaceId, slug, runId: run.id });
    await runtime.start(container.id);
    log.info({ container: container.name }, 'simulator container started: compiling and booting');
    return { requeueAfterMs: this.options.probeIntervalMs };
  }

  /** Ends a run: keeps the container's last output, removes the container, records the terminal status and counts it. */
  private async end(run: RunRecord, container: ManagedContainer | undefined, status: TerminalStatus, reason: string, log: Logger, exitCode: number | null = null): Promise<void> {
    const { runtime, metrics, db } = this.options;
    let output = '';
    if (container) {
      await runtime.stop(container.id, 5);
      output = (await runtime.logsTail(container.id, this.options.outputLines)).slice(-16_000);
    }
    // The end is recorded (and counted) before the container goes: if recording fails, the next pass still finds it.
    const finished = await finishRun(db, run.id, { status, reason, exitCode, output });
    if (finished) {
      metrics.runsTotal.inc({ terminal_status: status });
      if (finished.readyAt && finished.endedAt) {
        metrics.runActiveDuration.observe({ terminal_status: status }, (finished.endedAt.getTime() - finished.readyAt.getTime()) / 1000);
      }
      log[status === 'failed' ? 'warning' : 'info']({ status, reason, exitCode }, `run ${status}: ${reason}`);
    }
    if (container) await runtime.remove(container.id);
  }

  private async simContainers(runId: string, workspaceId: string | undefined): Promise<ManagedContainer[]> {
    const containers = await this.options.runtime.listContainers(workspaceId ? { workspaceId } : {});
    return containers.filter((container) => container.role === 'sim' && container.runId === runId);
  }

  private pastBuildTimeout(run: RunRecord): boolean {
    return Date.now() - run.queuedAt.getTime() > this.options.buildTimeoutMs;
  }

  private timeoutReason(): string {
    return `the simulator was not ready within the build timeout (${Math.round(this.options.buildTimeoutMs / 1000)} s)`;
  }
}
