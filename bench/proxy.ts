/**
 * Workspace proxy: what `/u/<slug>/...` through the control plane costs against going straight to the
 * editor container, and against JupyterHub's configurable-http-proxy (CHP) on the same route, all
 * measured in the same run on loopback and the project's own container.
 *
 * - HTTP: `GET /healthz` of the editor, 50 connections, wrk (1 thread), ROUNDS (3) rounds with the
 *   targets interleaved (order rotated each round); medians. Beside direct, the control plane and
 *   CHP, a fourth target is the floor: a bare Node proxy (same server, same undici client, nothing
 *   else), which shows how much of the distance to `direct` is Node's HTTP work on this machine. Saturated: 10 s per run after a
 *   1 s warm-up, requests/s, p50, p99. Targets: ≥ 0.7× direct throughput, ≥ 1.5× CHP's, added p99
 *   (control plane − direct) < 2 ms. Paced: the same connections at about PACED_RATE (1,000)
 *   requests/s for 5 s, where no target queues, so p99 − direct p99 is the latency one hop adds
 *   (saturated, a closed loop's latency is connections / throughput, i.e. queueing).
 *   CPU time per request of the proxy process and of the editor container (cgroup) is reported too.
 * - WebSocket: echo of 64-byte binary messages over WS_CONNECTIONS (4) connections, each keeping
 *   WS_WINDOW (64) messages outstanding, 5 s per run after 1 s, direct vs through the control plane,
 *   ROUNDS rounds interleaved; median messages/s. Target ≥ 0.8×.
 * - Memory: WS_IDLE (1,000) WebSockets opened through the control plane and kept idle (each checked
 *   with one echo); the control plane's RSS (VmRSS) and heap after a forced GC, before and after.
 *
 * Honest RSS: the control plane runs in a child process of its own (this file with `serve`, started
 * with --expose-gc: a control plane made by the composition root with its change listener, activity,
 * HTTP and workspace controller, on a loopback port), so its RSS holds
 * no load generator: wrk and CHP are separate processes, the WebSocket clients live in this process.
 *
 * Needs: the provisioned PostgreSQL (127.0.0.1:54329) and Docker Engine and the test image
 * (`npm test` once, or `bash scripts/provision.sh`), and `wrk` (Debian package; installed here with
 * apt-get when missing and running as root). File descriptors: the control plane holds two sockets
 * per proxied WebSocket and this process one, so with WS_IDLE=1000 both need a nofile limit above
 * ~2,100 (Node raises its soft limit to the hard one at start; if the hard limit is lower, run
 * `ulimit -n 4096` first). The editor container's limit is checked and printed.
 * Everything it creates (containers and volumes of its control-plane id, the child processes, the
 * database cp_bench_proxy) is removed at the end; it aborts (cleaning up) after 10 minutes.
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/proxy.ts
 */
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import WebSocket from 'ws';
import {
  benchDatabase,
  cgroupCpuSeconds,
  CONTROL_PLANE_LABEL,
  deadline,
  docker,
  freePort,
  machineBusyPercent,
  median,
  processCpuSeconds,
  processOpenFds,
  processRssBytes,
  removeLabelled,
  serveControlPlane,
  signedSessionCookie,
} from './lib.ts';

const DATABASE = 'cp_bench_proxy';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const HTTP_SECONDS = Number(process.env.HTTP_SECONDS ?? 10);
const HTTP_CONNECTIONS = 50;
/** The offered rate (requests/s over the same 50 connections) of the paced latency runs, and their length. */
const PACED_RATE = Number(process.env.PACED_RATE ?? 1000);
const PACED_SECONDS = Number(process.env.PACED_SECONDS ?? 5);
const WS_SECONDS = Number(process.env.WS_SECONDS ?? 5);
const WS_CONNECTIONS = Number(process.env.WS_CONNECTIONS ?? 4);
const WS_WINDOW = Number(process.env.WS_WINDOW ?? 64);
const WS_MESSAGE_BYTES = 64;
const WS_IDLE = Number(process.env.WS_IDLE ?? 1000);
/** Which parts to run (PARTS=memory,http,ws by default), in that order. */
const parts = new Set((process.env.PARTS ?? 'memory,http,ws').split(','));

/** What the control-plane child reports once its workspace's editor is up. */
interface Ready {
  type: 'ready';
  port: number;
  origin: string;
  slug: string;
  workspaceId: string;
  cookie: string;
  editorEndpoint: string;
}

/** process.memoryUsage() of the child after a forced GC (gc: whether --expose-gc made one possible). */
type Memory = NodeJS.MemoryUsage & { type: 'memory'; gc: boolean };

// ---------------------------------------------------------------------------------------------
// The control plane, in its own process.

async function serve(): Promise<void> {
  const { plane, dataSource, secret, stop } = await serveControlPlane();
  const { url: origin } = plane.http!;
  const port = Number(new URL(origin).port);

  process.on('message', (message: { type: string }) => {
    if (message.type === 'stop') void stop();
    if (message.type === 'memory') {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (gc) for (let i = 0; i < 3; i++) gc();
      process.send!({ type: 'memory', gc: Boolean(gc), ...process.memoryUsage() } satisfies Memory);
    }
  });

  const tag = randomBytes(3).toString('hex');
  const { user, workspace } = await plane.store.users.create({ email: `proxy-${tag}@school.test` });
  const cookie = await signedSessionCookie(dataSource, user.id, secret);
  await plane.store.workspaces.open(workspace.id);
  for (const until = Date.now() + 60_000; ; await sleep(50)) {
    const current = await plane.store.workspaces.get(workspace.id);
    if (current?.observedState === 'running' && current.editorEndpoint) {
      process.send!({
        type: 'ready',
        port,
        origin,
        slug: current.slug,
        workspaceId: current.id,
        cookie,
        editorEndpoint: current.editorEndpoint,
      } satisfies Ready);
      return;
    }
    if (Date.now() > until) throw new Error(`workspace not running after 60 s: ${current?.observedState} ${current?.statusMessage}`);
  }
}

/**
 * The floor: the least a Node proxy can do per request on this machine, with the same HTTP server
 * and the same upstream client (undici) as the control plane, and nothing else: no session, no
 * authorisation, no header rewriting, no metrics, no activity. It strips the `/u/<slug>` prefix
 * and forwards to the editor. It shows how much of the gap to `direct` is Node's HTTP work itself.
 */
async function bare(): Promise<void> {
  const prefix = process.env.BENCH_PREFIX!;
  const pool = new Pool(`http://${process.env.BENCH_UPSTREAM!}`, { connections: 256 });
  const server = http.createServer((req, res) => {
    pool.dispatch(
      { method: req.method ?? 'GET', path: (req.url ?? '/').slice(prefix.length), headers: { host: req.headers.host ?? '' } },
      {
        onRequestStart: () => undefined,
        onResponseStart(_controller, status, headers) {
          delete headers.connection;
          delete headers['keep-alive'];
          delete headers['transfer-encoding'];
          res.writeHead(status, headers);
        },
        onResponseData: (_controller, chunk) => void res.write(chunk),
        onResponseEnd: () => res.end(),
        onResponseError: () => res.destroy(),
      },
    );
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  process.on('disconnect', () => process.exit(0));
  process.on('message', (message: { type: string }) => message.type === 'stop' && process.exit(0));
  process.send!({ type: 'ready', port: (server.address() as { port: number }).port });
}

// ---------------------------------------------------------------------------------------------
// The benchmark.

async function main(): Promise<void> {
  const cleanups: (() => Promise<unknown>)[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const step of cleanups.toReversed()) await step().catch((error: unknown) => console.error('cleanup step failed:', error));
    })());
  deadline(10 * 60_000, cleanup);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void cleanup().finally(() => process.exit(130)));

  const wrkVersion = ensureWrk();
  const chpVersion = (
    JSON.parse(readFileSync(path.join(import.meta.dirname, '../node_modules/configurable-http-proxy/package.json'), 'utf8')) as { version: string }
  ).version;
  const secret = randomBytes(24).toString('hex');
  const controlPlaneId = `bench-${randomBytes(4).toString('hex')}`;

  try {
    const { dataSource, drop } = await benchDatabase(DATABASE);
    cleanups.push(drop);
    // Retried: another process may be restarting the Docker daemon just then (the test suite does).
    cleanups.push(async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await removeLabelled(CONTROL_PLANE_LABEL, controlPlaneId);
        } catch (error) {
          if (attempt === 5) throw error;
          await sleep(3000);
        }
      }
    });

    // The control plane: its own process, with --expose-gc for the memory figures.
    const child = fork(import.meta.filename, ['serve'], {
      // BENCH_CP_NODE_ARGS: extra Node flags for the control plane, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile it.
      execArgv: ['--expose-gc', '--no-warnings=ExperimentalWarning', ...(process.env.BENCH_CP_NODE_ARGS ?? '').split(' ').filter(Boolean)],
      env: { ...process.env, BENCH_DATABASE: DATABASE, BENCH_CONTROL_PLANE_ID: controlPlaneId, BENCH_SESSION_SECRET: secret },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    cleanups.push(() => stopChild(child, true));
    const ready = await new Promise<Ready>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`control plane exited (${code}) before its workspace ran`)));
      child.on('message', (message: { type: string }) => message.type === 'ready' && resolve(message as Ready));
    });
    child.removeAllListeners('exit');
    const cpPid = child.pid!;
    const [container] = await docker.listContainers({ filters: { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`] } });
    const editorPid = (await docker.getContainer(container!.Id).inspect()).State.Pid;
    const editorNofile = softNofile(editorPid);
    const ownNofile = softNofile(process.pid);

    // configurable-http-proxy with one route to the editor, as JupyterHub adds one per user server.
    const chpPort = await freePort();
    const chpApiPort = await freePort();
    const chpToken = randomBytes(16).toString('hex');
    const chp = spawn(
      process.execPath,
      [
        path.join(import.meta.dirname, '../node_modules/configurable-http-proxy/bin/configurable-http-proxy'),
        '--ip',
        '127.0.0.1',
        '--port',
        String(chpPort),
        '--api-ip',
        '127.0.0.1',
        '--api-port',
        String(chpApiPort),
      ],
      {
        env: { ...process.env, CONFIGPROXY_AUTH_TOKEN: chpToken },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let chpOutput = '';
    for (const stream of [chp.stdout!, chp.stderr!]) stream.on('data', (chunk: Buffer) => (chpOutput = (chpOutput + chunk.toString()).slice(-4000)));
    cleanups.push(() => stopChild(chp, false));
    await addChpRoute(chpApiPort, chpToken, `/u/${ready.slug}`, `http://${ready.editorEndpoint}`).catch((error: unknown) => {
      throw new Error(`configurable-http-proxy did not take the route: ${String(error)}\n${chpOutput}`);
    });

    // The bare Node proxy (the floor), its own process too.
    const bareChild = fork(import.meta.filename, ['bare'], {
      execArgv: ['--no-warnings=ExperimentalWarning'],
      env: { ...process.env, BENCH_UPSTREAM: ready.editorEndpoint, BENCH_PREFIX: `/u/${ready.slug}` },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    cleanups.push(() => stopChild(bareChild, true));
    const barePort = await new Promise<number>((resolve, reject) => {
      bareChild.once('exit', (code) => reject(new Error(`the bare proxy exited (${code}) before it listened`)));
      bareChild.once('message', (message: { port: number }) => resolve(message.port));
    });
    bareChild.removeAllListeners('exit');

    const targets: HttpTarget[] = [
      { name: 'direct (editor container)', url: `http://${ready.editorEndpoint}/healthz`, headers: {} },
      { name: 'control plane /u/<slug>/', url: `${ready.origin}/u/${ready.slug}/healthz`, headers: { Cookie: ready.cookie }, proxyPid: cpPid },
      { name: 'configurable-http-proxy', url: `http://127.0.0.1:${chpPort}/u/${ready.slug}/healthz`, headers: {}, proxyPid: chp.pid! },
      { name: 'bare Node proxy (floor)', url: `http://127.0.0.1:${barePort}/u/${ready.slug}/healthz`, headers: {}, proxyPid: bareChild.pid! },
    ];
    for (const target of targets) {
      const answer = await get(target.url, target.headers);
      if (answer.status !== 200 || answer.body !== 'ok')
        throw new Error(`${target.name}: ${target.url} answered ${answer.status} ${answer.body.slice(0, 200)}`);
    }

    const cpus = os.cpus();
    // Other work on the machine (another benchmark, a test run) skews every figure: say how busy it was.
    const busy = await machineBusyPercent(2000);
    console.log(
      `machine: ${cpus.length} CPUs (${cpus[0]?.model.trim()}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB; Node ${process.version}; ${wrkVersion}; configurable-http-proxy ${chpVersion}`,
    );
    console.log(
      `editor: ${ready.editorEndpoint} (classroom-workspace:test, nofile ${editorNofile}); control plane: child pid ${cpPid} on ${ready.origin}; CHP: 127.0.0.1:${chpPort}; bench nofile ${ownNofile}`,
    );
    console.log(
      `machine busy before the runs (other processes): ${busy.toFixed(0)} % of ${cpus.length} CPUs${busy > 10 ? ' — figures are skewed, rerun on an idle machine' : ''}`,
    );
    if (editorNofile < WS_IDLE + 100 || ownNofile < WS_IDLE + 100) throw new Error(`nofile too low for ${WS_IDLE} WebSockets: raise it (ulimit -n 4096)`);
    const coldRss = processRssBytes(cpPid);

    const wsDirect = {
      name: 'direct',
      url: `ws://${ready.editorEndpoint}/echo`,
      headers: {} as Record<string, string>,
      origin: undefined as string | undefined,
      runs: [] as WsRun[],
    };
    const wsProxied = {
      name: 'control plane',
      url: `ws://127.0.0.1:${ready.port}/u/${ready.slug}/echo`,
      headers: { Cookie: ready.cookie },
      origin: ready.origin,
      runs: [] as WsRun[],
      proxyPid: cpPid,
    };
    // Memory first, while the control plane's heap has only served the checks above: after the load
    // tests its RSS holds freed pages that new connections would reuse, hiding their cost.
    if (parts.has('memory')) {
      console.log(`\nMemory: ${WS_IDLE} idle WebSockets through the control plane (its own process; RSS = VmRSS, after forced GC)`);
      const memory = async (): Promise<Memory & { vmRss: number; fds: number }> => {
        const answer = new Promise<Memory>((resolve) => child.once('message', (message: Memory) => resolve(message)));
        child.send({ type: 'memory' });
        const result = await answer;
        await sleep(200);
        return { ...result, vmRss: processRssBytes(cpPid), fds: processOpenFds(cpPid) };
      };
      const before = await memory();
      const idle: WebSocket[] = [];
      cleanups.push(async () => idle.forEach((ws) => ws.terminate()));
      const opening = performance.now();
      for (let i = 0; i < WS_IDLE; i += 100) {
        const batch = await Promise.all(Array.from({ length: Math.min(100, WS_IDLE - i) }, () => openWs(wsProxied.url, wsProxied.headers, wsProxied.origin)));
        idle.push(...batch);
        // One echo each: the connection reaches the editor and back.
        await Promise.all(batch.map((ws) => new Promise((resolve) => (ws.once('message', resolve), ws.send(Buffer.alloc(WS_MESSAGE_BYTES))))));
      }
      const openedMs = performance.now() - opening;
      await sleep(2000);
      const after = await memory();
      for (const ws of idle) ws.close();
      await sleep(1000);
      const closed = await memory();
      const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
      const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
      console.log(
        `  gc forced: ${before.gc ? 'yes (--expose-gc)' : 'no'}; opened and echoed in ${(openedMs / 1000).toFixed(2)} s; control plane fds ${before.fds} → ${after.fds}`,
      );
      console.log(
        `  RSS at start ${mib(coldRss)}; before ${mib(before.vmRss)} → with ${WS_IDLE} open ${mib(after.vmRss)} → after closing ${mib(closed.vmRss)}`,
      );
      console.log(
        `  per connection: RSS ${kib((after.vmRss - before.vmRss) / WS_IDLE)}, JS heap ${kib((after.heapUsed - before.heapUsed) / WS_IDLE)}, external+buffers ${kib((after.external - before.external) / WS_IDLE)}`,
      );
    }

    if (parts.has('http')) {
      console.log(`\nHTTP GET /healthz: ${HTTP_CONNECTIONS} connections, wrk -t1; ${ROUNDS} rounds, targets interleaved (order rotated), medians`);
      const saturated = new Map<HttpTarget, WrkRun[]>(targets.map((target) => [target, []]));
      const paced = new Map<HttpTarget, WrkRun[]>(targets.map((target) => [target, []]));
      for (const target of targets) await runWrk(target, 2, editorPid); // warm-up: JIT, upstream keep-alive sockets
      for (let round = 0; round < ROUNDS; round++) {
        const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
        const line: string[] = [];
        for (const target of order) {
          await runWrk(target, 1, editorPid);
          const run = await runWrk(target, HTTP_SECONDS, editorPid);
          saturated.get(target)!.push(run);
          const atRate = await runWrk(target, PACED_SECONDS, editorPid, PACED_RATE);
          paced.get(target)!.push(atRate);
          line.push(
            `${target.name.split(' ')[0]} ${run.rps.toFixed(0)} rps p99 ${run.p99Ms.toFixed(1)} ms, at ${PACED_RATE}/s p99 ${atRate.p99Ms.toFixed(2)} ms`,
          );
        }
        console.log(`  round ${round + 1}: ${line.join(' | ')}`);
      }
      const table = (title: string, runs: Map<HttpTarget, WrkRun[]>) => {
        console.log(`  ${title}`);
        console.log(
          `    ${'target'.padEnd(28)}${'req/s'.padStart(9)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}${'errors'.padStart(8)}${'proxy CPU µs/req'.padStart(18)}${'editor CPU µs/req'.padStart(19)}`,
        );
        const summaries = targets.map((target) => summarise(runs.get(target)!));
        targets.forEach((target, i) => {
          const s = summaries[i]!;
          console.log(
            `    ${target.name.padEnd(28)}${s.rps.toFixed(0).padStart(9)}${s.p50Ms.toFixed(2).padStart(9)}${s.p99Ms.toFixed(2).padStart(9)}${String(s.errors).padStart(8)}${(Number.isNaN(s.proxyCpuUs) ? '—' : s.proxyCpuUs.toFixed(1)).padStart(18)}${s.editorCpuUs.toFixed(1).padStart(19)}`,
          );
        });
        return summaries as [Summary, Summary, Summary, Summary];
      };
      const [direct, proxied, chpSummary, bareSummary] = table(`saturated: ${HTTP_SECONDS} s per run after 1 s warm-up`, saturated);
      const vsDirect = proxied.rps / direct.rps;
      const vsChp = proxied.rps / chpSummary.rps;
      const addedP99 = proxied.p99Ms - direct.p99Ms;
      console.log(`    control plane / direct throughput ${vsDirect.toFixed(2)}x (target ≥ 0.7x): ${verdict(vsDirect >= 0.7)}`);
      console.log(`    control plane / configurable-http-proxy throughput ${vsChp.toFixed(2)}x (target ≥ 1.5x): ${verdict(vsChp >= 1.5)}`);
      console.log(`    added p99 (control plane − direct) ${addedP99.toFixed(2)} ms (target < 2 ms): ${verdict(addedP99 < 2)}`);
      console.log(
        `    (configurable-http-proxy / direct ${(chpSummary.rps / direct.rps).toFixed(2)}x, its added p99 ${(chpSummary.p99Ms - direct.p99Ms).toFixed(2)} ms)`,
      );
      console.log(
        `    (bare Node proxy / direct ${(bareSummary.rps / direct.rps).toFixed(2)}x: the ceiling of any Node proxy here; control plane / bare ${(proxied.rps / bareSummary.rps).toFixed(2)}x)`,
      );
      // Saturated, a closed loop's latency is connections / throughput (Little's law): a proxy slower than the
      // editor adds queueing, not its own latency. At a rate every target sustains, p99 shows what one hop adds.
      const [pacedDirect, pacedProxied, pacedChp] = table(
        `paced: about ${PACED_RATE} req/s offered (each connection waits 0–${((2000 * HTTP_CONNECTIONS) / PACED_RATE).toFixed(0)} ms between requests), ${PACED_SECONDS} s per run`,
        paced,
      );
      const pacedAdded = pacedProxied.p99Ms - pacedDirect.p99Ms;
      console.log(
        `    added p99 at ${PACED_RATE} req/s (control plane − direct) ${pacedAdded.toFixed(2)} ms (target < 2 ms): ${verdict(pacedAdded < 2)}; configurable-http-proxy's ${(pacedChp.p99Ms - pacedDirect.p99Ms).toFixed(2)} ms`,
      );
    }

    if (parts.has('ws')) {
      console.log(
        `\nWebSocket echo: ${WS_MESSAGE_BYTES}-byte binary messages, ${WS_CONNECTIONS} connections × ${WS_WINDOW} outstanding, ${WS_SECONDS} s per run after 1 s, ${ROUNDS} rounds interleaved`,
      );
      for (let round = 0; round < ROUNDS; round++) {
        const line: string[] = [];
        for (const target of round % 2 === 0 ? [wsDirect, wsProxied] : [wsProxied, wsDirect]) {
          const run = await wsThroughput(target.url, target.headers, target.origin, 'proxyPid' in target ? target.proxyPid : undefined);
          target.runs.push(run);
          line.push(`${target.name} ${run.rate.toFixed(0)} msg/s`);
        }
        console.log(`  round ${round + 1}: ${line.join(' | ')}`);
      }
      const wsDirectRate = median(wsDirect.runs.map((run) => run.rate));
      const wsProxiedRate = median(wsProxied.runs.map((run) => run.rate));
      const wsProxyCpu = median(wsProxied.runs.map((run) => run.proxyCpuUsPerMessage));
      console.log(
        `  direct ${wsDirectRate.toFixed(0)} msg/s, control plane ${wsProxiedRate.toFixed(0)} msg/s (proxy CPU ${wsProxyCpu.toFixed(2)} µs/msg); ratio ${(wsProxiedRate / wsDirectRate).toFixed(2)}x (target ≥ 0.8x): ${verdict(wsProxiedRate / wsDirectRate >= 0.8)}`,
      );
    }

    // Activity was on: the proxied traffic marked the workspace active (flushed every 10 s).
    const rows: { last_activity_at: Date | null }[] = await dataSource.query('SELECT last_activity_at FROM workspaces WHERE id = $1', [ready.workspaceId]);
    console.log(`\nactivity recorded for the workspace: ${rows[0]?.last_activity_at ? 'yes' : 'no'}`);
    const busyAfter = await machineBusyPercent(2000);
    console.log(
      `machine busy after the runs (other processes): ${busyAfter.toFixed(0)} % of ${os.cpus().length} CPUs${busyAfter > 10 ? ' — figures are likely skewed, rerun on an idle machine' : ''}`,
    );
  } finally {
    await cleanup();
  }
  process.exit(0);
}

function verdict(met: boolean): string {
  return met ? 'met' : 'NOT met';
}

/** wrk on PATH, installed from Debian when missing and running as root; its version line. */
function ensureWrk(): string {
  const version = () => spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  let found = version();
  if (found.error && process.getuid?.() === 0) {
    console.error('wrk is missing: apt-get install -y wrk');
    const install = () =>
      spawnSync('apt-get', ['install', '-y', '-q', 'wrk'], { stdio: 'ignore', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }).status === 0;
    if (!install()) {
      spawnSync('apt-get', ['update', '-q'], { stdio: 'ignore' });
      install();
    }
    found = version();
  }
  if (found.error) throw new Error('wrk is needed: apt-get install wrk (as root)');
  return `${found.stdout}${found.stderr}`
    .split('\n')[0]!
    .replace(/ Copyright.*/, '')
    .trim();
}

/** The soft open-files limit of process `pid`. */
function softNofile(pid: number): number {
  const match = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  return match?.[1] === 'unlimited' ? Infinity : Number(match?.[1]);
}

/** Asks a child to stop (IPC `stop`, else SIGTERM), then SIGKILL by pid after 10 s. */
async function stopChild(child: ChildProcess, ipc: boolean): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  // A child that died just now may still look connected: sending to it then fails with EPIPE.
  child.on('error', () => undefined);
  if (ipc && child.connected) child.send({ type: 'stop' });
  else child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

async function addChpRoute(apiPort: number, token: string, prefix: string, target: string): Promise<void> {
  for (const until = Date.now() + 15_000; ; await sleep(100)) {
    try {
      const response = await fetch(`http://127.0.0.1:${apiPort}/api/routes${prefix}`, {
        method: 'POST',
        headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ target }),
      });
      if (response.status === 201) return;
      throw new Error(`answered ${response.status} ${await response.text()}`);
    } catch (error) {
      if (Date.now() > until) throw error;
    }
  }
}

function get(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

// ---------------------------------------------------------------------------------------------
// HTTP load with wrk.

interface HttpTarget {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** The proxy's process, whose CPU time per request is reported. */
  proxyPid?: number;
}
interface WrkRun {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  proxyCpuUs: number;
  editorCpuUs: number;
}
interface Summary extends WrkRun {}

/**
 * wrk's Lua: its own totals and percentiles (microseconds) as one JSON line at the end; with a
 * think time (ms, mean), each connection waits a random 0–2× that before its next request, which
 * holds the offered rate near connections / think time (wrk's latency excludes the wait).
 */
function wrkScript(thinkMs: number | undefined): string {
  return `${thinkMs ? `delay = function() return math.random(0, ${Math.round(2 * thinkMs)}) end\n` : ''}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
`;
}
const wrkScripts = new Map<number, string>();

/** One wrk run against `target`: saturating (no rate), or at about `rate` requests/s over the same connections. */
async function runWrk(target: HttpTarget, seconds: number, editorPid: number, rate?: number): Promise<WrkRun> {
  const thinkMs = rate ? (1000 * HTTP_CONNECTIONS) / rate : 0;
  let script = wrkScripts.get(thinkMs);
  if (!script) {
    script = path.join(os.tmpdir(), `cp-bench-proxy-${process.pid}-${thinkMs}.lua`);
    writeFileSync(script, wrkScript(thinkMs));
    wrkScripts.set(thinkMs, script);
    process.once('exit', () => rmSync(script!, { force: true }));
  }
  // The editor container was replaced (e.g. another process restarted the Docker daemon): its figures would be meaningless.
  if (!existsSync(`/proc/${editorPid}`)) throw new Error('the editor container went away during the benchmark (Docker restarted by another process?)');
  const args = ['-t1', `-c${HTTP_CONNECTIONS}`, `-d${seconds}s`, '--timeout', '5s', '-s', script];
  for (const [name, value] of Object.entries(target.headers)) args.push('-H', `${name}: ${value}`);
  args.push(target.url);
  const proxyCpu0 = target.proxyPid ? processCpuSeconds(target.proxyPid) : NaN;
  const editorCpu0 = cgroupCpuSeconds(editorPid);
  const output = await new Promise<string>((resolve, reject) => {
    const wrk = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    wrk.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
    wrk.stderr.on('data', (chunk: Buffer) => (text += chunk.toString()));
    wrk.on('error', reject);
    wrk.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
  });
  const proxyCpu = target.proxyPid ? processCpuSeconds(target.proxyPid) - proxyCpu0 : NaN;
  const editorCpu = cgroupCpuSeconds(editorPid) - editorCpu0;
  const line = output.split('\n').find((text) => text.startsWith('{'));
  if (!line) throw new Error(`no result from wrk: ${output}`);
  const result = JSON.parse(line) as { requests: number; duration_us: number; p50_us: number; p99_us: number; errors: number };
  return {
    rps: result.requests / (result.duration_us / 1e6),
    p50Ms: result.p50_us / 1000,
    p99Ms: result.p99_us / 1000,
    errors: result.errors,
    proxyCpuUs: (proxyCpu * 1e6) / result.requests,
    editorCpuUs: (editorCpu * 1e6) / result.requests,
  };
}

function summarise(runs: WrkRun[]): Summary {
  return {
    rps: median(runs.map((run) => run.rps)),
    p50Ms: median(runs.map((run) => run.p50Ms)),
    p99Ms: median(runs.map((run) => run.p99Ms)),
    errors: runs.reduce((sum, run) => sum + run.errors, 0),
    proxyCpuUs: median(runs.map((run) => run.proxyCpuUs)),
    editorCpuUs: median(runs.map((run) => run.editorCpuUs)),
  };
}

// ---------------------------------------------------------------------------------------------
// WebSocket.

interface WsRun {
  rate: number;
  proxyCpuUsPerMessage: number;
}

function openWs(url: string, headers: Record<string, string>, origin: string | undefined): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, origin, perMessageDeflate: false, handshakeTimeout: 10_000 });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_request, response) => reject(new Error(`${url}: upgrade refused with ${response.statusCode}`)));
  });
}

/** Echo messages per second over WS_CONNECTIONS connections, each keeping WS_WINDOW messages in flight. */
async function wsThroughput(url: string, headers: Record<string, string>, origin: string | undefined, proxyPid: number | undefined): Promise<WsRun> {
  const sockets = await Promise.all(Array.from({ length: WS_CONNECTIONS }, () => openWs(url, headers, origin)));
  const payload = randomBytes(WS_MESSAGE_BYTES);
  let counting = false;
  let stopped = false;
  let received = 0;
  for (const ws of sockets) {
    ws.on('message', () => {
      if (counting) received++;
      if (!stopped) ws.send(payload);
    });
    for (let i = 0; i < WS_WINDOW; i++) ws.send(payload);
  }
  await sleep(1000);
  const cpu0 = proxyPid ? processCpuSeconds(proxyPid) : NaN;
  const t0 = performance.now();
  counting = true;
  await sleep(WS_SECONDS * 1000);
  counting = false;
  const seconds = (performance.now() - t0) / 1000;
  const cpu = proxyPid ? processCpuSeconds(proxyPid) - cpu0 : NaN;
  stopped = true;
  await Promise.all(sockets.map((ws) => new Promise((resolve) => (ws.once('close', resolve), ws.close()))));
  return { rate: received / seconds, proxyCpuUsPerMessage: (cpu * 1e6) / received };
}

// Last, so that every module-level constant above is initialised first.
if (process.argv[2] === 'serve') await serve();
else if (process.argv[2] === 'bare') await bare();
else await main();
