/**
 * The student's run loop, as a deployment runs it (a control plane in a child process of its own
 * with its change listener, activity, HTTP, the workspace and run controllers and the stats
 * sampler; students signed in with real session rows), against Docker doing the same alone:
 *
 * - First output: from the Run request (`POST /u/<slug>/api/runs`) to the run's first output line
 *   in the student's live stream (the stand-in's first line comes before its compile, so the
 *   compile itself is not in it), against `docker run` of the same command (dockerode create and
 *   start, its log followed) to its first line; ROUNDS (10) rounds alternating, medians. Target:
 *   ≤ 1.2×.
 * - Output latency: RUNS (30) runs at once, each printing a line with the time it was written every
 *   100 ms, each followed by a student's live stream; for MEASURE_SECONDS (20) the time from the container's
 *   write to the line's arrival here; p50, p95, p99, and the control plane's CPU and RSS meanwhile.
 *   Target: p95 < 250 ms.
 *
 * Needs the provisioned PostgreSQL and Docker Engine and the test image (`npm test` once).
 * Everything it makes (its database, containers, volumes, the child) is removed at the end.
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/run-loop.ts
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  benchDatabase,
  CONTROL_PLANE_LABEL,
  deadline,
  docker,
  followRunOutput,
  dropBenchDatabase,
  IMAGE,
  median,
  MEMORY,
  percentile,
  processCpuSeconds,
  processRssBytes,
  removeLabelled,
  serveControlPlane,
  signedSessionCookie,
  startRun,
  stopRun,
  type SignedIn,
} from './lib.ts';

const DATABASE = 'cp_bench_run_loop';
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const RUNS = Number(process.env.RUNS ?? 30);
const MEASURE_SECONDS = Number(process.env.MEASURE_SECONDS ?? 20);
const SIM = 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100 SIM_PRINT_EVERY_MS=100 node /app/sim.mjs';
const FIRST_LINE = 'compiling... 1/3';

// ---------------------------------------------------------------------------------------------
// The control plane, in its own process: it opens the workspaces and answers with their students.

async function serve(): Promise<void> {
  const { plane, dataSource, secret, stop } = await serveControlPlane({ SIM_COMMAND: SIM, RUN_BUILD_TIMEOUT: '120s' }, [
    'changes',
    'activity',
    'http',
    'workspaces',
    'runs',
    'stats',
  ]);
  process.on('message', (message: { type: string }) => message.type === 'stop' && void stop());
  const tag = randomBytes(3).toString('hex');
  const students: SignedIn[] = [];
  const ids: string[] = [];
  for (let i = 0; i < RUNS; i++) {
    const { user, workspace } = await plane.store.users.create({ email: `run-${tag}-${i}@school.test` });
    students.push({ slug: workspace.slug, cookie: await signedSessionCookie(dataSource, user.id, secret) });
    await plane.store.workspaces.open(workspace.id);
    ids.push(workspace.id);
  }
  for (const until = Date.now() + 180_000; Date.now() < until; await sleep(200)) {
    const states = await Promise.all(ids.map((id) => plane.store.workspaces.get(id)));
    if (states.every((state) => state?.status.observedState === 'running' && state.status.editorEndpoint)) {
      process.send!({ type: 'ready', origin: plane.http!.url, students });
      return;
    }
  }
  process.send!({ type: 'failed', message: 'the workspaces did not all run within 3 minutes' });
}

// ---------------------------------------------------------------------------------------------
// The benchmark.

/** Run request to the first output line in the live stream (ms). */
async function managedFirstLine(origin: string, student: SignedIn): Promise<number> {
  const abort = new AbortController();
  const started = performance.now();
  const runId = await startRun(origin, student);
  const first = new Promise<number>(
    (resolve) => void followRunOutput(origin, student, runId, (line) => line === FIRST_LINE && resolve(performance.now()), abort.signal),
  );
  const elapsed = (await first) - started;
  abort.abort();
  await stopRun(origin, student, runId);
  return elapsed;
}

/** `docker run` of the same command, to its first output line (ms). */
async function plainFirstLine(baselineId: string, i: number): Promise<number> {
  const started = performance.now();
  const container = await docker.createContainer({
    name: `bench-run-${baselineId}-${i}`,
    Image: IMAGE,
    Cmd: ['sh', '-c', SIM],
    Labels: { 'bench.baseline': baselineId },
    HostConfig: { Memory: MEMORY, MemorySwap: MEMORY, NetworkMode: 'bridge', Init: true },
  });
  await container.start();
  const stream = (await container.logs({ follow: true, stdout: true, stderr: true })) as NodeJS.ReadableStream & { destroy(): void };
  const elapsed = await new Promise<number>((resolve) => {
    let text = '';
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes(FIRST_LINE)) resolve(performance.now() - started);
    });
  });
  stream.destroy();
  await removeLabelled('bench.baseline', baselineId);
  return elapsed;
}

async function main(): Promise<void> {
  await dropBenchDatabase(DATABASE);
  const { drop } = await benchDatabase(DATABASE);
  const controlPlaneId = `bench-${randomBytes(4).toString('hex')}`;
  const baselineId = randomBytes(4).toString('hex');
  const child: ChildProcess = fork(new URL(import.meta.url).pathname, ['serve'], {
    env: { ...process.env, BENCH_DATABASE: DATABASE, BENCH_CONTROL_PLANE_ID: controlPlaneId, BENCH_SESSION_SECRET: randomBytes(24).toString('hex') },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const cleanup = async () => {
    child.send({ type: 'stop' });
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    await removeLabelled(CONTROL_PLANE_LABEL, controlPlaneId);
    await removeLabelled('bench.baseline', baselineId);
    await drop();
  };
  deadline(20 * 60_000, cleanup);
  try {
    const ready = await new Promise<{ type: string; origin: string; students: SignedIn[]; message?: string }>((resolve) => child.once('message', resolve));
    if (ready.type !== 'ready') throw new Error(ready.message);
    const { origin, students } = ready;
    console.log(`${students.length} workspaces running; control plane pid ${child.pid}`);

    // First output line.
    const managed: number[] = [];
    const plain: number[] = [];
    for (let i = 0; i < ROUNDS + 1; i++) {
      const order = i % 2 === 0 ? ['managed', 'plain'] : ['plain', 'managed'];
      for (const which of order) {
        const ms = which === 'managed' ? await managedFirstLine(origin, students[0]!) : await plainFirstLine(baselineId, i);
        // The first round warms both sides.
        if (i > 0) (which === 'managed' ? managed : plain).push(ms);
      }
    }
    const ratio = median(managed) / median(plain);
    console.log(
      `first output line: Run ${median(managed).toFixed(0)} ms (p90 ${percentile(managed, 90).toFixed(0)}), docker run ${median(plain).toFixed(0)} ms (p90 ${percentile(plain, 90).toFixed(0)}): ${ratio.toFixed(2)}× (target ≤ 1.2×)`,
    );

    // Output latency with RUNS runs streaming at once.
    const abort = new AbortController();
    const latencies: number[] = [];
    let measuring = false;
    const runIds = await Promise.all(students.map((student) => startRun(origin, student)));
    await Promise.all(
      students.map((student, i) =>
        followRunOutput(
          origin,
          student,
          runIds[i]!,
          (line) => {
            const match = /^tick \d+ (\d+)$/.exec(line);
            if (match && measuring) latencies.push(Date.now() - Number(match[1]));
          },
          abort.signal,
        ),
      ),
    );
    // The same lines straight from the engine (docker logs --follow of each run's container), as the
    // baseline: what the machine itself adds with this many containers writing at once.
    const direct: number[] = [];
    const directStreams: { destroy(): void }[] = [];
    for (const runId of runIds) {
      let containers: { Id: string }[] = [];
      for (const until = Date.now() + 60_000; containers.length === 0 && Date.now() < until; await sleep(200))
        containers = await docker.listContainers({ filters: { label: [`service.run-id=${runId}`] } });
      if (containers.length === 0) throw new Error(`run ${runId} has no container`);
      const stream = (await docker.getContainer(containers[0]!.Id).logs({ follow: true, stdout: true, stderr: true, tail: 0 })) as NodeJS.ReadableStream & {
        destroy(): void;
      };
      directStreams.push(stream);
      stream.on('data', (chunk: Buffer) => {
        if (!measuring) return;
        for (const match of chunk.toString('latin1').matchAll(/tick \d+ (\d+)\n/g)) direct.push(Date.now() - Number(match[1]));
      });
    }
    // Every run past its build (its simulator ready) before measuring: a class pressing Run at once is not this figure.
    for (const until = Date.now() + 180_000; ; await sleep(500)) {
      const statuses = await Promise.all(
        students.map(async (student, i) => {
          const answer = await fetch(`${origin}/u/${student.slug}/api/runs/${runIds[i]}`, { headers: { cookie: student.cookie } });
          return ((await answer.json()) as { run: { status: string } }).run.status;
        }),
      );
      if (statuses.every((status) => status === 'running')) break;
      if (Date.now() > until) throw new Error(`runs not all running after 3 minutes: ${statuses.join(', ')}`);
    }
    await sleep(2000);
    const pid = child.pid!;
    const cpuBefore = processCpuSeconds(pid);
    const rss: number[] = [];
    measuring = true;
    const started = performance.now();
    for (let second = 0; second < MEASURE_SECONDS; second++) {
      await sleep(1000);
      rss.push(processRssBytes(pid));
    }
    measuring = false;
    const cpuPercent = ((processCpuSeconds(pid) - cpuBefore) / ((performance.now() - started) / 1000)) * 100;
    abort.abort();
    for (const stream of directStreams) stream.destroy();
    await Promise.all(students.map((student, i) => stopRun(origin, student, runIds[i]!)));
    console.log(
      `output latency, ${RUNS} runs streaming at once (${latencies.length} lines in ${MEASURE_SECONDS} s): p50 ${percentile(latencies, 50)} ms, p95 ${percentile(latencies, 95)} ms, p99 ${percentile(latencies, 99)} ms (target p95 < 250 ms)`,
    );
    console.log(
      `the same lines from the engine directly (${direct.length} lines): p50 ${percentile(direct, 50)} ms, p95 ${percentile(direct, 95)} ms, p99 ${percentile(direct, 99)} ms`,
    );
    console.log(
      `control plane meanwhile: CPU ${cpuPercent.toFixed(1)} % of one core, RSS ${(median(rss) / 1e6).toFixed(0)} MB (max ${(Math.max(...rss) / 1e6).toFixed(0)} MB)`,
    );
  } finally {
    await cleanup();
  }
}

if (process.argv[2] === 'serve') await serve();
else await main();
