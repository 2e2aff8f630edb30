/**
 * Replicas behind the balancer (issue 23): two replicas of the deployed server (`bin/server.ts`,
 * every part, default lease timings) on one PostgreSQL database behind HAProxy as
 * compose.replicas.yaml runs it (classroom-base/haproxy:2.6, deploy/haproxy.cfg, the host's
 * network), and one student's workspace running (the test image's stand-in editor).
 *
 * 1. Requests failed during a leader's end, under steady proxied load through the balancer:
 *    CONCURRENCY (16) loops, each sending `GET /u/<slug>/` (the editor, through the proxy) one after
 *    another for SECONDS (12) per round; a third of the way in, the leader is SIGKILLed (case
 *    `killed`) or SIGTERMed (case `stopped`), and started again on its port after the round. Each
 *    response says which replica answered (a copy of deploy/haproxy.cfg with one line more:
 *    `http-response set-header X-Served-By %s`), so that a failure is told apart: a request the
 *    balancer could send nowhere, or one the killed replica held. ROUNDS (3) rounds per case.
 *    Goal: 0 failed requests that were not on the killed replica.
 * 2. Throughput: wrk (1 thread, 32 connections, WRK_SECONDS (10) s, 3 rounds, medians) on the same
 *    URL through the balancer with both replicas, with one (the other stopped), and on one replica
 *    directly (no balancer). Goal: two replicas ≥ 1.8× one, on a machine with the cores for it.
 *
 * Needs the provisioned PostgreSQL and Docker Engine, the test image and classroom-base/haproxy:2.6
 * (`npm test` once), and wrk (Debian's). Everything it creates (the database cp_bench_balancer, the
 * processes, the balancer's container, the data directory, the workspace) is removed at the end; it
 * aborts after 15 minutes.
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/balancer.ts   (ROUNDS, SECONDS, CONCURRENCY, CASES=killed,stopped, WRK_SECONDS, PARTS=failover,throughput)
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import { ChangeFeed } from '../src/db/changes.ts';
import { createStore } from '../src/store/index.ts';
import { benchDatabaseUrl, docker, freePort, median, percentile, replicaBench, signedSessionCookie, startReplica, type Replica } from './lib.ts';

const DATABASE = 'cp_bench_balancer';
const HAPROXY_IMAGE = 'classroom-base/haproxy:2.6';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.SECONDS ?? 12);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);
const WRK_SECONDS = Number(process.env.WRK_SECONDS ?? 10);
const CASES = (process.env.CASES ?? 'killed,stopped').split(',') as ('killed' | 'stopped')[];
const PARTS = new Set((process.env.PARTS ?? 'failover,throughput').split(','));
const SESSION_SECRET = randomBytes(24).toString('hex');
const METRICS_TOKEN = randomBytes(24).toString('hex');

/** One request's outcome: when it was sent (ms since the round began), how long it took, and who answered. */
interface Outcome {
  at: number;
  ms: number;
  ok: boolean;
  servedBy: string;
  failure?: string;
}

async function isLeader(replica: Replica): Promise<boolean> {
  const text = await fetch(`${replica.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` }, signal: AbortSignal.timeout(1000) })
    .then((response) => response.text())
    .catch(() => '');
  return /^leader 1$/m.test(text);
}

/** Requests one after another on CONCURRENCY loops until `ms` have passed; calls `midway` a third of the way in. */
async function steadyLoad(url: string, cookie: string, ms: number, midway: () => Promise<void>): Promise<Outcome[]> {
  const agent = new Agent({ connections: CONCURRENCY });
  const outcomes: Outcome[] = [];
  const began = performance.now();
  const loop = async () => {
    // Bounded by time, and by count (a request takes at least a round trip).
    for (let sent = 0; performance.now() - began < ms && sent < 1_000_000; sent++) {
      const at = performance.now() - began;
      try {
        const response = await fetch(url, { headers: { cookie }, dispatcher: agent, signal: AbortSignal.timeout(10_000) } as RequestInit);
        await response.arrayBuffer();
        outcomes.push({ at, ms: performance.now() - began - at, ok: response.status === 200, servedBy: response.headers.get('x-served-by') ?? '-' });
        if (response.status !== 200) outcomes.at(-1)!.failure = `status ${response.status}`;
      } catch (error) {
        outcomes.push({ at, ms: performance.now() - began - at, ok: false, servedBy: '-', failure: String((error as Error).cause ?? error) });
      }
    }
  };
  const loops = Array.from({ length: CONCURRENCY }, loop);
  await sleep(ms / 3);
  await midway();
  await Promise.all(loops);
  await agent.close();
  return outcomes;
}

/** wrk against `url` (1 thread, 32 connections): requests per second. */
async function wrk(url: string, cookie: string): Promise<number> {
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn('wrk', ['-t1', '-c32', `-d${WRK_SECONDS}s`, '--timeout', '5s', '-H', `cookie: ${cookie}`, url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (text += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
  });
  const rate = /Requests\/sec:\s+([\d.]+)/.exec(output);
  if (!rate) throw new Error(`no rate from wrk: ${output}`);
  if (/Non-2xx or 3xx responses/.test(output)) throw new Error(`wrk met failed responses: ${output}`);
  return Number(rate[1]);
}

async function main(): Promise<void> {
  const { controlPlaneId, dataSource, dataDir, cleanups, cleanup } = await replicaBench(DATABASE, 15);
  const email = `student-${randomBytes(3).toString('hex')}@school.test`;
  writeFileSync(path.join(dataDir, 'allowlist.json'), JSON.stringify({ entries: [email] }));
  const running = new Set<Replica>();
  cleanups.push(async () => running.forEach((replica) => replica.child.kill('SIGKILL')));

  const [lbPort, portA, portB] = [await freePort(), await freePort(), await freePort()];
  const start = async (port: number): Promise<Replica> => {
    const replica = await startReplica(
      {
        DATABASE_URL: benchDatabaseUrl(DATABASE),
        DATA_DIR: dataDir,
        SESSION_SECRET,
        METRICS_TOKEN,
        CONTROL_PLANE_ID: controlPlaneId,
        PORT: String(port),
        TRUST_PROXY: 'true',
      },
      (candidate) =>
        fetch(`${candidate.url}/healthz`).then(
          (response) => response.ok,
          () => false,
        ),
    );
    running.add(replica);
    return replica;
  };
  const stop = async (replica: Replica, signal: NodeJS.Signals) => {
    const exited = new Promise((resolve) => replica.child.once('exit', resolve));
    replica.child.kill(signal);
    await exited;
    running.delete(replica);
  };

  // The shipped configuration, and which replica answered.
  const config = readFileSync(path.join(import.meta.dirname, '../deploy/haproxy.cfg'), 'utf8').replace(
    'backend replicas\n',
    'backend replicas\n    http-response set-header X-Served-By %s\n',
  );
  const configFile = path.join(dataDir, 'haproxy.cfg');
  writeFileSync(configFile, config);
  const lb = await docker.createContainer({
    Image: HAPROXY_IMAGE,
    name: `${controlPlaneId}-lb`,
    Env: ['LB_HOST=127.0.0.1', `LB_PORT=${lbPort}`, `CONTROL_A_PORT=${portA}`, `CONTROL_B_PORT=${portB}`],
    HostConfig: { NetworkMode: 'host', Binds: [`${configFile}:/usr/local/etc/haproxy/haproxy.cfg:ro`] },
  });
  cleanups.push(() => lb.remove({ force: true }));
  await lb.start();
  const lbUrl = `http://127.0.0.1:${lbPort}`;

  try {
    const replicas: Record<'a' | 'b', Replica> = { a: await start(portA), b: await start(portB) };
    const store = createStore({ db: dataSource, changes: new ChangeFeed(), environmentCap: 10, allowlistFile: AllowlistFile.in(dataDir) });
    const { user, workspace } = await store.users.create({ email });
    await store.workspaces.open(workspace.id);
    for (const until = Date.now() + 60_000; (await store.workspaces.get(workspace.id))?.status.observedState !== 'running'; await sleep(100)) {
      if (Date.now() > until) throw new Error('the workspace did not run within 60 s');
    }
    const cookie = await signedSessionCookie(dataSource, user.id, SESSION_SECRET);
    const url = `${lbUrl}/u/${workspace.slug}/`;
    /** Both replicas up behind the balancer (its checks: 2 in a row, a second apart). */
    const bothServing = async () => {
      const seen = new Set<string>();
      for (const until = Date.now() + 30_000; seen.size < 2;) {
        if (Date.now() > until) throw new Error(`the balancer sends to ${[...seen].join(', ') || 'nobody'} only`);
        const response = await fetch(url, { headers: { cookie } });
        await response.arrayBuffer();
        if (response.ok) seen.add(response.headers.get('x-served-by') ?? '');
      }
    };
    await bothServing();
    console.log(
      `balancer: 2 replicas of bin/server.ts on PostgreSQL behind HAProxy (${HAPROXY_IMAGE}, deploy/haproxy.cfg); ${os.cpus().length} CPUs; GET /u/<slug>/ (the stand-in editor through the proxy)`,
    );

    if (PARTS.has('failover')) {
      for (const kind of CASES) {
        const failedElsewhere: number[] = [];
        for (let round = 1; round <= ROUNDS; round++) {
          let leader: 'a' | 'b' | undefined;
          for (const until = Date.now() + 30_000; !leader; await sleep(50)) {
            if (Date.now() > until) throw new Error('no leader');
            for (const name of ['a', 'b'] as const) if (await isLeader(replicas[name])) leader = name;
          }
          const outcomes = await steadyLoad(url, cookie, SECONDS * 1000, () => stop(replicas[leader], kind === 'killed' ? 'SIGKILL' : 'SIGTERM'));
          replicas[leader] = await start(leader === 'a' ? portA : portB);
          await bothServing();
          const failed = outcomes.filter((outcome) => !outcome.ok);
          // Which replica a failure was on: the balancer says it of an answer; a request with no
          // answer at all was on a connection that the killed replica held.
          const onOther = failed.filter((outcome) => outcome.servedBy !== '-' && outcome.servedBy !== leader);
          failedElsewhere.push(onOther.length);
          const third = (SECONDS * 1000) / 3;
          const before = outcomes.filter((outcome) => outcome.at < third).map((outcome) => outcome.ms);
          const after = outcomes.filter((outcome) => outcome.at >= third && outcome.at < third + 3000).map((outcome) => outcome.ms);
          const kinds = [...new Set(failed.map((outcome) => `${outcome.servedBy}: ${outcome.failure}`))].slice(0, 4).join('; ');
          console.log(
            `  ${kind} ${round}: leader ${leader} ${kind === 'killed' ? 'SIGKILLed' : 'SIGTERMed'} a third of the way in; ${outcomes.length} requests, ${failed.length} failed (${onOther.length} not on it)${kinds ? `: ${kinds}` : ''}; p99 before ${percentile(before, 99).toFixed(1)} ms, in the 3 s after ${percentile(after, 99).toFixed(1)} ms`,
          );
        }
        console.log(
          `${kind}: requests failed that were not on the ended replica: ${failedElsewhere.join(', ')} (goal 0: ${failedElsewhere.every((count) => count === 0) ? 'met' : 'NOT met'})`,
        );
      }
    }

    if (PARTS.has('throughput')) {
      const rounds: { two: number; one: number; direct: number }[] = [];
      for (let round = 0; round < 3; round++) {
        const two = await wrk(url, cookie);
        const direct = await wrk(`${replicas.a.url}/u/${workspace.slug}/`, cookie);
        await stop(replicas.b, 'SIGTERM');
        // The balancer takes it out after two failed checks; until then a refused connection goes to a.
        const one = await wrk(url, cookie);
        replicas.b = await start(portB);
        await bothServing();
        rounds.push({ two, one, direct });
        console.log(`  throughput ${round + 1}: two replicas ${two.toFixed(0)} req/s, one ${one.toFixed(0)}, one directly (no balancer) ${direct.toFixed(0)}`);
      }
      const [two, one, direct] = [median(rounds.map((r) => r.two)), median(rounds.map((r) => r.one)), median(rounds.map((r) => r.direct))];
      console.log(
        `throughput (medians of 3, wrk -t1 -c32 ${WRK_SECONDS} s): two replicas ${two.toFixed(0)} req/s, one ${one.toFixed(0)} req/s: ${(two / one).toFixed(2)}× (goal ≥ 1.8× on a machine with the cores: ${two / one >= 1.8 ? 'met' : 'NOT met'}); one replica without the balancer ${direct.toFixed(0)} req/s`,
      );
    }
  } finally {
    await cleanup();
  }
}

await main();
process.exit(0);
