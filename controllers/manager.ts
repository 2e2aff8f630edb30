import type { Logger } from '../src/log.ts';
import type { Fence } from '../src/store/leases.ts';

/** The one lifecycle shape of every long-running part: started once, stopped once. */
export interface Runnable {
  start(): Promise<void> | void;
  stop(): Promise<void> | void;
}

/** A runnable added to a manager: `current` is its instance now (a leader-only one's: this term's, undefined while following). */
export interface Added<R extends Runnable> {
  readonly current: R | undefined;
}

export interface ManagerOptions<Term> {
  /** Where a failure to stop a runnable is said (`stopping <name> failed`). */
  log: Logger;
  /**
   * The pieces leader-only runnables are made on (a store, a runtime): for a term won, on its
   * `fence`; without an election, unfenced (`undefined`).
   */
  term(fence: Fence | undefined): Term;
  /**
   * With a leader election (controllers/leadership.ts, whose `lead` and `follow` are this manager's):
   * its log, where a failure to stop a term's runnable is said. Without one, leader-only runnables
   * are made once, unfenced, when added, and run from start to stop like the others.
   */
  election?: { log: Logger };
}

interface Named {
  name: string;
  runnable: Runnable;
}

/**
 * Runs a control plane's long-running parts, as controller-runtime's manager does: runnables are
 * added in order, `start` starts them in that order and `stop` stops them in reverse (a failure to
 * stop one is logged and the others still stop). A leader-only runnable is given as a factory: with
 * an election, the election's `lead` makes every leader-only runnable anew for each term won, on
 * that term's fenced pieces, and starts them in order; its `follow` stops them in reverse. The
 * election is itself an ordinary runnable, added where the leader-only set should start and stop.
 */
export class Manager<Term> {
  private readonly options: ManagerOptions<Term>;
  private readonly runnables: Named[] = [];
  private readonly leaderOnly: { name: string; make: (term: Term) => Runnable; added: { current: Runnable | undefined } }[] = [];
  private readonly started: Named[] = [];
  /** The leader-only runnables of the term now, as far as they started. */
  private readonly term: Named[] = [];
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(options: ManagerOptions<Term>) {
    this.options = options;
  }

  /** Adds a runnable that runs from start to stop, after those added before it. */
  add<R extends Runnable>(name: string, runnable: R, options?: { leaderOnly?: false }): Added<R>;
  /** Adds a leader-only runnable, made by `make` on each term's pieces (once, unfenced, without an election). */
  add<R extends Runnable>(name: string, make: (term: Term) => R, options: { leaderOnly: true }): Added<R>;
  add(name: string, what: Runnable | ((term: Term) => Runnable), options: { leaderOnly?: boolean } = {}): Added<Runnable> {
    if (!options.leaderOnly) return this.always(name, what as Runnable);
    const make = what as (term: Term) => Runnable;
    if (!this.options.election) return this.always(name, make(this.options.term(undefined)));
    const added: { current: Runnable | undefined } = { current: undefined };
    this.leaderOnly.push({ name, make, added });
    return added;
  }

  /** Starts the runnables in the order they were added; a failure is thrown (`stop` stops those started). Once. */
  start(): Promise<void> {
    return (this.starting ??= (async () => {
      for (const each of this.runnables) {
        if (this.stopping) return;
        await each.runnable.start();
        this.started.push(each);
      }
    })());
  }

  /** Stops the started runnables in reverse order, after a start under way. Once; safe during start. */
  stop(): Promise<void> {
    return (this.stopping ??= (async () => {
      await this.starting?.catch(() => undefined);
      await stopInReverse(this.started, this.options.log);
    })());
  }

  /** The election's `lead`: makes the leader-only runnables on `fence`'s term and starts them in order; a failure is thrown (`follow` stops those started). */
  async lead(fence: Fence): Promise<void> {
    const term = this.options.term(fence);
    const made = this.leaderOnly.map(({ name, make, added }) => ({ name, runnable: (added.current = make(term)) }));
    for (const each of made) {
      await each.runnable.start();
      this.term.push(each);
    }
  }

  /** The election's `follow`: stops the term's runnables in reverse order; none is current any more. */
  async follow(): Promise<void> {
    for (const { added } of this.leaderOnly) added.current = undefined;
    await stopInReverse(this.term, this.options.election?.log ?? this.options.log);
  }

  private always<R extends Runnable>(name: string, runnable: R): Added<R> {
    this.runnables.push({ name, runnable });
    return { current: runnable };
  }
}

/** Empties `started`, stopping each in reverse order; a failure is logged and the rest still stop. */
async function stopInReverse(started: Named[], log: Logger): Promise<void> {
  for (const { name, runnable } of started.splice(0).toReversed()) {
    try {
      await runnable.stop();
    } catch (error) {
      log.error({ part: name, error }, `stopping ${name} failed`);
    }
  }
}
