/**
 * A class of STUDENTS (30) on one small server, as a coach starts it: everyone opens at once, then
 * everyone presses Run within RUN_SPREAD_SECONDS (10), then every robot prints and talks
 * NetworkTables for STREAM_SECONDS (60). Against the same done straight at Docker, in the same run.
 *
 * The control plane runs as a deployment runs it (bench/deployed.ts: bin/server.ts with every part:
 * controllers, stats sampler, activity writer, session cache, change feed; PostgreSQL; every student
 * signed in through OpenID Connect as a browser does), with bench/proxy-probe.ts preloaded for its
 * event loop's delay.
 *
 * The image: every student's editor is the real one (code-server from `classroom-workspace:latest`),
 * and a run is the test image's stand-in simulator (`node /app/sim.mjs`: "compiling..." lines, then
 * NetworkTables 4 and a line with its time every 100 ms), copied into an image made from the real
 * one (`classroom-bench-class`, removed at the end). One server has one image; a whole class of real
 * editors is heavier than the issue's sample of three real among stand-ins, and is what a class runs.
 *
 * ROUNDS (2) rounds of both sides (`managed`: through the control plane; `docker`: the baseline),
 * Docker first in the first round and the control plane first in the next, a new class of students
 * each round (every open a first start), each side with the machine to itself (the other side's
 * containers removed, or its workspaces stopped, first); the figures are both rounds' together:
 * 1. Open. Managed: each student presses Open. SAMPLE (3) of them in Chromium, on their workspace
 *    page: the click to VS Code's workbench shown (the page takes the student into the editor once
 *    it is ready). The others as that page does: POST .../api/workspace/open, the workspace asked
 *    for at once and then every 500 ms as the page asks while the editor starts (STARTING_REFRESH_MS,
 *    at a random phase) until it is ready, then the editor's page through the proxy. Docker: a
 *    volume and `docker run` of the same image (the same limits, network, mount), the editor asked
 *    every 100 ms until its page answers; the sample's Chromium then loads it (through a TCP relay
 *    on 127.0.0.1) to the workbench shown.
 * 2. Run: each student presses Run at their own moment within the spread (the same moments on both
 *    sides); the click to the run's first output line (managed: the student's live output stream;
 *    Docker: `docker run` of the same command on the student's home, its log followed).
 * 3. Stream: once every run has printed, for STREAM_SECONDS every line's age on arrival (the robot
 *    prints its clock; the machine has one clock), and NetworkTables' round trip (its time
 *    synchronisation, one ping in flight per student every 250 ms; managed: `.cp/nt4` with the
 *    student's cookie; Docker: the container's port).
 *
 * Reported: per phase p50/p95/max (p99 for the stream), failures, and the control plane's CPU, RSS,
 * event-loop delay (p99, max) and reconciles (from its /metrics) in each phase, beside the event-loop
 * delay of an idle Node process with the same probe (the floor: what the machine alone does to an
 * event loop, under the same load), and where the machine's CPU went in each phase on both sides
 * (the containers, dockerd and containerd, PostgreSQL, the control plane, the rest).
 * BENCH_RUN_TIMES=<file> writes each run's steps (click, answer, first line; Docker's create, start
 * and log follow) and each phase on the monotonic clock (a --cpu-prof profile's, to cut one by
 * phase); BENCH_CP_LOG, BENCH_CP_ENV and BENCH_CP_NODE_ARGS: bench/deployed.ts, as are BENCH_CP_NICE,
 * BENCH_CP_AUTOGROUP and BENCH_CP_CPU_SHARES, where the control plane is scheduled (its niceness,
 * autogroup and cgroup are printed). Targets: p95 open-to-usable and click-to-first-line ≤ 1.3×
 * Docker's, nothing failing, event-loop delay p99 < 50 ms.
 *
 * Needs the provisioned PostgreSQL and Docker Engine, the test and workspace images and Chromium
 * (`npm test` once). Memory: about 250 MB per student (30: about 8 GB). Traffic goes only to
 * 127.0.0.1 and the project's own containers. Everything it makes is removed at the end; it aborts
 * (cleaning up) after 45 minutes. Takes about 17 minutes on 2 cores.
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/class.ts
 *      (STUDENTS=30 SAMPLE=3 RUN_SPREAD_SECONDS=10 STREAM_SECONDS=60 ROUNDS=2 to change)
 */
import { execFileSync, fork } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import path from 'node:path';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeMulti, encode } from '@msgpack/msgpack';
import type { Browser, Page } from 'playwright-core';
import WebSocket from 'ws';
import { STARTING_REFRESH_MS } from '../api/pages/workspace-page.ts';
import { simEnvironment } from '../src/docker/runtime.ts';
import { launchBrowser, withPage } from '../test/helpers/browser.ts';
import { TEST_ENV } from '../test/helpers/controllers.ts';
import { TcpProxy } from '../test/helpers/tcp-proxy.ts';
import { asker, startServer, stopChild, type Server } from './deployed.ts';
import {
  benchScope,
  browserCookies,
  docker,
  dropBenchDatabase,
  followRunOutput,
  loadAverage,
  percentile,
  cpuSnapshot,
  cpuSplitSince,
  type CpuSplit,
  processCpuSeconds,
  processRssBytes,
  removeLabelled,
  startRun,
  stopRun,
  type SignedIn,
} from './lib.ts';

const DATABASE = 'cp_bench_class';
const STUDENTS = Number(process.env.STUDENTS ?? 30);
const SAMPLE = Math.min(STUDENTS, Number(process.env.SAMPLE ?? 3));
const RUN_SPREAD_MS = Number(process.env.RUN_SPREAD_SECONDS ?? 10) * 1000;
const STREAM_SECONDS = Number(process.env.STREAM_SECONDS ?? 60);
/** Rounds of both sides: Docker then the control plane in the first, the other way round in the next (a new class each round). */
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const IMAGE = 'classroom-bench-class:latest';
const CODE_MEMORY = '1g';
const RUN_MEMORY = '256m';
const SIM = 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100 SIM_PRINT_EVERY_MS=100 node /app/sim.mjs';

const OPEN_TIMEOUT_MS = 300_000;
const FIRST_LINE_TIMEOUT_MS = 120_000;
const PING_EVERY_MS = 250;
const NT4_PROTOCOL = 'v4.1.networktables.first.wpi.edu';
const NETWORK = TEST_ENV.WORKSPACE_NETWORK;
const EDITOR_PORT = Number(TEST_ENV.EDITOR_PORT);
const NT4_PORT = 5810;
const HALSIM_PORT = 3300;
const TARGET_RATIO = 1.3;
const TARGET_LOOP_P99_MS = 50;
const PROBE = path.join(import.meta.dirname, 'proxy-probe.ts');
const METRICS_TOKEN = randomBytes(24).toString('hex');

type Side = 'managed' | 'docker';
type Asker = ReturnType<typeof asker>;

interface Student extends SignedIn {
  index: number;
  /** When, within the spread, this student presses Run (ms). */
  runAt: number;
}

/** What one side measured. */
interface Figures {
  /** Open → editor usable (ms), the students without a browser; the sample's (Chromium, workbench shown). */
  open: number[];
  openBrowser: number[];
  /** Run click → first output line (ms). */
  firstLine: number[];
  /** A printed line's age on arrival, and NT4 round trips (ms). */
  output: number[];
  nt4: number[];
  failures: string[];
  /** Per phase: the control plane's (managed only; else NaN), and the event-loop delay of an idle Node process beside it (the floor). */
  phases: {
    name: string;
    seconds: number;
    cpuPercent: number;
    rssMaxMb: number;
    loop?: Loop;
    floor: Loop;
    reconciles?: Reconciles;
    split: CpuSplit & { controlPlane: number };
  }[];
}

/** Per controller: reconciles and their seconds in all, from the control plane's /metrics. */
type Reconciles = Record<string, { count: number; seconds: number }>;

async function reconciles(server: Server): Promise<Reconciles> {
  const text = await (await fetch(`${server.origin}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const result: Reconciles = {};
  for (const match of text.matchAll(/^reconcile_duration_seconds_(sum|count)\{controller="([^"]+)"\} (\S+)$/gm)) {
    const entry = (result[match[2]!] ??= { count: 0, seconds: 0 });
    if (match[1] === 'sum') entry.seconds = Number(match[3]);
    else entry.count = Number(match[3]);
  }
  return result;
}

const minus = (after: Reconciles, before: Reconciles): Reconciles =>
  Object.fromEntries(
    Object.entries(after).map(([name, each]) => [
      name,
      { count: each.count - (before[name]?.count ?? 0), seconds: each.seconds - (before[name]?.seconds ?? 0) },
    ]),
  );

interface Loop {
  p50: number;
  p99: number;
  max: number;
  /** Garbage collections meanwhile: how many, and their pauses in all and the longest (ms). */
  gc: { count: number; total: number; max: number };
}

const at = () => performance.now();
const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([promise, sleep(ms).then(() => Promise.reject(new Error(`${what}: nothing within ${ms / 1000} s`)))]);

/** A page's HTML from `url` is VS Code's (code-server's workbench page). */
async function editorAnswers(url: string, headers: Record<string, string> = {}): Promise<boolean> {
  try {
    const answer = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
    const text = await answer.text();
    return answer.status === 200 && text.includes('vscode-workbench-web-configuration');
  } catch {
    return false;
  }
}

/** The workbench shown in `page` (VS Code's `.monaco-workbench`). */
const workbench = (page: Page) => page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: OPEN_TIMEOUT_MS });

// ---------------------------------------------------------------------------------------------
// The control plane's side.

interface JsonWorkspace {
  workspace: { ready?: boolean; observedState: string; statusMessage?: string };
}

/** Open as the workspace page does it, without a browser: open → the editor's page through the proxy (ms). */
async function managedOpen(server: Server, student: Student): Promise<number> {
  const { origin } = server;
  const headers = { cookie: student.cookie };
  const started = at();
  const opened = await fetch(`${origin}/u/${student.slug}/api/workspace/open`, { method: 'POST', headers: { ...headers, origin } });
  if (opened.status >= 300) throw new Error(`Open answered ${opened.status}: ${await opened.text()}`);
  // The page asks at once after Open, then on its own timer while the editor starts, whose phase is the page's.
  let wait = Math.random() * STARTING_REFRESH_MS;
  for (const until = started + OPEN_TIMEOUT_MS; ; await sleep(wait), wait = STARTING_REFRESH_MS) {
    const answer = await fetch(`${origin}/u/${student.slug}/api/workspace`, { headers });
    if (answer.status === 200 && ((await answer.json()) as JsonWorkspace).workspace.ready) break;
    if (at() > until) throw new Error('not ready within the open timeout');
  }
  for (const until = at() + 60_000; !(await editorAnswers(`${origin}/u/${student.slug}/`, headers)); await sleep(100))
    if (at() > until) throw new Error('ready, but the editor page did not come through the proxy within 60 s');
  return at() - started;
}

/** Open in Chromium on the student's workspace page (loaded before the class starts): the click → the workbench shown (ms). */
async function managedBrowserOpen(page: Page): Promise<number> {
  const started = at();
  await page.locator('#open').click();
  await workbench(page);
  return at() - started;
}

async function managedRun(server: Server, student: Student, abort: AbortSignal, onTick: (age: number) => void): Promise<{ runId: string; firstLine: number }> {
  await sleep(student.runAt);
  const started = at();
  const clicked = Date.now();
  const runId = await startRun(server.origin, student);
  const answered = Date.now();
  const first = new Promise<number>((resolve) => {
    let seen = false;
    void followRunOutput(
      server.origin,
      student,
      runId,
      (line) => {
        if (!seen) {
          seen = true;
          resolve(at());
          // BENCH_RUN_TIMES: a file of each run's click, answer and first line (epoch ms), to line up with BENCH_CP_LOG's times.
          if (process.env.BENCH_RUN_TIMES)
            appendFileSync(process.env.BENCH_RUN_TIMES, `${JSON.stringify({ runId, clicked, answered, firstLine: Date.now() })}\n`);
        }
        const tick = /^tick \d+ (\d+)$/.exec(line);
        if (tick) onTick(Date.now() - Number(tick[1]));
      },
      abort,
    );
  });
  return { runId, firstLine: (await within(first, FIRST_LINE_TIMEOUT_MS, 'first output line')) - started };
}

// ---------------------------------------------------------------------------------------------
// Docker's side: the same done straight at the engine.

const baselineLabel = 'bench.class';

async function dockerOpen(tag: string, student: Student): Promise<{ ms: number; endpoint: string }> {
  const labels = { [baselineLabel]: tag };
  const name = `bench-class-${tag}-${student.index}`;
  const started = at();
  await docker.createVolume({ Name: `${name}-home`, Labels: labels });
  const container = await docker.createContainer({
    name,
    Image: IMAGE,
    Env: [`EDITOR_PORT=${EDITOR_PORT}`],
    Labels: labels,
    HostConfig: hostConfig(`${name}-home`, CODE_MEMORY),
  });
  await container.start();
  const address = (await container.inspect()).NetworkSettings.Networks[NETWORK]!.IPAddress;
  const endpoint = `${address}:${EDITOR_PORT}`;
  for (const until = started + OPEN_TIMEOUT_MS; !(await editorAnswers(`http://${endpoint}/`)); await sleep(100))
    if (at() > until) {
      const { State } = await container.inspect();
      const logs = (await container.logs({ stdout: true, stderr: true, tail: 5 })).toString('latin1').replaceAll(/[^\x20-\x7e\n]/g, '');
      throw new Error(`${endpoint}: the editor did not answer within the open timeout (${State.Status}, exit ${State.ExitCode}): ${logs}`);
    }
  return { ms: at() - started, endpoint };
}

/** As the control plane makes a workspace's containers (src/docker/docker-runtime.ts). */
function hostConfig(volume: string, memory: string) {
  const bytes = Number.parseInt(memory, 10) * (memory.endsWith('g') ? 2 ** 30 : 2 ** 20);
  return {
    Memory: bytes,
    MemorySwap: bytes,
    PidsLimit: 1024,
    NetworkMode: NETWORK,
    Mounts: [{ Type: 'volume' as const, Source: volume, Target: '/home/student' }],
    Init: true,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges:true'],
    LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '1' } },
  };
}

/** The sample's Chromium on an editor Docker started: through a TCP relay on 127.0.0.1 to the workbench shown (ms, from `started`). */
async function dockerBrowserLoad(browser: Browser, endpoint: string, started: number): Promise<number> {
  const [host, port] = endpoint.split(':');
  const relay = await new TcpProxy({ host: host!, port: Number(port) }).listen();
  try {
    return await withPage(browser, async (page) => {
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.goto(`http://127.0.0.1:${relay.port}/`, { waitUntil: 'commit', timeout: 60_000 });
      await workbench(page);
      return at() - started;
    });
  } finally {
    await relay.close();
  }
}

async function dockerRun(tag: string, student: Student, abort: AbortSignal, onTick: (age: number) => void): Promise<{ address: string; firstLine: number }> {
  await sleep(student.runAt);
  const labels = { [baselineLabel]: tag };
  const name = `bench-class-${tag}-${student.index}`;
  const started = at();
  const clicked = Date.now();
  const container = await docker.createContainer({
    name: `${name}-run`,
    Image: IMAGE,
    Cmd: ['sh', '-c', SIM],
    WorkingDir: '/home/student',
    Env: simEnvironment({ nt4Port: NT4_PORT, halsimPort: HALSIM_PORT }),
    Labels: labels,
    HostConfig: hostConfig(`${name}-home`, RUN_MEMORY),
  });
  const created = Date.now();
  await container.start();
  const startedAt = Date.now();
  const stream = (await container.logs({ follow: true, stdout: true, stderr: true })) as NodeJS.ReadableStream & { destroy(): void };
  const followed = Date.now();
  abort.addEventListener('abort', () => stream.destroy());
  const text = new PassThrough();
  docker.modem.demuxStream(stream, text, text);
  const first = new Promise<number>((resolve) => {
    let seen = false;
    let partial = '';
    text.on('data', (chunk: Buffer) => {
      if (!seen) {
        seen = true;
        resolve(at());
        if (process.env.BENCH_RUN_TIMES)
          appendFileSync(
            process.env.BENCH_RUN_TIMES,
            `${JSON.stringify({ docker: true, clicked, created, started: startedAt, followed, firstLine: Date.now() })}\n`,
          );
      }
      const lines = (partial + chunk.toString('latin1')).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        const tick = /^tick \d+ (\d+)$/.exec(line);
        if (tick) onTick(Date.now() - Number(tick[1]));
      }
    });
  });
  const firstLine = (await within(first, FIRST_LINE_TIMEOUT_MS, 'first output line')) - started;
  return { address: (await container.inspect()).NetworkSettings.Networks[NETWORK]!.IPAddress, firstLine };
}

// ---------------------------------------------------------------------------------------------
// NetworkTables: one time-synchronisation ping in flight, every PING_EVERY_MS.

async function pingNt4(url: string, headers: Record<string, string>, until: number, times: number[], signal: AbortSignal): Promise<void> {
  let socket: WebSocket | undefined;
  for (let attempt = 1; !socket; attempt++) {
    const candidate = new WebSocket(url, [NT4_PROTOCOL], { headers });
    socket = await new Promise<WebSocket | undefined>((resolve) => {
      candidate.once('open', () => resolve(candidate));
      candidate.once('error', () => resolve(undefined));
    });
    if (!socket && attempt === 20) throw new Error(`${url}: no NetworkTables connection after 20 tries`);
    if (!socket) await sleep(250);
  }
  let answered: (() => void) | undefined;
  socket.on('message', (data: Buffer, binary: boolean) => {
    if (!binary) return;
    for (const message of decodeMulti(data) as Iterable<unknown[]>) if (message[0] === -1) answered?.();
  });
  try {
    while (Date.now() < until && !signal.aborted) {
      const started = at();
      const answer = new Promise<void>((resolve) => (answered = resolve));
      socket.send(encode([-1, 0, 2, Math.round(started * 1000)]));
      await within(answer, 10_000, 'NetworkTables time synchronisation');
      times.push(at() - started);
      await sleep(Math.max(0, PING_EVERY_MS - (at() - started)));
    }
  } finally {
    socket.close();
  }
}

// ---------------------------------------------------------------------------------------------
// A side, start to end.

const noFigures = (): Figures => ({ open: [], openBrowser: [], firstLine: [], output: [], nt4: [], failures: [], phases: [] });

/** Each student presses Stop my workspace; resolves once every workspace is stopped (3 minutes at most). */
async function stopClass(server: Server, class_: Student[]): Promise<void> {
  await Promise.all(
    class_.map(async (student) => {
      const headers = { cookie: student.cookie };
      await fetch(`${server.origin}/u/${student.slug}/api/workspace/stop`, { method: 'POST', headers: { ...headers, origin: server.origin } });
      for (const until = at() + 180_000; at() < until; await sleep(500)) {
        const answer = await fetch(`${server.origin}/u/${student.slug}/api/workspace`, { headers });
        if (answer.status === 200 && ((await answer.json()) as JsonWorkspace).workspace.observedState === 'stopped') return;
      }
      throw new Error(`student ${student.index}'s workspace did not stop within 3 minutes`);
    }),
  );
}

async function runSide(side: Side, server: Server, floor: Asker, class_: Student[], browser: Browser, tag: string): Promise<Figures> {
  const figures = noFigures();
  const pid = server.child.pid!;
  let phase = { name: '', started: 0, cpu: 0, rss: [] as number[], reconciles: {} as Reconciles, split: cpuSnapshot() };
  const rssTimer = setInterval(() => phase.rss.push(processRssBytes(pid)), 1000);
  let phaseBegan = 0n;
  const begin = async (name: string) => {
    await Promise.all([floor('loop-reset'), side === 'managed' && server.ask('loop-reset')]);
    const before = side === 'managed' ? await reconciles(server) : {};
    phase = { name, started: at(), cpu: processCpuSeconds(pid), rss: [processRssBytes(pid)], reconciles: before, split: cpuSnapshot() };
    phaseBegan = process.hrtime.bigint();
  };
  const end = async () => {
    const [floorLoop, loop] = await Promise.all([floor<Loop>('loop'), side === 'managed' ? server.ask<Loop>('loop') : undefined]);
    const seconds = (at() - phase.started) / 1000;
    const managed = side === 'managed';
    const split = cpuSplitSince(phase.split, cpuSnapshot());
    // The phase on the monotonic clock (microseconds), as a --cpu-prof profile of the control plane times its samples.
    if (process.env.BENCH_RUN_TIMES)
      appendFileSync(
        process.env.BENCH_RUN_TIMES,
        `${JSON.stringify({ phase: phase.name, side, fromUs: Number(phaseBegan / 1000n), toUs: Number(process.hrtime.bigint() / 1000n) })}\n`,
      );
    const cores = (key: keyof CpuSplit) => split[key] / seconds;
    figures.phases.push({
      name: phase.name,
      seconds,
      cpuPercent: managed ? ((processCpuSeconds(pid) - phase.cpu) / seconds) * 100 : NaN,
      rssMaxMb: managed ? Math.max(...phase.rss) / 1e6 : NaN,
      ...(loop && { loop, reconciles: minus(await reconciles(server), phase.reconciles) }),
      floor: floorLoop,
      split: {
        machine: cores('machine'),
        containers: cores('containers'),
        engine: cores('engine'),
        postgres: cores('postgres'),
        controlPlane: (processCpuSeconds(pid) - phase.cpu) / seconds,
      },
    });
  };
  const fail = (what: string, student: Student) => (error: unknown) => {
    figures.failures.push(`${what}, student ${student.index}: ${(error as Error).message}`);
    return undefined;
  };
  const sample = class_.slice(0, SAMPLE);
  const rest = class_.slice(SAMPLE);
  const runAbort = new AbortController();
  try {
    // 1. Open.
    const pages: Page[] = [];
    const closers: (() => void)[] = [];
    if (side === 'managed') {
      // Each sample student on their workspace page, Open not yet pressed; closed after the phase.
      for (const student of sample)
        pages.push(
          await new Promise<Page>((resolve, reject) => {
            void withPage(browser, async (page) => {
              await page.setViewportSize({ width: 1280, height: 800 });
              await page.context().addCookies(browserCookies(student.cookie, server.origin));
              await page.goto(`${server.origin}/u/${student.slug}/`);
              await page.locator('#open').waitFor({ state: 'visible' });
              resolve(page);
              await new Promise<void>((closed) => closers.push(closed));
            }).catch(reject);
          }),
        );
    }
    await begin('open');
    const endpoints = new Map<number, string>();
    await Promise.all([
      ...sample.map(async (student, i) => {
        if (side === 'managed') {
          const ms = await managedBrowserOpen(pages[i]!).catch(fail('open (browser)', student));
          if (ms !== undefined) figures.openBrowser.push(ms);
          return;
        }
        const started = at();
        const opened = await dockerOpen(tag, student).catch(fail('open', student));
        if (!opened) return;
        endpoints.set(student.index, opened.endpoint);
        const ms = await dockerBrowserLoad(browser, opened.endpoint, started).catch(fail('open (browser)', student));
        if (ms !== undefined) figures.openBrowser.push(ms);
      }),
      ...rest.map(async (student) => {
        const ms =
          side === 'managed'
            ? await managedOpen(server, student).catch(fail('open', student))
            : await dockerOpen(tag, student).then((opened) => (endpoints.set(student.index, opened.endpoint), opened.ms), fail('open', student));
        if (ms !== undefined) figures.open.push(ms);
      }),
    ]);
    await end();
    for (const close of closers) close();

    // 2. Run, each at their moment within the spread.
    await begin('run');
    const measuring = { on: false };
    const onTick = (age: number) => measuring.on && figures.output.push(age);
    const runs = await Promise.all(
      class_.map(async (student) => {
        if (side === 'managed') {
          const run = await managedRun(server, student, runAbort.signal, onTick).catch(fail('run', student));
          if (!run) return undefined;
          figures.firstLine.push(run.firstLine);
          return { student, nt4: `${server.origin.replace(/^http/, 'ws')}/u/${student.slug}/.cp/nt4/nt/bench`, runId: run.runId };
        }
        const run = await dockerRun(tag, student, runAbort.signal, onTick).catch(fail('run', student));
        if (!run) return undefined;
        figures.firstLine.push(run.firstLine);
        return { student, nt4: `ws://${run.address}:${NT4_PORT}/nt/bench`, runId: '' };
      }),
    );
    await end();

    // 3. Every robot printing and on NetworkTables.
    await begin('stream');
    measuring.on = true;
    const until = Date.now() + STREAM_SECONDS * 1000;
    await Promise.all(
      runs.map(async (run) => {
        if (!run) return;
        const headers: Record<string, string> = side === 'managed' ? { cookie: run.student.cookie, origin: server.origin } : {};
        await pingNt4(run.nt4, headers, until, figures.nt4, runAbort.signal).catch(fail('NetworkTables', run.student));
      }),
    );
    await sleep(Math.max(0, until - Date.now()));
    measuring.on = false;
    await end();
    runAbort.abort();
    if (side === 'managed')
      await Promise.all(
        runs.map(async (run) => {
          if (run) await stopRun(server.origin, run.student, run.runId);
        }),
      );
  } finally {
    clearInterval(rssTimer);
    runAbort.abort();
    if (side === 'docker') await removeLabelled(baselineLabel, tag);
  }
  return figures;
}

// ---------------------------------------------------------------------------------------------

const ms = (value: number | undefined) => (value === undefined || Number.isNaN(value) ? '—' : `${(value / 1000).toFixed(2)} s`);
const msFine = (value: number | undefined) => (value === undefined || Number.isNaN(value) ? '—' : `${value.toFixed(1)} ms`);
const spread = (values: number[], format: (value: number) => string, high = 95) =>
  values.length === 0
    ? '—'
    : `p50 ${format(percentile(values, 50))}, p${high} ${format(percentile(values, high))}, max ${format(Math.max(...values))} (${values.length})`;

function report(figures: Record<Side, Figures>): void {
  console.log('');
  for (const side of ['docker', 'managed'] as Side[]) {
    const each = figures[side];
    console.log(`${side === 'managed' ? 'through the control plane' : 'straight at Docker'}:`);
    console.log(`  open → editor usable: ${spread(each.open, ms)}`);
    console.log(`  open → workbench shown in Chromium (the sample): ${spread(each.openBrowser, ms)}`);
    console.log(`  Run → first output line: ${spread(each.firstLine, ms)}`);
    console.log(`  a line's age on arrival: ${spread(each.output, msFine, 99)}`);
    console.log(`  NetworkTables round trip: ${spread(each.nt4, msFine, 99)}`);
    console.log(`  failures: ${each.failures.length === 0 ? 'none' : `${each.failures.length}\n    ${each.failures.join('\n    ')}`}`);
  }
  console.log('');
  const loopText = (loop: Loop) =>
    `p50 ${loop.p50.toFixed(1)} ms, p99 ${loop.p99.toFixed(1)} ms, max ${loop.max.toFixed(1)} ms (GC: ${loop.gc.count}, ${loop.gc.total.toFixed(0)} ms in all, longest ${loop.gc.max.toFixed(1)} ms)`;
  console.log('the control plane (its own process) by phase, and the event-loop delay of an idle Node process beside it (the floor):');
  for (const phase of figures.managed.phases)
    console.log(
      `  ${phase.name.padEnd(6)} ${phase.seconds.toFixed(1).padStart(6)} s: CPU ${phase.cpuPercent.toFixed(0).padStart(3)} % of a core, RSS max ${phase.rssMaxMb.toFixed(0)} MB, event-loop delay ${loopText(phase.loop!)}; the floor's ${loopText(phase.floor)}`,
    );
  for (const phase of figures.managed.phases)
    console.log(
      `  ${phase.name.padEnd(6)} reconciles: ${Object.entries(phase.reconciles!)
        .filter(([, each]) => each.count > 0)
        .map(([name, each]) => `${name} ${each.count} (mean ${((each.seconds / each.count) * 1000).toFixed(0)} ms)`)
        .join(', ')}`,
    );
  for (const phase of figures.docker.phases)
    console.log(
      `  straight at Docker, ${phase.name.padEnd(6)} ${phase.seconds.toFixed(1).padStart(6)} s: the floor's event-loop delay ${loopText(phase.floor)}`,
    );
  console.log("where the machine's CPU went, in cores (the rest: the bench, Chromium, a finished runc's):");
  for (const side of ['docker', 'managed'] as const)
    for (const { name, split } of figures[side].phases) {
      const rest = split.machine - split.containers - split.engine - split.postgres - split.controlPlane;
      console.log(
        `  ${side.padEnd(7)} ${name.padEnd(6)} busy ${split.machine.toFixed(2)}: containers ${split.containers.toFixed(2)}, dockerd and containerd ${split.engine.toFixed(2)}, PostgreSQL ${split.postgres.toFixed(2)}, control plane ${split.controlPlane.toFixed(2)}, the rest ${rest.toFixed(2)}`,
      );
    }
  const ratio = (of: (each: Figures) => number[]) => percentile(of(figures.managed), 95) / percentile(of(figures.docker), 95);
  const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');
  const open = ratio((each) => each.open);
  const browserOpen = ratio((each) => each.openBrowser);
  const firstLine = ratio((each) => each.firstLine);
  const loopP99 = Math.max(...figures.managed.phases.map((phase) => phase.loop!.p99));
  const floorP99 = Math.max(...figures.managed.phases.map((phase) => phase.floor.p99));
  const failures = figures.managed.failures.length + figures.docker.failures.length;
  console.log('');
  console.log(`p95 open → editor usable: ${open.toFixed(2)}× Docker's (target ≤ ${TARGET_RATIO}×: ${verdict(open <= TARGET_RATIO)})`);
  console.log(
    Number.isNaN(browserOpen)
      ? 'p95 open → workbench in Chromium: not measured (SAMPLE=0: no student in Chromium)'
      : `p95 open → workbench in Chromium: ${browserOpen.toFixed(2)}× (target ≤ ${TARGET_RATIO}×: ${verdict(browserOpen <= TARGET_RATIO)})`,
  );
  console.log(`p95 Run → first output line: ${firstLine.toFixed(2)}× (target ≤ ${TARGET_RATIO}×: ${verdict(firstLine <= TARGET_RATIO)})`);
  console.log(`nothing failing: ${verdict(failures === 0)} (${failures})`);
  console.log(
    `event-loop delay p99, worst phase: ${loopP99.toFixed(1)} ms (target < ${TARGET_LOOP_P99_MS} ms: ${verdict(loopP99 < TARGET_LOOP_P99_MS)}); the floor's in the same phases ${floorP99.toFixed(1)} ms`,
  );
  console.log(`load average at the end: ${loadAverage()}`);
}

async function main(): Promise<void> {
  const { cleanups, cleanup, controlPlaneId } = benchScope(45);
  const tag = randomBytes(4).toString('hex');
  try {
    console.log(`a class of ${STUDENTS} (${SAMPLE} in Chromium); load average at the start: ${loadAverage()}`);
    execFileSync('docker', ['build', '-q', '-t', IMAGE, '-'], {
      input: 'FROM classroom-workspace:test AS sim\nFROM classroom-workspace:latest\nCOPY --from=sim /app /app\n',
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    cleanups.push(async () =>
      docker
        .getImage(IMAGE)
        .remove()
        .catch(() => undefined),
    );
    await dropBenchDatabase(DATABASE);
    const emails = Array.from({ length: STUDENTS * ROUNDS }, (_, i) => `class-${tag}-${i}@school.test`);
    const server = await startServer(
      {
        database: { kind: 'postgres', name: DATABASE },
        controlPlaneId,
        // BENCH_CP_NODE_ARGS: extra Node flags for the control plane, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile it.
        execArgv: ['--import', PROBE, ...(process.env.BENCH_CP_NODE_ARGS ?? '').split(' ').filter(Boolean)],
        env: {
          WORKSPACE_IMAGE: IMAGE,
          CODE_MEMORY_LIMIT: CODE_MEMORY,
          RUN_MEMORY_LIMIT: RUN_MEMORY,
          SIM_COMMAND: SIM,
          MAX_ACTIVE_CONTAINERS: String(STUDENTS),
          METRICS_TOKEN,
        },
        emails,
      },
      cleanups,
    );
    // A class of its own for each round: every round's opens are a first start, as at the control plane's first class.
    const classes: Student[][] = Array.from({ length: ROUNDS }, () => []);
    for (const [index, email] of emails.entries())
      classes[Math.floor(index / STUDENTS)]!.push({
        ...(await server.signIn(email, `Student ${index}`)),
        index: index % STUDENTS,
        runAt: Math.random() * RUN_SPREAD_MS,
      });
    // Where the control plane is scheduled (BENCH_CP_NICE, BENCH_CP_AUTOGROUP, BENCH_CP_CPU_SHARES: bench/deployed.ts).
    const pid = server.child.pid!;
    const cpuGroup = readFileSync(`/proc/${pid}/cgroup`, 'utf8').match(/^\d+:[^:]*\bcpu\b[^:]*:(.*)$/m)?.[1] ?? '?';
    // A kernel without sched_autogroup has no such file.
    const autogroup = existsSync(`/proc/${pid}/autogroup`) ? readFileSync(`/proc/${pid}/autogroup`, 'utf8').trim() : 'no autogroup';
    console.log(
      `${emails.length} students signed in through OpenID Connect; control plane pid ${pid}: niceness ${os.getPriority(pid)}, ${autogroup}, cpu cgroup ${cpuGroup}`,
    );
    // The floor: an idle Node process with the same probe, for what the machine alone does to an event loop.
    const floorChild = fork(PROBE, [], { execArgv: ['--no-warnings=ExperimentalWarning'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    cleanups.push(() => stopChild(floorChild, false));
    const floor = asker(floorChild);
    const browser = await launchBrowser({ full: true });
    cleanups.push(() => browser.close());

    // Warm-up (not counted): the image's files read once, an editor to its workbench and a run to its first line.
    const warm: Student = { ...classes[0]![0]!, index: -1, runAt: 0 };
    const started = at();
    const opened = await dockerOpen(`${tag}w`, warm);
    await dockerBrowserLoad(browser, opened.endpoint, started);
    const abort = new AbortController();
    await dockerRun(`${tag}w`, warm, abort.signal, () => undefined);
    abort.abort();
    await removeLabelled(baselineLabel, `${tag}w`);
    console.log(`warm-up: an editor to its workbench in ${ms(at() - started)}`);

    const figures = { managed: noFigures(), docker: noFigures() };
    for (let round = 0; round < ROUNDS; round++) {
      const class_ = classes[round]!;
      for (const side of round % 2 === 0 ? (['docker', 'managed'] as const) : (['managed', 'docker'] as const)) {
        console.log(
          `round ${round + 1}, ${side}: ${STUDENTS} open, then Run within ${RUN_SPREAD_MS / 1000} s, then ${STREAM_SECONDS} s of output and NetworkTables (load average ${loadAverage()})`,
        );
        const roundTag = `${tag}r${round}`;
        cleanups.push(() => removeLabelled(baselineLabel, roundTag));
        const each = await runSide(side, server, floor, class_, browser, roundTag);
        for (const key of ['open', 'openBrowser', 'firstLine', 'output', 'nt4', 'failures', 'phases'] as const)
          (figures[side][key] as unknown[]).push(...each[key]);
        // The class's workspaces stopped (its editors' CPU and memory given back) before the next side.
        if (side === 'managed') await stopClass(server, class_);
      }
    }
    report(figures);
  } finally {
    await cleanup();
  }
}

await main();
