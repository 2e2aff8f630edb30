import type { DataSource } from 'typeorm';
import { recordActivity } from './workspaces.ts';

/**
 * Gathers workspace activity in memory (proxied traffic, student API calls) and writes it in one
 * statement per flush, never a database write per request. A failed flush keeps its batch for the next.
 */
export class ActivityRecorder {
  /** Workspace id → when it was last active (epoch ms: no Date allocated per request). */
  private pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private readonly db: DataSource;

  constructor(db: DataSource) {
    this.db = db;
  }

  /** Marks a workspace active now. */
  touch(workspaceId: string): void {
    this.pending.set(workspaceId, Date.now());
  }

  /** Writes everything gathered so far. */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    try {
      await recordActivity(this.db, new Map([...batch].map(([id, at]) => [id, new Date(at)])));
    } catch (error) {
      for (const [id, at] of batch) if (!this.pending.has(id)) this.pending.set(id, at);
      throw error;
    }
  }

  /** Flushes every `intervalMs` until stopped; errors are passed to `onError`. */
  start(intervalMs: number, onError: (error: unknown) => void): void {
    this.timer = setInterval(() => this.flush().catch(onError), intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and flushes what is left. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
