import { untilAborted } from '../src/caller.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';

/** What a reconcile may ask for besides success: to be looked at again after a delay. */
export interface ReconcileResult {
  requeueAfterMs?: number;
}

/**
 * A failure that retrying cannot fix (a workspace image that is not on the engine): the reconcile
 * records it in the status before throwing it, and the queue does not retry the key; the next
 * change of its spec, an engine event or the resync looks at it again, and the reconcile decides
 * whether anything changed (controller-runtime's TerminalError).
 */
export class TerminalError extends Error {
  constructor(cause: Error) {
    super(cause.message, { cause });
    this.name = 'TerminalError';
  }
}

/** Where a waiting key is: `now` (added) or `later` (a requeue or retry come due). */
type Lane = 'now' | 'later';

export interface WorkQueueOptions {
  /** The controller's name, the `controller` label of the metrics. */
  name: string;
  /**
   * One reconcile; `signal` is aborted when the queue shuts down (pass it to what may wait: engine
   * calls). It reaches the store by itself: once aborted, the reconcile's store calls start no more
   * and commit nothing (src/caller.ts, `untilAborted`).
   */
  reconcile: (key: string, signal: AbortSignal) => Promise<ReconcileResult | void>;
  metrics: Metrics;
  log: Logger;
  /** Reconciles running at once (different keys). */
  concurrency?: number;
  /** First retry delay after a failure; doubles per consecutive failure of the key. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Global cap on retries per second across all keys (a token bucket), as client-go's limiter. */
  retriesPerSecond?: number;
  /**
   * Failures said elsewhere, once (the engine found unreachable: its EngineReachability says so):
   * counted and retried as any other, logged at debug. Default: none.
   */
  saidElsewhere?: (error: unknown) => boolean;
}

/**
 * A controller work queue in the manner of client-go: keys are deduplicated while waiting; one
 * reconcile per key runs at a time (a key added while it runs is run again afterwards); a key
 * added (a change) is taken before keys whose requeue or retry came due (controller-runtime's
 * priority queue does the same for the keys it lists at start); a failed
 * key is retried with per-key exponential backoff (about 100 ms up to 5 min) under a global rate
 * cap; success forgets the key's backoff; a TerminalError is not retried. Shutting down aborts the
 * signal every reconcile was given, so that what they wait on (the engine) ends at once, and no
 * store call starts or commits for them afterwards.
 */
export class WorkQueue {
  private readonly options: Required<WorkQueueOptions>;
  /** Keys waiting, in two lanes: `now` (added: something changed) is taken before `later` (a requeue or a retry come due). */
  private readonly lanes = { now: [] as string[], later: [] as string[] };
  /** Each waiting key's lane (an entry left in the other lane by a promotion is skipped). */
  private readonly queued = new Map<string, Lane>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; due: number }>();
  private tokens: number;
  private lastRefill = Date.now();
  private active = 0;
  private stopped = false;
  private readonly stopping = new AbortController();
  private idleWaiters: (() => void)[] = [];

  constructor(options: WorkQueueOptions) {
    this.options = { concurrency: 8, baseDelayMs: 100, maxDelayMs: 300_000, retriesPerSecond: 20, saidElsewhere: () => false, ...options };
    this.tokens = this.options.retriesPerSecond;
  }

  /** The controller's name. */
  get name(): string {
    return this.options.name;
  }

  /** Adds a key now (deduplicated): something about it changed, so it goes before the keys that are only due a look. */
  add(key: string): void {
    this.enqueue(key, 'now');
  }

  /**
   * A key into `lane`, unless it waits already (a key waiting `later` that is added `now` moves
   * up) or runs (then it runs again afterwards). A requeue or retry that comes due goes `later`:
   * a class's 30 runs probed every 100 ms while they compile do not hold back the 31st Run
   * pressed, nor 30 editors checked while they start a 31st Open.
   */
  private enqueue(key: string, lane: Lane): void {
    if (this.stopped) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    const waiting = this.queued.get(key);
    if (waiting === 'now' || waiting === lane) return;
    this.queued.set(key, lane);
    this.lanes[lane].push(key);
    this.updateDepth();
    this.pump();
  }

  /** Adds a key after `delayMs`; of several delayed adds of one key, the soonest wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.stopped) return;
    if (delayMs <= 0) return this.add(key);
    const due = Date.now() + delayMs;
    const pending = this.timers.get(key);
    if (pending && pending.due <= due) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.enqueue(key, 'later');
    }, delayMs);
    timer.unref();
    this.timers.set(key, { timer, due });
  }

  /** How many reconciles run now. */
  get running(): number {
    return this.active;
  }

  /** Aborted when the queue shuts down: every reconcile's signal. */
  get signal(): AbortSignal {
    return this.stopping.signal;
  }

  /** Whether a delayed add of `key` is pending (a retry after a failure, or a requeue). */
  isDelayed(key: string): boolean {
    return this.timers.has(key);
  }

  /** Consecutive failures of a key (0 after a success). */
  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Resolves when nothing is queued or running (delayed adds not counted). */
  async idle(): Promise<void> {
    if (this.queued.size === 0 && this.active === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops taking keys, aborts the running reconciles' signal, and waits for them to finish. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    this.stopping.abort(new Error(`the ${this.options.name} controller is stopping`));
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.lanes.now.length = 0;
    this.lanes.later.length = 0;
    this.queued.clear();
    await this.idle();
  }

  private updateDepth(): void {
    this.options.metrics.workqueueDepth.set({ controller: this.options.name }, this.queued.size);
  }

  private pump(): void {
    while (!this.stopped && this.active < this.options.concurrency && this.queued.size > 0) {
      const key = this.next();
      this.queued.delete(key);
      this.processing.add(key);
      this.active++;
      this.updateDepth();
      void this.process(key);
    }
    if (this.queued.size === 0 && this.active === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** The first waiting key of the `now` lane, else of `later` (skipping entries a key left behind when it moved up). */
  private next(): string {
    for (const lane of ['now', 'later'] as const)
      for (let key = this.lanes[lane].shift(); key !== undefined; key = this.lanes[lane].shift()) if (this.queued.get(key) === lane) return key;
    throw new Error('a key is queued in no lane');
  }

  private async process(key: string): Promise<void> {
    const { name, metrics, log } = this.options;
    const end = metrics.reconcileDuration.startTimer({ controller: name });
    let retryAfter: number | undefined;
    try {
      const { signal } = this.stopping;
      const result = await untilAborted(signal, () => this.options.reconcile(key, signal));
      this.failures.delete(key);
      if (result?.requeueAfterMs !== undefined) {
        retryAfter = result.requeueAfterMs;
        metrics.reconcileTotal.inc({ controller: name, result: 'requeue' });
      } else {
        metrics.reconcileTotal.inc({ controller: name, result: 'success' });
      }
    } catch (error) {
      if (this.stopped) {
        // Cut short by the shutdown (its engine calls aborted): nothing failed.
        metrics.reconcileTotal.inc({ controller: name, result: 'aborted' });
      } else if (error instanceof TerminalError) {
        this.failures.delete(key);
        metrics.reconcileTotal.inc({ controller: name, result: 'terminal' });
        log.warning({ key, error: error.message }, `${name} reconcile failed in a way retrying cannot fix; not retried until it changes`);
      } else {
        retryAfter = this.fail(key, error as Error);
      }
    } finally {
      end();
    }
    this.processing.delete(key);
    this.active--;
    if (this.dirty.delete(key)) this.add(key);
    else if (retryAfter !== undefined) this.addAfter(key, retryAfter);
    this.pump();
  }

  /** Counts a failure of `key`: logged, and retried after the backoff it returns. */
  private fail(key: string, error: Error): number {
    const { name, metrics, log } = this.options;
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    const retryAfter = this.retryDelay(failures);
    metrics.reconcileTotal.inc({ controller: name, result: 'error' });
    log[this.options.saidElsewhere(error) ? 'debug' : 'warning'](
      { key, failures, retryInMs: retryAfter, error: error.message },
      `${name} reconcile failed, retrying`,
    );
    return retryAfter;
  }

  /** Per-key exponential backoff, and no sooner than the global bucket allows. */
  private retryDelay(failures: number): number {
    const { baseDelayMs, maxDelayMs, retriesPerSecond } = this.options;
    const perKey = Math.min(baseDelayMs * 2 ** (failures - 1), maxDelayMs);
    const now = Date.now();
    this.tokens = Math.min(retriesPerSecond, this.tokens + ((now - this.lastRefill) / 1000) * retriesPerSecond);
    this.lastRefill = now;
    this.tokens -= 1;
    const bucket = this.tokens >= 0 ? 0 : (-this.tokens / retriesPerSecond) * 1000;
    return Math.max(perKey, bucket);
  }
}
