/**
 * The simulator's NetworkTables through the control plane (`/u/<slug>/.cp/nt4/nt/<client>`, the
 * student's session, the proxy's admission) against straight to the simulator's container
 * (`ws://<address>:5810/nt/<client>`), in the same run, the control plane in a child process of its
 * own with its controllers:
 *
 * - Message rate: the stand-in floods a subscribed client with pose updates as fast as it takes
 *   them (SIM_NT4_FLOOD); messages received per second over SECONDS (5) after 1 s, ROUNDS (3)
 *   rounds alternating; medians. Target ≥ 0.8× direct.
 * - Added latency: NetworkTables' own round trip, time synchronisation ([-1, 0, type, client time]
 *   answered with the server's time), one in flight, PINGS (2,000) each way; p50, p95, p99, and the
 *   control plane's p95 minus direct's. Target < 2 ms.
 *
 * Needs the provisioned PostgreSQL and Docker Engine and the test image. Everything it makes is
 * removed at the end. Run: PATH=$PWD/node_modules/.bin:$PATH node bench/nt4.ts
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeMulti, encode } from '@msgpack/msgpack';
import WebSocket from 'ws';
import {
  benchDatabase,
  CONTROL_PLANE_LABEL,
  deadline,
  dropBenchDatabase,
  median,
  percentile,
  removeLabelled,
  serveControlPlane,
  signedSessionCookie,
} from './lib.ts';

const DATABASE = 'cp_bench_nt4';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.RATE_SECONDS ?? 5);
const PINGS = Number(process.env.PINGS ?? 2000);
const PROTOCOL = 'v4.1.networktables.first.wpi.edu';

interface Ready {
  type: 'ready';
  origin: string;
  slug: string;
  cookie: string;
  /** The simulator's NetworkTables, straight. */
  direct: string;
}

async function serve(): Promise<void> {
  const { plane, dataSource, secret, stop } = await serveControlPlane({ SIM_COMMAND: 'SIM_COMPILE_MS=100 SIM_BOOT_MS=100 SIM_NT4_FLOOD=1 node /app/sim.mjs' }, [
    'changes',
    'activity',
    'http',
    'workspaces',
    'runs',
    'stats',
  ]);
  process.on('message', (message: { type: string }) => message.type === 'stop' && void stop());
  const { user, workspace } = await plane.store.users.create({ email: `nt4-${randomBytes(3).toString('hex')}@school.test` });
  const cookie = await signedSessionCookie(dataSource, user.id, secret);
  await plane.store.workspaces.open(workspace.id);
  for (const until = Date.now() + 60_000; Date.now() < until; await sleep(50)) {
    if ((await plane.store.workspaces.get(workspace.id))?.status.editorEndpoint) break;
  }
  const run = await plane.store.runs.create(workspace.id);
  for (const until = Date.now() + 60_000; Date.now() < until; await sleep(50)) {
    const current = await plane.store.runs.get(run.id);
    if (current?.status.phase === 'running' && current.status.simEndpoint) {
      process.send!({
        type: 'ready',
        origin: plane.http!.url,
        slug: workspace.slug,
        cookie,
        direct: `ws://${current.status.simEndpoint}/nt/bench`,
      } satisfies Ready);
      return;
    }
  }
  process.send!({ type: 'failed' });
}

/** A NetworkTables connection: through the control plane (with the student's cookie and origin) or straight. */
function connect(ready: Ready, via: 'proxy' | 'direct'): Promise<WebSocket> {
  const socket =
    via === 'direct'
      ? new WebSocket(ready.direct, [PROTOCOL])
      : new WebSocket(`${ready.origin.replace('http', 'ws')}/u/${ready.slug}/.cp/nt4/nt/bench`, [PROTOCOL], {
          headers: { cookie: ready.cookie, origin: ready.origin },
        });
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, answer) => reject(new Error(`refused ${answer.statusCode}`)));
  });
}

/** Value messages per second a flooding simulator gets to a subscribed client. */
async function rate(ready: Ready, via: 'proxy' | 'direct'): Promise<number> {
  const socket = await connect(ready, via);
  let counting = false;
  let count = 0;
  socket.on('message', (data: Buffer, binary: boolean) => {
    if (!binary || !counting) return;
    for (const _message of decodeMulti(data)) count++;
  });
  socket.send(JSON.stringify([{ method: 'subscribe', params: { topics: ['/SmartDashboard/Field/Robot'], subuid: 1, options: {} } }]));
  await sleep(1000);
  counting = true;
  const started = performance.now();
  await sleep(SECONDS * 1000);
  counting = false;
  const perSecond = count / ((performance.now() - started) / 1000);
  socket.close();
  await sleep(300);
  return perSecond;
}

/** Round trips of NetworkTables' time synchronisation, one in flight (ms each). */
async function roundTrips(ready: Ready, via: 'proxy' | 'direct'): Promise<number[]> {
  const socket = await connect(ready, via);
  const times: number[] = [];
  let pending: ((value: void) => void) | undefined;
  socket.on('message', (data: Buffer, binary: boolean) => {
    if (!binary) return;
    for (const message of decodeMulti(data) as Iterable<unknown[]>) if (message[0] === -1) pending?.();
  });
  for (let i = 0; i < PINGS; i++) {
    const started = performance.now();
    const answered = new Promise<void>((resolve) => (pending = resolve));
    socket.send(encode([-1, 0, 2, Math.round(started * 1000)]));
    await answered;
    times.push(performance.now() - started);
  }
  socket.close();
  return times;
}

async function main(): Promise<void> {
  await dropBenchDatabase(DATABASE);
  const { drop } = await benchDatabase(DATABASE);
  const controlPlaneId = `bench-${randomBytes(4).toString('hex')}`;
  const child: ChildProcess = fork(new URL(import.meta.url).pathname, ['serve'], {
    env: { ...process.env, BENCH_DATABASE: DATABASE, BENCH_CONTROL_PLANE_ID: controlPlaneId, BENCH_SESSION_SECRET: randomBytes(24).toString('hex') },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const cleanup = async () => {
    child.send({ type: 'stop' });
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    await removeLabelled(CONTROL_PLANE_LABEL, controlPlaneId);
    await drop();
  };
  deadline(10 * 60_000, cleanup);
  try {
    const ready = await new Promise<Ready | { type: 'failed' }>((resolve) => child.once('message', resolve));
    if (ready.type !== 'ready') throw new Error('the run did not start');
    const rates: Record<'proxy' | 'direct', number[]> = { proxy: [], direct: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const via of (round % 2 === 0 ? ['direct', 'proxy'] : ['proxy', 'direct']) as ('proxy' | 'direct')[]) rates[via].push(await rate(ready, via));
    }
    const [direct, proxied] = [median(rates.direct), median(rates.proxy)];
    console.log(
      `message rate (flood, median of ${ROUNDS}): direct ${direct.toFixed(0)}/s, through the control plane ${proxied.toFixed(0)}/s: ${(proxied / direct).toFixed(2)}× (target ≥ 0.8×)`,
    );
    // Warm both, then measure alternately.
    await roundTrips(ready, 'direct');
    await roundTrips(ready, 'proxy');
    const straight = await roundTrips(ready, 'direct');
    const through = await roundTrips(ready, 'proxy');
    const p = (values: number[], at: number) => percentile(values, at).toFixed(3);
    console.log(`round trip (time sync, ${PINGS} each): direct p50 ${p(straight, 50)} p95 ${p(straight, 95)} p99 ${p(straight, 99)} ms`);
    console.log(`                                 through the control plane p50 ${p(through, 50)} p95 ${p(through, 95)} p99 ${p(through, 99)} ms`);
    console.log(`added latency p95: ${(percentile(through, 95) - percentile(straight, 95)).toFixed(3)} ms (target < 2 ms)`);
  } finally {
    await cleanup();
  }
}

if (process.argv[2] === 'serve') await serve();
else await main();
