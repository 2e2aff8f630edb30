/** How long a looked-up value is reused before it is looked up again. */
export const CACHE_TTL_MS = 1000;
/** How long before it expires an entry in use is looked up again in the background. */
export const REFRESH_AHEAD_MS = 250;
/** How long one lookup is shared: a request after that starts its own, so a hung connection stalls only the requests that shared it. */
export const SHARED_LOOKUP_MS = 2000;

/**
 * A small time-bounded cache, cleared entirely on a change. A fresh entry is answered at once,
 * without a promise (the proxy's hot path), and never after it expires. Concurrent misses of one key
 * share one lookup (for SHARED_LOOKUP_MS at most), and an entry still in use during its last
 * REFRESH_AHEAD_MS is looked up again in the background, so frequent traffic does not wait on the
 * database each time an entry expires. A lookup that began before the last clear is neither stored
 * nor shared, so a lookup racing a demotion cannot put the old role back.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private readonly pending = new Map<string, Promise<V>>();
  private epoch = 0;

  /** The value of `key`: the cached one while fresh, else the result of `lookup` (shared with concurrent callers). */
  get(key: string, lookup: () => Promise<V>): V | Promise<V> {
    const entry = this.entries.get(key);
    const now = Date.now();
    if (entry && entry.expires >= now) {
      // A failed refresh leaves the entry to expire; the next miss then reports the failure.
      if (entry.expires - now < REFRESH_AHEAD_MS && !this.pending.has(key)) this.load(key, lookup).catch(() => undefined);
      return entry.value;
    }
    return this.pending.get(key) ?? this.load(key, lookup);
  }

  /** Forgets every entry and every lookup under way. */
  clear(): void {
    this.epoch++;
    this.entries.clear();
    this.pending.clear();
  }

  private load(key: string, lookup: () => Promise<V>): Promise<V> {
    const epoch = this.epoch;
    const loading = lookup().then((value) => {
      if (epoch === this.epoch) {
        if (this.entries.size > 10_000) this.entries.clear();
        this.entries.set(key, { value, expires: Date.now() + CACHE_TTL_MS });
      }
      return value;
    });
    this.pending.set(key, loading);
    const unshare = () => this.pending.get(key) === loading && this.pending.delete(key);
    const timer = setTimeout(unshare, SHARED_LOOKUP_MS).unref();
    const settled = () => (clearTimeout(timer), unshare());
    loading.then(settled, settled);
    return loading;
  }
}
