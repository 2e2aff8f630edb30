/**
 * The class-start storm: what a coach feels at 9:00 when the whole class opens the editor at once.
 * Every student has their own running workspace with the real editor (`classroom-workspace:latest`,
 * code-server, 1 GiB each), started by the control plane's workspace controller on real Docker.
 *
 * 1. Recording: real Chromium (Debian's, test/helpers/browser.ts) opens one signed-in student's
 *    editor through the proxy at `/u/<slug>/` until `.monaco-workbench` is visible and the network
 *    has been quiet for IDLE_MS (1.5 s). Every request under `/u/<slug>/` is kept, in the order the
 *    browser issued it: method, path relative to the workspace, the headers Chromium sent (less
 *    Host, Cookie, Connection, Content-Length; Origin and Referer are rewritten per target; the
 *    Accept-Encoding and Accept-Language its network stack adds, which Playwright does not report
 *    for an intercepted request, are read from a loopback server first), body, status and size.
 *    WebSockets (code-server's management and extension-host sockets) are kept with the first frame
 *    each way; Playwright reports none of the frames VS Code's page sends, so when the server's
 *    first frame is VS Code's `sign` answer the replay sends the auth request of VS Code's protocol
 *    that the page sent (see vscodeOpening). What left the workspace or 127.0.0.1 (blocked by the
 *    helper: the extension gallery) is counted and not replayed. Playwright's request interception,
 *    which the helper's loopback guard needs, turns Chromium's HTTP cache off: every load is a
 *    cold one, as on the first day or after an editor upgrade (code-server's versioned assets are
 *    `Cache-Control: public, max-age=31536000`, so a returning browser asks for far less).
 * 2. Replay: for N = 10, 30 and 60 students at once (SIZES; the larger sizes only when the
 *    machine's free memory holds that many editors, measured on the first ten), every student
 *    replays the recording against their own editor, both through the control plane
 *    (`/u/<slug>/...` with their session cookie) and directly (the container's endpoint from the
 *    store, same paths without `/u/<slug>`: the proxy strips the prefix, code-server runs without a
 *    base path). Like a browser: its own 6 keep-alive connections per origin (undici Pool, new for
 *    each load), requests dispatched in the recorded order as connections free up, each answer read
 *    to its last byte, but without the page's own pauses (parsing, scripts), so the replay is denser
 *    than a real load. A WebSocket is opened when its turn comes (outside the 6), with a fresh
 *    reconnection token, its opening frame sent and its first message waited for (at most
 *    WS_TIMEOUT_MS); the handshake goes no further, so no extension host starts, unlike in a real
 *    load. Per N: one warm-up round per path (not counted), then ROUNDS (3; at least MIN_LOADS, 150,
 *    loads: 15 rounds at N = 10, 5 at N = 30) rounds per path, alternating which path goes first. A request's timeouts are
 *    REQUEST_TIMEOUT_MS (30 s) for headers and body, a whole load's LOAD_TIMEOUT_MS (120 s).
 * 3. Per N and path: time from the round's start to the last response of each student's load, p50
 *    and p95 over students and rounds, the ratio proxy/direct, errors (failed requests or sockets) and
 *    answers whose status differs from the recording; the CPU time, per round and as a share of one
 *    core, of the control plane (its own process, this file with `serve`, read from /proc; during
 *    the proxy rounds it is the proxy's), of all editor containers (cgroups) and of this process (the
 *    load generator), which share the machine's cores; the control plane's CPU per proxied request
 *    and per MiB, the editors' per student load. Target printed: through the proxy ≤ 1.15× direct
 *    at p95 for N = 30 (met / NOT met). Also the requests that take longest at the largest N
 *    (median dispatch → last byte), direct against proxy.
 * 4. Real Chromium: BROWSER_LOADS (5) loads through the proxy and 5 direct, alternating, each in a
 *    fresh context (cold cache) on a student whose editor no browser has opened yet; time from
 *    navigation start to `.monaco-workbench` visible, and to the explorer showing the starter's
 *    `build.gradle` (which needs the management WebSocket); medians. Chromium may only reach
 *    127.0.0.1, and a page on a container's bridge address would not be a secure context as
 *    127.0.0.1 is, so "direct" goes through a raw TCP relay on 127.0.0.1 in this process
 *    (test/helpers/tcp-proxy.ts: bytes piped, no HTTP parsing). Then the editors' memory, opened by
 *    a browser or only replayed.
 *
 * Needs: the provisioned PostgreSQL (127.0.0.1:54329), Docker Engine, Debian's Chromium (`npm test`
 * once, or `bash scripts/provision.sh`) and the workspace image (`sudo bash
 * scripts/build-workspace-image.sh`). Memory: about 100 MB per started editor, 350 MB once a
 * browser has opened it (measured and printed); N = 60 needs about 10 GB free. Traffic goes only
 * to 127.0.0.1 and the project's own containers. Everything it creates (containers and volumes of
 * its control-plane id, the child process, the database cp_bench_storm) is removed at the end; it
 * aborts (cleaning up) after 45 minutes. Takes about 10 minutes on 2 cores.
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/storm.ts
 *      (SIZES=10,30 ROUNDS=3 MIN_LOADS=150 BROWSER_LOADS=5 to change; STORM_RECORDING=<file> writes the recording as JSON)
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser, Page, Request as PwRequest } from 'playwright-core';
import { Pool } from 'undici';
import WebSocket from 'ws';
import { LABELS } from '../src/docker/runtime.ts';
import { launchBrowser, withPage } from '../test/helpers/browser.ts';
import { TcpProxy } from '../test/helpers/tcp-proxy.ts';
import {
  benchDatabase,
  browserCookies,
  cgroupCpuSeconds,
  CONTROL_PLANE_LABEL,
  deadline,
  docker,
  machineBusyPercent,
  median,
  percentile,
  processCpuSeconds,
  processRssBytes,
  removeLabelled,
  serveControlPlane,
  signedSessionCookie,
} from './lib.ts';

const DATABASE = 'cp_bench_storm';
const IMAGE = 'classroom-workspace:latest';
const CODE_MEMORY = '1g';
const SIZES = (process.env.SIZES ?? '10,30,60')
  .split(',')
  .map(Number)
  .filter((n) => n > 0)
  .toSorted((a, b) => a - b);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
/** Loads per path at every N at least (more rounds for smaller classes). */
const MIN_LOADS = Number(process.env.MIN_LOADS ?? 150);
/**
 * Rounds per path at N: at least ROUNDS, and at least MIN_LOADS loads. A round's students share the
 * machine and finish close together, so p95 over students × rounds is about the slowest round's,
 * and other work on the machine moves whole rounds: smaller classes, whose rounds are short, get
 * more of them.
 */
const roundsFor = (n: number) => Math.max(ROUNDS, Math.ceil(MIN_LOADS / n));
const BROWSER_LOADS = Number(process.env.BROWSER_LOADS ?? 5);
/** A browser's connections per origin (HTTP/1.1). */
const CONNECTIONS = 6;
const REQUEST_TIMEOUT_MS = 30_000;
const LOAD_TIMEOUT_MS = 120_000;
const WS_TIMEOUT_MS = 10_000;
/** Quiet network for this long after the workbench shows ends the recorded load. */
const IDLE_MS = 1500;
/** Memory left to everything else on the machine when deciding how many editors fit. */
const RESERVE_BYTES = 4 * 2 ** 30;
/** The target: proxy p95 / direct p95 at this N. */
const TARGET_N = 30;
const TARGET_RATIO = 1.15;

/** A student with a running editor, as the control-plane child reports it. */
interface Student {
  index: number;
  slug: string;
  workspaceId: string;
  cookie: string;
  /** host:port of the editor container on the bridge (the store's editorEndpoint). */
  editorEndpoint: string;
}
interface Ready {
  type: 'ready';
  origin: string;
}
interface Students {
  type: 'students';
  students: Student[];
  error?: string;
}

// ---------------------------------------------------------------------------------------------
// The control plane, in its own process (as bench/proxy.ts): its CPU is the proxy's.

async function serve(): Promise<void> {
  // The real editor: code-server needs far more than the test image's 64 MiB.
  const { plane, dataSource, secret, stop } = await serveControlPlane({ WORKSPACE_IMAGE: IMAGE, CODE_MEMORY_LIMIT: CODE_MEMORY });

  const tag = randomBytes(3).toString('hex');
  const students: Student[] = [];
  /** Makes students up to `count`, opens their workspaces together, and waits until every editor container runs (5 minutes at most). */
  const grow = async (count: number): Promise<Student[]> => {
    const added: { index: number; userId: string; workspaceId: string }[] = [];
    for (let index = students.length; index < count; index++) {
      const { user, workspace } = await plane.store.users.create({ email: `storm-${tag}-${index}@school.test` });
      added.push({ index, userId: user.id, workspaceId: workspace.id });
    }
    await Promise.all(added.map(({ workspaceId }) => plane.store.workspaces.open(workspaceId)));
    const until = Date.now() + 5 * 60_000;
    for (const { index, userId, workspaceId } of added) {
      for (; ; await sleep(200)) {
        const current = await plane.store.workspaces.get(workspaceId);
        if (current?.status.observedState === 'running' && current.status.editorEndpoint) {
          students[index] = {
            index,
            slug: current.slug,
            workspaceId,
            cookie: await signedSessionCookie(dataSource, userId, secret),
            editorEndpoint: current.status.editorEndpoint,
          };
          break;
        }
        if (Date.now() > until)
          throw new Error(`workspace ${index} not running after 5 minutes: ${current?.status.observedState} ${current?.status.statusMessage}`);
      }
    }
    return students.slice(0, count);
  };
  process.on('message', (message: { type: string; count?: number }) => {
    if (message.type === 'stop') void stop();
    if (message.type === 'students')
      void grow(message.count!).then(
        (list) => process.send!({ type: 'students', students: list } satisfies Students),
        (error: unknown) => process.send!({ type: 'students', students: [], error: String(error) } satisfies Students),
      );
  });
  process.send!({ type: 'ready', origin: plane.http!.url } satisfies Ready);
}

// ---------------------------------------------------------------------------------------------
// 1. Recording one real workbench load.

/** One request of the recorded load. */
interface Entry {
  kind: 'http' | 'ws';
  method: string;
  /** Path and query relative to the workspace (what follows `/u/<slug>`). */
  path: string;
  /** The headers Chromium sent (HTTP); filled when the request finished. */
  headers: Record<string, string>;
  body: Buffer | undefined;
  resourceType: string;
  /** The answer's status (101 for a WebSocket), 0 when it never finished, -1 when it failed. */
  status: number;
  startMs: number;
  endMs: number;
  /** Response body bytes as they crossed the network (encoded). */
  bytes: number;
  encoding: string;
  /** WebSocket: the first frame the page sent, when it sent one before the server spoke. */
  firstSent?: Buffer | string;
  /** WebSocket: the first frame the server sent. */
  firstReceived?: Buffer | string;
  /** WebSocket: what the replay sends once open (see vscodeOpening), if anything; then it waits for the first message. */
  opening?: Buffer | string;
  /** WebSocket: its first frames either way (for the recording's JSON). */
  frames?: { sent: boolean; ms: number; bytes: number; preview: string }[];
}
interface Recording {
  entries: Entry[];
  workbenchMs: number;
  idleMs: number;
  outside: string[];
  blocked: string[];
  failed: string[];
  userAgent: string;
}

/** Resolves with `promise`, or with `fallback` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  return Promise.race([promise, sleep(ms, fallback)]);
}

async function recordLoad(browser: Browser, origin: string, student: Student): Promise<Recording> {
  return withPage(browser, async (page) => {
    const context = page.context();
    await context.addCookies(browserCookies(student.cookie, origin));
    await page.setViewportSize({ width: 1280, height: 800 });
    const prefix = `${origin}/u/${student.slug}`;
    // Playwright reports the headers of an intercepted request as the page made them, without those Chromium's network
    // stack adds (Accept-Encoding, Accept-Language): a loopback server tells what they are.
    const networkHeaders = await addedByNetwork(page);
    const entries: Entry[] = [];
    const pending = new Map<PwRequest, Entry>();
    const finishing: Promise<unknown>[] = [];
    const outside: string[] = [];
    const blocked: string[] = [];
    const failed: string[] = [];
    let lastActivity = performance.now();
    const t0 = performance.now();
    context.on('request', (request) => {
      lastActivity = performance.now();
      const url = request.url();
      if (!url.startsWith(`${prefix}/`)) {
        (url.startsWith('http://127.0.0.1') ? outside : blocked).push(`${request.method()} ${url}`);
        return;
      }
      const entry: Entry = {
        kind: 'http',
        method: request.method(),
        path: url.slice(prefix.length),
        headers: {},
        body: request.postDataBuffer() ?? undefined,
        resourceType: request.resourceType(),
        status: 0,
        startMs: performance.now() - t0,
        endMs: NaN,
        bytes: 0,
        encoding: '',
      };
      entries.push(entry);
      pending.set(request, entry);
    });
    const finished = async (request: PwRequest, ok: boolean) => {
      lastActivity = performance.now();
      const entry = pending.get(request);
      if (!entry) return;
      entry.endMs = performance.now() - t0;
      entry.headers = await within(request.allHeaders(), 5000, {});
      if (ok) {
        const response = await within(request.response(), 5000, null);
        entry.status = response?.status() ?? 0;
        entry.encoding = (await within(response?.headerValue('content-encoding') ?? Promise.resolve(null), 5000, null)) ?? '';
        entry.bytes = (
          await within(request.sizes(), 5000, { requestBodySize: 0, requestHeadersSize: 0, responseBodySize: 0, responseHeadersSize: 0 })
        ).responseBodySize;
      } else {
        entry.status = -1;
        failed.push(`${entry.method} ${entry.path}: ${request.failure()?.errorText}`);
      }
      pending.delete(request);
    };
    context.on('requestfinished', (request) => void finishing.push(finished(request, true)));
    context.on('requestfailed', (request) => void finishing.push(finished(request, false)));
    page.on('websocket', (socket) => {
      const url = socket.url();
      const wsPrefix = `ws${prefix.slice(4)}`;
      if (!url.startsWith(`${wsPrefix}/`)) {
        outside.push(`WebSocket ${url}`);
        return;
      }
      const entry: Entry = {
        kind: 'ws',
        method: 'GET',
        path: url.slice(wsPrefix.length),
        headers: {},
        body: undefined,
        resourceType: 'websocket',
        status: 101,
        startMs: performance.now() - t0,
        endMs: NaN,
        bytes: 0,
        encoding: '',
      };
      entries.push(entry);
      let received = false;
      entry.frames = [];
      const frame = (sent: boolean, payload: string | Buffer) => {
        if (entry.frames!.length < 8)
          entry.frames!.push({
            sent,
            ms: performance.now() - t0,
            bytes: payload.length,
            preview: preview(payload),
          });
      };
      socket.on('framesent', ({ payload }) => {
        frame(true, payload);
        if (!received && entry.firstSent === undefined) entry.firstSent = payload;
      });
      socket.on('framereceived', ({ payload }) => {
        frame(false, payload);
        if (received) return;
        received = true;
        entry.endMs = performance.now() - t0;
        entry.firstReceived = payload;
      });
    });

    await page.goto(`${prefix}/`, { waitUntil: 'commit', timeout: 60_000 });
    await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 120_000 });
    const workbenchMs = performance.now() - t0;
    for (const until = performance.now() + 30_000; performance.now() < until; await sleep(100)) {
      if (pending.size === 0 && performance.now() - lastActivity >= IDLE_MS) break;
    }
    await within(Promise.all(finishing), 10_000, []);
    const idleMs = performance.now() - t0;
    const userAgent = entries.find((entry) => entry.headers['user-agent'])?.headers['user-agent'] ?? (await page.evaluate(() => navigator.userAgent));
    for (const entry of entries) {
      if (entry.kind === 'http') entry.headers = { ...networkHeaders, ...entry.headers };
      else entry.opening = entry.firstSent ?? vscodeOpening(entry.firstReceived);
    }
    return { entries: entries.toSorted((a, b) => a.startMs - b.startMs), workbenchMs, idleMs, outside, blocked, failed, userAgent };
  });
}

/**
 * What opens a recorded WebSocket whose first frames Playwright did not report (it reports none of
 * the frames VS Code's workbench sends; those it receives it does): when the server's first frame is
 * VS Code's `sign` answer, the page had sent the auth request of VS Code's remote protocol
 * (src/vs/platform/remote/common/remoteAgentConnection.ts), a control message of its
 * PersistentProtocol (src/vs/base/parts/ipc/common/ipc.net.ts): a 13-byte header (type 2 =
 * Control, id 0, ack 0, data length, big-endian) and the JSON `{type: 'auth', auth, data}`, with
 * `auth` the connection token (code-server runs without one: twenty zeros) and `data` a challenge.
 */
function vscodeOpening(firstReceived: Buffer | string | undefined): Buffer | undefined {
  if (!Buffer.isBuffer(firstReceived) || firstReceived.length < 13 || firstReceived[0] !== 2) return undefined;
  if (!firstReceived.subarray(13).toString('utf8').includes('"type":"sign"')) return undefined;
  const data = Buffer.from(JSON.stringify({ type: 'auth', auth: '00000000000000000000', data: randomUUID() }));
  const header = Buffer.alloc(13);
  header.writeUInt8(2, 0);
  header.writeUInt32BE(data.length, 9);
  return Buffer.concat([header, data]);
}

const base64 = (payload: Buffer | string | undefined) => (typeof payload === 'string' ? payload : payload?.toString('base64'));
const preview = (payload: Buffer | string | undefined) =>
  payload === undefined
    ? 'none'
    : `${payload.length} bytes: ${(typeof payload === 'string' ? payload : payload.toString('latin1')).slice(0, 60).replace(/[^\x20-\x7e]/g, '.')}`;

/** Accept-Encoding and Accept-Language as Chromium's network stack sends them, seen by a loopback server. */
async function addedByNetwork(page: Page): Promise<Record<string, string>> {
  let seen: http.IncomingHttpHeaders = {};
  const server = http.createServer((req, res) => {
    seen = req.headers;
    res.end('<!doctype html><title>probe</title>');
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  try {
    await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { timeout: 10_000 });
  } finally {
    server.closeAllConnections();
    server.close();
  }
  const headers: Record<string, string> = {};
  for (const name of ['accept-encoding', 'accept-language']) if (typeof seen[name] === 'string') headers[name] = seen[name];
  return headers;
}

// ---------------------------------------------------------------------------------------------
// 2. Replaying it, one simulated browser per student.

interface Target {
  /** http://host:port the student's browser talks to. */
  origin: string;
  /** `/u/<slug>` through the proxy, '' direct. */
  prefix: string;
  /** The control plane's session cookie (through the proxy). */
  cookie: string | undefined;
}
interface Load {
  /** From the round's start to the last response (or first WebSocket message) of this student's load. */
  lastMs: number;
  errors: number;
  /** Requests sent again after their kept-alive connection closed before any answer. */
  retries: number;
  mismatches: number;
  bytes: number;
  /** Per recorded entry: from dispatch to last byte (NaN when not sent). */
  durations: number[];
  firstError?: string;
}

/** Headers that are the connection's or the target's, never replayed as recorded. */
const NOT_REPLAYED = new Set(['host', 'cookie', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'upgrade', 'origin', 'referer']);

function requestHeaders(entry: Entry, target: Target): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(entry.headers)) if (!name.startsWith(':') && !NOT_REPLAYED.has(name)) headers[name] = value;
  if (entry.headers.origin) headers.origin = target.origin;
  if (entry.headers.referer) {
    const referer = new URL(entry.headers.referer);
    const at = referer.pathname.indexOf('/', 3);
    // The recorded referer is under /u/<recorded slug>: the same page under this target.
    headers.referer = `${target.origin}${target.prefix}${referer.pathname.startsWith('/u/') && at !== -1 ? referer.pathname.slice(at) : referer.pathname}${referer.search}`;
  }
  // The editor's own cookies (none are expected from code-server with --auth none) go both ways; the control plane's only to it.
  const editorCookies = (entry.headers.cookie ?? '')
    .split(';')
    .map((pair) => pair.trim())
    .filter((pair) => pair && !pair.toLowerCase().startsWith('cp_session'));
  const cookies = [...(target.cookie ? [target.cookie] : []), ...editorCookies];
  if (cookies.length > 0) headers.cookie = cookies.join('; ');
  return headers;
}

/** The WebSocket path with a fresh reconnection token: VS Code's server keys connections by it. */
function freshToken(path: string): string {
  return path.replace(/([?&]reconnectionToken=)[^&]*/, `$1${randomUUID()}`);
}

/** Opens a recorded WebSocket, sends its first frame, and resolves at the first message (or at open, when the recording had no exchange). */
function connectWs(entry: Entry, target: Target, userAgent: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const url = `ws${target.origin.slice(4)}${target.prefix}${freshToken(entry.path)}`;
    const headers: Record<string, string> = { 'user-agent': userAgent };
    if (target.cookie) headers.cookie = target.cookie;
    const ws = new WebSocket(url, { headers, origin: target.origin, handshakeTimeout: WS_TIMEOUT_MS });
    let settled = false;
    const done = (error?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ws.terminate();
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(() => done(new Error(`WebSocket ${entry.path.slice(0, 60)}: no message within ${WS_TIMEOUT_MS} ms`)), WS_TIMEOUT_MS);
    ws.on('error', (error) => done(error));
    ws.on('unexpected-response', (_request, response) => done(new Error(`WebSocket upgrade refused: ${response.statusCode}`)));
    ws.once('open', () => {
      if (entry.opening !== undefined) ws.send(entry.opening);
      else if (entry.firstReceived === undefined) done();
    });
    ws.once('message', () => done());
  });
}

/** One student's load: the recorded entries in order over CONNECTIONS keep-alive connections, WebSockets beside them. */
async function replay(entries: Entry[], target: Target, t0: number, userAgent: string): Promise<Load> {
  const pool = new Pool(target.origin, {
    connections: CONNECTIONS,
    pipelining: 1,
    connect: { timeout: 10_000 },
    headersTimeout: REQUEST_TIMEOUT_MS,
    bodyTimeout: REQUEST_TIMEOUT_MS,
  });
  const signal = AbortSignal.timeout(LOAD_TIMEOUT_MS);
  const load: Load = { lastMs: 0, errors: 0, retries: 0, mismatches: 0, bytes: 0, durations: entries.map(() => NaN) };
  let last = t0;
  const fail = (error: unknown) => {
    load.errors++;
    load.firstError ??= error instanceof Error ? error.message : String(error);
  };
  const sockets: Promise<void>[] = [];
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < entries.length && !signal.aborted; i = next++) {
      const entry = entries[i]!;
      const start = performance.now();
      const settle = () => {
        const end = performance.now();
        load.durations[i] = end - start;
        if (end > last) last = end;
      };
      if (entry.kind === 'ws') {
        sockets.push(connectWs(entry, target, userAgent).then(settle, (error: unknown) => (fail(error), settle())));
        continue;
      }
      for (let attempt = 1; ; attempt++) {
        let answered = false;
        try {
          const { statusCode, body } = await pool.request({
            method: entry.method as 'GET',
            path: `${target.prefix}${entry.path}`,
            headers: requestHeaders(entry, target),
            body: entry.body,
            signal,
          });
          answered = true;
          for await (const chunk of body) load.bytes += (chunk as Buffer).length;
          if (statusCode !== entry.status) load.mismatches++;
        } catch (error) {
          // As browsers do (and the proxy, for a GET): a request whose kept-alive connection the server closed before
          // any answer (code-server drops idle ones after 5 s) is sent once more. Counted apart from errors.
          if (attempt === 1 && !answered && !signal.aborted && (error as { code?: unknown }).code === 'UND_ERR_SOCKET') {
            load.retries++;
            continue;
          }
          fail(error);
        }
        break;
      }
      settle();
    }
  };
  try {
    await Promise.all(Array.from({ length: CONNECTIONS }, worker));
    await Promise.all(sockets);
  } finally {
    await pool.destroy().catch(() => undefined);
  }
  load.lastMs = last - t0;
  return load;
}

type PathName = 'direct' | 'proxy';
interface Round {
  path: PathName;
  n: number;
  loads: Load[];
  wallMs: number;
  planeCpu: number;
  editorsCpu: number;
  ownCpu: number;
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
  deadline(45 * 60_000, cleanup);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void cleanup().finally(() => process.exit(130)));
  const began = performance.now();

  await docker
    .getImage(IMAGE)
    .inspect()
    .catch(() => {
      throw new Error(`${IMAGE} is missing: build it with sudo bash scripts/build-workspace-image.sh`);
    });
  const secret = randomBytes(24).toString('hex');
  const controlPlaneId = `bench-${randomBytes(4).toString('hex')}`;
  let interrupted: string | undefined;

  try {
    const { drop } = await benchDatabase(DATABASE);
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

    const cpus = os.cpus();
    const busy = await machineBusyPercent(2000);
    const memAvailable0 = memAvailableBytes();
    console.log(
      `machine: ${cpus.length} CPUs (${cpus[0]?.model.trim()}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB (${gib(memAvailable0)} available); Node ${process.version}; load average ${os
        .loadavg()
        .map((value) => value.toFixed(2))
        .join(' ')}`,
    );
    console.log(`machine busy before the run (other processes): ${busy.toFixed(0)} % of ${cpus.length} CPUs${busy > 10 ? ' — figures are skewed' : ''}`);

    const child = fork(import.meta.filename, ['serve'], {
      execArgv: ['--no-warnings=ExperimentalWarning'],
      env: { ...process.env, BENCH_DATABASE: DATABASE, BENCH_CONTROL_PLANE_ID: controlPlaneId, BENCH_SESSION_SECRET: secret },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    cleanups.push(() => stopChild(child));
    const { origin } = await new Promise<Ready>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`control plane exited (${code}) before it listened`)));
      child.once('message', (message: Ready) => resolve(message));
    });
    child.removeAllListeners('exit');
    child.once('exit', (code, signal) => console.error(`control plane exited (${code ?? signal})`));
    const cpPid = child.pid!;

    /** Grows the class to `count` running editors that answer; returns every student and each editor container's pid. */
    const pids = new Map<string, number>();
    const grow = async (count: number): Promise<Student[]> => {
      const t0 = performance.now();
      const answer = new Promise<Students>((resolve) => {
        const listener = (message: { type: string }) => {
          if (message.type !== 'students') return;
          child.off('message', listener);
          resolve(message as Students);
        };
        child.on('message', listener);
      });
      child.send({ type: 'students', count });
      const { students, error } = await answer;
      if (error) throw new Error(`opening ${count} workspaces: ${error}`);
      // Running is not answering: code-server starts listening a moment later.
      const until = Date.now() + 3 * 60_000;
      await Promise.all(
        students.map(async (student) => {
          for (; ; await sleep(250)) {
            if ((await status(`http://${student.editorEndpoint}/healthz`)) === 200) return;
            if (Date.now() > until) throw new Error(`editor of ${student.slug} not answering after 3 minutes`);
          }
        }),
      );
      const containers = await docker.listContainers({ filters: { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`, `${LABELS.role}=code`] } });
      for (const info of containers) {
        const workspaceId = info.Labels[LABELS.workspaceId]!;
        if (!pids.has(workspaceId)) pids.set(workspaceId, (await docker.getContainer(info.Id).inspect()).State.Pid);
      }
      console.log(`  ${count} editors running and answering (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
      return students;
    };

    console.log(`\nControl plane: child pid ${cpPid} on ${origin}; editors: ${IMAGE}, ${CODE_MEMORY} each`);
    let students = await grow(SIZES[0]!);

    // Memory: what one editor takes, so that the larger classes are only tried when they fit.
    const stats = await editorMemory(students, pids);
    const memAvailable1 = memAvailableBytes();
    const perEditorStats = median(stats);
    const perEditorMachine = (memAvailable0 - memAvailable1) / students.length;
    const perEditor = Math.max(perEditorStats, perEditorMachine);
    console.log(
      `\nMemory: a started editor uses ${mib(perEditorStats)} (median of docker stats over ${students.length}, largest ${mib(Math.max(...stats))}); the machine's available memory fell ${mib(perEditorMachine)} per editor (with the control plane, RSS ${mib(processRssBytes(cpPid))}); ${gib(memAvailable1)} available`,
    );

    // 1. The recording.
    const browser = await launchBrowser({ full: true });
    cleanups.push(() => browser.close());
    console.log(`\n1. Recording one workbench load through the proxy (Chromium ${browser.version()})`);
    const recording = await recordLoad(browser, origin, students[0]!);
    if (process.env.STORM_RECORDING)
      writeFileSync(
        process.env.STORM_RECORDING,
        JSON.stringify(
          recording.entries.map(({ body, firstSent, firstReceived, opening, ...entry }) => ({
            ...entry,
            body: body?.toString('base64'),
            firstSent: base64(firstSent),
            firstReceived: base64(firstReceived),
            opening: base64(opening),
          })),
          null,
          1,
        ),
      );
    const replayed = recording.entries.filter((entry) => entry.status !== 0 && entry.status !== -1);
    describeRecording(recording, replayed);
    if (!replayed.some((entry) => entry.kind === 'http')) throw new Error('nothing recorded');

    const sizes = [SIZES[0]!];
    for (const size of SIZES.slice(1)) {
      const needed = (size - students.length) * perEditor * 1.5;
      const fits = needed <= memAvailable1 - RESERVE_BYTES;
      console.log(
        `  N = ${size}: ${size - students.length} more editors need about ${gib(needed)} (×1.5 for their load), ${gib(memAvailable1 - RESERVE_BYTES)} can be used (${gib(RESERVE_BYTES)} kept free): ${fits ? 'fits' : 'does NOT fit, stopping at N = ' + sizes.at(-1)}`,
      );
      if (!fits) break;
      sizes.push(size);
    }

    // 2. Replays.
    const httpCount = replayed.filter((entry) => entry.kind === 'http').length;
    const wsCount = replayed.length - httpCount;
    console.log(
      `\n2. Replay: ${httpCount} requests + ${wsCount} WebSockets per student, ${CONNECTIONS} connections per student and path, ${sizes.map((n) => `${roundsFor(n)} rounds at N = ${n}`).join(', ')} per path after one warm-up each, alternating`,
    );
    const targetOf = (student: Student, path: PathName): Target =>
      path === 'direct'
        ? { origin: `http://${student.editorEndpoint}`, prefix: '', cookie: undefined }
        : { origin, prefix: `/u/${student.slug}`, cookie: student.cookie };
    const runRound = async (path: PathName, class_: Student[]): Promise<Round> => {
      if (child.exitCode !== null) throw new Error('the control plane exited');
      const editorsCpu0 = editorsCpu(class_, pids);
      const planeCpu0 = processCpuSeconds(cpPid);
      const own0 = process.cpuUsage();
      const t0 = performance.now();
      const loads = await Promise.all(class_.map((student) => replay(replayed, targetOf(student, path), t0, recording.userAgent)));
      const wallMs = performance.now() - t0;
      const own = process.cpuUsage(own0);
      // Another process restarted Docker (the test suite does) or removed an editor: the round, and what follows, are meaningless.
      if (!editorsAlive(class_, pids)) throw new EditorsGone();
      return {
        path,
        n: class_.length,
        loads,
        wallMs,
        planeCpu: processCpuSeconds(cpPid) - planeCpu0,
        editorsCpu: editorsCpu(class_, pids) - editorsCpu0,
        ownCpu: (own.user + own.system) / 1e6,
      };
    };
    const roundLine = (label: string, round: Round) => {
      const times = round.loads.map((load) => load.lastMs);
      const errors = round.loads.reduce((sum, load) => sum + load.errors, 0);
      const mismatches = round.loads.reduce((sum, load) => sum + load.mismatches, 0);
      const retries = round.loads.reduce((sum, load) => sum + load.retries, 0);
      const firstError = round.loads.find((load) => load.firstError)?.firstError;
      console.log(
        `  ${label.padEnd(22)} ${round.path.padEnd(6)} p50 ${seconds(median(times))} p95 ${seconds(percentile(times, 95))} max ${seconds(Math.max(...times))}; ${mib(round.loads.reduce((sum, load) => sum + load.bytes, 0) / round.n)}/student; CPU: control plane ${round.planeCpu.toFixed(2)} s, editors ${round.editorsCpu.toFixed(2)} s, generator ${round.ownCpu.toFixed(2)} s${errors ? `; ${errors} errors (${firstError})` : ''}${mismatches ? `; ${mismatches} statuses differ from the recording` : ''}${retries ? `; ${retries} sent again on a new connection` : ''}`,
      );
    };

    const results = new Map<number, Round[]>();
    sizes: for (const n of sizes) {
      if (students.length < n) {
        console.log(`\n  opening ${n - students.length} more workspaces`);
        students = await grow(n);
      }
      const class_ = students.slice(0, n);
      console.log(`\n  N = ${n}`);
      await sleep(2000);
      const rounds: Round[] = [];
      try {
        for (const path of ['direct', 'proxy'] as const) roundLine('warm-up', await runRound(path, class_));
        for (let round = 0; round < roundsFor(n); round++) {
          for (const path of round % 2 === 0 ? (['proxy', 'direct'] as const) : (['direct', 'proxy'] as const)) {
            await sleep(1000);
            const result = await runRound(path, class_);
            rounds.push(result);
            roundLine(`round ${round + 1}`, result);
          }
        }
      } catch (error) {
        if (!(error instanceof EditorsGone)) throw error;
        interrupted = `editors went away during N = ${n} (Docker restarted by another process?): its rounds are dropped, the browser loads skipped`;
        console.log(`  ${interrupted}`);
        break sizes;
      }
      results.set(n, rounds);
    }

    // 3. The figures.
    console.log("\n3. Time to the last response of a student's load (s), over students × rounds; CPU per round (s, and % of one core over the round)");
    console.log(
      `  ${'N'.padStart(3)}  ${'path'.padEnd(7)}${'loads'.padStart(6)}${'p50'.padStart(8)}${'p95'.padStart(8)}${'max'.padStart(8)}${'errors'.padStart(8)}  ${'control plane CPU'.padEnd(20)}${'editors CPU'.padEnd(18)}${'generator CPU'.padEnd(14)}`,
    );
    let verdictLine = `target (N = ${TARGET_N}): not measured`;
    for (const [n, rounds] of results) {
      const figures = (path: PathName) => {
        const of = rounds.filter((round) => round.path === path);
        const times = of.flatMap((round) => round.loads.map((load) => load.lastMs));
        const cpu = (pick: (round: Round) => number) => {
          const perRound = median(of.map(pick));
          const share = median(of.map((round) => pick(round) / (round.wallMs / 1000)));
          return `${perRound.toFixed(2)} s (${(100 * share).toFixed(0)} %)`;
        };
        console.log(
          `  ${String(n).padStart(3)}  ${path.padEnd(7)}${String(times.length).padStart(6)}${seconds(median(times)).padStart(8)}${seconds(percentile(times, 95)).padStart(8)}${seconds(Math.max(...times)).padStart(8)}${String(of.reduce((sum, round) => sum + round.loads.reduce((s, load) => s + load.errors, 0), 0)).padStart(8)}  ${cpu((round) => round.planeCpu).padEnd(20)}${cpu((round) => round.editorsCpu).padEnd(18)}${cpu((round) => round.ownCpu).padEnd(14)}`,
        );
        return { p50: median(times), p95: percentile(times, 95) };
      };
      const direct = figures('direct');
      const proxied = figures('proxy');
      const proxyRounds = rounds.filter((round) => round.path === 'proxy');
      const planeUs = median(proxyRounds.map((round) => (round.planeCpu * 1e6) / (round.n * httpCount)));
      const editorsPerLoad = median(rounds.map((round) => round.editorsCpu / round.n));
      const planeMsPerMiB = median(proxyRounds.map((round) => (round.planeCpu * 1e3) / (round.loads.reduce((sum, load) => sum + load.bytes, 0) / 2 ** 20)));
      const ratio95 = proxied.p95 / direct.p95;
      // Each pair of adjacent rounds (proxy then direct, or direct then proxy) shares the machine's other work most closely.
      const pairs = Array.from({ length: Math.floor(rounds.length / 2) }, (_, k) => {
        const [a, b] = [rounds[2 * k]!, rounds[2 * k + 1]!];
        const [p, d] = a.path === 'proxy' ? [a, b] : [b, a];
        const times = (round: Round) => round.loads.map((load) => load.lastMs);
        return { p50: median(times(p)) / median(times(d)), p95: percentile(times(p), 95) / percentile(times(d), 95) };
      });
      console.log(
        `       proxy/direct: p50 ${(proxied.p50 / direct.p50).toFixed(2)}x, p95 ${ratio95.toFixed(2)}x (median over ${pairs.length} adjacent round pairs: p50 ${median(pairs.map((pair) => pair.p50)).toFixed(2)}x, p95 ${median(pairs.map((pair) => pair.p95)).toFixed(2)}x); control plane CPU ${planeUs.toFixed(0)} µs per proxied request (its WebSockets included), ${planeMsPerMiB.toFixed(1)} ms per MiB of bodies; editors ${(editorsPerLoad * 1000).toFixed(0)} ms CPU per student load`,
      );
      if (n === TARGET_N)
        verdictLine = `target: through the proxy ≤ ${TARGET_RATIO}x direct at p95 for N = ${TARGET_N}: ${ratio95.toFixed(2)}x, ${ratio95 <= TARGET_RATIO ? 'met' : 'NOT met'}`;
    }
    console.log(`  ${verdictLine}`);
    const largest = [...results.keys()].at(-1);
    if (largest !== undefined) dominating(replayed, results.get(largest)!, largest);

    // 4. Real Chromium, one at a time.
    if (!interrupted) {
      console.log(
        `\n4. Real Chromium: navigation start → .monaco-workbench visible (and → explorer shows build.gradle), ${BROWSER_LOADS} loads per path, alternating, each on an editor no browser opened yet`,
      );
      const fresh = students.slice(1);
      if (fresh.length < 2 * BROWSER_LOADS) console.log(`  (only ${fresh.length} unopened editors: some are opened twice)`);
      const browserTimes: Record<PathName, { workbench: number; explorer: number }[]> = { direct: [], proxy: [] };
      for (let k = 0; k < 2 * BROWSER_LOADS; k++) {
        const pair = Math.floor(k / 2);
        const path: PathName = (k % 2 === 0) === (pair % 2 === 0) ? 'proxy' : 'direct';
        const student = fresh[k % fresh.length]!;
        const result = await browserLoad(browser, path, origin, student);
        browserTimes[path].push(result);
        console.log(
          `  load ${k + 1} ${path.padEnd(6)} workbench ${seconds(result.workbench)}, explorer ${Number.isNaN(result.explorer) ? 'not within 60 s' : seconds(result.explorer)}`,
        );
      }
      // A load whose explorer did not show within 60 s counts as the slowest.
      const med = (path: PathName, key: 'workbench' | 'explorer') => median(browserTimes[path].map((each) => (Number.isNaN(each[key]) ? Infinity : each[key])));
      console.log(
        `  medians: workbench direct ${seconds(med('direct', 'workbench'))}, proxy ${seconds(med('proxy', 'workbench'))} (${(med('proxy', 'workbench') / med('direct', 'workbench')).toFixed(2)}x); explorer direct ${seconds(med('direct', 'explorer'))}, proxy ${seconds(med('proxy', 'explorer'))} (${(med('proxy', 'explorer') / med('direct', 'explorer')).toFixed(2)}x)`,
      );

      const opened = await editorMemory(fresh.slice(0, 2 * BROWSER_LOADS), pids);
      const replayedOnly = await editorMemory(students.slice(1 + 2 * BROWSER_LOADS), pids);
      console.log(
        `  editor memory now: ${mib(median(opened))} median for those a browser opened (VS Code's extension host runs), ${replayedOnly.length ? mib(median(replayedOnly)) : '—'} for those only replayed`,
      );
    }

    const busyAfter = await machineBusyPercent(2000);
    console.log(
      `\nmachine busy after the runs (other processes): ${busyAfter.toFixed(0)} % of ${os.cpus().length} CPUs; load average ${os
        .loadavg()
        .map((value) => value.toFixed(2))
        .join(' ')}; run took ${((performance.now() - began) / 60_000).toFixed(1)} min`,
    );
  } finally {
    await cleanup();
  }
  process.exit(interrupted ? 1 : 0);
}

function describeRecording(recording: Recording, replayed: Entry[]): void {
  const requests = replayed.filter((entry) => entry.kind === 'http');
  const bytes = requests.reduce((sum, entry) => sum + entry.bytes, 0);
  const byType = new Map<string, number>();
  for (const entry of requests) byType.set(entry.resourceType, (byType.get(entry.resourceType) ?? 0) + 1);
  const statuses = new Map<number, number>();
  for (const entry of requests) statuses.set(entry.status, (statuses.get(entry.status) ?? 0) + 1);
  const encodings = new Map<string, number>();
  for (const entry of requests) encodings.set(entry.encoding || 'none', (encodings.get(entry.encoding || 'none') ?? 0) + 1);
  const unique = new Set(requests.map((entry) => `${entry.method} ${entry.path}`)).size;
  console.log(
    `  workbench visible after ${seconds(recording.workbenchMs)}, network quiet after ${seconds(recording.idleMs)}; ${requests.length} requests (${unique} distinct), ${mib(bytes)} of bodies as sent`,
  );
  console.log(`  by type: ${[...byType].map(([type, count]) => `${type} ${count}`).join(', ')}`);
  console.log(
    `  statuses: ${[...statuses].map(([code, count]) => `${code} ×${count}`).join(', ')}; content-encoding: ${[...encodings].map(([name, count]) => `${name} ×${count}`).join(', ')}; methods: ${[...new Set(requests.map((entry) => entry.method))].join(', ')}`,
  );
  for (const entry of replayed.filter((each) => each.kind === 'ws'))
    console.log(
      `  WebSocket ${entry.path.replace(/reconnectionToken=[^&]*/, 'reconnectionToken=…')}: page's first frame ${entry.firstSent === undefined ? 'not reported' : `${entry.firstSent.length} bytes`}, first message after ${seconds(entry.endMs - entry.startMs)} (${preview(entry.firstReceived)}); the replay sends ${entry.opening === undefined ? 'nothing' : entry.opening === entry.firstSent ? 'the recorded frame' : "VS Code's auth request"} and waits for the first message`,
    );
  const biggest = requests.toSorted((a, b) => b.bytes - a.bytes).slice(0, 5);
  console.log(`  largest: ${biggest.map((entry) => `${short(entry.path)} ${mib(entry.bytes)}`).join(', ')}`);
  const skipped = recording.entries.length - replayed.length;
  console.log(
    `  not replayed: ${skipped} unfinished or failed under /u/<slug>/ (${recording.failed.slice(0, 3).join('; ') || 'none failed'}), ${recording.outside.length} outside it on 127.0.0.1 (${recording.outside.slice(0, 3).join(', ') || '—'}), ${recording.blocked.length} to other hosts (blocked: ${[...new Set(recording.blocked.map((line) => new URL(line.split(' ')[1]!).host))].join(', ') || '—'})`,
  );
}

/** The requests whose median duration (dispatch → last byte) is longest, per path, at N. */
function dominating(entries: Entry[], rounds: Round[], n: number): void {
  const medians = (path: PathName) =>
    entries.map((_, i) => {
      const values = rounds
        .filter((round) => round.path === path)
        .flatMap((round) => round.loads.map((load) => load.durations[i]!))
        .filter((value) => !Number.isNaN(value));
      return values.length ? median(values) : NaN;
    });
  const direct = medians('direct');
  const proxied = medians('proxy');
  const order = entries.map((_, i) => i).toSorted((a, b) => (proxied[b] ?? 0) - (proxied[a] ?? 0));
  console.log(`  longest requests at N = ${n} (median dispatch → last byte, direct / proxy; recorded size):`);
  for (const i of order.slice(0, 6)) {
    const entry = entries[i]!;
    console.log(
      `    ${entry.kind === 'ws' ? 'WS ' : ''}${short(entry.path).padEnd(70)} ${seconds(direct[i]!)} / ${seconds(proxied[i]!)}  ${entry.kind === 'ws' ? '' : mib(entry.bytes)}`,
    );
  }
}

/** One real Chromium load of a student's editor: through the proxy, or direct through a loopback TCP relay. */
async function browserLoad(browser: Browser, path: PathName, origin: string, student: Student): Promise<{ workbench: number; explorer: number }> {
  const [host, port] = student.editorEndpoint.split(':');
  const relay = path === 'direct' ? await new TcpProxy({ host: host!, port: Number(port) }).listen() : undefined;
  try {
    return await withPage(browser, async (page) => {
      await page.setViewportSize({ width: 1280, height: 800 });
      if (path === 'proxy') await page.context().addCookies(browserCookies(student.cookie, origin));
      const url = relay ? `http://127.0.0.1:${relay.port}/` : `${origin}/u/${student.slug}/`;
      const t0 = performance.now();
      await page.goto(url, { waitUntil: 'commit', timeout: 60_000 });
      await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 120_000 });
      const workbench = performance.now() - t0;
      const explorer = await page
        .getByRole('treeitem', { name: 'build.gradle' })
        .waitFor({ timeout: 60_000 })
        .then(
          () => performance.now() - t0,
          () => NaN,
        );
      return { workbench, explorer };
    });
  } finally {
    await relay?.close();
  }
}

/** Memory use of each student's editor container (docker stats, less the inactive page cache, as `docker stats` shows it). */
async function editorMemory(class_: Student[], pids: Map<string, number>): Promise<number[]> {
  return Promise.all(
    class_.map(async (student) => {
      const pid = pids.get(student.workspaceId);
      const id = pid === undefined ? undefined : /[0-9a-f]{64}/.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))?.[0];
      if (!id) return NaN;
      const sample = await docker.getContainer(id).stats({ stream: false });
      const cache = (sample.memory_stats.stats as Record<string, number | undefined> | undefined)?.total_inactive_file ?? 0;
      return (sample.memory_stats.usage ?? 0) - cache;
    }),
  ).then((values) => values.filter((value) => !Number.isNaN(value)));
}

/** Thrown when an editor container is gone after a round. */
class EditorsGone extends Error {}

/** Whether every editor container of `class_` still runs (its init process is there). */
function editorsAlive(class_: Student[], pids: Map<string, number>): boolean {
  return class_.every((student) => {
    const pid = pids.get(student.workspaceId);
    return pid !== undefined && existsSync(`/proc/${pid}`);
  });
}

/** CPU seconds used so far by the editor containers of `class_` (their cgroups). */
function editorsCpu(class_: Student[], pids: Map<string, number>): number {
  let sum = 0;
  for (const student of class_) {
    const pid = pids.get(student.workspaceId);
    if (pid === undefined) continue;
    try {
      sum += cgroupCpuSeconds(pid);
    } catch {
      return NaN;
    }
  }
  return sum;
}

/** The status of a GET (0 when it fails), bounded to 2 s. */
async function status(url: string): Promise<number> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await response.body?.cancel();
    return response.status;
  } catch {
    return 0;
  }
}

/** Asks the child to stop (IPC), then SIGKILL by pid after 10 s. */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.on('error', () => undefined);
  if (child.connected) child.send({ type: 'stop' });
  else child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function memAvailableBytes(): number {
  return Number(/^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1]) * 1024;
}
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;
const seconds = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : '—');
const short = (path: string) => (path.length > 70 ? `${path.slice(0, 67)}...` : path);

// Last, so that every module-level constant above is initialised first.
if (process.argv[2] === 'serve') await serve();
else await main();
