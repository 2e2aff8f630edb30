import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { ChangeFeed } from '../src/db/changes.ts';
import { names, type CodeContainerSpec, type EventSubscription, type ManagedContainer, type WorkspaceRuntime } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { probeHttp } from '../src/probe.ts';
import { getEffectiveCap } from '../src/store/settings.ts';
import {
  finalizeDeletedWorkspace,
  getWorkspace,
  listWorkspaceIds,
  writeWorkspaceStatus,
  type WorkspaceRecord,
} from '../src/store/workspaces.ts';
import { everyWithJitter } from './periodic.ts';
import { WorkQueue, type ReconcileResult } from './workqueue.ts';

/** Observed states a workspace's status can show. */
export type ObservedState = 'running' | 'starting' | 'stopped' | 'waiting' | 'failed';

/** The parts of a code container that come from configuration. */
export interface CodeTemplate {
  image: string;
  memoryBytes: number;
  network: string;
  editorPort: number;
}

export interface WorkspaceControllerOptions {
  db: DataSource;
  runtime: WorkspaceRuntime;
  changes: ChangeFeed;
  metrics: Metrics;
  /** Logger of `control.containers`. */
  log: Logger;
  template: CodeTemplate;
  /** MAX_ACTIVE_CONTAINERS, used while no override is stored. */
  environmentCap: number;
  /** Full resync period (±10 % jitter). */
  resyncIntervalMs?: number;
  /** Orphans are left alone this long after the controller starts. */
  orphanStartupGraceMs?: number;
  /** An orphan is removed this long after it was first seen. */
  orphanGraceMs?: number;
  /** How long a workspace waiting for capacity waits before it is looked at again. */
  capacityRetryMs?: number;
  /** How often a started container's editor is probed until it answers. */
  editorProbeMs?: number;
  concurrency?: number;
}

/** Hash of the fields of a code container that, when they change, mean "recreate". */
export function codeSpecHash(template: CodeTemplate): string {
  const canonical = JSON.stringify([template.image, template.memoryBytes, template.network, template.editorPort]);
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

const LIVE = new Set(['running', 'restarting', 'paused']);

/**
 * Converges each workspace's code container and home volume to its spec, and records the observed
 * status. Triggers only enqueue workspace ids: committed changes (the change feed), engine events
 * (and a list-everything on every events (re)connect), and a periodic full resync.
 */
export class WorkspaceController {
  readonly queue: WorkQueue;
  private readonly options: Required<WorkspaceControllerOptions>;
  private readonly specHash: string;
  /** Workspaces whose code container runs, as this controller last saw them: the cap's count. */
  private readonly runningCode = new Set<string>();
  private readonly starting = new Set<string>();
  private readonly orphanSeenAt = new Map<string, number>();
  private startedAt = Date.now();
  private subscriptions: (() => void)[] = [];

  constructor(options: WorkspaceControllerOptions) {
    this.options = {
      resyncIntervalMs: 30_000,
      orphanStartupGraceMs: 3 * 60_000,
      orphanGraceMs: 2 * 60_000,
      capacityRetryMs: 5000,
      editorProbeMs: 250,
      concurrency: 16,
      ...options,
    };
    this.specHash = codeSpecHash(options.template);
    this.queue = new WorkQueue({
      name: 'workspaces',
      reconcile: (id) => this.reconcile(id),
      metrics: options.metrics,
      log: options.log,
      concurrency: this.options.concurrency,
    });
  }

  /** Adopts what runs, subscribes to every trigger, and enqueues everything once. */
  async start(): Promise<void> {
    this.startedAt = Date.now();
    const { changes, runtime, log } = this.options;
    // Adopt: count the code containers already running before anything may start another.
    for (const container of await runtime.listContainers().catch(() => [])) {
      if (container.role === 'code' && container.state === 'running') this.runningCode.add(container.workspaceId);
    }
    this.subscriptions.push(
      changes.subscribe((change) => change.kind === 'workspaces' && this.queue.add(change.id)),
      changes.onReconnect(() => void this.resyncAll()),
    );
    // One line when the stream is lost and one when it is back, not one per reconnect attempt.
    let lost = false;
    const watch: EventSubscription = runtime.watch({
      onEvent: (event) => this.queue.add(event.workspaceId),
      onConnect: () => {
        if (lost) log.info('Docker events stream reconnected, resyncing');
        lost = false;
        void this.resyncAll();
      },
      onDisconnect: (error) => {
        if (!lost) log.warning({ error: error.message }, 'Docker events stream lost, reconnecting');
        lost = true;
      },
    });
    this.subscriptions.push(() => watch.close());
    this.subscriptions.push(everyWithJitter(() => this.resyncAll(), this.options.resyncIntervalMs));
  }

  /** Stops the triggers and waits for running reconciles. Containers are left as they are. */
  async stop(): Promise<void> {
    for (const unsubscribe of this.subscriptions.splice(0)) unsubscribe();
    await this.queue.shutdown();
  }

  /** Enqueues every workspace in the database and every workspace that has containers. */
  async resyncAll(): Promise<void> {
    try {
      const [ids, containers] = await Promise.all([listWorkspaceIds(this.options.db), this.options.runtime.listContainers()]);
      for (const id of new Set([...ids, ...containers.map((container) => container.workspaceId)])) this.queue.add(id);
    } catch (error) {
      this.options.log.warning({ error: (error as Error).message }, 'workspace resync failed; the next one will retry');
    }
  }

  /**
   * Compares the workspace's containers with its spec and makes them converge, then writes the
   * observed status last. Branches: row gone → the containers are orphans (removed after the grace
   * periods, the home volume kept); deleted → remove containers and volume, then the row (finalizer); stopped → stop the
   * code container; running → recreate a container whose spec hash or restart generation differs,
   * create or start a missing or stopped one unless the cap is reached (then `waiting`), then
   * `starting` until its editor answers and `running` after; nothing to do when it runs as specified.
   */
  async reconcile(id: string): Promise<ReconcileResult | void> {
    const { db, runtime } = this.options;
    const workspace = await getWorkspace(db, id);
    const containers = await runtime.listContainers({ workspaceId: id });
    if (!workspace) return this.reconcileOrphans(id, containers);
    this.orphanSeenAt.delete(id);
    if (workspace.desiredState === 'deleted') return this.finalize(workspace, containers);

    const wanted = names.code(workspace.slug);
    let code: ManagedContainer | undefined;
    for (const container of containers.filter((candidate) => candidate.role === 'code')) {
      if (container.name === wanted && !code) code = container;
      else await runtime.remove(container.id);
    }

    if (workspace.desiredState === 'stopped') {
      if (code && LIVE.has(code.state)) await runtime.stop(code.id);
      this.runningCode.delete(id);
      return this.status(workspace, 'stopped', '');
    }

    if (code && (code.specHash !== this.specHash || code.restartGeneration !== workspace.restartGeneration)) {
      const reason = code.specHash !== this.specHash ? 'spec changed' : 'restart requested';
      this.options.log.info({ workspaceId: id, slug: workspace.slug, reason }, 'recreating code container');
      await runtime.remove(code.id);
      // It keeps its slot under the cap: a running workspace is never refused, even after the cap was lowered.
      code = undefined;
    }
    if (code?.state === 'running') {
      this.runningCode.add(id);
      return this.ready(workspace, code);
    }
    return this.startCode(workspace, code);
  }

  private async startCode(workspace: WorkspaceRecord, existing: ManagedContainer | undefined): Promise<ReconcileResult | void> {
    const { db, runtime, metrics, log, template } = this.options;
    const id = workspace.id;
    if (!this.runningCode.has(id)) {
      const cap = await getEffectiveCap(db, this.options.environmentCap);
      if (this.runningCode.size + this.starting.size >= cap.value) {
        await this.status(workspace, 'waiting', `waiting for capacity: ${cap.value} containers run`);
        return { requeueAfterMs: this.options.capacityRetryMs };
      }
    }
    this.starting.add(id);
    const started = performance.now();
    try {
      await runtime.ensureVolume({ workspaceId: id, slug: workspace.slug });
      const spec: CodeContainerSpec = { ...template, workspaceId: id, slug: workspace.slug, restartGeneration: workspace.restartGeneration, specHash: this.specHash };
      const container = existing ?? (await runtime.createCodeContainer(spec));
      await runtime.start(container.id);
      if (!existing) metrics.containerStartDuration.observe((performance.now() - started) / 1000);
      this.runningCode.add(id);
      log.info({ workspaceId: id, slug: workspace.slug, containerId: container.id.slice(0, 12), cold: !existing }, 'code container started');
      // Its address exists only once it runs.
      const running = (await runtime.listContainers({ workspaceId: id })).find((candidate) => candidate.id === container.id);
      return this.ready(workspace, running ?? container);
    } catch (error) {
      await this.status(workspace, 'failed', (error as Error).message.slice(0, 500));
      throw error;
    } finally {
      this.starting.delete(id);
    }
  }

  /**
   * A running code container is `running` once its editor answers (any HTTP answer within 500 ms),
   * and only then gets its endpoint recorded, so the proxy never sends a student to an editor that
   * is still starting; until then it is `starting` and looked at again shortly. A status already
   * confirmed at this endpoint is not probed again.
   */
  private async ready(workspace: WorkspaceRecord, container: ManagedContainer): Promise<ReconcileResult | void> {
    const endpoint = this.endpointOf(container);
    const confirmed = workspace.observedState === 'running' && workspace.editorEndpoint === endpoint && workspace.observedGeneration === workspace.generation;
    if (endpoint && confirmed) return;
    if (endpoint && (await probeHttp(endpoint)).outcome === 'ok') return this.status(workspace, 'running', '', endpoint);
    await this.status(workspace, 'starting', 'waiting for the editor to answer');
    return { requeueAfterMs: this.options.editorProbeMs };
  }

  /** `address:port` of a running code container's editor, or null when it has no address. */
  private endpointOf(container: ManagedContainer): string | null {
    return container.address ? `${container.address}:${this.options.template.editorPort}` : null;
  }

  private async finalize(workspace: WorkspaceRecord, containers: ManagedContainer[]): Promise<void> {
    const { db, runtime, log } = this.options;
    for (const container of containers) await runtime.remove(container.id);
    await runtime.removeVolume(workspace.slug);
    await finalizeDeletedWorkspace(db, workspace.id);
    this.runningCode.delete(workspace.id);
    log.info({ workspaceId: workspace.id, slug: workspace.slug }, 'workspace deleted: containers and volume removed');
  }

  private async reconcileOrphans(id: string, containers: ManagedContainer[]): Promise<ReconcileResult | void> {
    this.runningCode.delete(id);
    if (containers.length === 0) return;
    const { runtime, log, metrics, orphanStartupGraceMs, orphanGraceMs } = this.options;
    const now = Date.now();
    const sinceStart = now - this.startedAt;
    if (sinceStart < orphanStartupGraceMs) return { requeueAfterMs: orphanStartupGraceMs - sinceStart };
    let seenAt = this.orphanSeenAt.get(id);
    if (seenAt === undefined) {
      seenAt = now;
      this.orphanSeenAt.set(id, now);
      metrics.orphanContainers.inc(containers.length);
      log.warning({ workspaceId: id, containers: containers.map((container) => container.name) }, 'orphan containers: no workspace matches; removing after the grace period');
    }
    if (now - seenAt < orphanGraceMs) return { requeueAfterMs: seenAt + orphanGraceMs - now };
    // Containers only: a home volume is student data, kept in case the database was the thing that was wrong.
    for (const container of containers) await runtime.remove(container.id);
    this.orphanSeenAt.delete(id);
    log.info({ workspaceId: id, containers: containers.map((container) => container.name) }, 'orphan containers removed (home volume kept)');
  }

  private async status(workspace: WorkspaceRecord, state: ObservedState, message: string, editorEndpoint: string | null = null): Promise<void> {
    await writeWorkspaceStatus(this.options.db, workspace.id, { observedState: state, observedGeneration: workspace.generation, statusMessage: message, editorEndpoint });
  }
}
