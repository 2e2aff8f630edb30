import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { EntityManager } from 'typeorm';
import type { Logger } from '../log.ts';

/** Kinds of desired state whose changes are announced; each is a PostgreSQL NOTIFY channel. */
export type ChangeKind = 'workspaces' | 'runs' | 'users';

const CHANNEL_PREFIX = 'cp_';

/** A change announcement: the kind and key (a workspace or run id) that was edited. */
export interface Change {
  kind: ChangeKind;
  id: string;
}

/**
 * Announces desired-state changes to the controllers. Store functions call `notify` inside their
 * transaction (PostgreSQL delivers NOTIFY at commit, to every listening process, e.g. the server
 * when the CLI edits) and `publish` after commit (the in-process path, which is the only one with
 * the embedded database). Changes are hints: the periodic resync is the guarantee.
 */
export class ChangeFeed {
  private readonly emitter = new EventEmitter();
  private listener: { close(): Promise<void> } | undefined;

  constructor() {
    this.emitter.setMaxListeners(50);
  }

  /** Queues a NOTIFY in the caller's transaction; it is delivered only if the transaction commits. */
  async notify(manager: EntityManager, change: Change): Promise<void> {
    await manager.query('SELECT pg_notify($1, $2)', [CHANNEL_PREFIX + change.kind, change.id]);
  }

  /** Delivers a change to this process's subscribers (call after commit). */
  publish(change: Change): void {
    this.emitter.emit('change', change);
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  subscribe(handler: (change: Change) => void): () => void {
    this.emitter.on('change', handler);
    return () => this.emitter.off('change', handler);
  }

  /** Subscribes to reconnects of the database listener (changes may have been missed: resync). */
  onReconnect(handler: () => void): () => void {
    this.emitter.on('reconnect', handler);
    return () => this.emitter.off('reconnect', handler);
  }

  /**
   * LISTENs on a dedicated connection to `url` and republishes other processes' NOTIFYs. When the
   * connection drops (database restart), reconnects with backoff, LISTENs again and emits
   * 'reconnect' so that subscribers resync.
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
          for (const kind of ['workspaces', 'runs', 'users'] satisfies ChangeKind[]) await client.query(`LISTEN ${CHANNEL_PREFIX}${kind}`);
          client.on('notification', (message) => {
            const kind = message.channel.slice(CHANNEL_PREFIX.length) as ChangeKind;
            if (message.payload) this.publish({ kind, id: message.payload });
          });
          if (first) log.debug('change listener connected');
          else log.info('change listener reconnected');
          if (!first) this.emitter.emit('reconnect');
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
