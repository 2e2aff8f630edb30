/**
 * The Class page at 200 students, each changing state every 5 s (40 changes a second in all), for a
 * minute (DURATION_S):
 *
 * - the API's answer, `GET /admin/class` as the coach's page reads it (a signed-in admin session),
 *   one request at a time through the whole minute: p50/p95/max (target p95 < 50 ms), against
 *   `/healthz` (a request and a database round trip, the floor) asked the same way in the same run;
 * - event to screen: a Class page open in real Chromium; every 2 s one student's run ends with a
 *   compile error naming a mark (`Robot.java:1: mark-<n>`): the time from the store's write
 *   (committed, announced) to the mark in the page's document, on the same machine's clock
 *   (target p95 < 2 s);
 * - the control plane's CPU (its own process: this file with `serve`, read from /proc) and RSS,
 *   before and during the churn.
 *
 * The students change as the controllers and the proxy record them, through the same store calls
 * (a run queued, ready, ended failed with javac's errors or stopped; a hand raised and withdrawn;
 * presence: online, a Driver Station enabling the robot), each announced on the change feed as in a
 * deployment. The control plane runs the parts a deployment runs beside its API (the change feed,
 * activity, the stats sampler, the idle sweep, sessions) but not the workspace and run controllers,
 * which would start 200 editors and simulators on this 2-core machine: what is measured is the
 * class view's cost, not Docker's.
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/class-view.ts
 *
 * Makes its own database `cp_bench_class` on the provisioned PostgreSQL and drops it at the end;
 * aborts after 10 minutes. STUDENTS (default 200) and DURATION_S (default 60) change the class.
 */
import { fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Page } from 'playwright-core';
import { launchBrowser } from '../test/helpers/browser.ts';
import {
  benchDatabase,
  browserCookies,
  controlPlane,
  deadline,
  loadAverage,
  machineBusyPercent,
  median,
  percentile,
  processCpuSeconds,
  processRssBytes,
  serveControlPlane,
  signedSessionCookie,
} from './lib.ts';

const STUDENTS = Math.max(10, Number(process.env.STUDENTS ?? 200));
const DURATION_S = Math.max(10, Number(process.env.DURATION_S ?? 60));
/** Each student changes every this often. */
const EVERY_MS = 5000;
const MARK_EVERY_MS = 2000;
const DATABASE = 'cp_bench_class';

const JAVAC = "/home/student/src/main/java/frc/robot/Robot.java:12: error: ';' expected\n    int x = 1\n             ^\n1 error";

/** The control plane in its own process, so that its CPU and memory are its own. */
async function serve(): Promise<void> {
  const { plane, stop } = await serveControlPlane({}, ['changes', 'activity', 'http', 'stats', 'idle', 'sessions']);
  process.on('message', (message: { type: string }) => {
    if (message.type === 'stop') void stop();
    // Measured after a full collection (the child runs with --expose-gc): what is held, not what awaits collecting.
    if (message.type === 'memory') {
      (globalThis as { gc?: () => void }).gc?.();
      process.send!({ type: 'memory', usage: process.memoryUsage() });
    }
  });
  process.send!({ type: 'ready', origin: plane.http!.url });
}

if (process.argv[2] === 'serve') await serve();
else await main();

async function main(): Promise<void> {
  const { dataSource, drop } = await benchDatabase(DATABASE);
  const secret = randomBytes(32).toString('hex');
  const cleanups: (() => Promise<unknown>)[] = [drop];
  const cleanup = async () => {
    for (const step of cleanups.splice(0).toReversed()) await step().catch((error: unknown) => console.error('cleanup step failed:', error));
  };
  deadline(10 * 60_000, cleanup);
  try {
    // The bench's own store (no parts started): its writes are announced as any process's are.
    const { store } = controlPlane(dataSource);
    const busy = await machineBusyPercent(2000);
    console.log(
      `machine: ${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim()}); Node ${process.version}; load average ${loadAverage()}; busy before the run (other processes): ${busy.toFixed(0)} %${busy > 10 ? ' — figures are skewed' : ''}`,
    );

    const child = fork(import.meta.filename, ['serve'], {
      execArgv: ['--no-warnings=ExperimentalWarning', '--expose-gc'],
      env: { ...process.env, BENCH_DATABASE: DATABASE, BENCH_CONTROL_PLANE_ID: `bench-${randomBytes(4).toString('hex')}`, BENCH_SESSION_SECRET: secret },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    cleanups.push(async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ type: 'stop' });
      await Promise.race([exited, sleep(10_000)]);
      child.kill('SIGKILL');
    });
    const { origin } = await new Promise<{ origin: string }>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`control plane exited (${code}) before it listened`)));
      child.once('message', (message: { origin: string }) => resolve(message));
    });
    const pid = child.pid!;

    // The class: STUDENTS students with open workspaces, one coach signed in.
    const tag = randomBytes(3).toString('hex');
    const students: { userId: string; email: string; workspace: Awaited<ReturnType<typeof store.users.create>>['workspace'] }[] = [];
    for (let i = 0; i < STUDENTS; i += 50) {
      const made = await Promise.all(
        Array.from({ length: Math.min(50, STUDENTS - i) }, (_, j) =>
          store.users.create({ email: `student${String(i + j).padStart(3, '0')}-${tag}@school.test` }),
        ),
      );
      for (const { user, workspace } of made) students.push({ userId: user.id, email: user.email, workspace });
    }
    await Promise.all(students.map((student) => store.workspaces.open(student.workspace.id)));
    await dataSource.query("UPDATE workspaces SET observed_state = 'running', last_activity_at = now()");
    const { user: coach } = await store.users.create({ email: `coach-${tag}@school.test`, role: 'admin' });
    const cookie = await signedSessionCookie(dataSource, coach.id, secret);
    const server = { id: randomUUID(), publicUrl: origin, hostname: 'bench', pid: process.pid, pidNamespace: 'bench' };
    await store.servers.heartbeat(server);
    await dataSource.query('VACUUM ANALYZE');

    // Each student's next change, in turn: a run queued, ready, ended; a hand up and down; presence.
    const none = { pages: 0, editors: 0, ntClients: 0, driver: false, robotEnabled: false, robotMode: null };
    const steps: ((student: (typeof students)[number], state: { runId?: string; helpId?: string }) => Promise<void>)[] = [
      async (s, state) => void (state.runId = (await store.runs.create(s.workspace.id)).id),
      async (_s, state) => void (await store.runs.markReady(state.runId!)),
      async (s) =>
        store.presence.write(server.id, [
          { ...none, workspaceId: s.workspace.id, editors: 1, ntClients: 1, driver: true, robotEnabled: true, robotMode: 'autonomous' },
        ]),
      async (_s, state) => void (await store.runs.finish(state.runId!, { status: 'stopped', reason: 'stopped by request', exitCode: 0, output: '' })),
      async (s, state) => void (state.runId = (await store.runs.create(s.workspace.id)).id),
      async (_s, state) =>
        void (await store.runs.finish(state.runId!, { status: 'failed', reason: 'compile or boot failed (exit code 1)', exitCode: 1, output: JAVAC })),
      async (s, state) => void (state.helpId = (await store.help.raise({ id: s.userId, email: s.email }, s.workspace, 'stuck')).id),
      async (s, state) => {
        await store.help.withdraw({ id: s.userId, email: s.email }, s.workspace.id);
        state.helpId = undefined;
        await store.presence.write(server.id, [{ ...none, workspaceId: s.workspace.id, editors: 1 }]);
      },
    ];
    const states = students.map(() => ({ step: 0, runId: undefined as string | undefined, helpId: undefined as string | undefined }));
    // The marks go to students of their own (the last ten), outside the churn.
    const markers = students.splice(-10);
    states.splice(-10);
    // A raise is limited to 5 per 10 minutes per workspace: the churn's hands come from the first 120 s of each student's cycle only.
    const raises = new Map<number, number>();

    const browser = await launchBrowser({ full: true });
    cleanups.push(() => browser.close());
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addCookies(browserCookies(cookie, origin));
    const page: Page = await context.newPage();
    await page.addInitScript(() => {
      const seen: Record<string, number> = {};
      Object.assign(globalThis, { __seen: seen });
      new MutationObserver(() => {
        for (const element of document.querySelectorAll('code.first-error')) {
          const mark = /mark-\d+/.exec(element.textContent ?? '')?.[0];
          if (mark && seen[mark] === undefined) seen[mark] = performance.timeOrigin + performance.now();
        }
      }).observe(document, { childList: true, subtree: true, characterData: true });
    });
    await page.goto(`${origin}/panel/class`);
    await page.locator('main table.class').waitFor({ timeout: 60_000 });

    /** The control plane's own account of its memory after a full collection (V8's heap, and buffers outside it). */
    const memory = () =>
      new Promise<NodeJS.MemoryUsage>((resolve) => {
        const answer = (message: { type: string; usage?: NodeJS.MemoryUsage }) => {
          if (message.type !== 'memory') return;
          child.off('message', answer);
          resolve(message.usage!);
        };
        child.on('message', answer);
        child.send({ type: 'memory' });
      });
    const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
    const heapText = (usage: NodeJS.MemoryUsage) =>
      `heap ${mib(usage.heapUsed)} used of ${mib(usage.heapTotal)}, external ${mib(usage.external)}, array buffers ${mib(usage.arrayBuffers)}`;
    const heapBefore = await memory();
    const cpu0 = processCpuSeconds(pid);
    const rssBefore = processRssBytes(pid);
    const until = Date.now() + DURATION_S * 1000;
    const failures: string[] = [];

    // 1. The churn: one student every EVERY_MS / count.
    const churn = (async () => {
      const gap = EVERY_MS / students.length;
      for (let turn = 0; Date.now() < until; turn++) {
        const index = turn % students.length;
        const state = states[index]!;
        let step = state.step % steps.length;
        // A hand past the limit is skipped (its withdrawal too).
        if (step === 6 && (raises.get(index) ?? 0) >= 5) step = 2;
        if (step === 6) raises.set(index, (raises.get(index) ?? 0) + 1);
        if (step === 7 && !state.helpId) step = 2;
        state.step = step + 1;
        const started = performance.now();
        steps[step]!(students[index]!, state).catch((error: unknown) => failures.push(String(error)));
        const wait = gap - (performance.now() - started);
        if (wait > 0) await sleep(wait);
      }
    })();

    // 2. The API, one request at a time, alternating with /healthz.
    const classTimes: number[] = [];
    const healthTimes: number[] = [];
    const reader = (async () => {
      while (Date.now() < until) {
        for (const [url, times] of [
          [`${origin}/admin/class`, classTimes],
          [`${origin}/healthz`, healthTimes],
        ] as const) {
          const t0 = performance.now();
          const response = await fetch(url, { headers: { cookie, accept: 'application/json' } });
          await response.arrayBuffer();
          if (response.status !== 200) failures.push(`${url}: ${response.status}`);
          times.push(performance.now() - t0);
        }
        await sleep(50);
      }
    })();

    // 3. The marks: a run of a marker student ends with a compile error naming it.
    const written: Record<string, number> = {};
    const marking = (async () => {
      for (let n = 0; Date.now() < until - 3000; n++) {
        const marker = markers[n % markers.length]!;
        const run = await store.runs.create(marker.workspace.id);
        const mark = `mark-${n}`;
        await store.runs.finish(run.id, {
          status: 'failed',
          reason: 'compile or boot failed (exit code 1)',
          exitCode: 1,
          output: `Robot.java:1: error: ${mark}`,
        });
        written[mark] = Date.now();
        await sleep(MARK_EVERY_MS);
      }
    })();

    const cpuSamples: number[] = [];
    const sampler = (async () => {
      let last = processCpuSeconds(pid);
      while (Date.now() < until) {
        await sleep(1000);
        const now = processCpuSeconds(pid);
        cpuSamples.push((now - last) * 100);
        last = now;
      }
    })();
    await Promise.all([churn, reader, marking, sampler]);
    const cpu = processCpuSeconds(pid) - cpu0;
    const rssDuring = processRssBytes(pid);
    const heapDuring = await memory();
    // Marks written in the last seconds get their time to show.
    await sleep(3000);
    const seen = await page.evaluate(() => (globalThis as unknown as { __seen: Record<string, number> }).__seen);
    const latencies = Object.entries(written).map(([mark, at]) => (seen[mark] === undefined ? Infinity : seen[mark]! - at));
    const shown = latencies.filter(Number.isFinite);

    const ms = (value: number) => `${value.toFixed(1)} ms`;
    console.log(
      `\n${STUDENTS} students, each changing every ${EVERY_MS / 1000} s (${((STUDENTS - 10) * 1000) / EVERY_MS} changes a second), for ${DURATION_S} s:`,
    );
    console.log(
      `GET /admin/class: ${classTimes.length} reads, p50 ${ms(median(classTimes))}, p95 ${ms(percentile(classTimes, 95))}, max ${ms(Math.max(...classTimes))} (target p95 < 50 ms)`,
    );
    console.log(
      `GET /healthz (the floor, same run): p50 ${ms(median(healthTimes))}, p95 ${ms(percentile(healthTimes, 95))}; class view / floor at p95: ${(percentile(classTimes, 95) / percentile(healthTimes, 95)).toFixed(1)}×`,
    );
    console.log(
      `event → coach's screen: ${shown.length} of ${latencies.length} marks shown, p50 ${ms(median(shown))}, p95 ${ms(percentile(latencies, 95))}, max ${ms(Math.max(...latencies))} (target p95 < 2 s)`,
    );
    console.log(
      `control plane: CPU ${((cpu / DURATION_S) * 100).toFixed(0)} % of one core on average (p95 of 1 s samples ${percentile(cpuSamples, 95).toFixed(0)} %), RSS ${(rssBefore / 2 ** 20).toFixed(0)} MiB before, ${(rssDuring / 2 ** 20).toFixed(0)} MiB during`,
    );
    console.log(`control plane memory after a full collection: before ${heapText(heapBefore)}; during ${heapText(heapDuring)}`);
    if (failures.length > 0) console.log(`failures: ${failures.length} (first: ${failures[0]})`);
    else console.log('failures: none');
  } finally {
    await cleanup();
  }
}
