import type { Backups } from '../src/backup/backups.ts';
import { engineAway, names, type RuntimeEnvironment, type RuntimeVolumes } from '../src/docker/runtime.ts';
import { AppError } from '../src/errors.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { SYSTEM_ACTOR } from '../src/store/audit.ts';
import type { Store } from '../src/store/index.ts';
import { passFailed, Periodic } from './periodic.ts';

/** After a backup failed (a file changed as it was read), the same home is not tried again before this. */
export const RETRY_AFTER_FAILURE_MS = 15 * 60_000;

/** The longest passes wait for workspaces that are starting (a class opening): past it, homes are backed up all the same. */
export const OPENING_WAIT_MS = 10 * 60_000;

export interface BackupScheduleOptions {
  store: { workspaces: Pick<Store['workspaces'], 'list'>; runs: Pick<Store['runs'], 'startingCount'>; scheduledBackups: Store['scheduledBackups'] };
  backups: Pick<Backups, 'create' | 'remove'>;
  runtime: Pick<RuntimeVolumes, 'listVolumes'> & Pick<RuntimeEnvironment, 'reachability'>;
  metrics: Metrics;
  /** Logger of `control.backups`. */
  log: Logger;
  /** BACKUP_INTERVAL_HOURS: the least time between two scheduled backups of one home. */
  intervalMs: number;
  /** BACKUP_KEEP: how many scheduled backups of each home are kept. */
  keep: number;
  /** How often it looks (default: every minute, or a quarter of the interval when that is shorter). */
  checkEveryMs?: number;
}

/**
 * Scheduled backups of every home (issue 24), on the leader. Each pass (every minute) looks at
 * every workspace whose home volume exists and backs it up (Backups.create, as `system`, audited
 * `workspace.backup` with `scheduled: true`) when it has no scheduled backup yet, or when its last
 * one is at least the interval old and the workspace was active since (a home nobody used is not
 * copied again). Then that home's scheduled backups past the newest `keep` are removed. Backups an
 * operator made, or a restore kept, are never removed. One home at a time; a backup that fails (a
 * file changing while it is read: the workspace runs) is logged and that home tried again
 * RETRY_AFTER_FAILURE_MS later. A backup counts from when it began: activity while it was being
 * read makes the next one due. A pass backs up nothing while a workspace is starting (wanted running,
 * its editor not up yet) or a run is (compiling and booting: queued): a class opening at once, then
 * pressing Run within the minute, has the machine's CPU and engine to itself, for up to
 * OPENING_WAIT_MS (homes made at a class's first start are all due a minute later, and a home is
 * due again one interval after, which is the next class's start). Stopping gives up the backup under way. Counts `scheduled_backups_total{outcome}` and
 * `scheduled_backups_pruned_total`.
 */
export class BackupSchedule {
  private readonly options: BackupScheduleOptions;
  private readonly periodic: Periodic;
  /** When a home's last attempt failed, by workspace id (this leader's term only). */
  private readonly failedAt = new Map<string, number>();
  /** Since when passes have waited for workspaces that are starting (undefined: none are). */
  private waitingSince: number | undefined;
  /** Ends the backup under way when the schedule stops (the leader stepping down, a shutdown): a home can take minutes. */
  private abort = new AbortController();

  constructor(options: BackupScheduleOptions) {
    this.options = options;
    const checkEveryMs = options.checkEveryMs ?? Math.min(60_000, Math.max(1000, options.intervalMs / 4));
    this.periodic = new Periodic(
      () => this.pass(),
      checkEveryMs,
      passFailed(this.options.log, 'scheduled backups', (error) => engineAway(options.runtime, error)),
    );
  }

  start(): void {
    this.abort = new AbortController();
    this.periodic.start({ immediately: true });
  }

  /** Stops at once: a backup under way is given up (its partial file removed), and tried again at the next start. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.periodic.stop();
  }

  /** One pass (see the class comment); returns the slugs backed up. */
  async pass(now = Date.now()): Promise<string[]> {
    const { store, backups, runtime, metrics, log, intervalMs, keep } = this.options;
    const volumes = new Set((await runtime.listVolumes()).map((volume) => volume.name));
    const latest = await store.scheduledBackups.latest();
    const done: string[] = [];
    const { signal } = this.abort;
    const workspaces = await store.workspaces.list();
    const starting =
      workspaces.filter(
        (workspace) =>
          workspace.spec.desiredState === 'running' && (workspace.status.observedState === 'starting' || workspace.status.observedState === 'stopped'),
      ).length + (await store.runs.startingCount());
    if (starting === 0) this.waitingSince = undefined;
    else if (now - (this.waitingSince ??= now) < OPENING_WAIT_MS) {
      log.debug({ starting }, 'scheduled backups wait: workspaces or runs are starting');
      return done;
    }
    for (const workspace of workspaces) {
      if (signal.aborted) break;
      if (!volumes.has(names.home(workspace))) continue;
      const last = latest.get(workspace.id);
      if (last && (now - last.getTime() < intervalMs || !workspace.status.lastActivityAt || workspace.status.lastActivityAt <= last)) continue;
      if (now - (this.failedAt.get(workspace.id) ?? -Infinity) < RETRY_AFTER_FAILURE_MS) continue;
      const where = { workspaceId: workspace.id, slug: workspace.slug };
      const began = new Date();
      try {
        const made = await backups.create(SYSTEM_ACTOR, workspace, { scheduled: true, signal });
        const name = made.name!;
        await store.scheduledBackups.record(workspace.id, name, began).catch(async (error: unknown) => {
          // Not recorded, so never pruned: not kept either.
          await backups.remove(name).catch(() => undefined);
          throw error;
        });
        this.failedAt.delete(workspace.id);
        metrics.scheduledBackups.inc({ outcome: 'ok' });
        log.info({ ...where, backup: name, bytes: made.sizeBytes, files: made.manifest.files }, `backed up ${workspace.slug}'s home`);
        done.push(workspace.slug);
      } catch (error) {
        if (signal.aborted) break;
        // The engine went away: no home can be backed up now, and none is to blame; the next pass tries them all.
        if (engineAway(runtime, error)) throw error;
        this.failedAt.set(workspace.id, now);
        metrics.scheduledBackups.inc({ outcome: 'failed' });
        log.warning({ ...where, error }, `backing up ${workspace.slug}'s home failed: trying again in ${RETRY_AFTER_FAILURE_MS / 60_000} minutes`);
        continue;
      }
      for (const old of await store.scheduledBackups.beyond(workspace.id, keep)) {
        await backups.remove(old).catch((error: unknown) => {
          // Gone already (removed by hand): forgotten all the same.
          if (!(error instanceof AppError && error.code === 'backup_not_found')) throw error;
        });
        await store.scheduledBackups.forget(old);
        metrics.scheduledBackupsPruned.inc();
        log.info({ ...where, backup: old }, `removed ${workspace.slug}'s scheduled backup ${old} (more than ${keep} kept)`);
      }
    }
    return done;
  }
}
