/**
 * The half-open WebSocket flood of issue 39 (finding 1) against the deployed server: a student's
 * program that accepts WebSockets and never closes them (the test image's `/hold`), and a client
 * that opens one through the proxy and drops it on its 101, RATE times a second (330: 10,500 in 32 s
 * took the control plane to its descriptor limit before the fix). For SECONDS (60) with no flood,
 * then SECONDS with it, a paced probe asks `/healthz` and the admin API (`/admin/status`, bearer
 * token) PROBE_RATE times a second each; the baseline is the same server in the same run without
 * the flood.
 *
 * Prints, for each phase: /healthz and admin API p50/p99/max (and the ratio flood/none), the
 * control plane's open descriptors (most seen), RSS (most seen) and CPU (cores), and what the
 * flood's upgrades got (101, refused, failed). The server runs as deployed (startDeployed: every
 * part, a real sign-in through an OpenID Connect provider on loopback, PostgreSQL).
 *
 * Needs the provisioned PostgreSQL and Docker Engine and the test image (`npm test` once). Removes
 * what it made; aborts after 10 minutes.
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/tunnel-flood.ts   (PHASE_SECONDS=…, RATE=…, PROBE_RATE=…)
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDeployed, type Deployed } from './deployed.ts';
import { benchScope, CONTROL_PLANE_LABEL, docker, percentile, processCpuSeconds, processOpenFds, processRssBytes } from './lib.ts';

const DATABASE = 'cp_bench_tunnel_flood';
const SECONDS = Number(process.env.PHASE_SECONDS ?? 60);
const RATE = Number(process.env.RATE ?? 330);
const PROBE_RATE = Number(process.env.PROBE_RATE ?? 10);
const ADMIN_TOKEN = randomBytes(24).toString('hex');

/** One phase's figures. */
interface Phase {
  healthz: number[];
  admin: number[];
  failedProbes: number;
  maxFds: number;
  maxRssBytes: number;
  cores: number;
  upgrades: Record<string, number>;
}

/** Sends one WebSocket upgrade to the student's held path and resolves with its status (drops the socket on the answer). */
function dropOnAnswer(deployed: Deployed): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: deployed.port });
    const timer = setTimeout(() => (socket.destroy(), resolve('no answer in 10 s')), 10_000);
    socket.on('error', (error: NodeJS.ErrnoException) => (clearTimeout(timer), resolve(error.code ?? 'error')));
    socket.once('data', (chunk: Buffer) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(/^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1'))?.[1] ?? 'garbled');
    });
    socket.write(
      `GET /u/${deployed.slug}/hold HTTP/1.1\r\nHost: 127.0.0.1:${deployed.port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nOrigin: ${deployed.origin}\r\nCookie: ${deployed.cookie}\r\n\r\n`,
    );
  });
}

/** Runs one phase of SECONDS: the paced probes, the samples of the process, and the flood when `flood`. */
async function phase(deployed: Deployed, flood: boolean): Promise<Phase> {
  const pid = deployed.child.pid!;
  const result: Phase = { healthz: [], admin: [], failedProbes: 0, maxFds: 0, maxRssBytes: 0, cores: 0, upgrades: {} };
  const until = Date.now() + SECONDS * 1000;
  const cpuBefore = processCpuSeconds(pid);
  const started = performance.now();
  const probe = async (into: number[], url: string, headers: Record<string, string>) => {
    const at = performance.now();
    const response = await fetch(url, { headers }).catch(() => undefined);
    if (!response?.ok) result.failedProbes++;
    await response?.arrayBuffer();
    into.push(performance.now() - at);
  };
  const probes = (async () => {
    for (let tick = 0; Date.now() < until; tick++) {
      void probe(result.healthz, `${deployed.origin}/healthz`, {});
      void probe(result.admin, `${deployed.origin}/admin/status`, { authorization: `Bearer ${ADMIN_TOKEN}` });
      await sleep(1000 / PROBE_RATE);
    }
  })();
  const samples = (async () => {
    while (Date.now() < until) {
      result.maxFds = Math.max(result.maxFds, processOpenFds(pid));
      result.maxRssBytes = Math.max(result.maxRssBytes, processRssBytes(pid));
      await sleep(250);
    }
  })();
  const flooding = (async () => {
    if (!flood) return;
    const inFlight = new Set<Promise<void>>();
    for (let sent = 0; Date.now() < until; sent++) {
      // Paced: the n-th upgrade goes at n/RATE seconds (at most 200 unanswered at once).
      const due = started + (sent * 1000) / RATE;
      if (due > performance.now()) await sleep(due - performance.now());
      if (inFlight.size >= 200) await Promise.race(inFlight);
      const count = async () => {
        const status = await dropOnAnswer(deployed);
        result.upgrades[status] = (result.upgrades[status] ?? 0) + 1;
      };
      const one = count();
      inFlight.add(one);
      void one.finally(() => inFlight.delete(one));
    }
    await Promise.all(inFlight);
  })();
  await Promise.all([probes, samples, flooding]);
  result.cores = (processCpuSeconds(pid) - cpuBefore) / ((performance.now() - started) / 1000);
  return result;
}

const ms = (values: number[], p: number) => percentile(values, p).toFixed(1);

function report(name: string, figures: Phase, base?: Phase): void {
  const ratio = (key: 'healthz' | 'admin') => (base ? ` (p99 ${(percentile(figures[key], 99) / percentile(base[key], 99)).toFixed(2)}x the baseline's)` : '');
  console.log(`${name}:`);
  console.log(
    `  /healthz       p50 ${ms(figures.healthz, 50)} ms, p99 ${ms(figures.healthz, 99)} ms, max ${ms(figures.healthz, 100)} ms over ${figures.healthz.length}${ratio('healthz')}`,
  );
  console.log(
    `  /admin/status  p50 ${ms(figures.admin, 50)} ms, p99 ${ms(figures.admin, 99)} ms, max ${ms(figures.admin, 100)} ms over ${figures.admin.length}${ratio('admin')}`,
  );
  console.log(`  probes failed: ${figures.failedProbes}`);
  console.log(
    `  control plane: descriptors at most ${figures.maxFds}, RSS at most ${(figures.maxRssBytes / 2 ** 20).toFixed(0)} MiB, CPU ${figures.cores.toFixed(2)} cores`,
  );
  if (Object.keys(figures.upgrades).length > 0) console.log(`  flood upgrades: ${JSON.stringify(figures.upgrades)}`);
}

async function main(): Promise<void> {
  const { cleanups, cleanup, controlPlaneId } = benchScope(10);
  try {
    const deployed = await startDeployed(
      { database: { kind: 'postgres', name: DATABASE }, controlPlaneId, env: { ADMIN_TOKEN, LOG_LEVEL: 'warning' } },
      cleanups,
    );
    console.log(`control plane pid ${deployed.child.pid} on ${deployed.origin}; ${SECONDS} s per phase; flood ${RATE} upgrades/s to /u/${deployed.slug}/hold`);
    const [started] = await docker.listContainers({ filters: { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`, 'service.role=code'] } });
    console.log(`the student's editor started ${(await docker.getContainer(started!.Id).inspect()).State.StartedAt}`);
    const none = await phase(deployed, false);
    report('no flood (baseline)', none);
    const flooded = await phase(deployed, true);
    report('half-open flood', flooded, none);
    // After the flood: the descriptors go back.
    await sleep(3000);
    const pid = deployed.child.pid!;
    console.log(`3 s after the flood: descriptors ${processOpenFds(pid)}, RSS ${(processRssBytes(pid) / 2 ** 20).toFixed(0)} MiB`);
    // The student's editor holds every WebSocket it was given (its own descriptors and memory): whether it lasted.
    const [editor] = await docker.listContainers({ all: true, filters: { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`, 'service.role=code'] } });
    const state = editor ? (await docker.getContainer(editor.Id).inspect()).State : undefined;
    console.log(`the student's editor: ${state ? `${state.Status}, started ${state.StartedAt}${state.OOMKilled ? ', killed for memory once' : ''}` : 'gone'}`);
  } finally {
    await cleanup();
  }
}

await main();
