/**
 * Where the test suite's time goes: each test file's wall time and the machine's busy CPU time
 * while it ran (every process: jest, the servers and browsers it starts, Docker, the containers,
 * PostgreSQL), one file at a time (TEST_LANES_WORKERS=1) so that nothing else runs beside a file.
 * Prints every file, most CPU first, each lane's totals, and the whole suite's CPU divided by the
 * machine's cores: the shortest time the lanes could take side by side, were every core kept busy.
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/suite-cpu.ts
 *
 * About 22 minutes on a 2-core machine (the lanes' own times added up). Needs what `npm test`
 * provisions. Run it on a quiet machine: anything else running is counted too.
 *
 * The same file is the jest reporter that does the counting (scripts/test-lanes.sh passes it to
 * every lane's jest run when TEST_LANES_REPORTER names it): it reads /proc/stat when a file
 * starts and when its result comes, and appends one JSON line per file to SUITE_CPU_LOG.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..');
/** Linux's USER_HZ: /proc/stat counts in hundredths of a second. */
const TICKS_PER_SECOND = 100;

interface Mark {
  at: number;
  busy: number;
}

interface FileCpu {
  lane: string;
  file: string;
  wallSeconds: number;
  cpuSeconds: number;
}

/** The machine's busy time so far (user, nice, system, irq, softirq, steal), in seconds. */
function mark(): Mark {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/);
  const [user, nice, system, , , irq, softirq, steal] = fields.map(Number);
  return { at: performance.now(), busy: (user! + nice! + system! + irq! + softirq! + steal!) / TICKS_PER_SECOND };
}

/** The jest reporter: one line per file to SUITE_CPU_LOG, labelled with SUITE_CPU_LANE. */
export default class SuiteCpuReporter {
  private readonly started = new Map<string, Mark>();
  private readonly log = process.env.SUITE_CPU_LOG ?? path.join(os.tmpdir(), 'suite-cpu.jsonl');
  private readonly lane = process.env.SUITE_CPU_LANE ?? 'jest';

  onTestFileStart(test: { path: string }): void {
    this.started.set(test.path, mark());
  }

  onTestFileResult(test: { path: string }): void {
    const start = this.started.get(test.path);
    if (!start) return;
    const end = mark();
    const row: FileCpu = {
      lane: this.lane,
      file: path.relative(PROJECT_ROOT, test.path),
      wallSeconds: (end.at - start.at) / 1000,
      cpuSeconds: end.busy - start.busy,
    };
    appendFileSync(this.log, `${JSON.stringify(row)}\n`);
  }
}

/** The table: every file, most CPU first, then each lane's totals and the whole suite's. */
function report(rows: FileCpu[]): string {
  const cores = os.availableParallelism();
  const named = rows.toSorted((a, b) => b.cpuSeconds - a.cpuSeconds).map((row) => ({ ...row, name: `${row.file} (${row.lane})` }));
  const width = Math.max(48, ...named.map((row) => row.name.length));
  const line = (name: string, wall: number, cpu: number) =>
    `${name.padEnd(width)} ${wall.toFixed(1).padStart(8)} ${cpu.toFixed(1).padStart(8)} ${(cpu / wall).toFixed(2).padStart(6)}`;
  const out = [`${'file'.padEnd(width)} ${'wall s'.padStart(8)} ${'CPU s'.padStart(8)} ${'cores'.padStart(6)}`];
  for (const row of named) out.push(line(row.name, row.wallSeconds, row.cpuSeconds));
  const sum = (of: FileCpu[], key: 'wallSeconds' | 'cpuSeconds') => of.reduce((total, row) => total + row[key], 0);
  out.push('');
  for (const lane of [...new Set(rows.map((row) => row.lane))]) {
    const of = rows.filter((row) => row.lane === lane);
    out.push(line(`lane ${lane} (${of.length} files)`, sum(of, 'wallSeconds'), sum(of, 'cpuSeconds')));
  }
  out.push(line(`all lanes, one after another (${rows.length} files)`, sum(rows, 'wallSeconds'), sum(rows, 'cpuSeconds')));
  out.push(`the suite's CPU on ${cores} cores, every core busy: ${(sum(rows, 'cpuSeconds') / cores).toFixed(0)} s at the least`);
  return out.join('\n');
}

if (import.meta.main) {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'suite-cpu-'));
  const log = path.join(scratch, 'files.jsonl');
  try {
    const run = spawnSync('bash', [path.join(PROJECT_ROOT, 'scripts/test-lanes.sh')], {
      cwd: PROJECT_ROOT,
      stdio: 'inherit',
      timeout: 90 * 60_000,
      env: { ...process.env, TEST_LANES_WORKERS: '1', TEST_LANES_REPORTER: import.meta.filename, SUITE_CPU_LOG: log },
    });
    const rows = readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((text) => JSON.parse(text) as FileCpu);
    console.log(`\n${report(rows)}`);
    if (run.status !== 0) {
      console.error(`suite-cpu: the lanes exited ${run.status ?? run.signal}; the figures above are of the files that ran`);
      process.exitCode = 1;
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
