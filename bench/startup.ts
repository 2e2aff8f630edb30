/**
 * How long the server takes from its start (`bin/server`, a process of its own, as `npm start`
 * runs it) to its first healthy `/healthz`: on a new embedded database, on an existing one and on
 * PostgreSQL, against the floor of a Node HTTP server (`node:http` answering 200, started the
 * same way) in the same run. The cases take turns, round after round, so that a drift of the
 * machine falls on all of them; medians of N rounds (default 7), after one warm-up round.
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/startup.ts
 *
 * The server is asked every 5 ms, from this process (a refused connection costs it microseconds):
 * the probe must not take the CPU the start needs. (`curl` in a shell loop, the earlier
 * `bench/startup.sh`, used about three quarters of a core here, and its figures were 0.3 s higher.)
 *
 * Makes a scratch DATA_DIR and its own database `cp_bench_startup` on the provisioned PostgreSQL,
 * removes both at the end; aborts after 10 minutes.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/config.ts';
import { benchDatabaseUrl, median, scratchBench } from './lib.ts';
import { freePort } from '../test/helpers/server.ts';

const N = Math.max(3, Number(process.env.N ?? 7));
const SERVER = path.join(PROJECT_ROOT, 'bin/server');
const FLOOR = `require('node:http').createServer((_, res) => res.end('ok')).listen(Number(process.env.PORT), '127.0.0.1')`;

/** Status of one GET /healthz (0 when nothing answered), on a connection of its own. */
function probe(port: number): Promise<number> {
  return new Promise((resolve) => {
    const request = http.get({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', () => resolve(0));
  });
}

/** Milliseconds from spawning `command` to its first 200 from /healthz; then stops it (SIGTERM) and waits for its exit. */
async function startToHealthy(command: string, args: string[], env: Record<string, string>): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(command, args, { env: { ...process.env, ...env, PORT: String(port), LOG_LEVEL: 'warning' }, stdio: 'ignore' });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let gone = false;
  void exited.then(() => (gone = true));
  try {
    for (;;) {
      if ((await probe(port)) === 200) return performance.now() - started;
      if (gone) throw new Error(`${command} exited before it answered /healthz`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

const { scratch, cleanup } = await scratchBench('cp_bench_startup');
try {
  const fresh = path.join(scratch, 'fresh');
  const existing = path.join(scratch, 'existing');
  const cases: [string, () => Promise<number>][] = [
    ['floor: a node:http server', () => startToHealthy(process.execPath, ['-e', FLOOR], {})],
    [
      'embedded database, new',
      () => {
        rmSync(fresh, { recursive: true, force: true });
        return startToHealthy(SERVER, [], { DATA_DIR: fresh });
      },
    ],
    ['embedded database, existing', () => startToHealthy(SERVER, [], { DATA_DIR: existing })],
    ['PostgreSQL (migrated)', () => startToHealthy(SERVER, [], { DATA_DIR: path.join(scratch, 'pg'), DATABASE_URL: benchDatabaseUrl('cp_bench_startup') })],
  ];
  const times = cases.map((): number[] => []);
  for (let round = 0; round <= N; round++)
    for (const [index, [, run]] of cases.entries()) {
      const took = await run();
      if (round > 0) times[index]!.push(took);
    }
  const floor = median(times[0]!);
  console.log(`start to the first healthy /healthz, ms: median (lowest–highest) of ${N} rounds; Node ${process.version}`);
  for (const [index, [name]] of cases.entries()) {
    const each = times[index]!;
    const ratio = index === 0 ? '' : `  ${(median(each) / floor).toFixed(1)}× the floor`;
    console.log(`  ${name.padEnd(30)} ${median(each).toFixed(0).padStart(5)}  (${Math.min(...each).toFixed(0)}–${Math.max(...each).toFixed(0)})${ratio}`);
  }
} finally {
  await cleanup();
}
