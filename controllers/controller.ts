import type { Change, ChangeFeed } from '../src/db/changes.ts';
import { engineAway, type RuntimeEnvironment, type RuntimeEvent, type RuntimeEvents } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Fence } from '../src/store/leases.ts';
import { everyWithJitter } from './periodic.ts';
import { WorkQueue, type ReconcileResult, type WorkQueueOptions } from './workqueue.ts';

/**
 * What every controller shares, as controller-runtime's Controller does: a work queue whose
 * reconcile is the subclass's, the triggers that feed it (`follow`), and one start/stop shape.
 */
export abstract class Controller {
  readonly queue: WorkQueue;
  private triggers: Triggers | undefined;

  /**
   * `fence`: a leader's controller reconciles only while it leads (its fence says so by its own
   * clock, before anything is asked of the engine); without one it always does (driven directly).
   */
  protected constructor(queue: Omit<WorkQueueOptions, 'reconcile'>, fence?: Fence) {
    this.queue = new WorkQueue({
      ...queue,
      reconcile: (key) => {
        fence?.assertCurrent();
        return this.reconcile(key);
      },
    });
  }

  /** Takes one key from desired to observed; its doc comment is the controller's contract. */
  abstract reconcile(key: string): Promise<ReconcileResult | void>;

  /** Adopts what runs, then follows the controller's triggers. */
  abstract start(): Promise<void>;

  /** Stops the triggers and waits for running reconciles. Containers are left as they are. */
  async stop(): Promise<void> {
    this.triggers?.stop();
    this.triggers = undefined;
    await this.queue.shutdown();
  }

  /** Enqueues everything now, as the periodic resync does (started controllers only). */
  async resyncAll(): Promise<void> {
    await this.triggers?.resync();
  }

  /** Wires the triggers (see wireTriggers) to this controller's queue. */
  protected follow(spec: Omit<TriggerSpec, 'queue'>): void {
    this.triggers = wireTriggers({ ...spec, queue: this.queue });
  }
}

/** A controller's wired triggers. */
export interface Triggers {
  /** Enqueues every key now (a failure is logged, not thrown). */
  resync(): Promise<void>;
  stop(): void;
}

/** What a controller follows and how each trigger names the keys to look at. Triggers only enqueue keys. */
interface TriggerSpec {
  queue: WorkQueue;
  changes: ChangeFeed;
  /** The keys a committed change asks to look at (none for changes the controller does not follow). */
  keysOfChange(change: Change): string[] | Promise<string[]>;
  /** Its engine events, and whether the engine answers. */
  runtime: RuntimeEvents & Pick<RuntimeEnvironment, 'reachability'>;
  /** The key an engine event asks to look at, if any. */
  keyOfEvent(event: RuntimeEvent): string | undefined;
  /** Every key of the database a full resync looks at. */
  storedKeys(): Promise<string[]>;
  /**
   * Every key of the engine a full resync looks at (adoption, orphans), if the controller has any.
   * A resync enqueues the lists that came: an engine away leaves the database's keys looked at.
   */
  engineKeys?(): Promise<string[]>;
  /** Full resync period (±10 % jitter). */
  resyncIntervalMs: number;
  /** Where lost streams and failed resyncs are reported, and the engine's reachability said (EngineReachability.attach). */
  log: Logger;
}

/**
 * Wires a controller's triggers to its queue, the way controller-runtime's sources and handlers
 * do: committed changes (the change feed); a resync whenever the change listener starts listening
 * (it may have missed some); engine events, and a resync on every (re)connect of the events stream;
 * and a full resync every period with jitter. Notifications are hints; the resync is the guarantee.
 * A resync enqueues the lists that came (the database's keys while the engine is away); a list that
 * failed is logged and the next trigger retries. Returns how to stop them all, and a resync to run
 * now.
 */
function wireTriggers(spec: TriggerSpec): Triggers {
  const { queue, log } = spec;
  // The engine's outages are said once, by its reachability (through the first controller attached); each trigger then stays quiet about them.
  const detach = spec.runtime.reachability?.attach(log);
  const enqueue = (keys: string[]) => keys.forEach((key) => queue.add(key));
  const resync = async () => {
    const lists = await Promise.allSettled([spec.storedKeys(), spec.engineKeys?.() ?? []]);
    enqueue([...new Set(lists.flatMap((list) => (list.status === 'fulfilled' ? list.value : [])))]);
    for (const list of lists) {
      // Stopping aborts the resync under way: nothing to say.
      if (list.status === 'fulfilled' || queue.signal.aborted) continue;
      const error = list.reason as Error;
      log[engineAway(spec.runtime, error) ? 'debug' : 'warning'](
        { controller: queue.name, error: error.message },
        `${queue.name} resync failed; the next one will retry`,
      );
    }
  };
  const unsubscribe = spec.changes.subscribe((change) => {
    Promise.resolve(spec.keysOfChange(change)).then(enqueue, (error: unknown) =>
      log.warning(
        { controller: queue.name, change, error: (error as Error).message },
        `${queue.name}: looking up the keys of a change failed; the next resync covers it`,
      ),
    );
  });
  const unsubscribeListening = spec.changes.onListening(() => void resync());
  // One line when the stream is lost and one when it is back, not one per reconnect attempt.
  let lost = false;
  const watch = spec.runtime.watch({
    onEvent: (event) => {
      const key = spec.keyOfEvent(event);
      if (key !== undefined) queue.add(key);
    },
    onConnect: () => {
      if (lost) log.info({ controller: queue.name }, 'Docker events stream reconnected, resyncing');
      lost = false;
      void resync();
    },
    onDisconnect: (error) => {
      // An engine that cannot be reached (at start, or after the stream was lost) is said by its reachability.
      if (engineAway(spec.runtime, error))
        return log.debug({ controller: queue.name, error: error.message }, 'Docker events stream: engine not reached, retrying');
      if (!lost) log.warning({ controller: queue.name, error: error.message }, 'Docker events stream lost, reconnecting');
      lost = true;
    },
  });
  const stopResync = everyWithJitter(resync, spec.resyncIntervalMs);
  return {
    resync,
    stop: () => {
      unsubscribe();
      unsubscribeListening();
      watch.close();
      stopResync();
      detach?.();
    },
  };
}
