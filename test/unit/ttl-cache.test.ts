/**
 * The proxy's cache (api/proxy/ttl-cache.ts) on its own, on Jest's fake clock: answers without a
 * promise while fresh, never after it expires, shares concurrent lookups (for a while), refreshes
 * an entry in use before it expires, and forgets everything, including lookups under way, on clear.
 */
import { jest } from '@jest/globals';
import { CACHE_TTL_MS, REFRESH_AHEAD_MS, SHARED_LOOKUP_MS, TtlCache } from '../../api/proxy/ttl-cache.ts';

/** A lookup that counts its calls and resolves only when told to. */
function gatedLookup<V>() {
  const calls: ((value: V) => void)[] = [];
  const failures: ((error: Error) => void)[] = [];
  const lookup = () =>
    new Promise<V>((resolve, reject) => {
      calls.push(resolve);
      failures.push(reject);
    });
  return { lookup, calls, failures };
}

beforeEach(() => {
  jest.useFakeTimers({ now: new Date('2026-11-23T09:00:00Z') });
});
afterEach(() => {
  jest.useRealTimers();
});

describe('TtlCache', () => {
  it('answers a fresh entry at once, without a promise and without another lookup', async () => {
    const cache = new TtlCache<string>();
    const { lookup, calls } = gatedLookup<string>();
    const first = cache.get('k', lookup);
    expect(first).toBeInstanceOf(Promise);
    calls[0]!('v');
    await expect(first).resolves.toBe('v');
    jest.advanceTimersByTime(CACHE_TTL_MS - REFRESH_AHEAD_MS - 1);
    expect(cache.get('k', lookup)).toBe('v');
    expect(calls).toHaveLength(1);
  });

  it('never answers an entry past its time: the next get waits for a new lookup', async () => {
    const cache = new TtlCache<string>();
    const { lookup, calls } = gatedLookup<string>();
    const first = cache.get('k', lookup);
    calls[0]!('old');
    await first;
    jest.advanceTimersByTime(CACHE_TTL_MS + 1);
    const second = cache.get('k', lookup);
    expect(second).toBeInstanceOf(Promise);
    calls[1]!('new');
    await expect(second).resolves.toBe('new');
  });

  it('shares one lookup between concurrent misses of a key', async () => {
    const cache = new TtlCache<string>();
    const { lookup, calls } = gatedLookup<string>();
    const gets = Array.from({ length: 20 }, () => cache.get('k', lookup) as Promise<string>);
    expect(calls).toHaveLength(1);
    calls[0]!('v');
    await expect(Promise.all(gets)).resolves.toEqual(Array(20).fill('v'));
  });

  it('stops sharing a lookup that hangs after a while, so only the requests that shared it wait', async () => {
    const cache = new TtlCache<string>();
    const { lookup, calls } = gatedLookup<string>();
    void cache.get('k', lookup);
    jest.advanceTimersByTime(SHARED_LOOKUP_MS + 1);
    const later = cache.get('k', lookup);
    expect(calls).toHaveLength(2);
    calls[1]!('v');
    await expect(later).resolves.toBe('v');
  });

  it('looks an entry in use up again in its last moments, answering from the cache meanwhile', async () => {
    const cache = new TtlCache<string>();
    const { lookup, calls } = gatedLookup<string>();
    const first = cache.get('k', lookup);
    calls[0]!('old');
    await first;
    jest.advanceTimersByTime(CACHE_TTL_MS - REFRESH_AHEAD_MS + 1);
    expect(cache.get('k', lookup)).toBe('old');
    expect(calls).toHaveLength(2);
    // Another get while the refresh is under way starts no third lookup.
    expect(cache.get('k', lookup)).toBe('old');
    expect(calls).toHaveLength(2);
    calls[1]!('new');
    await Promise.resolve();
    jest.advanceTimersByTime(REFRESH_AHEAD_MS);
    expect(cache.get('k', lookup)).toBe('new');
  });

  it('does not keep a lookup that began before a clear (a demotion racing a lookup cannot put the old role back)', async () => {
    const cache = new TtlCache<string>();
    const { lookup, calls } = gatedLookup<string>();
    const racing = cache.get('k', lookup);
    cache.clear();
    calls[0]!('admin');
    await expect(racing).resolves.toBe('admin');
    const after = cache.get('k', lookup);
    expect(after).toBeInstanceOf(Promise);
    expect(calls).toHaveLength(2);
    calls[1]!('user');
    await expect(after).resolves.toBe('user');
  });

  it('reports a failed lookup to everyone who shared it, and looks up again on the next get', async () => {
    const cache = new TtlCache<string>();
    const { lookup, calls, failures } = gatedLookup<string>();
    const a = cache.get('k', lookup);
    const b = cache.get('k', lookup);
    failures[0]!(new Error('database down'));
    await expect(a).rejects.toThrow('database down');
    await expect(b).rejects.toThrow('database down');
    void cache.get('k', lookup);
    expect(calls).toHaveLength(2);
  });
});
