/** How long repeats of one thing are folded into one log line. */
export const FOLD_WINDOW_MS = 60_000;

/**
 * Folds repeats of a thing worth a log line (a bound hit, a refused address) by key: the first time
 * in a window says so at once, the repeats within the window are only counted, and the first one
 * after it says how many there were. So a flood costs one line a minute per key, not one per event.
 */
export class Fold {
  private readonly windowMs: number;
  /** When each key last made a line, and its repeats since. */
  private readonly seen = new Map<string, { at: number; repeats: number }>();

  constructor(windowMs = FOLD_WINDOW_MS) {
    this.windowMs = windowMs;
  }

  /** Counts one event of `key`: the number of repeats folded since its last line when a line is due now, else undefined. */
  take(key: string, now = Date.now()): number | undefined {
    const last = this.seen.get(key);
    if (last && now - last.at < this.windowMs) {
      last.repeats++;
      return undefined;
    }
    if (this.seen.size >= 10_000) this.prune(now);
    this.seen.set(key, { at: now, repeats: 0 });
    return last?.repeats ?? 0;
  }

  /** Forgets keys whose window is over (their folded repeats are not reported). */
  private prune(now: number): void {
    for (const [key, last] of this.seen) if (now - last.at >= this.windowMs) this.seen.delete(key);
  }
}
