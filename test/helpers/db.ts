import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../../src/db/database.ts';
import { adminQuery, databaseUrl, runPrefix } from './pg.ts';

/** A new database name of this run (jest resets module state per file, so no counters). */
const newName = (kind: string) => `${runPrefix()}_${kind}${process.env.JEST_WORKER_ID ?? '0'}_${randomBytes(4).toString('hex')}`;

/** Creates a new database cloned from the run's migrated template and returns its URL. */
export async function createTestDatabase(): Promise<string> {
  const name = newName('w');
  await adminQuery(`CREATE DATABASE ${name} TEMPLATE ${runPrefix()}_template`);
  return databaseUrl(name);
}

/** Creates an empty database (no migrations) and returns its URL. */
export async function createEmptyDatabase(): Promise<string> {
  const name = newName('e');
  await adminQuery(`CREATE DATABASE ${name}`);
  return databaseUrl(name);
}

/** An initialised data source on a fresh migrated database. */
export async function openTestDatabase(): Promise<{ url: string; dataSource: DataSource }> {
  const url = await createTestDatabase();
  const dataSource = createDataSource(url, 5);
  await dataSource.initialize();
  return { url, dataSource };
}

/** Empties every table and puts the settings back to their migrated state. */
export async function truncateAll(dataSource: DataSource): Promise<void> {
  await dataSource.query(
    'TRUNCATE users, workspaces, runs, audit_log, sessions, sign_in_links, leader_lease, handoff_codes, rate_limits, capacity_refusals, leader_counters, nodes, node_drains, lessons RESTART IDENTITY CASCADE',
  );
  await dataSource.query('UPDATE settings SET value = NULL');
}

/** A migrated database of its own for one test file; its fields are set in beforeAll. */
export interface TestDatabase {
  url: string;
  dataSource: DataSource;
}

/**
 * Registers the usual hooks of a test file: a fresh migrated database before all tests, emptied
 * before each (unless `truncate: false`), closed after all. Returns the object the hooks fill in.
 */
export function useTestDatabase(options: { truncate?: boolean } = {}): TestDatabase {
  const db = {} as TestDatabase;
  beforeAll(async () => Object.assign(db, await openTestDatabase()));
  afterAll(async () => db.dataSource?.destroy());
  if (options.truncate !== false) beforeEach(async () => truncateAll(db.dataSource));
  return db;
}
