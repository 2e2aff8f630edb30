/**
 * The control plane as a deployment runs it, for the benchmarks: bin/server.ts in a process of its
 * own with every part (controllers, stats sampler, activity writer, session cache, change feed), an
 * OpenID Connect provider on loopback, and a student signed in through it as a browser does, whose
 * workspace is open and its editor running; the student's run, and a page on the editor's address
 * that drives its robot as the Driver Station does.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser as Chromium, Page } from 'playwright-core';
import { benchDatabase, benchDatabaseUrl, browserCookies, CONTROL_PLANE_LABEL, docker, freePort, startRun, stopRun, type SignedIn } from './lib.ts';
import { HALSIM_URI, LABELS } from '../src/docker/runtime.ts';
import { DEFAULT_KEYS, keyboardState, NEUTRAL } from '../images/workspace/extension/src/ds-input.ts';
import { driverStationMessage, enable, INITIAL, joystickMessage, setLink, setRun } from '../images/workspace/extension/src/ds-state.ts';
import { HEARTBEAT_MS } from '../images/workspace/extension/src/halsim.ts';
import { TEST_ENV } from '../test/helpers/controllers.ts';
import { Browser, startOidcProvider } from '../test/helpers/oidc.ts';

/** The control plane under test: the server process, the student's session and workspace, and how to ask it about itself. */
export interface Deployed {
  child: ChildProcess;
  origin: string;
  port: number;
  slug: string;
  cookie: string;
  editorEndpoint: string;
  /** Asks the server's probe (bench/proxy-probe.ts, when `--import`ed) a question and waits for the answer of the same type. */
  ask<T>(type: 'memory' | 'loop' | 'loop-reset'): Promise<T>;
  /** How the server was started (a follower replica is started the same way, on another port). */
  start: { execArgv: string[]; env: NodeJS.ProcessEnv };
}

/** How a benchmark wants its deployed server. */
export interface DeployedOptions {
  /** PostgreSQL (a bench database of this name) or the embedded database. */
  database: { kind: 'postgres'; name: string } | { kind: 'embedded' };
  controlPlaneId: string;
  /** Node flags beside the server's own. */
  execArgv?: string[];
  /** Settings beside the test image's and the sign-in provider's. */
  env?: Record<string, string>;
}

/** The server under test, before anyone opened anything: how to sign students in through its provider, and ask it about itself. */
export interface Server {
  child: ChildProcess;
  origin: string;
  port: number;
  /** Signs `email` (on the allowlist given to startServer) in through the provider as a browser does: their workspace's slug and session cookie. */
  signIn: (email: string, name: string) => Promise<SignedIn>;
  /** Asks the server's probe (bench/proxy-probe.ts, when `--import`ed) a question and waits for the answer of the same type. */
  ask: <T>(type: 'memory' | 'loop' | 'loop-reset') => Promise<T>;
  /** How the server was started (a follower replica is started the same way, on another port). */
  start: { execArgv: string[]; env: NodeJS.ProcessEnv };
  /** Resolves with the first answer to `url` (asked again every 100 ms); rejects once the server exited or after 120 s. */
  answer: (url: string, init?: RequestInit) => Promise<Response>;
}

/**
 * Starts the server as a deployment runs it (bin/server.ts, every part: controllers, stats
 * sampler, activity writer, session cache, change feed; LOG_LEVEL info) on PostgreSQL or the
 * embedded database, with an OpenID Connect provider on loopback and `emails` on the allowlist, and
 * waits until `/healthz` answers. Everything it made is undone by `cleanups` (run last to first).
 */
export async function startServer(options: DeployedOptions & { emails: string[] }, cleanups: (() => Promise<unknown>)[]): Promise<Server> {
  const { controlPlaneId } = options;
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const provider = await startOidcProvider({
    clients: [{ client_id: 'control-plane', client_secret: 'control-plane-secret', redirect_uris: [`${origin}/connect/oidc/callback`] }],
  });
  cleanups.push(() => provider.close());
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cp-bench-deployed-'));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  writeFileSync(path.join(dataDir, 'allowlist.json'), JSON.stringify({ entries: options.emails }));
  let database = {};
  if (options.database.kind === 'postgres') {
    const { drop } = await benchDatabase(options.database.name);
    cleanups.push(drop);
    database = { DATABASE_URL: benchDatabaseUrl(options.database.name) };
  }
  const start = {
    // BENCH_CP_NODE_ARGS: extra Node flags for the control plane, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile it.
    execArgv: ['--no-warnings=ExperimentalWarning', ...(options.execArgv ?? [])],
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...database,
      DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'info',
      CONTROL_PLANE_ID: controlPlaneId,
      OIDC_ISSUER: provider.issuer,
      OIDC_CLIENT_ID: 'control-plane',
      OIDC_CLIENT_SECRET: 'control-plane-secret',
      ...TEST_ENV,
      ...options.env,
      // BENCH_CP_ENV: settings for the control plane besides the bench's, e.g. "HOME_DISK_LIMIT=0 HOME_DISK_CHECK_SECONDS=5".
      ...Object.fromEntries(
        (process.env.BENCH_CP_ENV ?? '')
          .split(' ')
          .filter(Boolean)
          .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
      ),
    },
  };
  // BENCH_CP_LOG: a file for the control plane's log (standard output), e.g. to follow a run's steps by their times.
  const logFile = process.env.BENCH_CP_LOG ? openSync(process.env.BENCH_CP_LOG, 'w') : 'ignore';
  // BENCH_CP_NICE: the control plane's niceness (e.g. -10), as `nice -n` sets it: ahead of the processes of its scheduling group.
  // BENCH_CP_AUTOGROUP=1: a session of its own (setsid), whose autogroup has that niceness (Linux's sched_autogroup puts
  // each session's processes in a group that takes its turns on the CPU as one): ahead of the rest of the machine.
  const nice = Number(process.env.BENCH_CP_NICE ?? 0);
  const ownGroup = process.env.BENCH_CP_AUTOGROUP === '1';
  const niced = nice ? { execPath: 'nice', execArgv: ['-n', String(nice), process.execPath, ...start.execArgv] } : {};
  const child = fork(path.join(import.meta.dirname, '../bin/server.ts'), [], {
    ...start,
    ...niced,
    detached: ownGroup,
    stdio: ['ignore', logFile, 'inherit', 'ipc'],
  });
  cleanups.push(() => stopChild(child, false));
  if (ownGroup) writeFileSync(`/proc/${child.pid}/autogroup`, String(nice));
  // BENCH_CP_CPU_SHARES: the control plane in a cgroup of its own beside the containers' (cgroup v1, Docker's cgroupfs
  // driver: /docker/<id>), with that CPU weight: where compose's `cpu_shares` puts the control plane's container.
  const shares = process.env.BENCH_CP_CPU_SHARES;
  if (shares) {
    const group = `/sys/fs/cgroup/cpu/docker/${controlPlaneId}`;
    mkdirSync(group);
    writeFileSync(`${group}/cpu.shares`, shares);
    writeFileSync(`${group}/cgroup.procs`, String(child.pid));
    cleanups.push(async () => {
      await stopChild(child, false);
      rmdirSync(group);
    });
  }
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`the control plane exited (${code})`))));
  exited.catch(() => undefined);
  const answer = async (url: string, init: RequestInit = {}, browser = new Browser()) => {
    for (const until = Date.now() + 120_000; ; await sleep(100)) {
      const response = await Promise.race([browser.fetch(url, init).catch(() => undefined), exited]);
      if (response) return response;
      if (Date.now() > until) throw new Error(`${url}: no answer from the control plane`);
    }
  };
  await answer(`${origin}/healthz`);
  const signIn = async (email: string, name: string): Promise<SignedIn> => {
    const browser = new Browser();
    provider.nextLogin({ id: email, email, email_verified: true, name });
    const signedIn = await browser.follow(`${origin}/auth/start/oidc`);
    await signedIn.response.arrayBuffer();
    const me = (await (await answer(`${origin}/auth/me`, {}, browser)).json()) as { user?: { workspaceSlug: string | null } };
    const slug = me.user?.workspaceSlug;
    if (!slug) throw new Error(`the sign-in did not make a workspace: ${JSON.stringify(me)} (${signedIn.chain.join(' -> ')})`);
    return { slug, cookie: `cp_session=${browser.cookie(origin, 'cp_session')}; cp_session.sig=${browser.cookie(origin, 'cp_session.sig')}` };
  };
  return { child, origin, port, signIn, ask: asker(child), start, answer: (url, init) => answer(url, init) };
}

/**
 * Starts the server as startServer does, signs a student in through its provider as a browser
 * does, opens their workspace through the student API and waits until its editor runs.
 */
export async function startDeployed(options: DeployedOptions, cleanups: (() => Promise<unknown>)[]): Promise<Deployed> {
  const email = `student-${randomBytes(3).toString('hex')}@school.test`;
  const server = await startServer({ ...options, emails: [email] }, cleanups);
  const { origin, answer } = server;
  const { slug, cookie } = await server.signIn(email, 'Ada Bench');
  const until = Date.now() + 120_000;
  const opened = await answer(`${origin}/u/${slug}/api/workspace/open`, { method: 'POST', headers: { origin, cookie } });
  if (opened.status >= 300) throw new Error(`opening the workspace answered ${opened.status} ${await opened.text()}`);
  for (;;) {
    const { workspace } = (await (await answer(`${origin}/u/${slug}/api/workspace`, { headers: { cookie } })).json()) as {
      workspace: { observedState: string; statusMessage?: string };
    };
    if (workspace.observedState === 'running') break;
    if (Date.now() > until) throw new Error(`workspace not running after 120 s: ${JSON.stringify(workspace)}`);
    await sleep(100);
  }
  // Where the editor listens on the workspace network: what the control plane proxies to.
  const ours = { label: [`${CONTROL_PLANE_LABEL}=${options.controlPlaneId}`] };
  const [container] = await docker.listContainers({ filters: ours });
  if (!container) {
    const all = await docker.listContainers({ all: true, filters: ours });
    throw new Error(`the workspace is running, but no container of it runs: ${JSON.stringify(all.map((each) => [each.Names, each.State, each.Status]))}`);
  }
  const networks = (await docker.getContainer(container.Id).inspect()).NetworkSettings.Networks;
  const editorEndpoint = `${networks[TEST_ENV.WORKSPACE_NETWORK]!.IPAddress}:${TEST_ENV.EDITOR_PORT}`;
  return { child: server.child, origin, port: server.port, slug, cookie, editorEndpoint, ask: server.ask, start: server.start };
}

/** How to ask a process that preloads bench/proxy-probe.ts a question (IPC), and wait for the answer of the same type. */
export function asker(child: ChildProcess): <T>(type: 'memory' | 'loop' | 'loop-reset') => Promise<T> {
  return <T>(type: string) =>
    new Promise<T>((resolve) => {
      const listener = (message: { type: string }) => {
        if (message.type !== type) return;
        child.off('message', listener);
        resolve(message as T);
      };
      child.on('message', listener);
      child.send({ type });
    });
}

/** Asks a child to stop (IPC `stop`, else SIGTERM), then SIGKILL by pid after 10 s. */
export async function stopChild(child: ChildProcess, ipc: boolean): Promise<void> {
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

/**
 * Settings of a deployment of the real workspace image (code-server with the classroom extension,
 * the stand-in robot) at the default memory limits (CODE_MEMORY_LIMIT's 2 GiB, for the editor and,
 * through RUN_MEMORY_LIMIT's default, the simulator; the test image's settings give 64 MiB).
 */
export const ROBOT_WORKSPACE_ENV = { WORKSPACE_IMAGE: 'classroom-workspace:latest', CODE_MEMORY_LIMIT: '2g', RUN_BUILD_TIMEOUT: '300s' };

/** A run of the student's robot program and where its two protocols are: through the control plane (as the editor reaches them) and straight at its container. */
export interface RobotRun {
  runId: string;
  /** The simulator's container. */
  containerId: string;
  /** WPILib's HALSim WebSocket: `<editor>/.cp/halsim/wpilibws`, and `ws://<container>:HALSIMWS_PORT/wpilibws`. */
  halsim: { proxied: string; direct: string };
  /** NetworkTables 4, where `/nt/<client>` follows: `<editor>/.cp/nt4`, and `ws://<container>:NT4_PORT`. */
  nt4: { proxied: string; direct: string };
}

/**
 * Presses Run as the student does (the student API, their cookie) and waits (5 minutes at most:
 * the robot program is compiled first) until the run is running; Stop is pressed at cleanup.
 */
export async function startRobotRun(deployed: Deployed, cleanups: (() => Promise<unknown>)[]): Promise<RobotRun> {
  const { origin, slug, cookie } = deployed;
  const runId = await startRun(origin, { slug, cookie });
  cleanups.push(() => stopRun(origin, { slug, cookie }, runId));
  for (const until = Date.now() + 300_000; ; await sleep(200)) {
    const { run } = (await (await fetch(`${origin}/u/${slug}/api/runs/${runId}`, { headers: { cookie } })).json()) as {
      run: { status: string; reason: string | null; output?: string };
    };
    if (run.status === 'running') break;
    if (run.status !== 'queued') throw new Error(`the run ended (${run.status}: ${run.reason}) before it ran: ${(run.output ?? '').slice(-2000)}`);
    if (Date.now() > until) throw new Error('the run was not running after 5 minutes');
  }
  const [container] = await docker.listContainers({ filters: { label: [`${LABELS.runId}=${runId}`] } });
  if (!container) throw new Error(`run ${runId} is running, but no container of it runs`);
  const inspected = await docker.getContainer(container.Id).inspect();
  const address = inspected.NetworkSettings.Networks[TEST_ENV.WORKSPACE_NETWORK]!.IPAddress;
  // The ports the image contract gives the simulator (its environment).
  const env = (name: string) => inspected.Config.Env.find((each) => each.startsWith(`${name}=`))!.slice(name.length + 1);
  const editor = `${origin.replace(/^http/, 'ws')}/u/${slug}/.cp`;
  return {
    runId,
    containerId: container.Id,
    halsim: { proxied: `${editor}/halsim${HALSIM_URI}`, direct: `ws://${address}:${env('HALSIMWS_PORT')}${HALSIM_URI}` },
    nt4: { proxied: `${editor}/nt4`, direct: `ws://${address}:${env('NT4_PORT')}` },
  };
}

/**
 * A Chromium page on the editor's origin (path mode: the control plane's) with the student's session
 * cookie, so that what the benchmark's code opens in it under `<editor>/.cp/` goes with the student's
 * cookie and the editor's Origin, as the Driver Station's connections do. The page is the control
 * plane's own `/healthz` answer, a document served from loopback: Chromium's Local Network Access
 * checks refuse a page Playwright made up (no address, so "public") any connection to loopback or
 * to a container. Its Content-Security-Policy is bypassed, for the benchmark's scripts. Nothing is
 * routed through Playwright. Closed at cleanup.
 */
export async function editorOriginPage(browser: Chromium, deployed: Deployed, cleanups: (() => Promise<unknown>)[]): Promise<Page> {
  const context = await browser.newContext({ serviceWorkers: 'block', bypassCSP: true });
  cleanups.push(() => context.close());
  await context.addCookies(browserCookies(deployed.cookie, deployed.origin));
  const page = await context.newPage();
  await page.goto(`${deployed.origin}/healthz`);
  return page;
}

/** What a benchmark's page driving the robot sends and looks for, made by the Driver Station's own code (ds-state.ts, ds-input.ts): driverSetup. */
export interface DriverSetup {
  key: string;
  pressed: string;
  released: string;
  /** The Driver Station's state, enabled in teleop, with `>new_data`: its heartbeat, and what follows each joystick message. */
  heartbeat: string;
  heartbeatMs: number;
  /** The axis the key moves, and its value pressed and released. */
  axis: number;
  down: number;
  up: number;
}

/**
 * The Driver Station's messages for run `runId`: its state enabled in teleop, and joystick 0 with the
 * Driver Station's key `key` (a KeyboardEvent code; default the left stick forward's) pressed and released.
 */
export function driverSetup(runId: string, key = DEFAULT_KEYS.leftStickUp): DriverSetup {
  const now = Date.now();
  const pressedState = keyboardState(new Set([key]), DEFAULT_KEYS);
  const axis = pressedState.axes.findIndex((value, index) => value !== NEUTRAL.axes[index]);
  return {
    key,
    pressed: JSON.stringify(joystickMessage(0, pressedState)),
    released: JSON.stringify(joystickMessage(0, NEUTRAL)),
    heartbeat: JSON.stringify(driverStationMessage(enable(setLink(setRun(INITIAL, runId, now), 'connected', now), now))),
    heartbeatMs: HEARTBEAT_MS,
    axis,
    down: pressedState.axes[axis]!,
    up: NEUTRAL.axes[axis]!,
  };
}

/** A benchmark's page driving the robot (window.driver, made by installDriver). */
export interface PageDriver {
  /** Each key event to the robot's echo of the axis it moved (ms), oldest first. */
  samples: number[];
  /** Connects; null once the robot spoke (its state), else why the connection ended first. */
  connect(url: string): Promise<string | null>;
  /** Resolves once `count` samples were taken; rejects after `ms`. */
  echoed(count: number, ms: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Runs in a page (page.evaluate): the Driver Station's side of a HALSim connection as window.driver.
 * Once the robot speaks, the page keeps it enabled in teleop with the Driver Station's heartbeat
 * (`setup.heartbeat` every `setup.heartbeatMs`) until the connection ends. A keydown/keyup of
 * `setup.key` sends joystick 0's state, then the heartbeat (whose `>new_data` makes it visible to
 * robot code), as the Driver Station does; the event's time stamp to the robot's echo of the axis
 * holding the new value is a sample.
 */
export function installDriver(setup: DriverSetup): void {
  let socket: WebSocket | undefined;
  let pending: { at: number; value: number } | undefined;
  let beat: ReturnType<typeof setInterval> | undefined;
  const samples: number[] = [];
  const waiters = new Set<() => void>();
  const send = (text: string) => {
    if (socket?.readyState === WebSocket.OPEN) socket.send(text);
  };
  const listener = (message: string, value: number) => (event: KeyboardEvent) => {
    if (event.code !== setup.key || event.repeat) return;
    send(message);
    send(setup.heartbeat);
    pending = { at: event.timeStamp, value };
  };
  window.addEventListener('keydown', listener(setup.pressed, setup.down));
  window.addEventListener('keyup', listener(setup.released, setup.up));
  const driver: PageDriver = {
    samples,
    connect: (url) =>
      new Promise((resolve) => {
        const ws = new WebSocket(url);
        socket = ws;
        let heard = false;
        ws.addEventListener('message', (event: MessageEvent<string>) => {
          if (!heard) {
            heard = true;
            send(setup.heartbeat);
            beat = setInterval(() => send(setup.heartbeat), setup.heartbeatMs);
            resolve(null);
          }
          const message = JSON.parse(event.data) as { type: string; device: string; data: Record<string, unknown> };
          const axes = message.type === 'Joystick' && message.device === '0' ? message.data['>axes'] : undefined;
          if (!pending || !Array.isArray(axes) || axes[setup.axis] !== pending.value) return;
          samples.push(performance.now() - pending.at);
          pending = undefined;
          for (const waiter of waiters) waiter();
        });
        ws.addEventListener('close', (event) => {
          clearInterval(beat);
          resolve(`closed ${event.code} ${event.reason}`);
        });
      }),
    echoed: (count, ms) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (samples.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no echo within ${ms} ms (${samples.length} samples)`));
        }, ms);
        waiters.add(check);
        check();
      }),
    close: () =>
      new Promise((resolve) => {
        const ws = socket;
        if (!ws || ws.readyState === WebSocket.CLOSED) return resolve();
        ws.addEventListener('close', () => resolve());
        ws.close(1000);
      }),
  };
  (window as unknown as { driver: PageDriver }).driver = driver;
}

/** Connects the page's driver (installDriver) to `url`; a robot still held by the last connection (409, or the relay's 1013) is asked again, 50 times at most. */
export async function connectDriver(page: Page, url: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const refused = await page.evaluate((to) => (window as unknown as { driver: PageDriver }).driver.connect(to), url);
    if (refused === null) return;
    if (attempt === 50) throw new Error(`${url}: ${refused}`);
    await sleep(100);
  }
}
