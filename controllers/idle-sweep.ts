import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import type { WorkspaceStore } from '../src/store/workspaces.ts';
import { passFailed, Periodic } from './periodic.ts';

export interface IdleSweepOptions {
  workspaces: WorkspaceStore;
  activity: ActivityRecorder;
  metrics: Metrics;
  /** Logger of `control.idle`. */
  log: Logger;
  idleMinutes: number;
  intervalMs?: number;
}

/**
 * Every minute, sets workspaces wanted running whose last activity is older than IDLE_STOP_MINUTES
 * to stopped (the workspace controller then stops them), counts `idle_sweep_stops_total`, and logs
 * one `control.idle` line per workspace. Activity gathered in memory is flushed first. Its start and
 * each pass that finishes set `idle_sweep_last_run_timestamp_seconds` (an alert says when passes stop).
 */
export class IdleSweep {
  private readonly options: Required<IdleSweepOptions>;
  private readonly periodic: Periodic;

  constructor(options: IdleSweepOptions) {
    this.options = { intervalMs: 60_000, ...options };
    this.periodic = new Periodic(() => this.sweep(), this.options.intervalMs, passFailed(this.options.log, 'idle sweep'));
  }

  /** Starts sweeping every interval; `idle_sweep_last_run_timestamp_seconds` counts from now until the first pass. */
  start(): void {
    this.options.metrics.idleSweepLastRun.set(Date.now() / 1000);
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** One sweep; returns the ids of the workspaces it stopped. */
  async sweep(): Promise<string[]> {
    const { workspaces, activity, idleMinutes, log, metrics } = this.options;
    await activity.flush();
    const stopped = await workspaces.stopIdle(idleMinutes);
    for (const workspace of stopped) {
      log.info(
        { workspaceId: workspace.id, slug: workspace.slug, lastActivityAt: workspace.lastActivityAt?.toISOString() ?? null, idleMinutes },
        'stopping idle workspace',
      );
    }
    metrics.idleSweepStops.inc(stopped.length);
    metrics.idleSweepLastRun.set(Date.now() / 1000);
    return stopped.map((workspace) => workspace.id);
  }
}
