/**
 * How long an operator waits for a CLI command: `cli --help`, a command that reads only the
 * allowlist file (`allowlist list`), a read of the database (`users list`) and a write
 * (`cap set`), each as the program runs it (`bin/cli`, a process of its own), on the embedded
 * database alone, on the embedded database while a server holds it (the CLI joins it), and on
 * PostgreSQL; against the floor of any Node program here (`node -e 0` on the pinned Node) in the
 * same run; then `npx cli users list` as an operator types it in the project's folder. Medians of
 * REPS runs (default 7) after one warm-up run of each.
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/cli.ts
 *
 * Makes a scratch DATA_DIR and its own database `cp_bench_cli` on the provisioned PostgreSQL and
 * removes both at the end; aborts after 10 minutes.
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/config.ts';
import { benchDatabaseUrl, median, scratchBench } from './lib.ts';
import { freePort } from '../test/helpers/server.ts';

const REPS = Math.max(3, Number(process.env.REPS ?? 7));
const CLI = path.join(PROJECT_ROOT, 'bin/cli');

/** Seconds a command takes, as a process of its own (it must succeed). */
function seconds(command: string, args: string[], env: Record<string, string>): number {
  const started = performance.now();
  const result = spawnSync(command, args, { cwd: PROJECT_ROOT, env: { ...process.env, ...env }, encoding: 'utf8' });
  const elapsed = (performance.now() - started) / 1000;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return elapsed;
}

/** The median of REPS runs after one warm-up. */
function timed(command: string, args: string[], env: Record<string, string>): number {
  seconds(command, args, env);
  return median(Array.from({ length: REPS }, () => seconds(command, args, env)));
}

const { scratch, cleanup } = await scratchBench('cp_bench_cli');
let server: ReturnType<typeof spawn> | undefined;
try {
  const floor = timed(process.execPath, ['-e', '0'], {});
  console.log(`floor: node -e 0 (Node ${process.version}) ${floor.toFixed(2)} s; ${REPS} runs each, medians\n`);
  const embedded = { DATA_DIR: path.join(scratch, 'embedded') };
  const postgres = { DATA_DIR: path.join(scratch, 'postgres'), DATABASE_URL: benchDatabaseUrl('cp_bench_cli') };
  // A database with its migrations applied, as an operator's is.
  seconds(CLI, ['users', 'list'], embedded);
  seconds(CLI, ['users', 'list'], postgres);
  const cases: [string, string[]][] = [
    ['cli --help', ['--help']],
    ['cli allowlist list (the file only)', ['allowlist', 'list']],
    ['cli users list (a read)', ['users', 'list']],
    ['cli cap set 12 (a write)', ['cap', 'set', '12']],
  ];
  const report = (where: string, env: Record<string, string>) => {
    console.log(where);
    for (const [name, args] of cases) {
      const took = timed(CLI, args, env);
      console.log(`  ${name.padEnd(38)} ${took.toFixed(2).padStart(5)} s  (${(took / floor).toFixed(1).padStart(5)}× the floor)`);
    }
  };
  report('embedded database, no server', embedded);
  report('PostgreSQL', postgres);
  // As an operator types it in the project's folder: npx finds bin/cli, npm's own start included.
  console.log('npx cli users list (a read), as typed in the project');
  for (const [where, env] of [
    ['embedded database, no server', embedded],
    ['PostgreSQL', postgres],
  ] as const) {
    const took = timed('npx', ['cli', 'users', 'list'], env);
    console.log(`  ${where.padEnd(38)} ${took.toFixed(2).padStart(5)} s  (${(took / floor).toFixed(1).padStart(5)}× the floor)`);
  }
  // A server holding the embedded database: the CLI joins it through its port.
  const port = await freePort();
  server = spawn(path.join(PROJECT_ROOT, 'bin/server'), [], {
    env: { ...process.env, ...embedded, PORT: String(port), LOG_LEVEL: 'warning' },
    stdio: 'ignore',
  });
  for (let ready = false; !ready;) {
    ready = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (answer) => answer.ok,
      () => false,
    );
    if (!ready) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  report('embedded database, joined while a server holds it', embedded);
} finally {
  server?.kill('SIGTERM');
  if (server) await new Promise((resolve) => server!.once('exit', resolve));
  await cleanup();
}
