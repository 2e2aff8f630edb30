/**
 * Latency of the audit-log filters at 1,000,000 rows, through listAudit (the SQL that
 * GET /admin/audit-log runs), against a plain primary-key page as the baseline. Makes its own
 * database `cp_bench_audit` on the test server, runs the real migrations, loads the rows in SQL,
 * measures, prints one line per case, and drops the database; aborts after 10 minutes.
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/audit-log.ts
 *
 * BENCH_DATABASE_URL (else TEST_DATABASE_URL, else the provisioned 127.0.0.1:54329) names the server;
 * REPS the repetitions per case (default 40, at least 30).
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { createDataSource, migrate } from '../src/db/database.ts';
import { listAudit, type AuditFilter } from '../src/store/audit.ts';
import { auditRowsSql } from './lib.ts';

const SERVER_URL = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:54329/postgres';
const DATABASE = 'cp_bench_audit';
const ROWS = 1_000_000;
const REPS = Math.max(30, Number(process.env.REPS ?? 40));
const WARMUP = 5;
const TARGET_MS = 20;
const TIME_LIMIT_MS = 10 * 60_000;
const DAY_MS = 86_400_000;

/** Runs one statement on the server's admin database. */
async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: SERVER_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const dropDatabase = () => admin(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);

/** The cases measured: a name and the filter listAudit gets (limit 50, as the endpoint's default). */
function cases(now: number): [string, Omit<AuditFilter, 'limit'>][] {
  const ago = (days: number) => new Date(now - days * DAY_MS);
  return [
    ['no filter', {}],
    ['action common (container., 60%)', { action: 'container.' }],
    ['action rare (user.delete, 0.5%)', { action: 'user.delete' }],
    ['action rare prefix (user.de, 2.5%)', { action: 'user.de' }],
    ['actor common (coach, 60%)', { actor: 'coach' }],
    ['actor rare (ta150@, 0.06%)', { actor: 'ta150@' }],
    ['actor between (ta100@, 0.08%)', { actor: 'ta100@' }],
    ['since/until (one week, 3 months ago)', { since: ago(97), until: ago(90) }],
    ['since/until (a quarter, 6-9 months ago)', { since: ago(270), until: ago(180) }],
    ['deep cursor (before 10000)', { before: 10_000 }],
    ['combined (user. + coach0 + before 500000)', { action: 'user.', actor: 'coach0', before: 500_000 }],
    ['combined (container. + ta + last 30 days)', { action: 'container.', actor: 'ta', since: ago(30) }],
  ];
}

/** Milliseconds of each of `REPS` runs of `run`, after a warm-up. */
async function time(run: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < WARMUP; i++) await run();
  const samples: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const start = performance.now();
    await run();
    samples.push(performance.now() - start);
  }
  return samples.toSorted((a, b) => a - b);
}

/** The value at quantile q of sorted samples (nearest rank). */
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;

/** The SQL and parameters listAudit sends for `filter`, captured by a stand-in data source. */
async function sqlOf(filter: AuditFilter): Promise<{ sql: string; params: unknown[] }> {
  let captured = { sql: '', params: [] as unknown[] };
  const recorder = { query: async (sql: string, params: unknown[]) => ((captured = { sql, params }), []) };
  await listAudit(recorder as unknown as DataSource, filter);
  return captured;
}

async function main(): Promise<void> {
  const url = new URL(SERVER_URL);
  url.pathname = `/${DATABASE}`;
  await dropDatabase();
  await admin(`CREATE DATABASE ${DATABASE}`);
  const db = createDataSource(url.toString(), 2);
  try {
    await db.initialize();
    await migrate(db);
    let started = performance.now();
    // One connection, so that the seed holds for the load: the same rows every run.
    const runner = db.createQueryRunner();
    await runner.query('SELECT setseed(0.42)');
    await runner.query(auditRowsSql(ROWS));
    await runner.release();
    await db.query('VACUUM ANALYZE audit_log');
    const load = performance.now() - started;
    const [{ count, size }] = (await db.query("SELECT count(*)::int AS count, pg_size_pretty(pg_total_relation_size('audit_log')) AS size FROM audit_log")) as [
      { count: number; size: string },
    ];
    console.log(`loaded ${count} rows (${size} with indexes) in ${(load / 1000).toFixed(1)} s; ${REPS} runs per case after ${WARMUP} warm-up runs`);

    const baselineSql = 'SELECT id, timestamp, actor_id, actor_email, action, target_kind, target_id, metadata FROM audit_log ORDER BY id DESC LIMIT 50';
    const baselineSamples = await time(() => db.query(baselineSql));
    const baseline = quantile(baselineSamples, 0.5);
    const results = [{ name: 'baseline (pk, ORDER BY id DESC LIMIT 50)', median: baseline, p95: quantile(baselineSamples, 0.95) }];
    const slow: [string, AuditFilter][] = [];
    for (const [name, partial] of cases(Date.now())) {
      const filter = { ...partial, limit: 50 };
      const samples = await time(() => listAudit(db, filter));
      const median = quantile(samples, 0.5);
      results.push({ name, median, p95: quantile(samples, 0.95) });
      if (median >= TARGET_MS) slow.push([name, filter]);
    }
    const width = Math.max(...results.map((row) => row.name.length));
    const fmt = (ms: number) => ms.toFixed(2).padStart(9);
    console.log(`${'case'.padEnd(width)}  median_ms     p95_ms  ratio_to_baseline`);
    for (const row of results) {
      console.log(`${row.name.padEnd(width)}  ${fmt(row.median)}  ${fmt(row.p95)}  ${(row.median / baseline).toFixed(1).padStart(17)}`);
    }
    const met = results.length - 1 - slow.length;
    console.log(
      `target "under ${TARGET_MS} ms median": ${met} of ${results.length - 1} cases meet it${slow.length > 0 ? `; missed: ${slow.map(([name]) => name).join(', ')}` : ''}`,
    );
    for (const [name, filter] of slow) {
      const { sql, params } = await sqlOf(filter);
      const plan = (await db.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params)) as { 'QUERY PLAN': string }[];
      console.log(`\n${name}:\n${plan.map((line) => line['QUERY PLAN']).join('\n')}`);
    }
  } finally {
    await db.destroy().catch(() => undefined);
    await dropDatabase();
  }
}

const limit = setTimeout(() => {
  console.error(`bench/audit-log: still running after ${TIME_LIMIT_MS / 60_000} minutes; aborting`);
  void dropDatabase().finally(() => process.exit(1));
}, TIME_LIMIT_MS);
limit.unref();
try {
  await main();
} catch (error) {
  console.error(error);
  process.exitCode = 1;
}
