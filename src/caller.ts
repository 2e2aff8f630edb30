/**
 * The caller a change is made for, carried across every await of its work (AsyncLocalStorage): an
 * API request. A change made for a caller that is gone (its connection closed before its answer: a
 * balancer gave up on a frozen replica, a student closed the tab) or whose deadline has passed is
 * never committed: the store's one way to change state (src/store/mutation.ts) asks
 * `assertCallerWaits` right before its commit and rolls back instead. Work with no caller (a
 * controller, the CLI) is not bounded here.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { AppError, UnavailableError } from './errors.ts';

/** How long an API request may take before what it would change is no longer made (the balancer's API timeout, deploy/haproxy.cfg). */
export const API_DEADLINE_MS = 30_000;

/** The deadline of a request that is minutes of work (a backup, a restore): the balancer's timeout for everything but the API. */
export const LONG_REQUEST_MS = 10 * 60_000;

/** What a change asks of its caller before it commits. */
export interface Caller {
  /** Whether the caller is gone (its connection ended before it was answered). */
  gone(): boolean;
  /** When its deadline passes, on `performance.now()`'s clock (monotonic: it runs on while a process is paused). */
  deadlineAt: number;
  /**
   * Set once the caller's handling is over: work it started that goes on after (an import's clone,
   * a timer) is its own, bounded by neither the caller's connection nor its deadline.
   */
  released: boolean;
  /** Ends the work when aborted (a controller's queue stopping): no new store call starts, nothing commits. */
  signal?: AbortSignal;
}

const callers = new AsyncLocalStorage<Caller>();

/** Runs `work` (and everything it awaits) for `caller`. */
export function forCaller<T>(caller: Caller, work: () => Promise<T>): Promise<T> {
  return callers.run(caller, work);
}

/**
 * Runs `work` (and everything it awaits) as work with no client and no deadline that `signal`
 * ends (a controller's reconcile, controllers/workqueue.ts): once it aborts, every store call the
 * work would start, and every commit, throws its reason (`assertNotAborted`, `assertCallerWaits`).
 */
export function untilAborted<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  return callers.run({ gone: () => false, deadlineAt: Number.POSITIVE_INFINITY, released: false, signal }, work);
}

/** Runs `work` as no caller's: what it starts outlives the work that started it (a run's output follower, which keeps what it read after its controller stops). */
export function detached<T>(work: () => T): T {
  return callers.exit(work);
}

/**
 * Throws the signal's reason when the work running now was given one that has aborted
 * (`untilAborted`). The database asks it before every new store call (src/db/database.ts): pg
 * cannot cancel a query under way cleanly, so one already sent finishes, and nothing new starts.
 */
export function assertNotAborted(): void {
  callers.getStore()?.signal?.throwIfAborted();
}

/** The caller of the work running now, if it has one. */
export function currentCaller(): Caller | undefined {
  return callers.getStore();
}

/** Refused because its caller is gone: there is no one to answer (stable id `caller_gone`). */
export class CallerGoneError extends AppError {
  constructor() {
    super('caller_gone', 'The request was abandoned before it was answered; nothing was changed.');
    this.name = 'CallerGoneError';
  }
}

/** Throws when the work running now has a caller that is gone, past its deadline or aborted (nothing is committed then). */
export function assertCallerWaits(): void {
  const caller = callers.getStore();
  caller?.signal?.throwIfAborted();
  if (!caller || caller.released) return;
  if (caller.gone()) throw new CallerGoneError();
  if (performance.now() > caller.deadlineAt) {
    throw UnavailableError('deadline_passed', 'The control plane took too long to answer this request; nothing was changed. Try again.', 1);
  }
}
