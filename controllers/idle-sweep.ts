import type { ActivityRecorder } from '../src/store/activity.ts';
import { Periodic } from './periodic.ts';
import { stopIdleWorkspaces, type StoreContext } from '../src/store/workspaces.ts';

export interface IdleSweepOptions {
  /** The store, with `log` of the `control.idle` category. */
  store: StoreContext;
  activity: ActivityRecorder;
  idleMinutes: number;
  intervalMs?: number;
}

/**
 * Every minute, sets workspaces wanted running whose last activity is older than IDLE_STOP_MINUTES
 * to stopped (the workspace controller then stops them), counts `idle_sweep_stops_total`, and logs
 * one `control.idle` line per workspace. Activity gathered in memory is flushed first.
 */
export class IdleSweep {
  private readonly options: Required<IdleSweepOptions>;
  private readonly periodic: Periodic;

  constructor(options: IdleSweepOptions) {
    this.options = { intervalMs: 60_000, ...options };
    this.periodic = new Periodic(() => this.sweep(), this.options.intervalMs, (error) => this.options.store.log.error({ error }, 'idle sweep failed'));
  }

  start(): void {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** One sweep; returns the ids of the workspaces it stopped. */
  async sweep(): Promise<string[]> {
    const { store, activity, idleMinutes } = this.options;
    await activity.flush();
    const stopped = await stopIdleWorkspaces(store, idleMinutes);
    for (const workspace of stopped) {
      store.log.info({ workspaceId: workspace.id, slug: workspace.slug, lastActivityAt: workspace.lastActivityAt?.toISOString() ?? null, idleMinutes }, 'stopping idle workspace');
    }
    store.metrics.idleSweepStops.inc(stopped.length);
    return stopped.map((workspace) => workspace.id);
  }
}
