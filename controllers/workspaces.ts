import { createHash } from 'node:crypto';
import {
  DEFAULT_PIDS_LIMIT,
  endpointOf,
  engineAway,
  ImageMissingError,
  names,
  NoRoomError,
  type CodeContainerSpec,
  type ManagedContainer,
  type WorkspaceRuntime,
} from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { probeHttp, type Probe } from '../src/probe.ts';
import type { Store } from '../src/store/index.ts';
import type { ObservedState, WorkspaceRecord } from '../src/store/workspaces.ts';
import { Controller } from './controller.ts';
import { TerminalError, type ReconcileResult } from './workqueue.ts';
import type { Fence } from '../src/store/leases.ts';
import type { Backups } from '../src/backup/backups.ts';
import { SYSTEM_ACTOR } from '../src/store/audit.ts';
import { Periodic } from './periodic.ts';
import { TaskFailures } from './task-failures.ts';

/** The parts of a code container that come from configuration. */
export interface CodeTemplate {
  image: string;
  memoryBytes: number;
  network: string;
  editorPort: number;
  /** CPUs an editor may use, in billionths (CODE_CPUS); 0: no limit. */
  nanoCpus: number;
  /** The most processes and threads an editor may hold at once (CONTAINER_PIDS_LIMIT); absent: DEFAULT_PIDS_LIMIT. */
  pidsLimit?: number;
}

/** What moves homes between nodes (Backups): a fresh backup restored elsewhere, or the latest one. */
export type HomeMover = Pick<Backups, 'moveOff' | 'recoverLatest'>;

export interface WorkspaceControllerOptions {
  store: Pick<Store, 'workspaces' | 'settings' | 'changes' | 'leaderCounters' | 'nodes'>;
  /** A leader's fence (its store writes under the same one); none when driven directly. */
  fence?: Fence;
  runtime: WorkspaceRuntime;
  metrics: Metrics;
  /** Logger of `control.containers`. */
  log: Logger;
  template: CodeTemplate;
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
  /** Asks an editor whether it answers (an HTTP GET with the probe timeout). */
  probe?: (endpoint: string) => Promise<Probe>;
  concurrency?: number;
  /** Moves homes off drained and lost nodes (a swarm); none: homes stay where they are. */
  homes?: HomeMover;
  /** How long a node is down before its workspaces' homes are brought back elsewhere from their latest backup (NODE_LOST_SECONDS). */
  nodeLostMs?: number;
  /** How often the nodes are looked at (drains asked for, nodes down). */
  nodeCheckMs?: number;
}

/**
 * Hash of the fields of a code container that, when they change, mean "recreate": a changed limit
 * (memory, CPUs, processes) takes effect on every editor, running ones included.
 */
export function codeSpecHash(template: CodeTemplate): string {
  // A CPU limit counts only when set, so that existing editors were not recreated for its introduction.
  // The process limit always counts (it has no "none"): editors made before it are recreated once.
  const canonical = JSON.stringify([
    template.image,
    template.memoryBytes,
    template.network,
    template.editorPort,
    ...(template.nanoCpus > 0 ? [template.nanoCpus] : []),
    { pids: template.pidsLimit ?? DEFAULT_PIDS_LIMIT },
  ]);
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

const LIVE = new Set(['running', 'restarting', 'paused']);

/** What a student's page says while the node of their editor is away (down, not yet lost). */
function awayText(node: string): string {
  return `The server ${node} that holds your files is not answering; your editor starts again there once it is back.`;
}

/**
 * Converges each workspace's code container and home volume to its spec, and records the observed
 * status. Triggers only enqueue workspace ids: committed workspace and cap changes, engine events
 * (and a list-everything on every events (re)connect), and a periodic full resync.
 */
export class WorkspaceController extends Controller {
  private readonly options: Required<Omit<WorkspaceControllerOptions, 'concurrency' | 'fence' | 'homes'>> & { homes: HomeMover | undefined };
  private readonly specHash: string;
  /** Workspaces whose code container runs, as this controller last saw them: the cap's count. */
  private readonly runningCode = new Set<string>();
  private readonly starting = new Set<string>();
  /**
   * The code container each workspace's start was last logged for: a swarm service's task runs a
   * while after its start, and each look meanwhile starts it again, but it started once.
   */
  private readonly saidStarted = new Map<string, string>();
  private readonly orphanSeenAt = new Map<string, number>();
  /** Orphan volumes by name: when first seen, or `reported` once counted and logged. */
  private readonly orphanVolumes = new Map<string, number | 'reported'>();
  /** Whether the containers already running were counted (adoption); nothing starts before. */
  private adopted = false;
  private startedAt = Date.now();
  private networkChecked = false;
  private missingImageReported: string | undefined;
  /** Nodes an operator asked to drain, by name (as last read). */
  private drained = new Set<string>();
  /** When each node not ready was first seen so, by name. */
  private readonly downSince = new Map<string, number>();
  /** Each node's state (Swarm's words) at the last look, by name. */
  private nodeStates = new Map<string, string>();
  /** Workspaces whose lost home has no backup to come back from: said once each. */
  private readonly unrecoverable = new Set<string>();
  private readonly nodeCheck: Periodic;
  /** Editors' tasks a swarm node refused: counted, said, their network repaired (controllers/task-failures.ts). */
  private readonly failures: TaskFailures;

  constructor(options: WorkspaceControllerOptions) {
    super(
      {
        name: 'workspaces',
        metrics: options.metrics,
        log: options.log,
        concurrency: options.concurrency ?? 16,
        saidElsewhere: (error) => engineAway(options.runtime, error),
      },
      options.fence,
    );
    this.options = {
      resyncIntervalMs: 30_000,
      orphanStartupGraceMs: 3 * 60_000,
      orphanGraceMs: 2 * 60_000,
      capacityRetryMs: 5000,
      editorProbeMs: 250,
      probe: probeHttp,
      nodeLostMs: 60_000,
      nodeCheckMs: 5000,
      ...options,
      homes: options.homes,
      // Reconciles' engine calls end when the queue shuts down.
      runtime: options.runtime.scoped({ signal: this.queue.signal }),
    };
    this.specHash = codeSpecHash(options.template);
    const { runtime, metrics, log, template } = this.options;
    this.failures = new TaskFailures({ runtime, metrics, log, network: template.network, signal: this.queue.signal });
    this.nodeCheck = new Periodic(
      () => this.checkNodes().then((keys) => keys.forEach((key) => this.queue.add(key))),
      this.options.nodeCheckMs,
      (error) => {
        // Stopping aborts the look under way, and an engine that cannot be reached is said by its reachability: nothing to say.
        if (!this.queue.signal.aborted && !engineAway(this.options.runtime, error))
          this.options.log.warning({ error: (error as Error).message }, 'looking at the nodes failed; the next look tries again');
      },
    );
  }

  /** Adopts what runs, then follows every trigger (which enqueues everything once). */
  override async start(): Promise<void> {
    this.startedAt = Date.now();
    const { store, runtime, log } = this.options;
    // Count the code containers already running before anything may start another. If the engine
    // does not answer now, the first reconcile that would start a container tries again (and fails, retried, until it does).
    await this.adopt().catch((error: unknown) =>
      log[engineAway(runtime, error) ? 'debug' : 'warning'](
        { error: (error as Error).message },
        'listing running containers failed; retrying before the first start',
      ),
    );
    // The operator hears at start, in one line, that no workspace can open yet (never pulled: built or pulled by them).
    const image = this.options.template.image;
    if (!(await runtime.imageExists(image).catch(() => true))) this.imageMissing(new ImageMissingError(image));
    this.follow({
      changes: store.changes,
      // A cap change may let waiting workspaces start: look at them all. A drain asked for or taken back: those on its node.
      keysOfChange: (change) =>
        change.kind === 'workspaces' ? [change.id] : change.kind === 'settings' ? store.workspaces.ids() : change.kind === 'nodes' ? this.checkNodes() : [],
      runtime,
      keyOfEvent: (event) => event.workspaceId,
      allKeys: async () => {
        void this.sweepVolumes().catch((error: unknown) => {
          if (!this.queue.signal.aborted)
            log[engineAway(runtime, error) ? 'debug' : 'warning'](
              { error: (error as Error).message },
              'looking for orphan volumes failed; the next resync looks again',
            );
        });
        const [ids, containers] = await Promise.all([store.workspaces.ids(), runtime.listContainers()]);
        return [...new Set([...ids, ...containers.map((container) => container.workspaceId)])];
      },
      resyncIntervalMs: this.options.resyncIntervalMs,
      log,
    });
    this.nodeCheck.start({ immediately: true });
  }

  /** Stops as every controller does (its engine calls aborted at once), the look at the nodes with it. */
  override async stop(): Promise<void> {
    await Promise.all([super.stop(), this.nodeCheck.stop()]);
  }

  /**
   * Looks at the nodes: records them (what the operator's views show), reads the drains asked for, pauses each drained node (nothing new is
   * placed there) and makes active again one no longer drained, and notes since when each node is
   * down. Answers the workspaces whose editor is on a node they must leave (drained, or down past
   * NODE_LOST_SECONDS), or on a node Swarm marked down or ready again since the last look (their
   * pages say so), for the queue. (Run every few seconds and on every drain asked for.)
   */
  async checkNodes(): Promise<string[]> {
    const { store, runtime, log } = this.options;
    const [nodes, drains] = await Promise.all([runtime.nodes(), store.nodes.drains()]);
    await store.nodes.record(nodes);
    const before = this.drained;
    this.drained = new Set(drains.map((drain) => drain.node));
    const now = Date.now();
    // Marked down or back since the last look (a node first seen down is looked at by the start's full look).
    const turned = new Set(
      nodes
        .filter((node) => this.nodeStates.has(node.name) && (this.nodeStates.get(node.name) === 'down') !== (node.state === 'down'))
        .map((node) => node.name),
    );
    this.nodeStates = new Map(nodes.map((node) => [node.name, node.state]));
    for (const node of nodes) {
      if (node.state === 'ready') this.downSince.delete(node.name);
      else if (!this.downSince.has(node.name)) {
        this.downSince.set(node.name, now);
        log.warning(
          { node: node.name, state: node.state },
          `node ${node.name} is ${node.state}; its workspaces move if it is not back within ${Math.round(this.options.nodeLostMs / 1000)} s`,
        );
      }
      if (this.drained.has(node.name) && node.availability === 'active') {
        await runtime.setNodeAvailability(node.name, 'pause');
        log.info({ node: node.name }, `node ${node.name} drained: nothing new is placed there, and its workspaces move off it`);
      } else if (!this.drained.has(node.name) && before.has(node.name) && node.availability === 'pause') {
        await runtime.setNodeAvailability(node.name, 'active');
        log.info({ node: node.name }, `node ${node.name} taken back: workspaces may be placed there again`);
      }
    }
    const wanted = new Set(nodes.map((node) => node.name).filter((name) => turned.has(name) || this.leaving(name) !== undefined));
    if (wanted.size === 0) return [];
    const containers = await runtime.listContainers();
    return [
      ...new Set(
        containers.filter((container) => container.role === 'code' && container.node && wanted.has(container.node)).map((container) => container.workspaceId),
      ),
    ];
  }

  /** Why a workspace on this node must leave it: drained by an operator, or lost (down past NODE_LOST_SECONDS); undefined: it stays. */
  private leaving(node: string | undefined): 'drained' | 'lost' | undefined {
    if (node === undefined) return undefined;
    const downSince = this.downSince.get(node);
    if (downSince !== undefined && Date.now() - downSince >= this.options.nodeLostMs) return 'lost';
    return this.drained.has(node) ? 'drained' : undefined;
  }

  /**
   * Compares a workspace's code container with its spec, takes the step that converges them, and
   * writes the observed status last. A running workspace is `running` only once its editor answers.
   * Containers are stopped, never removed, unless the spec changed or the workspace is deleted.
   */
  override async reconcile(id: string): Promise<ReconcileResult | void> {
    const { store, runtime } = this.options;
    const workspace = await store.workspaces.get(id);
    const containers = await runtime.listContainers({ workspaceId: id });
    // Row gone: its containers are orphans (removed after the grace periods, the home volume kept).
    if (!workspace) return this.reconcileOrphans(id, containers);
    this.orphanSeenAt.delete(id);
    // Deleted: remove containers and volume, then the row (the finalizer).
    if (workspace.desiredState === 'deleted') return this.finalize(workspace, containers);

    // Duplicates or strays with the workspace's label but another name: removed.
    const wanted = names.code(workspace.slug);
    let code: ManagedContainer | undefined;
    for (const container of containers.filter((candidate) => candidate.role === 'code')) {
      if (container.name === wanted && !code) code = container;
      else await runtime.remove(container.id);
    }

    // Its home was replaced (a restore): the container on the old volume goes, then the old volume.
    const home = names.home(workspace);
    if (code && code.homeVolume !== home) {
      this.options.log.info({ workspaceId: id, slug: workspace.slug, from: code.homeVolume, to: home }, 'home volume replaced: recreating code container');
      await runtime.remove(code.id);
      code = undefined;
    }
    // Volumes a restore replaced: removed once nothing mounts them (a run's container may, until it goes).
    await this.removeRetired(workspace);

    // Its editor is on a node it must leave (drained, or lost): its home moves first.
    const away = code && this.options.homes ? this.leaving(code.node) : undefined;
    if (code && away) return this.move(workspace, code, away);

    // Wanted stopped: stop the container (kept, so reopening is a fast start).
    if (workspace.desiredState === 'stopped') {
      if (code && LIVE.has(code.state)) await runtime.stop(code.id);
      this.runningCode.delete(id);
      return this.status(workspace, 'stopped', '');
    }

    // Its editor's node is down, not yet lost: Swarm replaced its task there, and nothing starts until the node is back.
    if (code?.node && this.nodeStates.get(code.node) === 'down') return this.status(workspace, 'starting', awayText(code.node));

    // Spec or restart generation drifted: recreate. It keeps its slot under the cap (a running workspace is never refused, even after the cap was lowered).
    if (code && (code.specHash !== this.specHash || code.restartGeneration !== workspace.restartGeneration)) {
      const reason = code.specHash !== this.specHash ? 'spec changed' : 'restart requested';
      this.options.log.info({ workspaceId: id, slug: workspace.slug, reason }, 'recreating code container');
      await runtime.remove(code.id);
      code = undefined;
    }
    // Running as specified: only its readiness is left to record.
    if (code?.state === 'running') {
      this.runningCode.add(id);
      this.failures.forget(id);
      return this.ready(workspace, code);
    }
    // Failed for this spec because the image is missing, and it still is: nothing to try (see startCode).
    if (workspace.observedState === 'failed' && workspace.observedGeneration === workspace.generation && this.missingImageReported) {
      if (!(await this.options.runtime.imageExists(this.options.template.image))) return;
      this.missingImageReported = undefined;
    }
    // Its node refused or ended its task (a swarm): counted and said; its network repaired when that is what was refused.
    if (code?.failure) await this.failures.saw(workspace, code);
    // Missing or stopped: create or start it, under the cap.
    return this.startCode(workspace, code);
  }

  /**
   * Moves a workspace's home off the node its editor is on. Drained: the editor stops, a fresh
   * backup of the home is restored into a new volume on another node, and the old one is retired
   * (no file lost). Lost: the home is brought back from its newest stored backup on another node,
   * and its page tells the student from what time; without a backup it waits for the node, said
   * once. Either way the next reconcile finds the home replaced and makes its editor there.
   */
  private async move(workspace: WorkspaceRecord, code: ManagedContainer, why: 'drained' | 'lost'): Promise<ReconcileResult> {
    const { store, runtime, log } = this.options;
    const homes = this.options.homes!;
    const node = code.node!;
    const context = { workspaceId: workspace.id, slug: workspace.slug, node };
    if (why === 'drained') {
      await this.status(workspace, 'waiting', `Moving to another server: ${node} is being emptied by the operator. Your files come along.`);
      if (LIVE.has(code.state)) await runtime.stop(code.id);
      this.runningCode.delete(workspace.id);
      const moved = await homes.moveOff(SYSTEM_ACTOR, workspace);
      await store.workspaces.moveHome(
        SYSTEM_ACTOR,
        workspace.id,
        moved.volume,
        { retire: true, metadata: { node, reason: 'node drained', backup: moved.backup } },
        names.home,
      );
      log.info({ ...context, volume: moved.volume, backup: moved.backup }, `moved the home of ${workspace.slug} off drained node ${node}`);
      return { requeueAfterMs: 0 };
    }
    this.runningCode.delete(workspace.id);
    const recovered = await homes.recoverLatest(workspace);
    if (!recovered) {
      if (!this.unrecoverable.has(workspace.id)) {
        this.unrecoverable.add(workspace.id);
        log.error(context, `node ${node} is lost and no backup of the home of ${workspace.slug} exists: it waits for the node to come back`);
      }
      await this.status(workspace, 'waiting', `Waiting for the server ${node}, which holds your files: it stopped answering, and no backup of them exists.`);
      return { requeueAfterMs: this.options.nodeLostMs };
    }
    this.unrecoverable.delete(workspace.id);
    const reason = `the server ${node} that held your files stopped answering`;
    await store.workspaces.moveHome(
      SYSTEM_ACTOR,
      workspace.id,
      recovered.volume,
      { retire: false, recovered: { from: recovered.backupAt, reason }, metadata: { node, reason: 'node lost', backup: recovered.backup } },
      names.home,
    );
    log.warning(
      { ...context, volume: recovered.volume, backup: recovered.backup, backupAt: recovered.backupAt.toISOString() },
      `node ${node} is lost: the home of ${workspace.slug} was brought back from its backup of ${recovered.backupAt.toISOString()} on another node`,
    );
    return { requeueAfterMs: 0 };
  }

  /** Removes the workspace's retired home volumes that no container mounts, and forgets those removed. */
  private async removeRetired(workspace: WorkspaceRecord): Promise<void> {
    if (workspace.retiredVolumes.length === 0) return;
    const { runtime, store, log } = this.options;
    const removed: string[] = [];
    for (const volume of workspace.retiredVolumes) {
      if (volume === names.home(workspace)) removed.push(volume);
      else if (await runtime.removeVolume(volume)) removed.push(volume);
      else log.info({ workspaceId: workspace.id, volume }, 'a replaced home volume is still mounted (a run): removed once it is not');
    }
    await store.workspaces.forgetRetired(workspace.id, removed);
    if (removed.length > 0) log.info({ workspaceId: workspace.id, slug: workspace.slug, volumes: removed }, 'replaced home volumes removed');
  }

  /** Counts the code containers that run now (the cap's count starts from the engine, never from zero). */
  private async adopt(): Promise<void> {
    if (this.adopted) return;
    for (const container of await this.options.runtime.listContainers()) {
      if (container.role === 'code' && container.state === 'running') this.runningCode.add(container.workspaceId);
    }
    this.adopted = true;
  }

  private async startCode(workspace: WorkspaceRecord, existing: ManagedContainer | undefined): Promise<ReconcileResult | void> {
    const { store, runtime, metrics, log, template } = this.options;
    const id = workspace.id;
    await this.adopt();
    if (!this.runningCode.has(id)) {
      const cap = await store.settings.cap();
      // At the cap: wait, and look again shortly.
      if (this.runningCode.size + this.starting.size >= cap.value) {
        await this.status(workspace, 'waiting', `waiting for capacity: ${cap.value} containers run`);
        return { requeueAfterMs: this.options.capacityRetryMs };
      }
    }
    this.starting.add(id);
    const started = performance.now();
    try {
      await this.ensureNetwork();
      const homeVolume = names.home(workspace);
      await runtime.ensureVolume({ workspaceId: id, slug: workspace.slug }, homeVolume);
      const spec: CodeContainerSpec = {
        ...template,
        pidsLimit: template.pidsLimit ?? DEFAULT_PIDS_LIMIT,
        workspaceId: id,
        slug: workspace.slug,
        restartGeneration: workspace.restartGeneration,
        homeVolume,
        specHash: this.specHash,
      };
      const container = existing ?? (await runtime.createCodeContainer(spec));
      await runtime.start(container.id);
      if (!existing) metrics.containerStartDuration.observe((performance.now() - started) / 1000);
      this.runningCode.add(id);
      if (this.saidStarted.get(id) !== container.id) {
        this.saidStarted.set(id, container.id);
        log.info({ workspaceId: id, slug: workspace.slug, containerId: container.id.slice(0, 12), cold: !existing }, 'code container started');
      }
      // Its address exists only once it runs.
      const running = (await runtime.listContainers({ workspaceId: id })).find((candidate) => candidate.id === container.id);
      return this.ready(workspace, running ?? container);
    } catch (error) {
      // No node has room (a swarm): it waits, as at the cap, and is looked at again shortly.
      if (error instanceof NoRoomError) {
        await this.status(workspace, 'waiting', error.message);
        return { requeueAfterMs: this.options.capacityRetryMs };
      }
      // Its node is not ready (a swarm that marked it down before the last look at the nodes, or does not know it yet): it waits for it.
      if (existing?.node && (await this.notReady(existing.node))) {
        await this.status(workspace, 'starting', awayText(existing.node));
        return { requeueAfterMs: this.options.nodeCheckMs };
      }
      // The engine refused: `failed` with its message, and the queue retries with backoff; but not a
      // missing image, which no retry brings (terminal: looked at again when the spec changes, and
      // by the resync, which creates nothing until the image is there).
      await this.status(workspace, 'failed', (error as Error).message.slice(0, 500));
      if (!(error instanceof ImageMissingError)) throw error;
      this.imageMissing(error);
      throw new TerminalError(error);
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
    if (endpoint && confirmed && workspace.node === (container.node ?? null)) return;
    if (endpoint && (await this.options.probe(endpoint)).outcome === 'ok') return this.status(workspace, 'running', '', endpoint, container.node);
    await this.status(workspace, 'starting', this.failures.text(workspace.id) ?? 'waiting for the editor to answer');
    return { requeueAfterMs: this.options.editorProbeMs };
  }

  /** Whether the runtime reports the node as not ready now; false when it cannot tell. */
  private async notReady(node: string): Promise<boolean> {
    const state = (await this.options.runtime.nodes().catch(() => [])).find((candidate) => candidate.name === node)?.state;
    return state !== undefined && state !== 'ready';
  }

  /** `host:port` of a running code container's editor, or null while it has none. */
  private endpointOf(container: ManagedContainer): string | null {
    return endpointOf(container, this.options.template.editorPort) ?? null;
  }

  private async finalize(workspace: WorkspaceRecord, containers: ManagedContainer[]): Promise<void> {
    const { store, runtime, log } = this.options;
    for (const container of containers) await runtime.remove(container.id);
    // Every volume of the workspace: its home, and any a restore made or left behind.
    await runtime.removeVolumes({ workspaceId: workspace.id, slug: workspace.slug });
    await store.workspaces.finalizeDeleted(workspace.id);
    this.runningCode.delete(workspace.id);
    this.saidStarted.delete(workspace.id);
    this.failures.forget(workspace.id);
    log.info({ workspaceId: workspace.id, slug: workspace.slug }, 'workspace deleted: containers and volume removed');
  }

  private async reconcileOrphans(id: string, containers: ManagedContainer[]): Promise<ReconcileResult | void> {
    this.runningCode.delete(id);
    if (containers.length === 0) return;
    const { runtime, log, metrics, orphanStartupGraceMs, orphanGraceMs } = this.options;
    const now = Date.now();
    // Just started: the records may still be loading; never touch anything yet.
    const sinceStart = now - this.startedAt;
    if (sinceStart < orphanStartupGraceMs) return { requeueAfterMs: orphanStartupGraceMs - sinceStart };
    // First seen: logged and counted once, removed after the grace period.
    let seenAt = this.orphanSeenAt.get(id);
    if (seenAt === undefined) {
      seenAt = now;
      this.orphanSeenAt.set(id, now);
      metrics.orphanContainers.inc(containers.length);
      await this.options.store.leaderCounters.add('orphan_containers', containers.length);
      log.warning(
        { workspaceId: id, containers: containers.map((container) => container.name) },
        'orphan containers: no workspace matches; removing after the grace period',
      );
    }
    if (now - seenAt < orphanGraceMs) return { requeueAfterMs: seenAt + orphanGraceMs - now };
    // Containers only: a home volume is student data, kept in case the database was the thing that was wrong.
    for (const container of containers) await runtime.remove(container.id);
    this.orphanSeenAt.delete(id);
    log.info({ workspaceId: id, containers: containers.map((container) => container.name) }, 'orphan containers removed (home volume kept)');
  }

  /**
   * The orphan sweep's volumes (run with every full resync): a managed volume that is neither a
   * workspace's home nor one a restore replaced (a staging volume a crashed restore left, the home
   * of a row deleted by hand) is counted (`orphan_volumes_total`) and logged once, after it has been
   * seen for the grace period (a restore in progress has its staging volume for a while). Never
   * removed: it holds a student's files, and the operator decides (`docker volume rm`).
   */
  async sweepVolumes(): Promise<void> {
    const { store, runtime, log, metrics, orphanGraceMs } = this.options;
    const [workspaces, volumes] = await Promise.all([store.workspaces.list(), runtime.listVolumes()]);
    const accounted = new Set(workspaces.flatMap((workspace) => [names.home(workspace), ...workspace.retiredVolumes]));
    const now = Date.now();
    const orphans = volumes.filter((volume) => !accounted.has(volume.name));
    const due = orphans.filter((volume) => {
      const seenAt = this.orphanVolumes.get(volume.name);
      if (seenAt === undefined) this.orphanVolumes.set(volume.name, now);
      return seenAt !== 'reported' && now - (seenAt ?? now) >= orphanGraceMs;
    });
    // Forget those gone (removed by the operator, or a restore that finished).
    const current = new Set(orphans.map((volume) => volume.name));
    for (const name of this.orphanVolumes.keys()) if (!current.has(name)) this.orphanVolumes.delete(name);
    if (due.length === 0) return;
    for (const volume of due) this.orphanVolumes.set(volume.name, 'reported');
    metrics.orphanVolumes.inc(due.length);
    await store.leaderCounters.add('orphan_volumes', due.length);
    log.warning(
      { volumes: due.map((volume) => volume.name), workspaceIds: [...new Set(due.map((volume) => volume.workspaceId))] },
      "orphan volumes: no workspace's home nor a replaced home; kept (they hold files): back up what is needed, then docker volume rm",
    );
  }

  /**
   * Makes sure of the workspace network before the first container is created (the engine makes a
   * missing one isolated, and keeps it from link-local addresses where it may); says once, as a
   * warning, when workspaces on it can reach each other, or a cloud's metadata service.
   */
  private async ensureNetwork(): Promise<void> {
    if (this.networkChecked) return;
    const { runtime, template, log } = this.options;
    const { isolated, created, firewall } = await runtime.ensureNetwork(template.network);
    if (firewall && !firewall.applied)
      log.warning(
        { network: template.network, reason: firewall.reason, commands: firewall.commands },
        `workspaces on ${template.network} can reach link-local addresses (a cloud's metadata service, 169.254.169.254): the control plane could not write the firewall rules (${firewall.reason}); run these as root on the host: ${firewall.commands.join('; ')}`,
      );
    if (created) log.info({ network: template.network }, 'created the workspace network (containers on it cannot reach each other)');
    if (!isolated) {
      log.warning(
        { network: template.network },
        `workspaces on the network ${template.network} can reach each other's editors: set WORKSPACE_NETWORK to a network with inter-container traffic off (the default, classroom-workspaces, is made so)`,
      );
    }
    this.networkChecked = true;
  }

  /** Says once (per image) in the operator's log that the workspace image is missing and how to get it. */
  private imageMissing(error: ImageMissingError): void {
    if (this.missingImageReported === error.image) return;
    this.missingImageReported = error.image;
    this.options.log.error({ image: error.image }, error.message);
  }

  private async status(workspace: WorkspaceRecord, state: ObservedState, message: string, editorEndpoint: string | null = null, node?: string): Promise<void> {
    await this.options.store.workspaces.writeStatus(workspace.id, {
      observedState: state,
      observedGeneration: workspace.generation,
      statusMessage: message,
      editorEndpoint,
      ...(node !== undefined && { node }),
    });
  }
}
