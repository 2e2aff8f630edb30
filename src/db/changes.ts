import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Queryable } from './sql.ts';
import { detached } from '../caller.ts';
import type { Logger } from '../log.ts';

/**
 * Kinds of desired state whose changes are announced; each is a PostgreSQL NOTIFY channel.
 * `allowlist`: the allowlist file was edited through the store (the id is the entry): every
 * replica reads the file again, also where it is on a network filesystem that tells no process of
 * an edit made on another host. `nodes`: a swarm node asked to be drained or taken back (the id is its name).
 * `help`: a help request raised, taken, resolved or withdrawn (the id is the request's): nothing
 * converges on it; the panel's live events tell every open panel. `lessons`: a lesson made, handed
 * out, reset or collected, or a delivery or snapshot done (the id is the workspace's, or the lesson's):
 * the lesson controller converges on it; the panel and the student's page hear it. `join_codes`: a
 * join code opened, closed, joined or its expiry done (the id is the code's): the leader's expiry
 * wakes on it (controllers/join-code-expiry.ts); the panel's Join codes page hears it.
 */
export const CHANGE_KINDS = ['workspaces', 'runs', 'users', 'settings', 'allowlist', 'nodes', 'help', 'lessons', 'join_codes'] as const;

/**
 * What changed: desired state (one of CHANGE_KINDS), or `status`: the observed status of a
 * workspace or of its run, which the leader's controllers write (for the admin panel's live view
 * and the proxy's cache; nothing converges on it). All are announced to every process.
 */
export type ChangeKind = (typeof CHANGE_KINDS)[number] | 'status';

/** Every kind that is NOTIFYed. */
const NOTIFIED_KINDS: readonly ChangeKind[] = [...CHANGE_KINDS, 'status'];

const CHANNEL_PREFIX = 'cp_';

/**
 * Signals: what is not a change of state but every replica must hear, each on a channel of its own:
 * `session_ended` (a sign-out; payload sessionDigest of the session's id: the id is a credential),
 * `refusal` (a student refused at the cap; payload the refusal's id) and `output` (a piece of a
 * run's output kept; payload `<run id> <offset where its kept output now ends>`: the text is read
 * from the database, a NOTIFY carries at most 8,000 bytes).
 */
export const SIGNALS = ['session_ended', 'refusal', 'output'] as const;
export type Signal = (typeof SIGNALS)[number];

/** The NOTIFY channel of a signal. */
export const signalChannel = (signal: Signal): string => `${CHANNEL_PREFIX}${signal}`;

/** The NOTIFY channels this feed listens on. */
export const CHANNELS = [...NOTIFIED_KINDS.map((kind) => `${CHANNEL_PREFIX}${kind}`), ...SIGNALS.map(signalChannel)];

/** The channel of a change kind. */
export const channelOf = (kind: ChangeKind): string => `${CHANNEL_PREFIX}${kind}`;

/** A change announcement: the kind and key (a workspace, run or user id, a settings key) that was edited. */
export interface Change {
  kind: ChangeKind;
  id: string;
}

/** Output of a run just kept (RunStore.appendOutput): where it starts, in characters into the run's output, and its text. */
export interface RunOutputEvent {
  runId: string;
  offset: number;
  text: string;
}

/**
 * Announces desired-state changes to the controllers. The store's mutation helper calls `notify` inside its
 * transaction (PostgreSQL delivers NOTIFY at commit, to every listening process, e.g. the server
 * when the CLI edits) and `publish` after commit (the in-process path, which is the only one with
 * the embedded database). Changes are hints: the periodic resync is the guarantee.
 */
export class ChangeFeed {
  private readonly emitter = new EventEmitter();
  private listener: { close(): Promise<void> } | undefined;

  constructor() {
    // Every open live view of a run's output listens here: one per student watching.
    this.emitter.setMaxListeners(0);
  }

  /** Queues a NOTIFY in the caller's transaction; it is delivered only if the transaction commits. */
  async notify(manager: Queryable, change: Change): Promise<void> {
    await manager.query('SELECT pg_notify($1, $2)', [channelOf(change.kind), change.id]);
  }

  /**
   * Delivers a change to this process's subscribers (call after commit), each as work of its own
   * (src/caller.ts): what a subscriber starts is bound neither by the request nor by the reconcile
   * that made the change (a live view outlives a stopped controller).
   */
  publish(change: Change): void {
    detached(() => this.emitter.emit('change', change));
  }

  /**
   * Publishes a NOTIFY that another process committed (`cp_<kind>` with the id as payload); other
   * channels are ignored. LISTEN calls it with PostgreSQL; the embedded database's owner calls it
   * for what its guests commit.
   */
  deliver(channel: string, payload: string): void {
    if (!channel.startsWith(CHANNEL_PREFIX) || !payload) return;
    const signal = SIGNALS.find((candidate) => channel === signalChannel(candidate));
    if (signal) return this.publishSignal(signal, payload);
    const kind = NOTIFIED_KINDS.find((candidate) => channel === channelOf(candidate));
    if (kind) this.publish({ kind, id: payload });
  }

  /** Delivers a signal to this process's subscribers (its own, at once; others' come through deliver). A subscriber may hear one twice. */
  publishSignal(signal: Signal, payload: string): void {
    this.emitter.emit(`signal:${signal}`, payload);
  }

  /** Subscribes to a signal; returns the unsubscribe function. */
  subscribeSignal(signal: Signal, handler: (payload: string) => void): () => void {
    this.emitter.on(`signal:${signal}`, handler);
    return () => this.emitter.off(`signal:${signal}`, handler);
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  subscribe(handler: (change: Change) => void): () => void {
    this.emitter.on('change', handler);
    return () => this.emitter.off('change', handler);
  }

  /** Delivers new output of a run to this process's subscribers (live views; nothing converges on it). */
  publishOutput(event: RunOutputEvent): void {
    this.emitter.emit('output', event);
  }

  /** Subscribes to runs' new output in this process; returns the unsubscribe function. */
  subscribeOutput(handler: (event: RunOutputEvent) => void): () => void {
    this.emitter.on('output', handler);
    return () => this.emitter.off('output', handler);
  }

  /**
   * Subscribes to every time the database listener starts listening, its first connect included
   * (changes committed before it listened may have been missed: resync).
   */
  onListening(handler: () => void): () => void {
    this.emitter.on('listening', handler);
    return () => this.emitter.off('listening', handler);
  }

  /**
   * LISTENs on a dedicated connection to `url` and republishes other processes' NOTIFYs. Emits
   * 'listening' each time it starts listening, so that subscribers resync: at first (what was
   * committed while it connected was not heard), and when the connection dropped (database restart)
   * and it connected again with backoff.
   */
  listen(url: string, log: Logger): void {
    const abort = new AbortController();
    let client: pg.Client | undefined;
    const run = async () => {
      let delay = 250;
      let first = true;
      while (!abort.signal.aborted) {
        client = new pg.Client({ connectionString: url, keepAlive: true });
        const lost = new Promise<Error>((resolve) => {
          client!.on('error', resolve);
          client!.once('end', () => resolve(new Error('connection ended')));
        });
        try {
          await client.connect();
          for (const channel of CHANNELS) await client.query(`LISTEN ${channel}`);
          client.on('notification', (message) => this.deliver(message.channel, message.payload ?? ''));
          if (first) log.debug('change listener connected');
          else log.info('change listener reconnected');
          this.emitter.emit('listening');
          first = false;
          delay = 250;
          const error = await lost;
          if (abort.signal.aborted) break;
          log.warning({ error: error.message }, 'change listener lost its database connection, reconnecting');
        } catch (error) {
          if (abort.signal.aborted) break;
          log.warning({ error: (error as Error).message, retryInMs: delay }, 'change listener cannot connect, retrying');
        }
        client.removeAllListeners('notification');
        await client.end().catch(() => undefined);
        await sleep(delay, undefined, { signal: abort.signal }).catch(() => undefined);
        delay = Math.min(delay * 2, 5000);
      }
    };
    void run();
    this.listener = {
      close: async () => {
        abort.abort();
        await client?.end().catch(() => undefined);
      },
    };
  }

  /** Stops listening. */
  async close(): Promise<void> {
    await this.listener?.close();
  }
}
