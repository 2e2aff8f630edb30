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
import { probeHttp, ProbeWaits, type Probe } from '../src/probe.ts';
import type { Store } from '../src/store/index.ts';
import type { Fence } from '../src/store/leases.ts';
import type { ObservedState, WorkspaceRecord } from '../src/store/workspaces.ts';
import { Controller } from './controller.ts';
import { GarbageCollection } from './garbage-collection.ts';
import { HomeMoves, type HomeMover } from './home-moves.ts';
import { NodeLifecycle } from './node-lifecycle.ts';
import { TaskFailures } from './task-failures.ts';
import { WorkspaceEnvironment } from './workspace-environment.ts';
import { LIVE, writeStatus } from './workspace-status.ts';
import { TerminalError, type ReconcileResult } from './workqueue.ts';

/** The longest wait between two probes of a starting editor (probeInterval). */
const EDITOR_PROBE_MAX_MS = 1000;

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
  /** How often a started container's editor is probed until it answers, at first (then less often: probeInterval). */
  editorProbeMs?: number;
  /** Asks an editor whether it answers (an HTTP GET with the probe timeout). */
  probe?: (endpoint: string) => Promise<Probe>;
  /**
   * Reconciles at once (default 64): more than a class, so that when a whole class presses Open no
   * one's container start waits for another's (the engine starts 30 at once in about 5 s on 2 cores,
   * and a reconcile holds its worker through the start and the first probe).
   */
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

/** What a student's page says while the node of their editor is away (down, not yet lost). */
function awayText(node: string): string {
  return `The server ${node} that holds your files is not answering; your editor starts again there once it is back.`;
}

/**
 * Converges each workspace's code container and home volume to its spec, and records the observed
 * status. Triggers only enqueue workspace ids: committed workspace and cap changes, engine events
 * (and a list-everything on every events (re)connect), and a periodic full resync. Its other jobs
 * are parts of their own, each with its triggers, all feeding this one queue (so one reconcile per
 * workspace runs at a time, whatever woke it): the node lifecycle (`nodes`: its timer and drains
 * asked for), home moves (`homes`: workspaces on drained and lost nodes), garbage collection
 * (`garbage`: orphans, on rows gone and with every resync; retired homes) and the workspace
 * network and image (`environment`: at start and before the first container).
 */
export class WorkspaceController extends Controller {
  private readonly options: Required<Omit<WorkspaceControllerOptions, 'concurrency' | 'fence' | 'homes'>>;
  private readonly specHash: string;
  /** Workspaces whose code container runs, as this controller last saw them: the cap's count. */
  private readonly runningCode = new Set<string>();
  private readonly starting = new Set<string>();
  /** Since when each starting workspace's editor has not answered its probe. */
  private readonly probeWaits = new ProbeWaits();
  /**
   * The code container each workspace's start was last logged for: a swarm service's task runs a
   * while after its start, and each look meanwhile starts it again, but it started once.
   */
  private readonly saidStarted = new Map<string, string>();
  /** Whether the containers already running were counted (adoption); nothing starts before. */
  private adopted = false;
  /** Editors' tasks a swarm node refused: counted, said, their network repaired (controllers/task-failures.ts). */
  private readonly failures: TaskFailures;
  /** The nodes of a swarm: drains, nodes down and back (controllers/node-lifecycle.ts). */
  readonly nodes: NodeLifecycle;
  /** Moves homes off drained and lost nodes (controllers/home-moves.ts); none without a home mover. */
  readonly homes: HomeMoves | undefined;
  /** Orphan containers and volumes, retired homes (controllers/garbage-collection.ts). */
  readonly garbage: GarbageCollection;
  /** The workspace network and image (controllers/workspace-environment.ts). */
  readonly environment: WorkspaceEnvironment;

  constructor(options: WorkspaceControllerOptions) {
    super(
      {
        name: 'workspaces',
        metrics: options.metrics,
        log: options.log,
        concurrency: options.concurrency ?? 64,
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
      // Reconciles' engine calls end when the queue shuts down.
      runtime: options.runtime.scoped({ signal: this.queue.signal }),
    };
    this.specHash = codeSpecHash(options.template);
    const { store, runtime, metrics, log, template, nodeLostMs, nodeCheckMs, orphanStartupGraceMs, orphanGraceMs } = this.options;
    const { signal } = this.queue;
    this.failures = new TaskFailures({ runtime, metrics, log, network: template.network, signal });
    this.nodes = new NodeLifecycle({ store, runtime, log, nodeLostMs, nodeCheckMs, signal, enqueue: (key) => this.queue.add(key) });
    this.homes = options.homes && new HomeMoves({ store, runtime, log, homes: options.homes, nodeLostMs, stopped: (id) => this.runningCode.delete(id) });
    this.garbage = new GarbageCollection({ store, runtime, metrics, log, orphanStartupGraceMs, orphanGraceMs, signal });
    this.environment = new WorkspaceEnvironment({ runtime, log, template });
  }

  /** Adopts what runs, then follows every trigger (which enqueues everything once), its parts' with them. */
  override async start(): Promise<void> {
    this.garbage.started();
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
    await this.environment.checkImage();
    this.follow({
      changes: store.changes,
      // A cap change may let waiting workspaces start: look at them all. A drain asked for or taken back: those on its node.
      keysOfChange: (change) =>
        change.kind === 'workspaces' ? [change.id] : change.kind === 'settings' ? store.workspaces.ids() : this.nodes.keysOfChange(change),
      runtime,
      keyOfEvent: (event) => event.workspaceId,
      storedKeys: () => store.workspaces.ids(),
      engineKeys: async () => {
        this.garbage.onResync();
        return (await runtime.listContainers()).map((container) => container.workspaceId);
      },
      resyncIntervalMs: this.options.resyncIntervalMs,
      log,
    });
    this.nodes.start();
  }

  /** Stops as every controller does (its engine and store calls aborted at once), the look at the nodes with it. */
  override async stop(): Promise<void> {
    await Promise.all([super.stop(), this.nodes.stop()]);
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
    if (!workspace || workspace.spec.desiredState !== 'running') this.probeWaits.forget(id);
    // Row gone: its containers are orphans (removed after the grace periods, the home volume kept).
    if (!workspace) {
      this.runningCode.delete(id);
      return this.garbage.orphans(id, containers);
    }
    this.garbage.claimed(id);
    // Deleted: remove containers and volume, then the row (the finalizer).
    if (workspace.spec.desiredState === 'deleted') return this.finalize(workspace, containers);

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
    await this.garbage.removeRetired(workspace);

    // Its editor is on a node it must leave (drained, or lost): its home moves first.
    const away = code && this.homes ? this.nodes.leaving(code.node) : undefined;
    if (code && away) return this.homes!.move(workspace, code, away);

    // Wanted stopped: stop the container (kept, so reopening is a fast start).
    if (workspace.spec.desiredState === 'stopped') {
      if (code && LIVE.has(code.state)) await runtime.stop(code.id);
      this.runningCode.delete(id);
      return this.status(workspace, 'stopped', '');
    }

    // Its editor's node is down, not yet lost: Swarm replaced its task there, and nothing starts until the node is back.
    if (code?.node && this.nodes.isDown(code.node)) return this.status(workspace, 'starting', awayText(code.node));

    // Spec or restart generation drifted: recreate. It keeps its slot under the cap (a running workspace is never refused, even after the cap was lowered).
    if (code && (code.specHash !== this.specHash || code.restartGeneration !== workspace.spec.restartGeneration)) {
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
    if (
      workspace.status.observedState === 'failed' &&
      workspace.status.observedGeneration === workspace.spec.generation &&
      (await this.environment.imageStillMissing())
    )
      return;
    // Its node refused or ended its task (a swarm): counted and said; its network repaired when that is what was refused.
    if (code?.failure) await this.failures.saw(workspace, code);
    // Missing or stopped: create or start it, under the cap.
    return this.startCode(workspace, code);
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
      await this.environment.ensureNetwork();
      const homeVolume = names.home(workspace);
      await runtime.ensureVolume({ workspaceId: id, slug: workspace.slug }, homeVolume);
      const spec: CodeContainerSpec = {
        ...template,
        pidsLimit: template.pidsLimit ?? DEFAULT_PIDS_LIMIT,
        workspaceId: id,
        slug: workspace.slug,
        restartGeneration: workspace.spec.restartGeneration,
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
      if (existing?.node && (await this.nodes.notReady(existing.node))) {
        await this.status(workspace, 'starting', awayText(existing.node));
        return { requeueAfterMs: this.options.nodeCheckMs };
      }
      // The engine refused: `failed` with its message, and the queue retries with backoff; but not a
      // missing image, which no retry brings (terminal: looked at again when the spec changes, and
      // by the resync, which creates nothing until the image is there).
      await this.status(workspace, 'failed', (error as Error).message.slice(0, 500));
      if (!(error instanceof ImageMissingError)) throw error;
      this.environment.imageMissing(error);
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
    const confirmed =
      workspace.status.observedState === 'running' &&
      workspace.status.editorEndpoint === endpoint &&
      workspace.status.observedGeneration === workspace.spec.generation;
    if (endpoint && confirmed && workspace.status.node === (container.node ?? null)) return this.probeWaits.forget(workspace.id);
    if (endpoint && (await this.options.probe(endpoint)).outcome === 'ok') {
      this.probeWaits.forget(workspace.id);
      return this.status(workspace, 'running', '', endpoint, container.node);
    }
    await this.status(workspace, 'starting', this.failures.text(workspace.id) ?? 'waiting for the editor to answer');
    // Asked less often the longer it has not answered.
    return { requeueAfterMs: this.probeWaits.next(workspace.id, this.options.editorProbeMs, EDITOR_PROBE_MAX_MS) };
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

  private status(workspace: WorkspaceRecord, state: ObservedState, message: string, editorEndpoint: string | null = null, node?: string): Promise<void> {
    return writeStatus(this.options.store, workspace, state, message, editorEndpoint, node);
  }
}
