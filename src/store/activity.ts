import type { WorkspaceStore } from './workspaces.ts';

/**
 * Gathers workspace activity in memory and writes it in one statement per flush, never a database
 * write per request. A failed flush keeps its batch for the next. What counts as activity is what a
 * student does: a request to their editor (a page, a file), opening its WebSocket, an action of the
 * student API (`keep`, which the editor's extension sends while the student works in it, at most
 * once a minute), a run in progress and its end. What flows over an open editor WebSocket does not:
 * VS Code's own keep-alives go every few seconds whether anyone is there or not, and would keep a
 * forgotten tab's workspace running for good.
 */
export class ActivityRecorder {
  /** Workspace id → when it was last active (epoch ms: no Date allocated per request). */
  private pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private readonly workspaces: WorkspaceStore;
  private readonly intervalMs: number;
  private readonly onError: (error: unknown) => void;

  /** Flushes every `intervalMs` once started; errors of those flushes go to `onError`. */
  constructor(workspaces: WorkspaceStore, intervalMs: number, onError: (error: unknown) => void) {
    this.workspaces = workspaces;
    this.intervalMs = intervalMs;
    this.onError = onError;
  }

  /** Marks a workspace active now. */
  touch(workspaceId: string): void {
    this.pending.set(workspaceId, Date.now());
  }

  /** When the workspace was last marked active and not yet written (epoch ms), or undefined. */
  pendingSince(workspaceId: string): number | undefined {
    return this.pending.get(workspaceId);
  }

  /** Writes everything gathered so far. */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    try {
      await this.workspaces.recordActivity(batch);
    } catch (error) {
      for (const [id, at] of batch) if (!this.pending.has(id)) this.pending.set(id, at);
      throw error;
    }
  }

  /** Flushes every interval until stopped. */
  start(): void {
    this.timer = setInterval(() => void this.flush().catch(this.onError), this.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and flushes what is left. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
