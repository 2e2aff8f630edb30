/**
 * The embedded database owned from a worker thread of this process (embedded-thread.ts), as this
 * thread starts and ends it: a module of its own, light to load, so that an operator command
 * begins PGlite's start before it has loaded anything else (bin/cli.ts). What the thread does is
 * in embedded.ts (serve).
 */
import { EventEmitter, once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log.ts';
import type { EmbeddedDatabase, EmbeddedOptions } from './embedded.ts';

/** The embedded database being served by a worker thread of this process (ownInThread). */
export interface OwnerThread {
  /** Where it serves the database once PGlite is up; undefined when another process holds it. Rejects when serving failed. */
  ready: Promise<string | undefined>;
  /** Calls `handler` for every NOTIFY committed by any connection (as EmbeddedDatabase's). */
  onNotification: EmbeddedDatabase['onNotification'];
  /** Stops serving and ends the thread (after it is ready); safe to call more than once. */
  close(): Promise<void>;
}

/**
 * The PostgreSQL settings of an operator command's own embedded database (bin/cli.ts). PGlite
 * zeroes all of its shared memory at every start, sized mostly by `shared_buffers` and
 * `max_connections`: a 4 MB pool with room for one connection (PGlite's one backend serves every
 * connection anyway) starts it sooner than 16 MB for 100 (bench/cli.ts). PostgreSQL works with
 * any pool; a command's larger writes (audit-prune, a user's deletion) only evict more often.
 */
export const ONE_COMMAND: Readonly<Record<string, string>> = { shared_buffers: '4MB', max_connections: '1' };

/**
 * The PostgreSQL settings of the server's embedded database (bin/server.ts): a 32 MB buffer pool,
 * where the cluster's own is 128 MB. Zeroing 128 MB took 0.8 s of every start on this project's
 * machine (measured with the earlier start-up benchmark, bench/startup.sh), and 32 MB (4,000 pages) holds the whole database of a classroom; a
 * deployment with more data than that runs on PostgreSQL (`DATABASE_URL`) anyway.
 */
export const SERVER_SETTINGS: Readonly<Record<string, string>> = { shared_buffers: '32MB' };

/** What the thread of ownInThread tells this one (embedded-thread.ts). */
export type ThreadMessage =
  | { type: 'ready'; url: string }
  | { type: 'held' }
  | { type: 'failed'; message: string }
  | { type: 'notification'; channel: string; payload: string }
  | { type: 'log'; line: string };

/** What the thread of ownInThread is given (embedded-thread.ts). */
export type ThreadData = Pick<EmbeddedOptions, 'dataDir' | 'describe' | 'template' | 'staleMs' | 'channels' | 'settings'>;

/**
 * Begins owning the embedded database under `dataDir` in a worker thread (embedded-thread.ts):
 * PGlite runs there, on another core, serving the database on its loopback port, and this thread
 * joins it as its guests do. Its log lines come to `log`, its notifications to `onNotification`.
 * An operator command starts one before it has even loaded the command (bin/cli.ts); the server
 * serves its database from one (`inThread`). When another process holds the database, the thread
 * ends at once (`ready` is undefined).
 */
export function ownInThread(options: ThreadData & { log: Logger | Promise<Logger> }): OwnerThread {
  // Its log lines wait for a logger still loading (bin/cli starts the thread before it has one).
  const logged = Promise.resolve(options.log);
  const toLog = async (write: (log: Logger) => void) => write(await logged);
  const data: ThreadData = {
    dataDir: options.dataDir,
    describe: options.describe,
    template: options.template,
    staleMs: options.staleMs,
    channels: options.channels,
    settings: options.settings,
  };
  const worker = new Worker(new URL('./embedded-thread.ts', import.meta.url), { workerData: data });
  const notifications = new EventEmitter();
  let serving = false;
  const ended = once(worker, 'exit').then(() => undefined);
  const ready = new Promise<string | undefined>((resolve, reject) => {
    worker.on('message', (message: ThreadMessage) => {
      if (message.type === 'ready') {
        serving = true;
        resolve(message.url);
      } else if (message.type === 'held') resolve(undefined);
      else if (message.type === 'failed') reject(new Error(message.message));
      else if (message.type === 'notification') notifications.emit('notification', message.channel, message.payload);
      else void toLog((log) => relayLog(log, message.line));
    });
    worker.on('error', (error) => {
      // Once it served, the database is gone from under the process (/healthz says so): the log says why.
      if (serving) void toLog((log) => log.error({ error }, 'the thread serving the embedded database failed'));
      else reject(error);
    });
    void ended.then(() => reject(new Error('the thread serving the embedded database ended before it was ready')));
  });
  let closing: Promise<void> | undefined;
  return {
    ready,
    onNotification: (handler) => {
      notifications.on('notification', handler);
      return () => notifications.off('notification', handler);
    },
    close: () =>
      (closing ??= (async () => {
        // oxlint-disable-next-line unicorn/require-post-message-target-origin -- a worker thread, not a window
        if (await ready.catch(() => undefined)) worker.postMessage('close');
        await ended;
      })()),
  };
}

/** Logs a JSON line of the thread's logger with this thread's `log`, at its level, with its fields. */
function relayLog(log: Logger, line: string): void {
  const { level, message, timestamp: _timestamp, category: _category, ...fields } = JSON.parse(line) as Record<string, unknown>;
  const write = log[level as 'info'] as Logger['info'] | undefined;
  write?.call(log, fields, String(message));
}
