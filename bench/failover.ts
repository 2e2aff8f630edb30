/**
 * Failover (issue 23): how long the control plane is without a leader when its leader goes, with
 * two replicas of the deployed server (`bin/server.ts`, every part, the default lease timings:
 * LEASE_DURATION_SECONDS 15, LEASE_RENEW_DEADLINE_SECONDS 10, LEASE_RETRY_SECONDS 2) on one
 * PostgreSQL database.
 *
 * - killed: the leader SIGKILLed. Its replacement sees that the holder was a process of its own
 *   host that no longer runs and takes over at its next try (one retry period at most), as a
 *   single server restarted after a crash does.
 * - paused: the leader SIGSTOPped (alive but silent, as a replica on a lost host, or a frozen VM):
 *   the other takes over once the lease expires (duration + up to one retry period); the paused one
 *   is then SIGKILLed.
 *
 * Each case KILLS (10) times: the time from the signal to the other replica's /metrics saying
 * `leader 1` (polled every 20 ms), and the term it leads under (it must rise by one); then the gone
 * replica is started again, as a follower, for the next round. Median and maximum.
 *
 * Needs the provisioned PostgreSQL (127.0.0.1:54329) and Docker Engine (`npm test` once, or
 * `bash scripts/provision.sh`). Everything it creates (the database cp_bench_failover, the
 * processes, the data directory, containers of its control-plane id: none) is removed at the end;
 * it aborts after 20 minutes.
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/failover.ts   (KILLS=…, CASES=killed,paused)
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { benchDatabaseUrl, median, replicaBench, startReplica, type Replica } from './lib.ts';

const DATABASE = 'cp_bench_failover';
const KILLS = Number(process.env.KILLS ?? 10);
const CASES = (process.env.CASES ?? 'killed,paused').split(',') as ('killed' | 'paused')[];
const ADMIN_TOKEN = randomBytes(24).toString('hex');

/** What a replica's /metrics says of its leadership, or undefined when it does not answer. */
async function leadership(replica: Replica): Promise<{ leader: boolean; term: number } | undefined> {
  const text = await fetch(`${replica.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, signal: AbortSignal.timeout(1000) })
    .then((response) => response.text())
    .catch(() => undefined);
  if (text === undefined) return undefined;
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { leader: value('leader') === 1, term: value('leader_term') };
}

async function main(): Promise<void> {
  const { controlPlaneId, dataDir, cleanups, cleanup } = await replicaBench(DATABASE, 20);
  const replicas = new Set<Replica>();
  cleanups.push(async () => {
    for (const replica of replicas) {
      replica.child.kill('SIGCONT');
      replica.child.kill('SIGKILL');
    }
  });

  /** Starts a replica and waits until it answers /metrics. */
  const start = async (): Promise<Replica> => {
    const replica = await startReplica(
      { DATABASE_URL: benchDatabaseUrl(DATABASE), DATA_DIR: dataDir, ADMIN_TOKEN, CONTROL_PLANE_ID: controlPlaneId },
      async (candidate) => (await leadership(candidate)) !== undefined,
    );
    replicas.add(replica);
    return replica;
  };

  try {
    const first = await start();
    const second = await start();
    let pair: [Replica, Replica] = [first, second];
    console.log(`failover: 2 replicas of bin/server.ts on PostgreSQL, default lease timings (15 s / 10 s / 2 s), ${KILLS} times per case`);
    for (const kind of CASES) {
      const times: number[] = [];
      for (let round = 0; round < KILLS; round++) {
        // Whoever leads now (wait for one: the previous round's restarted replica may still be joining).
        let leader: Replica | undefined;
        let term = 0;
        while (!leader) {
          for (const replica of pair) {
            const state = await leadership(replica);
            if (state?.leader) [leader, term] = [replica, state.term];
          }
          if (!leader) await sleep(50);
        }
        const other = pair.find((replica) => replica !== leader)!;
        const signalledAt = performance.now();
        leader.child.kill(kind === 'killed' ? 'SIGKILL' : 'SIGSTOP');
        let took: { term: number } | undefined;
        while (!took) {
          const state = await leadership(other);
          if (state?.leader && state.term > term) took = state;
          else await sleep(20);
        }
        const seconds = (performance.now() - signalledAt) / 1000;
        times.push(seconds);
        if (took.term !== term + 1) throw new Error(`term ${term} → ${took.term}: it must rise by one`);
        if (kind === 'paused') leader.child.kill('SIGKILL');
        replicas.delete(leader);
        pair = [other, await start()];
        console.log(`  ${kind} ${round + 1}: the other led after ${seconds.toFixed(2)} s (term ${term} → ${took.term})`);
      }
      console.log(`${kind}: median ${median(times).toFixed(2)} s, max ${Math.max(...times).toFixed(2)} s over ${times.length}`);
    }
  } finally {
    await cleanup();
  }
}

await main();
process.exit(0);
