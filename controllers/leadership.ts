import type { LeaseConfig } from '../src/config.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { FencedOutError, RECONCILER_LEASE, type Fence, type LeaseStore } from '../src/store/leases.ts';

export interface LeadershipOptions {
  leases: Pick<LeaseStore, 'acquire' | 'renew' | 'release'>;
  /** This process's name on the lease (unique per process: a restarted process is a new holder). */
  holder: string;
  lease: LeaseConfig;
  metrics: Metrics;
  log: Logger;
  /** Starts the leader-only parts, writing under `fence`; called once per term won. */
  lead(fence: Fence): Promise<void>;
  /** Stops them; called once per term lost or given up, before anything else is tried. */
  follow(): Promise<void>;
  /**
   * The lease's holder when it is known to be dead (a process on this host that no longer runs),
   * else undefined: its lease is taken at once instead of after it expires, so that a single
   * server restarted after a crash does not wait a whole lease to act again.
   */
  holderGone?(): Promise<string | undefined>;
  /**
   * Whether a leader's write transaction is ended by the database once idle past the renew
   * deadline (Fence's holdMs): on PostgreSQL, where other replicas wait on it; not on the embedded
   * database, one process, whose own backend the timeout would end.
   */
  boundWrites: boolean;
}

/**
 * Leader election on the database's lease (src/store/leases.ts), as controller-runtime's
 * leaderelection does it, with a fencing token:
 *
 * - Every `retryMs` a follower tries to take the lease (free, or expired `durationMs` after its
 *   last renewal, by the database's clock); a leader renews it.
 * - A leader counts its lease from when its last successful renewal was *sent* (its own monotonic
 *   clock). Once `renewDeadlineMs` passes without one (the database unreachable, a renewal hanging,
 *   the process paused by SIGSTOP or a stalled VM), it stops acting: its fence refuses every write
 *   and reconcile at once, then its leader-only parts are stopped. Since renewDeadline < duration,
 *   it has stopped before another may take the lease.
 * - Every write a leader makes carries its term and is checked in its own transaction (checkFence);
 *   a write refused there means another leads: the leader steps down at once.
 * - A leader that stops (SIGTERM) releases the lease, so that another takes over within one
 *   `retryMs` instead of a whole lease.
 *
 * One transition at a time: taking over, stepping down and stopping are serialised.
 */
export class Leadership {
  private readonly options: LeadershipOptions;
  /** The term this process leads under and when its last renewal was sent; undefined while following. */
  private current: { term: number; renewedAt: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private transition: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Whether "following" was said since the last change (one line, not one per try). */
  private saidFollowing = false;

  constructor(options: LeadershipOptions) {
    this.options = options;
  }

  /** Whether this process leads now (by its own clock: within the renew deadline of its last renewal). */
  get leading(): boolean {
    return this.current !== undefined && this.withinDeadline(this.current);
  }

  /** The term this process leads under, or undefined. */
  get term(): number | undefined {
    return this.leading ? this.current!.term : undefined;
  }

  /** Tries once to lead (resolving once the leader-only parts run, when it won), then keeps trying every retry period. */
  async start(): Promise<void> {
    this.options.metrics.leader.set(0);
    await this.tick();
    this.schedule();
  }

  /** Stops trying; a leader stops its parts and releases the lease, so another takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    const current = this.current;
    if (!current) return;
    await this.stepDown(current.term, 'this replica is stopping', 'released');
    await this.options.leases
      .release(RECONCILER_LEASE, this.options.holder, current.term)
      .then(() => this.options.log.info({ term: current.term }, `released the reconciler lease (term ${current.term})`))
      .catch((error: unknown) =>
        this.options.log.warning({ term: current.term, error }, 'releasing the reconciler lease failed; another replica takes over when it expires'),
      );
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick().finally(() => {
        this.ticking = undefined;
        this.schedule();
      });
    }, this.options.lease.retryMs);
  }

  private withinDeadline(current: { renewedAt: number }): boolean {
    return performance.now() - current.renewedAt < this.options.lease.renewDeadlineMs;
  }

  /** One try: a leader renews (or steps down past its deadline), a follower tries to take the lease. */
  private async tick(): Promise<void> {
    await this.transition;
    if (this.stopped) return;
    const { leases, holder, lease, log } = this.options;
    const current = this.current;
    if (current) {
      if (!this.withinDeadline(current)) return this.stepDown(current.term, 'no renewal within the renew deadline', 'lost');
      const sentAt = performance.now();
      try {
        const renewed = await within(leases.renew(RECONCILER_LEASE, holder, current.term, lease.durationMs), lease.renewDeadlineMs);
        if (!renewed) return this.stepDown(current.term, 'another replica took the lease', 'lost');
        if (this.current === current) {
          current.renewedAt = sentAt;
          this.options.metrics.leaderRenewal.at = sentAt;
        }
      } catch (error) {
        log.warning({ term: current.term, error }, 'renewing the reconciler lease failed; trying again');
        if (!this.withinDeadline(current)) return this.stepDown(current.term, 'no renewal within the renew deadline', 'lost');
      }
      return;
    }
    const sentAt = performance.now();
    let term: number | undefined;
    try {
      term = (await within(leases.acquire(RECONCILER_LEASE, holder, lease.durationMs), lease.renewDeadlineMs))?.term;
      const gone = term === undefined ? await this.options.holderGone?.() : undefined;
      if (gone !== undefined) {
        term = (await within(leases.acquire(RECONCILER_LEASE, holder, lease.durationMs, gone), lease.renewDeadlineMs))?.term;
        if (term !== undefined)
          log.info({ previous: gone }, 'the previous leader is a process of this host that no longer runs: taking over without waiting for its lease');
      }
    } catch (error) {
      log.debug({ error }, 'trying to take the reconciler lease failed; trying again');
      return;
    }
    if (term === undefined) {
      if (!this.saidFollowing) log.info('another replica leads: following (serving requests; taking over if the leader goes)');
      this.saidFollowing = true;
      return;
    }
    await this.takeOver(term, sentAt);
  }

  /** Runs `work` after every transition before it (never two at a time). */
  private serially(work: () => Promise<void>): Promise<void> {
    const next = (async () => {
      await this.transition;
      await work();
    })();
    this.transition = next.catch(() => undefined);
    return next;
  }

  private takeOver(term: number, sentAt: number): Promise<void> {
    return this.serially(async () => {
      const { metrics, log, holder } = this.options;
      const current = { term, renewedAt: sentAt };
      this.current = current;
      this.saidFollowing = false;
      metrics.leader.set(1);
      metrics.leaderTerm.set(term);
      metrics.leaderRenewal.at = sentAt;
      metrics.leaderTransitions.inc({ transition: 'acquired' });
      log.info({ term, holder }, `leading: took the reconciler lease (term ${term})`);
      const fence: Fence = {
        holder,
        term,
        holdMs: this.options.boundWrites ? this.options.lease.renewDeadlineMs : undefined,
        assertCurrent: () => {
          if (this.current !== current) throw new FencedOutError(term, 'this replica stepped down');
          if (!this.withinDeadline(current)) throw new FencedOutError(term, 'no renewal of the lease within the renew deadline');
        },
        refused: (by) => {
          metrics.fencedWrites.inc({ refused_by: by });
          if (by === 'database') void this.stepDown(term, 'a write was refused: another replica leads under a later term', 'lost');
        },
      };
      try {
        await this.options.lead(fence);
      } catch (error) {
        log.error({ term, error }, 'starting the reconciler failed; giving the lease up');
        await this.leave(current, 'lost');
        await this.options.leases.release(RECONCILER_LEASE, holder, term).catch(() => undefined);
      }
    });
  }

  /** Stops acting under `term` (nothing when this process no longer leads under it). */
  private stepDown(term: number, reason: string, transition: 'lost' | 'released'): Promise<void> {
    return this.serially(async () => {
      const current = this.current;
      if (current?.term !== term) return;
      if (transition === 'lost') this.options.log.warning({ term, reason }, `stopped leading (term ${term}): ${reason}`);
      await this.leave(current, transition);
    });
  }

  /**
   * Lost: refuses every write under `current` at once, then stops the leader-only parts. Released
   * (this replica stops): stops the parts first, under a fence that still holds (its renew deadline
   * still bounds it), so that what they are doing finishes rather than failing as fenced out; then
   * refuses every write.
   */
  private async leave(current: { term: number }, transition: 'lost' | 'released'): Promise<void> {
    const { metrics, log } = this.options;
    const refuse = () => {
      if (this.current === current) this.current = undefined;
      metrics.leader.set(0);
      metrics.leaderRenewal.at = undefined;
      metrics.leaderTransitions.inc({ transition });
    };
    if (transition === 'lost') refuse();
    try {
      await this.options.follow();
    } catch (error) {
      log.error({ term: current.term, error }, 'stopping the reconciler failed');
    }
    if (transition === 'released') refuse();
  }
}

/** `promise`, or a rejection after `ms` (a database call that hangs must not hold a leader past its deadline). */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from the database within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
