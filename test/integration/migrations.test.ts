import { createDataSource, migrate, MIGRATION_LOCK_KEY } from '../../src/db/database.ts';
import { MIGRATIONS } from '../../migrations/index.ts';
import { createEmptyDatabase } from '../helpers/db.ts';

const TABLES = [
  'audit_log',
  'capacity_refusals',
  'handoff_codes',
  'help_requests',
  'home_disk_usage',
  'join_codes',
  'leader_counters',
  'leader_lease',
  'lesson_collections',
  'lesson_deliveries',
  'lesson_snapshots',
  'lesson_versions',
  'lessons',
  'migrations',
  'node_drains',
  'nodes',
  'rate_limits',
  'run_output',
  'runs',
  'scheduled_backups',
  'servers',
  'sessions',
  'settings',
  'sign_in_links',
  'users',
  'workspace_imports',
  'workspace_looks',
  'workspace_presence',
  'workspace_stats',
  'workspace_uptime',
  'workspaces',
];

async function tables(url: string): Promise<string[]> {
  const dataSource = createDataSource(url, 1);
  await dataSource.initialize();
  try {
    const rows: { table_name: string }[] = await dataSource.query(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    );
    return rows.map((row) => row.table_name);
  } finally {
    await dataSource.destroy();
  }
}

describe('migrations', () => {
  it('create every table of the data model with the indexes the filters need', async () => {
    const url = await createEmptyDatabase();
    const dataSource = createDataSource(url, 2);
    await dataSource.initialize();
    const applied = await migrate(dataSource);
    expect(applied).toHaveLength(MIGRATIONS.length);
    const indexes: { indexname: string }[] = await dataSource.query("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'");
    expect(indexes.map((row) => row.indexname)).toEqual(
      expect.arrayContaining([
        'audit_log_action',
        'audit_log_actor_email',
        'audit_log_timestamp',
        'runs_one_active',
        'workspaces_running_activity',
        'sessions_user',
      ]),
    );
    const cap: { value: unknown }[] = await dataSource.query("SELECT value FROM settings WHERE key = 'max_active_containers'");
    expect(cap).toEqual([{ value: null }]);
    await dataSource.destroy();
    expect(await tables(url)).toEqual(TABLES);
  });

  it('roll back cleanly to an empty schema and apply again', async () => {
    const url = await createEmptyDatabase();
    const dataSource = createDataSource(url, 2);
    await dataSource.initialize();
    await migrate(dataSource);
    for (let i = 0; i < MIGRATIONS.length; i++) await dataSource.undoLastMigration({ transaction: 'each' });
    const left: { table_name: string }[] = await dataSource.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
    expect(left.map((row) => row.table_name)).toEqual(['migrations']);
    const extensions: { extname: string }[] = await dataSource.query("SELECT extname FROM pg_extension WHERE extname = 'pg_trgm'");
    expect(extensions).toEqual([]);
    expect(await migrate(dataSource)).toHaveLength(MIGRATIONS.length);
    await dataSource.destroy();
    expect(await tables(url)).toEqual(TABLES);
  });

  it('run once when two processes migrate at the same time (advisory lock)', async () => {
    const url = await createEmptyDatabase();
    const first = createDataSource(url, 2);
    const second = createDataSource(url, 2);
    await Promise.all([first.initialize(), second.initialize()]);
    const [a, b] = await Promise.all([migrate(first), migrate(second)]);
    expect(a.length + b.length).toBe(MIGRATIONS.length);
    expect([a.length, b.length]).toContain(0);
    const rows: { count: string }[] = await first.query('SELECT count(*) FROM migrations');
    expect(Number(rows[0]!.count)).toBe(MIGRATIONS.length);
    await Promise.all([first.destroy(), second.destroy()]);
  });

  it('are applied as nothing-to-do on an up-to-date database', async () => {
    const url = await createEmptyDatabase();
    const dataSource = createDataSource(url, 2);
    await dataSource.initialize();
    await migrate(dataSource);
    expect(await migrate(dataSource)).toEqual([]);
    await dataSource.destroy();
  });

  it('find an up-to-date database without waiting for the lock another process holds while it migrates', async () => {
    const url = await createEmptyDatabase();
    const dataSource = createDataSource(url, 2);
    const migrating = createDataSource(url, 1);
    await Promise.all([dataSource.initialize(), migrating.initialize()]);
    await migrate(dataSource);
    // A session of its own, held (an idle pooled one would be closed, and its lock with it).
    const holder = migrating.createQueryRunner();
    await holder.connect();
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
    // Without the unlocked check this waits on the lock until the test times out.
    expect(await migrate(dataSource)).toEqual([]);
    await holder.release();
    await Promise.all([dataSource.destroy(), migrating.destroy()]);
  });

  it('apply what a database is missing when it is behind by one', async () => {
    const url = await createEmptyDatabase();
    const dataSource = createDataSource(url, 2);
    await dataSource.initialize();
    await migrate(dataSource);
    await dataSource.undoLastMigration({ transaction: 'each' });
    expect(await migrate(dataSource)).toEqual([MIGRATIONS.at(-1)!.name]);
    await dataSource.destroy();
  });
});
