/**
 * Revocation fan-out (issue 23): how soon a sign-out on one replica ends a student's editor
 * WebSockets on every replica. Two replicas of the deployed server (`bin/server.ts`, every part) on
 * one PostgreSQL database, data directory and session secret; one student's workspace running (the
 * test image's echo server); each round opens TUNNELS (50) WebSockets with a fresh session, half
 * through each replica, checks that each echoes, signs the session out through the first replica
 * and measures, for each tunnel, the time from the sign-out request to its close.
 *
 * - ROUNDS (10) rounds as deployed: the other replica hears the sign-out by NOTIFY.
 * - CUT_ROUNDS (5) rounds with the other replica's LISTEN connection cut (pg_terminate_backend) just
 *   before the sign-out: its tunnels end when the listener comes back and it checks every open
 *   tunnel again (the resync bound: the listener's first reconnect waits 250 ms).
 *
 * Prints p50, p99 and max of the close times, per kind, and which replica's tunnels they were.
 * Target: p99 ≤ 1 s. Needs the provisioned PostgreSQL and Docker Engine and the test image (`npm
 * test` once). Everything it creates is removed at the end; it aborts after 10 minutes.
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/revocation.ts   (ROUNDS=…, CUT_ROUNDS=…, TUNNELS=…)
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import { ChangeFeed } from '../src/db/changes.ts';
import { createStore } from '../src/store/index.ts';
import { benchDatabaseUrl, median, percentile, replicaBench, signedSessionCookie, startReplica, type Replica } from './lib.ts';

const DATABASE = 'cp_bench_revocation';
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const CUT_ROUNDS = Number(process.env.CUT_ROUNDS ?? 5);
const TUNNELS = Number(process.env.TUNNELS ?? 50);
const SESSION_SECRET = randomBytes(24).toString('hex');

/** Opens a WebSocket to `url` and resolves once it has echoed one message. */
async function openEchoing(url: string, cookie: string, origin: string): Promise<WebSocket> {
  const socket = new WebSocket(url, { headers: { cookie, origin } });
  await new Promise((resolve, reject) => (socket.once('open', resolve), socket.once('error', reject)));
  await new Promise((resolve) => (socket.once('message', resolve), socket.send('ping')));
  return socket;
}

async function main(): Promise<void> {
  const { controlPlaneId, dataSource, dataDir, cleanups, cleanup } = await replicaBench(DATABASE, 10);
  const email = `student-${randomBytes(3).toString('hex')}@school.test`;
  writeFileSync(path.join(dataDir, 'allowlist.json'), JSON.stringify({ entries: [email] }));
  const replicas: Replica[] = [];
  cleanups.push(async () => replicas.forEach((replica) => replica.child.kill('SIGKILL')));

  const start = async (): Promise<Replica> => {
    const replica = await startReplica(
      { DATABASE_URL: benchDatabaseUrl(DATABASE), DATA_DIR: dataDir, SESSION_SECRET, CONTROL_PLANE_ID: controlPlaneId },
      (candidate) =>
        fetch(`${candidate.url}/healthz`).then(
          (response) => response.ok,
          () => false,
        ),
    );
    replicas.push(replica);
    return replica;
  };

  try {
    const [a, b] = [await start(), await start()];
    const store = createStore({ db: dataSource, changes: new ChangeFeed(), environmentCap: 10, allowlistFile: AllowlistFile.in(dataDir) });
    const { user, workspace } = await store.users.create({ email });
    await store.workspaces.open(workspace.id);
    const until = Date.now() + 60_000;
    while ((await store.workspaces.get(workspace.id))?.status.observedState !== 'running') {
      if (Date.now() > until) throw new Error('the workspace did not run within 60 s');
      await sleep(100);
    }
    console.log(`revocation: 2 replicas of bin/server.ts on PostgreSQL; ${TUNNELS} editor WebSockets per round, half through each; sign-out through the first`);
    const results: Record<'notified' | 'listener cut', { a: number[]; b: number[] }> = { notified: { a: [], b: [] }, 'listener cut': { a: [], b: [] } };
    for (let round = 0; round < ROUNDS + CUT_ROUNDS; round++) {
      const kind = round < ROUNDS ? 'notified' : 'listener cut';
      const cookie = await signedSessionCookie(dataSource, user.id, SESSION_SECRET);
      const sockets = await Promise.all(
        Array.from({ length: TUNNELS }, (_, i) => {
          const replica = i % 2 === 0 ? a : b;
          return openEchoing(`${replica.url.replace('http', 'ws')}/u/${workspace.slug}/echo`, cookie, replica.url).then((socket) => ({
            socket,
            on: replica === a ? ('a' as const) : ('b' as const),
          }));
        }),
      );
      if (kind === 'listener cut') {
        // B's LISTEN connection (the only one on this database besides A's: cut both; A publishes its own sign-out in process).
        await dataSource.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()",
        );
      }
      const signedOutAt = performance.now();
      const closed = sockets.map(
        ({ socket, on }) =>
          new Promise<{ on: 'a' | 'b'; ms: number }>((resolve) => socket.once('close', () => resolve({ on, ms: performance.now() - signedOutAt }))),
      );
      const out = await fetch(`${a.url}/auth/sign-out`, { method: 'POST', headers: { cookie, origin: a.url }, redirect: 'manual' });
      if (out.status !== 303) throw new Error(`sign-out answered ${out.status}`);
      const times = await Promise.race([
        Promise.all(closed),
        sleep(30_000).then(() => {
          throw new Error('tunnels still open 30 s after the sign-out');
        }),
      ]);
      for (const { on, ms } of times) results[kind][on].push(ms);
      console.log(
        `  round ${round + 1} (${kind}): closed after p50 ${median(times.map((t) => t.ms)).toFixed(0)} ms, max ${Math.max(...times.map((t) => t.ms)).toFixed(0)} ms`,
      );
    }
    for (const [kind, { a: onA, b: onB }] of Object.entries(results)) {
      if (onA.length + onB.length === 0) continue;
      const all = [...onA, ...onB];
      const line = (values: number[]) =>
        `p50 ${median(values).toFixed(0)} ms, p99 ${percentile(values, 99).toFixed(0)} ms, max ${Math.max(...values).toFixed(0)} ms`;
      console.log(`${kind}: all ${all.length}: ${line(all)} (target p99 ≤ 1000 ms: ${percentile(all, 99) <= 1000 ? 'met' : 'NOT met'})`);
      console.log(`  on the replica signed out through: ${line(onA)}; on the other: ${line(onB)}`);
    }
  } finally {
    await cleanup();
  }
}

await main();
process.exit(0);
