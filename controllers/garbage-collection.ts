import { untilAborted } from '../src/caller.ts';
import { engineAway, names, type ManagedContainer, type RuntimeEnvironment, type RuntimeVolumes, type RuntimeWorkloads } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import type { Store } from '../src/store/index.ts';
import type { WorkspaceRecord } from '../src/store/workspaces.ts';
import type { ReconcileResult } from './workqueue.ts';

export interface GarbageCollectionOptions {
  store: Pick<Store, 'workspaces' | 'leaderCounters'>;
  runtime: Pick<RuntimeWorkloads, 'remove'> & Pick<RuntimeVolumes, 'removeVolume' | 'listVolumes'> & Pick<RuntimeEnvironment, 'reachability'>;
  metrics: Metrics;
  /** Logger of `control.containers`. */
  log: Logger;
  /** Orphans are left alone this long after the controller starts. */
  orphanStartupGraceMs: number;
  /** An orphan is removed (a container) or reported (a volume) this long after it was first seen. */
  orphanGraceMs: number;
  /** Aborted when the workspace controller stops: a volume sweep under way ends quietly, and its store calls with it. */
  signal: AbortSignal;
}

/**
 * Garbage collection, one job of the workspace controller: what no workspace accounts for any more.
 * Orphan containers (a key whose row is gone, from the workspace queue: engine events and the full
 * resync bring them) are counted and logged once, and removed after the grace periods, their home
 * volume kept; orphan volumes are looked for with every full resync (its trigger) and reported,
 * never removed; the home volumes a restore or a move retired are removed by the workspace's
 * reconcile once nothing mounts them.
 */
export class GarbageCollection {
  private readonly options: GarbageCollectionOptions;
  private readonly orphanSeenAt = new Map<string, number>();
  /** Orphan volumes by name: when first seen, or `reported` once counted and logged. */
  private readonly orphanVolumes = new Map<string, number | 'reported'>();
  private startedAt = Date.now();

  constructor(options: GarbageCollectionOptions) {
    this.options = options;
  }

  /** The controller starts: orphans are left alone for the start-up grace from now. */
  started(): void {
    this.startedAt = Date.now();
  }

  /** Its resync trigger: looks for orphan volumes (in the background; a failure is said, unless a stop aborted it). */
  onResync(): void {
    const { runtime, log, signal } = this.options;
    void this.sweepVolumes().catch((error: unknown) => {
      if (!signal.aborted)
        log[engineAway(runtime, error) ? 'debug' : 'warning'](
          { error: (error as Error).message },
          'looking for orphan volumes failed; the next resync looks again',
        );
    });
  }

  /** A workspace's row exists again (or still): its containers are no orphans. */
  claimed(workspaceId: string): void {
    this.orphanSeenAt.delete(workspaceId);
  }

  /**
   * The containers of a workspace whose row is gone: nothing in the first minutes after start, when
   * the records may still be loading; logged and counted once when first seen; removed after the
   * grace period, the home volume kept (student data, in case the database was what was wrong).
   */
  async orphans(id: string, containers: ManagedContainer[]): Promise<ReconcileResult | void> {
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

  /** Removes the workspace's retired home volumes that no container mounts, and forgets those removed. */
  async removeRetired(workspace: WorkspaceRecord): Promise<void> {
    if (workspace.spec.retiredVolumes.length === 0) return;
    const { runtime, store, log } = this.options;
    const removed: string[] = [];
    for (const volume of workspace.spec.retiredVolumes) {
      if (volume === names.home(workspace)) removed.push(volume);
      else if (await runtime.removeVolume(volume)) removed.push(volume);
      else log.info({ workspaceId: workspace.id, volume }, 'a replaced home volume is still mounted (a run): removed once it is not');
    }
    await store.workspaces.forgetRetired(workspace.id, removed);
    if (removed.length > 0) log.info({ workspaceId: workspace.id, slug: workspace.slug, volumes: removed }, 'replaced home volumes removed');
  }

  /**
   * The orphan sweep's volumes (run with every full resync): a managed volume that is neither a
   * workspace's home nor one a restore replaced (a staging volume a crashed restore left, the home
   * of a row deleted by hand) is counted (`orphan_volumes_total`) and logged once, after it has been
   * seen for the grace period (a restore in progress has its staging volume for a while). Never
   * removed: it holds a student's files, and the operator decides (`docker volume rm`).
   */
  sweepVolumes(): Promise<void> {
    return untilAborted(this.options.signal, () => this.sweep());
  }

  private async sweep(): Promise<void> {
    const { store, runtime, log, metrics, orphanGraceMs } = this.options;
    const [workspaces, volumes] = await Promise.all([store.workspaces.list(), runtime.listVolumes()]);
    const accounted = new Set(workspaces.flatMap((workspace) => [names.home(workspace), ...workspace.spec.retiredVolumes]));
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
}
