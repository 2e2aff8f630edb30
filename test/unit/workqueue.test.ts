import { TerminalError, WorkQueue, type ReconcileResult } from '../../controllers/workqueue.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { captureLogger } from '../helpers/controllers.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A queue over `reconcile`, with its metrics and the keys in the order they were reconciled. */
function queue(
  reconcile: (key: string, signal: AbortSignal) => Promise<ReconcileResult | void>,
  options: { concurrency?: number; retriesPerSecond?: number; baseDelayMs?: number } = {},
) {
  const metrics: Metrics = createMetrics();
  const calls: string[] = [];
  const work = new WorkQueue({
    name: 'test',
    metrics,
    log: categoryLogger(captureLogger().root, 'test'),
    reconcile: async (key, signal) => {
      calls.push(key);
      return reconcile(key, signal);
    },
    ...options,
  });
  return { work, metrics, calls };
}

async function counter(metrics: Metrics, result: string): Promise<number> {
  return (await metrics.reconcileTotal.get()).values.find((value) => value.labels.controller === 'test' && value.labels.result === result)?.value ?? 0;
}

describe('WorkQueue', () => {
  it('deduplicates a key added many times while it waits', async () => {
    const { work, calls } = queue(async () => sleep(20), { concurrency: 1 });
    work.add('busy');
    for (let i = 0; i < 10; i++) work.add('a');
    await work.idle();
    expect(calls).toEqual(['busy', 'a']);
  });

  it('runs one reconcile per key at a time, and again once if the key was added meanwhile', async () => {
    let inFlight = 0;
    let most = 0;
    const { work, calls } = queue(
      async () => {
        most = Math.max(most, ++inFlight);
        await sleep(30);
        inFlight--;
      },
      { concurrency: 4 },
    );
    work.add('a');
    await sleep(5);
    work.add('a');
    work.add('a');
    await work.idle();
    expect(most).toBe(1);
    expect(calls).toEqual(['a', 'a']);
  });

  it('runs different keys concurrently up to the concurrency', async () => {
    let inFlight = 0;
    let most = 0;
    const { work } = queue(
      async () => {
        most = Math.max(most, ++inFlight);
        await sleep(20);
        inFlight--;
      },
      { concurrency: 3 },
    );
    for (const key of ['a', 'b', 'c', 'd', 'e']) work.add(key);
    await work.idle();
    expect(most).toBe(3);
  });

  it('retries a failing key with exponential backoff and forgets it on success', async () => {
    const times: number[] = [];
    let failuresLeft = 3;
    const { work, metrics } = queue(
      async () => {
        times.push(performance.now());
        if (failuresLeft-- > 0) throw new Error('engine said no');
      },
      { baseDelayMs: 40 },
    );
    work.add('a');
    while (times.length < 4) await sleep(10);
    await work.idle();
    const gaps = times.slice(1).map((time, i) => time - times[i]!);
    expect(gaps[0]).toBeGreaterThanOrEqual(35);
    expect(gaps[1]).toBeGreaterThanOrEqual(75);
    expect(gaps[2]).toBeGreaterThanOrEqual(155);
    expect(work.failuresOf('a')).toBe(0);
    expect(await counter(metrics, 'error')).toBe(3);
    expect(await counter(metrics, 'success')).toBe(1);
  });

  it('does not retry a terminal failure, and runs the key again when it is added again', async () => {
    let attempts = 0;
    const { work, metrics, calls } = queue(
      async () => {
        attempts++;
        if (attempts === 1) throw new TerminalError(new Error('The workspace image is not on this server.'));
      },
      { baseDelayMs: 1 },
    );
    work.add('a');
    await work.idle();
    // A retry would have been scheduled (after 1 ms) before the queue went idle.
    expect(work.isDelayed('a')).toBe(false);
    expect(calls).toEqual(['a']);
    expect(work.failuresOf('a')).toBe(0);
    expect({ terminal: await counter(metrics, 'terminal'), error: await counter(metrics, 'error') }).toEqual({ terminal: 1, error: 0 });
    work.add('a');
    await work.idle();
    expect(calls).toEqual(['a', 'a']);
  });

  it("aborts the running reconciles' signal when it shuts down, and counts them aborted, not failed", async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const { work, metrics } = queue(
      (_key, signal) =>
        new Promise((_resolve, reject) => {
          started();
          // As an engine call given the signal does: it ends when the signal is aborted.
          signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
        }),
    );
    work.add('a');
    await running;
    await work.shutdown();
    expect(work.signal.aborted).toBe(true);
    expect({ aborted: await counter(metrics, 'aborted'), error: await counter(metrics, 'error') }).toEqual({ aborted: 1, error: 0 });
  });

  it('looks at a key again after the delay a reconcile asks for', async () => {
    let rounds = 0;
    const { work, metrics } = queue(async () => (++rounds < 3 ? { requeueAfterMs: 20 } : undefined));
    work.add('a');
    while (rounds < 3) await sleep(10);
    expect(await counter(metrics, 'requeue')).toBe(2);
  });

  /** A queue of one worker held by key `busy` until `release()`; `due` keys' requeues have come due (they wait `later`). */
  async function heldWith(...due: string[]) {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held = queue(
      async (key) => {
        if (key === 'busy') await gate;
      },
      { concurrency: 1 },
    );
    held.work.add('busy');
    for (const [i, key] of due.entries()) held.work.addAfter(key, i + 1);
    while (due.some((key) => held.work.isDelayed(key))) await sleep(5);
    return { ...held, release };
  }

  it('takes a key added (a change) before keys whose requeue came due', async () => {
    const { work, calls, release } = await heldWith('due-1', 'due-2');
    work.add('changed');
    release();
    await work.idle();
    expect(calls).toEqual(['busy', 'changed', 'due-1', 'due-2']);
  });

  it('moves a key whose requeue came due up when it is added, and runs it once', async () => {
    const { work, calls, release } = await heldWith('a', 'b');
    work.add('b');
    release();
    await work.idle();
    expect(calls).toEqual(['busy', 'b', 'a']);
  });

  it('spaces retries of many failing keys by the global rate cap', async () => {
    const times: number[] = [];
    const { work } = queue(
      async (key) => {
        times.push(performance.now());
        if (key !== 'done') throw new Error('fail');
      },
      { retriesPerSecond: 10, baseDelayMs: 1, concurrency: 20 },
    );
    for (let i = 0; i < 20; i++) work.add(`k${i}`);
    // 20 first attempts at once, then retries: the bucket holds 10, so the rest wait ~100 ms apart.
    await sleep(600);
    await work.shutdown();
    const retries = times.length - 20;
    expect(retries).toBeGreaterThan(10);
    expect(retries).toBeLessThan(20);
  });

  it('reports its depth and stops taking keys after shutdown', async () => {
    const { work, metrics, calls } = queue(async () => sleep(20), { concurrency: 1 });
    work.add('a');
    work.add('b');
    expect((await metrics.workqueueDepth.get()).values.find((value) => value.labels.controller === 'test')?.value).toBe(1);
    await work.shutdown();
    work.add('c');
    await sleep(30);
    expect(calls).toEqual(['a']);
  });

  it('lets a sooner delayed add replace a later one (a short requeue after a long backoff)', async () => {
    const { work, calls } = queue(async () => undefined);
    work.addAfter('a', 60_000);
    work.addAfter('a', 30);
    await sleep(100);
    expect(calls).toEqual(['a']);
    await work.shutdown();
  });
});

describe('WorkQueue failures said elsewhere', () => {
  it('logs a failure said elsewhere (the engine away) at debug, counts it and retries it like any other; others as a warning', async () => {
    const { root, records } = captureLogger();
    const metrics = createMetrics();
    const away = new Error('Docker Engine cannot be reached at unix:///run/missing.sock (connect ENOENT /run/missing.sock)');
    // Each key fails this many times, then succeeds.
    const failing = new Map([
      ['away', 2],
      ['broken', 1],
    ]);
    let succeeded!: () => void;
    const bothSucceeded = new Promise<void>((resolve) => (succeeded = resolve));
    const work = new WorkQueue({
      name: 'test',
      metrics,
      log: categoryLogger(root, 'test'),
      baseDelayMs: 5,
      saidElsewhere: (error) => error === away,
      reconcile: async (key) => {
        const left = failing.get(key)!;
        failing.set(key, left - 1);
        if (left > 0) throw key === 'away' ? away : new Error('engine refused');
        if ([...failing.values()].every((count) => count < 0)) succeeded();
      },
    });
    work.add('away');
    work.add('broken');
    await bothSucceeded;
    const failures = records.filter((record) => record.message === 'test reconcile failed, retrying').map((record) => [record.level, record.key]);
    expect(failures).toHaveLength(3);
    expect(failures).toEqual(
      expect.arrayContaining([
        ['debug', 'away'],
        ['warning', 'broken'],
      ]),
    );
    expect(failures.filter(([level]) => level === 'debug')).toEqual([
      ['debug', 'away'],
      ['debug', 'away'],
    ]);
    expect(await counter(metrics, 'error')).toBe(3);
    await work.shutdown();
  });
});
