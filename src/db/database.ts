import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource, type QueryRunner, type ReplicationMode } from 'typeorm';
import { assertNotAborted } from '../caller.ts';
import { MIGRATIONS } from '../../migrations/index.ts';
import type { Logger } from '../log.ts';
import { CHANNELS } from './changes.ts';
import { errorCode, isUnreachable, redactUrl } from './errors.ts';
import { openEmbedded, type EmbeddedOptions } from './embedded.ts';

/** An open database: the TypeORM data source and how to close everything behind it. */
export interface Database {
  dataSource: DataSource;
  /** True for the embedded PGlite database (owned by this process or joined through its owner). */
  embedded: boolean;
  /**
   * Follows the NOTIFYs other processes commit, where the database itself tells them (the embedded
   * database's owner); absent where the change feed LISTENs instead (PostgreSQL).
   */
  onNotification?: (handler: (channel: string, payload: string) => void) => () => void;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** A PostgreSQL URL; without one, the embedded database under `dataDir` is used. */
  url: string | undefined;
  /** The same database without a pooler in between (default `url`): the migrations run there (their advisory lock is a session's). */
  directUrl?: string;
  dataDir: string;
  log: Logger;
  /** Stop retrying when this signal aborts (shutdown during start-up). */
  signal?: AbortSignal;
  /** For the embedded database: own it (the server, which waits while someone else does) or share it (the CLI). */
  embedded?: Pick<EmbeddedOptions, 'mode' | 'describe' | 'template' | 'thread' | 'inThread' | 'settings'>;
  /** Retry a server that is not reachable yet (the server waits for its database; the CLI says so at once). Default true. */
  retry?: boolean;
  /** Delay before the first retry; doubles up to maxRetryDelayMs. */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
}

/** Key of the advisory lock that serialises migrations across processes ("cp-migr" in ASCII). */
export const MIGRATION_LOCK_KEY = 0x63702d6d69677200n;

/**
 * A data source whose every new store call (a query, a transaction: each takes a query runner)
 * first asks whether the work making it was aborted (src/caller.ts, `untilAborted`): a stopped
 * controller's reconcile starts nothing more. The statements of a transaction under way run on
 * its runner, so its ROLLBACK always goes through.
 */
class AbortableDataSource extends DataSource {
  override createQueryRunner(mode?: ReplicationMode): QueryRunner {
    assertNotAborted();
    return super.createQueryRunner(mode);
  }
}

/** Creates a data source for a PostgreSQL URL with our migrations registered (not yet initialised); a call for aborted work is refused (AbortableDataSource). */
export function createDataSource(url: string, poolSize = 10): DataSource {
  return new AbortableDataSource({
    type: 'postgres',
    url,
    migrations: MIGRATIONS,
    migrationsTableName: 'migrations',
    logging: false,
    extra: { max: poolSize, connectionTimeoutMillis: 5000, idleTimeoutMillis: 30000 },
  });
}

/**
 * Opens the database: the server at `url`, or the embedded PGlite (stored in `dataDir/pgdata`,
 * served on a loopback port so the same pg driver talks to both). A server that is not reachable
 * yet is retried with exponential backoff and one warning line per attempt; a fatal error
 * (bad password, missing database) is thrown at once.
 */
export async function openDatabase(options: OpenOptions): Promise<Database> {
  if (options.url === undefined) return openEmbeddedDatabase(options);
  const url = options.url;
  let delay = options.retryDelayMs ?? 500;
  for (let attempt = 1; ; attempt++) {
    const dataSource = createDataSource(url);
    try {
      await dataSource.initialize();
      return { dataSource, embedded: false, close: () => dataSource.destroy() };
    } catch (error) {
      await dataSource.destroy().catch(() => undefined);
      const code = errorCode(error);
      if (!isUnreachable(error) || options.signal?.aborted || options.retry === false) throw error;
      options.log.warning({ attempt, code, retryInMs: delay, database: redactUrl(url) }, `database not reachable (${code}), retrying`);
      await sleep(delay, undefined, { signal: options.signal }).catch(() => undefined);
      if (options.signal?.aborted) throw error;
      delay = Math.min(delay * 2, options.maxRetryDelayMs ?? 10_000);
    }
  }
}

async function openEmbeddedDatabase(options: OpenOptions): Promise<Database> {
  const mode = options.embedded?.mode ?? 'owner';
  const embedded = await openEmbedded({
    dataDir: options.dataDir,
    log: options.log,
    mode,
    describe: options.embedded?.describe ?? { role: 'server', command: 'server' },
    channels: CHANNELS,
    dataSource: createDataSource,
    signal: options.signal,
    template: options.embedded?.template,
    thread: options.embedded?.thread,
    settings: options.embedded?.settings,
    // An owner (the server) serves it from a thread of its own: PGlite's work off the event loop that proxies requests.
    inThread: options.embedded?.inThread ?? mode === 'owner',
  });
  return { dataSource: embedded.dataSource, embedded: true, onNotification: embedded.onNotification, close: embedded.close };
}

/**
 * Opens the database (openDatabase) and runs its pending migrations (migrate), saying in the log
 * which were applied; closes it again when they fail.
 */
export async function openMigrated(options: OpenOptions): Promise<Database> {
  const database = await openDatabase(options);
  try {
    const direct = options.directUrl !== undefined && options.directUrl !== options.url;
    const applied = direct ? await migrateAt(options.directUrl!) : await migrate(database.dataSource);
    options.log.info({ applied: applied.length }, applied.length > 0 ? `applied migrations: ${applied.join(', ')}` : 'database schema is up to date');
  } catch (error) {
    await database.close().catch(() => undefined);
    throw error;
  }
  return database;
}

/** Runs the pending migrations on the database at `url`, through a connection of its own (closed after). Returns their names. */
export async function migrateAt(url: string): Promise<string[]> {
  const dataSource = createDataSource(url, 2);
  await dataSource.initialize();
  try {
    return await migrate(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Runs pending migrations, each in its own transaction, holding a PostgreSQL advisory lock so that
 * two processes starting at once never race. Returns the names of the migrations applied.
 */
export async function migrate(dataSource: DataSource): Promise<string[]> {
  if (await upToDate(dataSource)) return [];
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
    const applied = await dataSource.runMigrations({ transaction: 'each' });
    return applied.map((migration) => migration.name);
  } finally {
    await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY.toString()]).catch(() => undefined);
    await runner.release();
  }
}

/**
 * Whether every migration of this build is applied already: two reads, without the advisory lock
 * and TypeORM's checks. That is every start-up and every CLI command but the first after an
 * upgrade, and a round trip to the embedded database costs a thread hop each. A database that is
 * behind (or has no migrations table yet) takes migrate's locked path, which reads again under the lock.
 */
async function upToDate(dataSource: DataSource): Promise<boolean> {
  const [table] = await dataSource.query<{ present: boolean }[]>(`SELECT to_regclass('migrations') IS NOT NULL AS present`);
  if (!table?.present) return false;
  const rows = await dataSource.query<{ name: string }[]>('SELECT name FROM migrations');
  const applied = new Set(rows.map((row) => row.name));
  return dataSource.migrations.every((migration) => migration.name !== undefined && applied.has(migration.name));
}
