/**
 * How long the server takes from its start (`bin/server`, a process of its own, as `npm start`
 * runs it) to its first healthy `/healthz`: on a new embedded database, on an existing one and on
 * PostgreSQL, against the floor of a Node HTTP server (`node:http` answering 200, started the
 * same way) in the same run. Then as a user starts it: `npm start` (npm's own start included) on
 * an existing embedded database and on PostgreSQL, and the compose service (compose.yaml with the
 * control image provisioning builds, its PostgreSQL service already up): `docker compose up -d
 * control` making a new container, and `docker compose start control` of the kept one. The cases take turns, round after round, so that a drift of the
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
import { spawn, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/config.ts';
import { benchDatabaseUrl, median, scratchBench } from './lib.ts';
import { buildImages, CONTROL_IMAGE, deployment, type Deployment } from '../test/helpers/compose.ts';
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

/** Asks /healthz on `port` every 5 ms until it answers 200; throws once `gone()` says the server is gone. */
async function untilHealthy(port: number, gone: () => boolean, what: string): Promise<void> {
  for (;;) {
    if ((await probe(port)) === 200) return;
    if (gone()) throw new Error(`${what} ended before /healthz answered`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Milliseconds from spawning `command` (in the project's folder, a process group of its own, as a
 * shell starts it) to its first 200 from /healthz; then stops the group (SIGTERM: npm and the
 * server it started) and waits for its exit.
 */
async function startToHealthy(command: string, args: string[], env: Record<string, string>): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(command, args, {
    cwd: PROJECT_ROOT,
    detached: true,
    env: { ...process.env, ...env, PORT: String(port), LOG_LEVEL: 'warning' },
    stdio: 'ignore',
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let gone = false;
  void exited.then(() => (gone = true));
  try {
    await untilHealthy(port, () => gone, command);
    return performance.now() - started;
  } finally {
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
  }
}

/**
 * The compose service as an operator starts it (compose.yaml, the control image provisioning
 * builds, its PostgreSQL service already up): milliseconds from `docker compose <args>` to the
 * first 200 from /healthz; `before` (not timed) puts the service in the state the command starts from.
 */
async function composeToHealthy(deployed: Deployment, port: number, before: string[], args: string[]): Promise<number> {
  await ok(deployed, before);
  const started = performance.now();
  await ok(deployed, args);
  await untilHealthy(port, () => performance.now() - started > 120_000, 'the compose service (120 s)');
  return performance.now() - started;
}

/**
 * The same floor in a container of the control image, started as compose starts the service (host
 * network, an init): milliseconds from `docker run -d` to its first 200; what the engine and the
 * container add before any of the server's own start.
 */
async function floorContainer(name: string): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const run = spawnSync('docker', ['run', '-d', '--name', name, '--init', '--network', 'host', '-e', `PORT=${port}`, CONTROL_IMAGE, 'node', '-e', FLOOR], {
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`docker run exited ${run.status}: ${run.stderr}`);
  await untilHealthy(port, () => performance.now() - started > 60_000, 'the floor container (60 s)');
  return performance.now() - started;
}

async function ok(deployed: Deployment, args: string[]): Promise<void> {
  const result = await deployed.compose(args, 120_000);
  if (result.code !== 0) throw new Error(`docker compose ${args.join(' ')} exited ${result.code}: ${result.stderr}`);
}

const { scratch, cleanup } = await scratchBench('cp_bench_startup');
const composePort = await freePort();
const deployed = await deployment(['compose.yaml'], { PORT: String(composePort), DB_PORT: String(await freePort()), LOG_LEVEL: 'warning' });
try {
  await buildImages();
  await ok(deployed, ['up', '-d', '--wait', 'db']);
  const postgres = { DATA_DIR: path.join(scratch, 'pg'), DATABASE_URL: benchDatabaseUrl('cp_bench_startup') };
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
    ['PostgreSQL (migrated)', () => startToHealthy(SERVER, [], postgres)],
    ['npm start, embedded, existing', () => startToHealthy('npm', ['start'], { DATA_DIR: existing })],
    ['npm start, PostgreSQL', () => startToHealthy('npm', ['start'], postgres)],
    [
      'floor in a container: docker run -d',
      () => {
        const name = `bench-startup-floor-${process.pid}`;
        return floorContainer(name).finally(() => spawnSync('docker', ['rm', '-f', name], { stdio: 'ignore' }));
      },
    ],
    ['compose: up -d (a new container)', () => composeToHealthy(deployed, composePort, ['rm', '-sf', 'control'], ['up', '-d', 'control'])],
    ['compose: start (the container kept)', () => composeToHealthy(deployed, composePort, ['stop', 'control'], ['start', 'control'])],
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
  await deployed.cleanup();
  await cleanup();
}
