/**
 * `audit-prune` of 1,000,000 audit entries while a server keeps writing and reading the audit log:
 * how long the prune takes (`bin/cli audit-prune --yes`, a process of its own, as an operator runs
 * it), and the latency of the server's audit writes (an audited cap change, through the store) and
 * audit queries (the admin API's list, no filter and an action filter) during it, against the same
 * load with no prune, measured first in the same run. Target: no stall over 100 ms (p99 and max).
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/audit-prune.ts
 *
 * Makes its own database `cp_bench_prune` on the provisioned PostgreSQL (BENCH_DATABASE_URL names
 * another server), loads the rows a year before the cut plus 1,000 recent ones the prune keeps,
 * and drops the database at the end; aborts after 10 minutes. ROWS sets the number (default 1,000,000).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import { PROJECT_ROOT } from '../src/config.ts';
import { ChangeFeed } from '../src/db/changes.ts';
import { CLI_ACTOR } from '../src/store/audit.ts';
import { createStore, type Store } from '../src/store/index.ts';
import { auditRowsSql, benchDatabase, benchDatabaseUrl, deadline, percentile } from './lib.ts';

const ROWS = Number(process.env.ROWS ?? 1_000_000);
const DATABASE = 'cp_bench_prune';
/** The load: one audited write and one query of each kind every this many ms. */
const PACE_MS = 50;
const BASELINE_MS = 10_000;
const run = promisify(execFile);

/** Latencies (ms) of each kind of operation, gathered while `until` is pending. */
async function load(store: Store, until: Promise<unknown>): Promise<Record<'write' | 'list' | 'filter', number[]>> {
  const samples = { write: [] as number[], list: [] as number[], filter: [] as number[] };
  let done = false;
  void until.finally(() => (done = true));
  const timed = async (kind: keyof typeof samples, operation: () => Promise<unknown>) => {
    const started = performance.now();
    await operation();
    samples[kind].push(performance.now() - started);
  };
  for (let i = 0; !done; i++) {
    const tick = performance.now();
    await Promise.all([
      timed('write', () => store.settings.setCap(CLI_ACTOR, 10 + (i % 5))),
      timed('list', () => store.audit.list({ limit: 50 })),
      timed('filter', () => store.audit.list({ action: 'config.', limit: 50 })),
    ]);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, PACE_MS - (performance.now() - tick))));
  }
  return samples;
}

function report(name: string, samples: Record<string, number[]>): boolean {
  let ok = true;
  for (const [kind, values] of Object.entries(samples)) {
    const p99 = percentile(values, 99);
    const max = Math.max(...values);
    ok &&= p99 <= 100 && max <= 100;
    console.log(
      `  ${name.padEnd(16)} ${kind.padEnd(7)} n=${String(values.length).padStart(5)}  p50 ${percentile(values, 50).toFixed(1).padStart(6)} ms  p99 ${p99.toFixed(1).padStart(6)} ms  max ${max.toFixed(1).padStart(6)} ms`,
    );
  }
  return ok;
}

const { dataSource, drop } = await benchDatabase(DATABASE);
deadline(10 * 60_000, drop);
try {
  let started = performance.now();
  const runner = dataSource.createQueryRunner();
  await runner.query('SELECT setseed(0.42)');
  await runner.query(auditRowsSql(ROWS, 30));
  await runner.query(auditRowsSql(1000, 0, 10));
  await runner.release();
  await dataSource.query('VACUUM ANALYZE audit_log');
  console.log(`loaded ${ROWS} entries older than 30 days and 1000 of the last 10 days in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const store = createStore({
    db: dataSource,
    changes: new ChangeFeed(),
    environmentCap: 10,
    allowlistFile: new AllowlistFile(path.join(mkdtempSync(path.join(os.tmpdir(), 'cp-bench-prune-')), 'allowlist.json')),
  });

  console.log(`the server's audit load: one audited write and two queries every ${PACE_MS} ms`);
  const quiet = report('no prune', await load(store, new Promise((resolve) => setTimeout(resolve, BASELINE_MS))));

  const before = new Date(Date.now() - 20 * 86_400_000).toISOString();
  started = performance.now();
  const prune = run(path.join(PROJECT_ROOT, 'bin/cli'), ['audit-prune', '--before', before, '--yes', '--json'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: benchDatabaseUrl(DATABASE),
      DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'cp-bench-prune-cli-')),
    },
    maxBuffer: 1 << 20,
  });
  const during = await load(store, prune);
  const { stdout } = await prune;
  const seconds = (performance.now() - started) / 1000;
  const { deleted } = JSON.parse(stdout) as { deleted: number };
  console.log(`audit-prune: deleted ${deleted} entries in ${seconds.toFixed(1)} s (${Math.round(deleted / seconds)} entries/s), a process of its own`);
  const met = report('during the prune', during);
  const [{ left }] = (await dataSource.query('SELECT count(*)::int AS left FROM audit_log')) as [{ left: number }];
  console.log(`entries left: ${left} (the 1000 newer, the load's writes and the prune's own entry)`);
  console.log(
    `target "no stall over 100 ms during the prune" (p99 and max of every kind): ${met ? 'met' : 'NOT met'}${quiet ? '' : ' (the load stalls without a prune too)'}`,
  );
} finally {
  await drop();
}
process.exit(0);
