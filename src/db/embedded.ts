/**
 * The embedded database (PGlite): one process owns it at a time, and others reach it through the
 * owner's loopback socket.
 *
 * PGlite is one PostgreSQL backend inside one process, and two processes opening the same data
 * directory would corrupt it. So the data directory is locked (`DATA_DIR/pgdata.lock`, refreshed
 * every few seconds, taken over 10 s after a crashed owner stopped refreshing it), and the owner
 * serves it on a loopback port, written with its pid and role to `DATA_DIR/pgdata.holder.json`.
 * - The server is always an owner: when the CLI holds the database, it waits for it (and says so).
 * - The CLI is a guest when the server (or another CLI) holds it: it connects to the owner's port,
 *   so its changes happen in the running server's database. Otherwise it owns the database for as
 *   long as it runs.
 * - NOTIFYs of guests reach the owner: the owner reads the notifications in what its socket sends
 *   back to each connection and hands them to `onNotification` listeners (the change feed), so a
 *   CLI edit reaches the running server's controllers at once, as LISTEN does with PostgreSQL.
 */
import { EventEmitter } from 'node:events';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PGlite } from '@electric-sql/pglite';
import lockfile from 'proper-lockfile';
import type { DataSource } from 'typeorm';
import { UnavailableError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { ownInThread, type OwnerThread } from './owner-thread.ts';

/** Who holds the embedded database, as its owner writes it beside the data. */
export interface EmbeddedHolder {
  pid: number;
  /** `server` or `cli`. */
  role: string;
  /** What it runs, e.g. `cli backup ada`. */
  command: string;
  /** Where guests connect. */
  url: string;
  since: string;
}

/** An open embedded database: the data source, whether this process owns it, and its notifications. */
export interface EmbeddedDatabase {
  dataSource: DataSource;
  owner: boolean;
  /** Calls `handler` for every NOTIFY committed by any connection (owners only; guests hear nothing). */
  onNotification: (handler: (channel: string, payload: string) => void) => () => void;
  close: () => Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  log: Logger;
  /** `owner`: wait until the database is free (the server); `shared`: join its owner as a guest (the CLI). */
  mode: 'owner' | 'shared';
  /** What this process is, for the holder file and others' messages: `server`, or `cli <command>`. */
  describe: { role: string; command: string };
  /** The NOTIFY channels whose notifications an owner passes to `onNotification`. */
  channels: readonly string[];
  /** Makes a data source for a PostgreSQL URL (the pg driver talks to PGlite through its socket). */
  dataSource(url: string, poolSize: number): DataSource;
  signal?: AbortSignal;
  /** How long the lock may go unrefreshed before another process takes it over. */
  staleMs?: number;
  /** The initdb template a new cluster starts from (default: the installed PGlite's, embedded-template.ts). */
  template?: string;
  /**
   * PostgreSQL settings an owner starts PGlite with (`-c name=value`), over the cluster's own.
   * PGlite zeroes its whole shared memory at every start, sized by `shared_buffers` and
   * `max_connections`: an operator command that owns the database for one command starts it
   * smallest (ONE_COMMAND), the server with a smaller buffer pool than PGlite's default
   * (SERVER_SETTINGS; both in src/db/owner-thread.ts).
   */
  settings?: Readonly<Record<string, string>>;
  /** A thread of this process that began owning the database (ownInThread): joined when it got it. */
  thread?: OwnerThread;
  /**
   * Owner mode: serve the database from a worker thread of this process (ownInThread) rather than
   * this one, so that PGlite's work (every query runs in it) never holds up this thread's event loop.
   */
  inThread?: boolean;
}

/** The database served by `thread` at `url`, joined: owned by this process, through its thread. */
async function joinThread(thread: OwnerThread, url: string, options: EmbeddedOptions, poolSize: number): Promise<EmbeddedDatabase> {
  const guest = await join({ pid: process.pid, ...options.describe, url, since: new Date().toISOString() }, options, poolSize).catch(async (error: unknown) => {
    await thread.close();
    throw error;
  });
  const close = async () => {
    try {
      await guest.close();
    } finally {
      await thread.close();
    }
  };
  return { ...guest, owner: true, onNotification: thread.onNotification, close };
}

const LOCK_FILE = 'pgdata.lock';
const HOLDER_FILE = 'pgdata.holder.json';

/** Opens the embedded database under `dataDir` as its owner, or as a guest of the process that owns it. */
export async function openEmbedded(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  // Begun early (the CLI, the server): joined when it got the database; a failure is met again below, and reported there.
  const early = options.thread;
  const url = await early?.ready.catch(() => undefined);
  if (early && url) return joinThread(early, url, options, options.inThread ? 4 : 2);
  const dataDir = path.join(options.dataDir, 'pgdata');
  await mkdir(dataDir, { recursive: true });
  let waitingSaid = false;
  for (let delay = 250; ; delay = Math.min(delay * 2, 2000)) {
    if (options.inThread) {
      const thread = ownInThread(options);
      const served = await thread.ready;
      if (served) return joinThread(thread, served, options, 4);
      await thread.close();
    } else {
      const release = await tryLock(dataDir, options);
      if (release) return own(dataDir, release, options);
    }
    const holder = await readHolder(options.dataDir);
    if (options.mode === 'shared' && holder) {
      options.log.debug({ holder }, 'joining the embedded database of another process');
      return join(holder, options);
    }
    if (options.mode === 'owner' && !waitingSaid) {
      waitingSaid = true;
      options.log.warning({ holder }, `the embedded database is held by ${describeHolder(holder)}; waiting until it is free`);
    }
    if (options.mode === 'shared' && delay >= 2000) {
      throw UnavailableError(
        'database_busy',
        `The embedded database in ${options.dataDir} is locked by another process that does not say where it serves it; try again.`,
        5,
      );
    }
    await sleep(delay, undefined, { signal: options.signal }).catch(() => undefined);
    if (options.signal?.aborted) throw new Error('start-up aborted while waiting for the embedded database');
  }
}

/** Takes the data directory's lock, or undefined when another live process holds it. */
export async function tryLock(dataDir: string, options: Pick<EmbeddedOptions, 'dataDir' | 'log' | 'staleMs'>): Promise<(() => Promise<void>) | undefined> {
  try {
    return await lockfile.lock(dataDir, {
      lockfilePath: path.join(options.dataDir, LOCK_FILE),
      realpath: false,
      stale: options.staleMs ?? 10_000,
      retries: 0,
      // Without onCompromised, a lock lost (e.g. the disk gone) throws from a timer and kills the process.
      onCompromised: (error) => options.log.error({ error }, 'lost the lock of the embedded database'),
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOCKED') return undefined;
    throw error;
  }
}

async function readHolder(dataDir: string): Promise<EmbeddedHolder | undefined> {
  try {
    return JSON.parse(await readFile(path.join(dataDir, HOLDER_FILE), 'utf8')) as EmbeddedHolder;
  } catch {
    // Missing (the owner is still starting) or half-written: as if unknown.
    return undefined;
  }
}

function describeHolder(holder: EmbeddedHolder | undefined): string {
  return holder ? `${holder.command} (pid ${holder.pid}, since ${holder.since})` : 'another process';
}

/** The embedded database as its owner serves it: PGlite on a loopback port, named in the holder file. */
export interface Served {
  url: string;
  onNotification: EmbeddedDatabase['onNotification'];
  /** Stops serving, closes PGlite and releases the lock. */
  close(): Promise<void>;
}

/** What serving the database needs of the options. */
export type ServeOptions = Pick<EmbeddedOptions, 'dataDir' | 'log' | 'describe' | 'channels' | 'template' | 'settings'>;

/** Serves the database whose lock was taken: PGlite in this thread, on a loopback port that guests read from the holder file. */
export async function serve(dataDir: string, release: () => Promise<void>, options: ServeOptions): Promise<Served> {
  const [pglite, { PGLiteSocketServer }] = await Promise.all([startPglite(dataDir, options), import('@electric-sql/pglite-socket')]);
  const notifications = new EventEmitter();
  // The one backend session listens, so that every connection's NOTIFY comes back in what the socket sends (and is read there).
  if (options.channels.length > 0) await pglite.exec(options.channels.map((channel) => `LISTEN ${channel};`).join(' '));
  const relayed = shareable(pglite, (channel, payload) => notifications.emit('notification', channel, payload));
  const server = new PGLiteSocketServer({ db: relayed, host: '127.0.0.1', port: 0, maxConnections: 16 });
  await server.start();
  const url = `postgres://postgres@${server.getServerConn()}/postgres`;
  const holder: EmbeddedHolder = { pid: process.pid, ...options.describe, url, since: new Date().toISOString() };
  const holderFile = path.join(options.dataDir, HOLDER_FILE);
  await writeFile(`${holderFile}.tmp`, JSON.stringify(holder));
  await rename(`${holderFile}.tmp`, holderFile);
  if (options.describe.role === 'server') options.log.info({ dataDir }, 'no DATABASE_URL set: using the embedded PostgreSQL (PGlite)');
  return {
    url,
    onNotification: (handler) => {
      notifications.on('notification', handler);
      return () => notifications.off('notification', handler);
    },
    close: async () => {
      await rm(holderFile, { force: true });
      await server.stop();
      await pglite.close();
      await release();
    },
  };
}

/** Owns the database: serves it, and connects to it. */
async function own(dataDir: string, release: () => Promise<void>, options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const served = await serve(dataDir, release, options);
  const dataSource = options.dataSource(served.url, 4);
  try {
    await dataSource.initialize();
  } catch (error) {
    await served.close().catch(() => undefined);
    throw error;
  }
  return {
    dataSource,
    owner: true,
    onNotification: served.onNotification,
    close: async () => {
      await dataSource.destroy();
      await served.close();
    },
  };
}

/**
 * PGlite on `dataDir`. A new cluster (an empty directory) is unpacked from the initdb template when there is one
 * (embedded-template.ts); should that fail, it is made by initdb after all, in an emptied directory.
 */
async function startPglite(dataDir: string, { log, template: file, settings = {} }: Pick<EmbeddedOptions, 'log' | 'template' | 'settings'>): Promise<PGlite> {
  const [{ PGlite: Pglite }, { pg_trgm }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite/contrib/pg_trgm')]);
  const extensions = { pg_trgm };
  // PGlite's own start parameters, and the given settings after them.
  const startParams = [...Pglite.defaultStartParams, ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`])];
  const create = () => Pglite.create({ dataDir, extensions, startParams });
  // Only into an empty directory: whatever else is there is left to PGlite, as it always was.
  if ((await readdir(dataDir)).length > 0) return create();
  // Loaded only for a new cluster: the template's name takes every migration's.
  const { unpackTemplate, templateFile } = await import('./embedded-template.ts');
  const templateAt = file ?? (await templateFile());
  try {
    if (!(await unpackTemplate(templateAt, dataDir))) return create();
    const pglite = await create();
    log.debug({ dataDir, template: templateAt }, 'unpacked a new PGlite cluster from the initdb template');
    return pglite;
  } catch (error) {
    log.warning({ error, template: templateAt }, 'the initdb template failed to load; making the new PGlite cluster with initdb instead');
    await rm(dataDir, { recursive: true, force: true });
    await mkdir(dataDir, { recursive: true });
    return create();
  }
}

/** Joins the owner's database through its loopback port. */
async function join(holder: EmbeddedHolder, options: EmbeddedOptions, poolSize = 2): Promise<EmbeddedDatabase> {
  const dataSource = options.dataSource(holder.url, poolSize);
  try {
    await dataSource.initialize();
  } catch (error) {
    await dataSource.destroy().catch(() => undefined);
    throw UnavailableError(
      'database_busy',
      `The embedded database is held by ${describeHolder(holder)}, which does not answer at ${holder.url} (${(error as Error).message}).`,
      5,
    );
  }
  return { dataSource, owner: false, onNotification: () => () => undefined, close: () => dataSource.destroy() };
}

/** The part of PGlite its socket server uses. */
interface ProtocolDb {
  execProtocolRawStream(message: Uint8Array, options: { syncToFs?: boolean; onRawData: (data: Uint8Array) => void }): Promise<void>;
  isInTransaction(): boolean;
}

/** Frontend messages of the extended query protocol, which leave state (statements, portals) for the next, up to Sync ('S'). */
const EXTENDED = new Set(['P', 'B', 'D', 'E', 'C', 'H'].map((type) => type.charCodeAt(0)));
const SYNC = 'S'.charCodeAt(0);

/**
 * PGlite as its socket server sees it, made safe for several connections and relaying their
 * notifications:
 * - The socket server runs each connection's messages one by one on the one backend, and keeps
 *   to one connection only while a transaction is open. An extended query (Parse, Bind, Execute
 *   up to Sync) leaves state between its messages too: when another connection begins a
 *   transaction in between, the server keeps to that one, whose own queries replace the first's
 *   unnamed statement and portal ("portal does not exist"). So the server is told a transaction is
 *   open from a connection's first extended message to its Sync as well.
 * - Every connection's backend messages are read on their way out for NotificationResponse ('A')
 *   messages, which go to `notify`. Message boundaries may fall anywhere in a chunk.
 */
function shareable<T extends object>(pglite: T & ProtocolDb, notify: (channel: string, payload: string) => void): T {
  let extendedOpen = false;
  const execProtocolRawStream: ProtocolDb['execProtocolRawStream'] = async (message, streamOptions) => {
    const type = message[0];
    if (type !== undefined && EXTENDED.has(type)) extendedOpen = true;
    const reader = new NotificationReader(notify);
    try {
      await pglite.execProtocolRawStream(message, {
        ...streamOptions,
        onRawData: (data) => {
          reader.push(data);
          streamOptions.onRawData(data);
        },
      });
    } finally {
      if (type === SYNC) extendedOpen = false;
    }
  };
  const isInTransaction = () => extendedOpen || pglite.isInTransaction();
  // A connection gone mid-sequence is rolled back by the socket server through exec: its sequence is over.
  const exec = async (...args: unknown[]) => {
    extendedOpen = false;
    return (pglite as unknown as { exec: (...a: unknown[]) => Promise<unknown> }).exec(...args);
  };
  return new Proxy(pglite, {
    get(target, property) {
      if (property === 'execProtocolRawStream') return execProtocolRawStream;
      if (property === 'isInTransaction') return isInTransaction;
      if (property === 'exec') return exec;
      const value: unknown = Reflect.get(target, property, target);
      // PGlite's methods use private state: they must run on PGlite itself, not on the proxy.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Reads backend messages (type byte, int32 length, body) from a byte stream, passing on notifications. */
export class NotificationReader {
  private readonly notify: (channel: string, payload: string) => void;
  private header = Buffer.alloc(0);
  private skip = 0;
  private body: Buffer[] | undefined;
  private bodyLeft = 0;

  constructor(notify: (channel: string, payload: string) => void) {
    this.notify = notify;
  }

  push(data: Uint8Array): void {
    let chunk = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    while (chunk.length > 0) {
      if (this.skip > 0) {
        const skipped = Math.min(this.skip, chunk.length);
        this.skip -= skipped;
        chunk = chunk.subarray(skipped);
        continue;
      }
      if (this.body) {
        const taken = chunk.subarray(0, this.bodyLeft);
        this.body.push(taken);
        this.bodyLeft -= taken.length;
        chunk = chunk.subarray(taken.length);
        if (this.bodyLeft === 0) {
          this.deliver(Buffer.concat(this.body));
          this.body = undefined;
        }
        continue;
      }
      const need = 5 - this.header.length;
      this.header = Buffer.concat([this.header, chunk.subarray(0, need)]);
      chunk = chunk.subarray(need);
      if (this.header.length < 5) continue;
      const type = this.header[0];
      const length = this.header.readInt32BE(1) - 4;
      this.header = Buffer.alloc(0);
      if (type === 0x41 && length > 0) {
        this.body = [];
        this.bodyLeft = length;
      } else this.skip = Math.max(0, length);
    }
  }

  /** A NotificationResponse body: int32 pid, channel and payload as NUL-terminated strings. */
  private deliver(body: Buffer): void {
    const channelEnd = body.indexOf(0, 4);
    const payloadEnd = body.indexOf(0, channelEnd + 1);
    if (channelEnd === -1 || payloadEnd === -1) return;
    this.notify(body.toString('utf8', 4, channelEnd), body.toString('utf8', channelEnd + 1, payloadEnd));
  }
}
