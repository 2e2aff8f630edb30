/**
 * Issue 19, the student's run loop on the server: a run's whole output kept as it is written and
 * streamed live (server-sent events, resumed with Last-Event-ID), bounded at OUTPUT_LIMIT with a
 * mark, whole and without repeats across a restarted control plane; an active run counts as
 * activity and its end too; a run past RUN_MAX_MINUTES is stopped; the student API under the
 * editor's own address (`/u/<slug>/.cp/api/`), the workspace page at `/u/<slug>/.cp/`; and the
 * simulator's NetworkTables through the proxy, for the owner only. Real PostgreSQL, real Docker
 * (the test image's stand-in simulator, which speaks NetworkTables 4), the real app.
 */
import http from 'node:http';
import { decodeMulti, encode } from '@msgpack/msgpack';
import WebSocket from 'ws';
import { TRUNCATED_MARK } from '../../controllers/run-output.ts';
import { IdleSweep } from '../../controllers/idle-sweep.ts';
import type { RunController } from '../../controllers/runs.ts';
import { createMetrics } from '../../src/metrics.ts';
import { OUTPUT_LIMIT, type RunRecord } from '../../src/store/runs.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { captureLogger, createHarness, docker, eventually, removeEverything, type Harness, testRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let harness: Harness;
let app: TestApp;
let runs: RunController | undefined;
let coach: Student;
let bob: Student;
let counter = 0;

beforeAll(async () => {
  // A workspace per test, each left running: room for them all.
  harness = createHarness(db.dataSource, { environmentCap: 50 });
  await harness.controller.start();
  // One change feed: the app hears the collector's output and the controller's status at once.
  app = await startApp(db.dataSource, {}, { changes: harness.changes });
  coach = await newStudent(harness.store, 'coach', tag, 'admin');
  bob = await newStudent(harness.store, 'bob', tag);
}, 60_000);
afterAll(async () => {
  await runs?.stop();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);
afterEach(async () => {
  await runs?.stop();
  runs = undefined;
});

/** A run controller whose simulator runs the stand-in with `sim` settings (and these options). */
async function startRuns(sim: string, options: { maxRunMs?: number; oomGraceMs?: number } = {}): Promise<RunController> {
  const { controller } = testRunController(harness, `${sim} node /app/sim.mjs`, options);
  await controller.start();
  return controller;
}

/** A student whose workspace runs (its editor up). */
async function runningStudent(): Promise<Student> {
  const student = await newStudent(harness.store, `ada${counter++}`, tag);
  student.workspace = await openAndWait(harness.store, student.workspace);
  return student;
}

const FAST = 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100';
const api = (student: Student, rest: string) => `${app.url}/u/${student.workspace.slug}/api${rest}`;
const post = (student: Student, rest: string) => fetch(api(student, rest), { method: 'POST', headers: { cookie: student.cookie, origin: app.url } });

async function startRun(student: Student): Promise<string> {
  const answer = await post(student, '/runs');
  expect(answer.status).toBe(202);
  return ((await answer.json()) as { run: { id: string } }).run.id;
}

async function runOf(id: string): Promise<RunRecord> {
  return (await harness.store.runs.get(id))!;
}

/** The kept output of a run, whole. */
async function keptOutput(student: Student, runId: string): Promise<string> {
  const answer = await fetch(api(student, `/runs/${runId}/output.txt`), { headers: { cookie: student.cookie } });
  expect(answer.status).toBe(200);
  return answer.text();
}

/** An open output stream: the events so far (parsed), and a wait for one that matches. */
interface EventStream {
  events: { type: string; id: string | undefined; data: unknown }[];
  text: () => string;
  until: (what: string, test: (stream: EventStream) => boolean) => Promise<void>;
  close: () => void;
}

/** Opens `GET .../runs/<id>/output` and reads its events as they come. */
async function openOutput(student: Student, runId: string, headers: Record<string, string> = {}): Promise<EventStream> {
  const abort = new AbortController();
  const answer = await fetch(api(student, `/runs/${runId}/output`), { headers: { cookie: student.cookie, ...headers }, signal: abort.signal });
  expect(answer.status).toBe(200);
  expect(answer.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const stream: EventStream = {
    events: [],
    text: () =>
      stream.events
        .filter((event) => event.type === 'output')
        .map((event) => (event.data as { text: string }).text)
        .join(''),
    until: (what, test) => eventually(what, async () => test(stream), 30_000).then(() => undefined),
    close: () => abort.abort(),
  };
  void (async () => {
    let buffered = '';
    try {
      for await (const chunk of answer.body!.pipeThrough(new TextDecoderStream())) {
        buffered += chunk;
        for (let end = buffered.indexOf('\n\n'); end !== -1; end = buffered.indexOf('\n\n')) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const field = (name: string) =>
            block
              .split('\n')
              .find((line) => line.startsWith(`${name}: `))
              ?.slice(name.length + 2);
          const type = field('event');
          if (type) stream.events.push({ type, id: field('id'), data: JSON.parse(field('data')!) });
        }
      }
    } catch {
      // Closed by the test.
    }
  })();
  return stream;
}

describe("a run's output", () => {
  it('is kept whole as it is written and streamed live, in order, each piece at its offset, then the end', async () => {
    runs = await startRuns(`${FAST} SIM_PRINT_EVERY_MS=100`);
    const ada = await runningStudent();
    const runId = await startRun(ada);
    const live = await openOutput(ada, runId);
    await live.until('tick 5 streamed', (stream) => stream.text().includes('tick 5 '));
    // Every piece starts where the one before ended, and its id is the offset after it.
    let offset = 0;
    for (const event of live.events) {
      const { offset: at, text } = event.data as { offset: number; text: string };
      expect(at).toBe(offset);
      offset += text.length;
      expect(event.id).toBe(String(offset));
    }
    const text = live.text();
    for (const line of ['compiling... 1/3', 'compiling... 3/3', 'compiled', 'booting simulator...', 'sim ready: nt4 on 0.0.0.0:5810', 'tick 1 ', 'tick 4 ']) {
      expect(text).toContain(line);
    }
    expect(text.indexOf('compiled')).toBeLessThan(text.indexOf('tick 1 '));

    expect((await post(ada, `/runs/${runId}/stop`)).status).toBe(202);
    await live.until('the end event', (stream) => stream.events.some((event) => event.type === 'end'));
    expect(live.events.at(-1)).toMatchObject({ type: 'end', data: { id: runId, status: 'stopped', reason: 'stopped by request' } });
    live.close();
    // What the student saw is what is kept, and the run says how much.
    const kept = await keptOutput(ada, runId);
    expect(kept).toBe(live.text());
    expect(kept).toContain('sim: SIGTERM, exiting');
    expect((await runOf(runId)).status.outputLength).toBe(kept.length);
  }, 60_000);

  it('resumes a stream where it was (Last-Event-ID), and sends a finished run whole, then its end', async () => {
    runs = await startRuns(`${FAST} SIM_EXIT_AFTER_MS=700 SIM_PRINT_EVERY_MS=100`);
    const ada = await runningStudent();
    const runId = await startRun(ada);
    await eventually('the run ended by itself', async () => (await runOf(runId)).status.phase === 'stopped', 30_000);
    const kept = await keptOutput(ada, runId);
    const middle = kept.indexOf('tick 3 ');
    expect(middle).toBeGreaterThan(0);
    const resumed = await openOutput(ada, runId, { 'last-event-id': String(middle) });
    await resumed.until('the end event', (stream) => stream.events.some((event) => event.type === 'end'));
    resumed.close();
    expect(resumed.events[0]!.data).toMatchObject({ offset: middle });
    expect(resumed.text()).toBe(kept.slice(middle));
    expect(resumed.events.at(-1)).toMatchObject({ type: 'end', data: { status: 'stopped', reason: 'the simulator exited on its own', exitCode: 0 } });
  }, 60_000);

  it(`is bounded: a simulator that prints megabytes has ${OUTPUT_LIMIT} characters kept, then a mark saying so`, async () => {
    runs = await startRuns(`${FAST} SIM_PRINT_MB=8`);
    const ada = await runningStudent();
    const runId = await startRun(ada);
    const truncated = await eventually(
      'the output cut at the limit',
      async () => ((await runOf(runId)).status.outputTruncated ? runOf(runId) : undefined),
      30_000,
    );
    expect(truncated.status.outputLength).toBe(OUTPUT_LIMIT + TRUNCATED_MARK.length);
    expect((await post(ada, `/runs/${runId}/stop`)).status).toBe(202);
    await eventually('the run ended', async () => (await runOf(runId)).status.phase === 'stopped', 30_000);
    const kept = await keptOutput(ada, runId);
    expect(kept.length).toBe(OUTPUT_LIMIT + TRUNCATED_MARK.length);
    expect(kept.endsWith(TRUNCATED_MARK)).toBe(true);
    // The run's last lines are still kept with it.
    expect((await runOf(runId)).status.output).toMatch(/x{100}|printed everything|SIGTERM/);
  }, 90_000);

  it('stays whole across a restarted control plane: the next collector goes on where the last stopped, nothing twice', async () => {
    runs = await startRuns(`${FAST} SIM_PRINT_EVERY_MS=40`);
    const ada = await runningStudent();
    const runId = await startRun(ada);
    const live = await openOutput(ada, runId);
    await live.until('tick 10 streamed', (stream) => stream.text().includes('tick 10 '));
    // The control plane stops (what its collector read is kept); the simulator goes on printing.
    await runs.stop();
    const keptAtStop = (await runOf(runId)).status.outputLength;
    runs = await startRuns(`${FAST} SIM_PRINT_EVERY_MS=40`);
    await eventually('more output after the restart', async () => (await runOf(runId)).status.outputLength > keptAtStop + 200, 30_000);
    expect((await post(ada, `/runs/${runId}/stop`)).status).toBe(202);
    await live.until('the end event', (stream) => stream.events.some((event) => event.type === 'end'));
    live.close();
    const kept = await keptOutput(ada, runId);
    const ticks = [...kept.matchAll(/^tick (\d+) /gm)].map((match) => Number(match[1]));
    expect(ticks.length).toBeGreaterThan(12);
    expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, i) => i + 1));
    // The stream that stayed open across the restart saw it all too.
    expect(live.text()).toBe(kept);
  }, 90_000);

  it('keeps the output of several runs streaming at once, each whole and in order, none mixed with another', async () => {
    runs = await startRuns(`${FAST} SIM_PRINT_EVERY_MS=30`);
    const students = await Promise.all([runningStudent(), runningStudent(), runningStudent()]);
    const runIds = await Promise.all(students.map((student) => startRun(student)));
    for (const [i, runId] of runIds.entries()) {
      await eventually(`run ${i} printed tick 20`, async () => (await keptOutput(students[i]!, runId)).includes('tick 20 '), 30_000);
    }
    await Promise.all(students.map((student, i) => post(student, `/runs/${runIds[i]}/stop`)));
    for (const [i, runId] of runIds.entries()) {
      await eventually(`run ${i} ended`, async () => (await runOf(runId)).status.phase === 'stopped', 30_000);
      const kept = await keptOutput(students[i]!, runId);
      const ticks = [...kept.matchAll(/^tick (\d+) /gm)].map((match) => Number(match[1]));
      expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, n) => n + 1));
      expect(kept.match(/compiling\.\.\. 1\/3/g)).toHaveLength(1);
      expect((await runOf(runId)).status.outputLength).toBe(kept.length);
    }
  }, 90_000);

  it('appends pieces of several runs in one statement, each only where its output ends now', async () => {
    const [ada, eve] = await Promise.all([newStudent(harness.store, `ada${counter++}`, tag), newStudent(harness.store, `eve${counter++}`, tag)]);
    // Runs written as the store writes them, without simulators (nothing converges on them here).
    const insertRun = async (workspaceId: string) =>
      (
        (await db.dataSource.query("INSERT INTO runs (workspace_id, status, desired_state) VALUES ($1, 'stopped', 'stopped') RETURNING id", [workspaceId])) as {
          id: string;
        }[]
      )[0]!;
    const adaRun = await insertRun(ada.workspace.id);
    const eveRun = await insertRun(eve.workspace.id);
    const piece = (runId: string, offset: number, text: string) => ({ runId, offset, text, sourceBytes: offset + text.length, truncated: false });
    expect(await harness.store.runs.appendOutput([piece(adaRun.id, 0, 'one\n'), piece(eveRun.id, 0, 'uno\n')])).toEqual(new Set([adaRun.id, eveRun.id]));
    // Ada's piece at a stale offset (a second writer, or a retry of a write that landed) changes nothing; Eve's goes on.
    expect(await harness.store.runs.appendOutput([piece(adaRun.id, 0, 'again\n'), piece(eveRun.id, 4, 'dos\n')])).toEqual(new Set([eveRun.id]));
    expect(await harness.store.runs.outputText(adaRun.id)).toBe('one\n');
    expect(await harness.store.runs.outputText(eveRun.id)).toBe('uno\ndos\n');
    expect(await runOf(eveRun.id)).toMatchObject({ status: { outputLength: 8, outputSourceBytes: 8 } });
  });

  it('counts offsets as the streams do, in UTF-16 code units: after a robot that prints an emoji, the next piece goes on and a stream from inside it reads on', async () => {
    const ada = await newStudent(harness.store, `ada${counter++}`, tag);
    const [run] = (await db.dataSource.query("INSERT INTO runs (workspace_id, status, desired_state) VALUES ($1, 'stopped', 'stopped') RETURNING id", [
      ada.workspace.id,
    ])) as { id: string }[];
    const first = 'robot \u{1F916} ready\n';
    expect(first.length).toBe(15);
    const piece = (offset: number, text: string) => ({ runId: run!.id, offset, text, sourceBytes: Buffer.byteLength(text), truncated: false });
    expect(await harness.store.runs.appendOutput([piece(0, first)])).toEqual(new Set([run!.id]));
    expect(await harness.store.runs.appendOutput([piece(15, 'tick 1\n')])).toEqual(new Set([run!.id]));
    expect((await runOf(run!.id)).status.outputLength).toBe(22);
    expect(await harness.store.runs.outputText(run!.id)).toBe(`${first}tick 1\n`);
    // From the last character of the first piece, and from the end of it: nothing lost, nothing twice.
    expect(await harness.store.runs.outputFrom(run!.id, 14)).toEqual([
      { offset: 14, text: '\n' },
      { offset: 15, text: 'tick 1\n' },
    ]);
    expect(await harness.store.runs.outputFrom(run!.id, 15)).toEqual([{ offset: 15, text: 'tick 1\n' }]);
    expect(await harness.store.runs.outputFrom(run!.id, 22)).toEqual([]);
  });

  it('refuses what is not a run of this workspace, an offset that is not a number, and another student', async () => {
    runs = await startRuns(`${FAST} SIM_EXIT_AFTER_MS=200`);
    const ada = await runningStudent();
    const runId = await startRun(ada);
    const get = (student: Student, rest: string) => fetch(api(student, rest), { headers: { cookie: student.cookie } });
    expect((await get(ada, `/runs/${crypto.randomUUID()}/output`)).status).toBe(404);
    expect((await get(ada, '/runs/not-a-run/output.txt')).status).toBe(404);
    for (const from of ['-1', 'abc', '1e3', 'Infinity']) expect((await get(ada, `/runs/${runId}/output?from=${from}`)).status).toBe(400);
    expect((await fetch(api(ada, `/runs/${runId}/output`), { headers: { cookie: bob.cookie } })).status).toBe(403);
    expect((await fetch(api(ada, `/runs/${runId}/output.txt`))).status).toBe(401);
  }, 60_000);
});

describe('a run that is cut short', () => {
  const OUT_OF_MEMORY = 'compile or boot ran out of memory';

  it('fails with the reason when its container runs out of memory while building, its output kept up to there', async () => {
    // The engine marks the kill out of memory a moment after the exit: on a busy machine, once more
    // than the default grace later. Waited for here (what is tested is the reason, not the grace).
    runs = await startRuns('SIM_COMPILE_MS=3000 SIM_ALLOC_MB=200', { oomGraceMs: 30_000 });
    // The engine's own verdict, from its events: it marks the kill (State.OOMKilled) and says `oom`
    // at once, when containerd tells it. Once in a CI run that notice never came (the exit won a
    // race in containerd, 30 s of grace and no mark): the run can then know only the exit code.
    const ooms = new Set<string>();
    const connected = Promise.withResolvers<void>();
    const watch = harness.runtime.watch({
      onEvent: (event) => void (event.action === 'oom' && event.runId && ooms.add(event.runId)),
      onConnect: () => connected.resolve(),
      onDisconnect: () => undefined,
    });
    try {
      await connected.promise;
      const ada = await runningStudent();
      const runId = await startRun(ada);
      const ended = await eventually(
        'the run failed',
        async () => {
          const run = await runOf(runId);
          return run.status.phase === 'failed' ? run : undefined;
        },
        45_000,
      );
      expect(ended.status.exitCode).toBe(137);
      // A run said out of memory was marked so by the engine, whose event reaches this watch too.
      await eventually("the engine's word on the kill", async () => ooms.has(runId) || ended.status.reason !== OUT_OF_MEMORY, 10_000);
      expect(ended.status.reason).toBe(ooms.has(runId) ? OUT_OF_MEMORY : 'compile or boot failed (exit code 137)');
    } finally {
      watch.close();
    }
  }, 90_000);

  it('fails with the reason when its container is killed while building, its output kept up to there', async () => {
    runs = await startRuns('SIM_COMPILE_MS=20000');
    const ada = await runningStudent();
    const runId = await startRun(ada);
    const live = await openOutput(ada, runId);
    await live.until('compiling started', (stream) => stream.text().includes('compiling... 1/3'));
    const [container] = await docker.listContainers({ filters: { label: [`service.run-id=${runId}`] } });
    await docker.getContainer(container!.Id).kill();
    await live.until('the end event', (stream) => stream.events.some((event) => event.type === 'end'));
    live.close();
    expect(live.events.at(-1)).toMatchObject({ type: 'end', data: { status: 'failed', reason: 'compile or boot failed (exit code 137)', exitCode: 137 } });
    expect(await keptOutput(ada, runId)).toContain('compiling... 1/3');
  }, 60_000);
});

describe('runs and the idle sweep', () => {
  it('spares a workspace while a run is in progress, and counts the end of a run as activity', async () => {
    runs = await startRuns(FAST);
    const ada = await runningStudent();
    const sweep = new IdleSweep({
      workspaces: harness.store.workspaces,
      activity: app.activity,
      metrics: createMetrics(),
      log: captureLogger().root,
      idleMinutes: 1,
    });
    const age = () => db.dataSource.query("UPDATE workspaces SET last_activity_at = now() - interval '1 hour' WHERE id = $1", [ada.workspace.id]);
    const runId = await startRun(ada);
    await eventually('the run running', async () => (await runOf(runId)).status.phase === 'running', 30_000);
    await age();
    expect(await sweep.sweep()).not.toContain(ada.workspace.id);
    expect((await post(ada, `/runs/${runId}/stop`)).status).toBe(202);
    await eventually('the run stopped', async () => (await runOf(runId)).status.phase === 'stopped', 30_000);
    expect(await sweep.sweep()).not.toContain(ada.workspace.id);
    // The control case: idle for an hour with no run, it is stopped.
    await age();
    expect(await sweep.sweep()).toContain(ada.workspace.id);
  }, 60_000);

  it('stops a run that has been running longer than RUN_MAX_MINUTES, and says why', async () => {
    runs = await startRuns(FAST, { maxRunMs: 1500 });
    const ada = await runningStudent();
    const runId = await startRun(ada);
    const ended = await eventually('the run stopped at its limit', async () => {
      const run = await runOf(runId);
      return run.status.phase === 'stopped' ? run : undefined;
    });
    expect(ended.status.reason).toMatch(/^stopped after \d+ minutes, the longest a run may last \(RUN_MAX_MINUTES\)/);
    expect(ended.status.endedAt!.getTime() - ended.status.readyAt!.getTime()).toBeGreaterThanOrEqual(1500);
  }, 60_000);
});

describe("the editor's own address", () => {
  it('serves the student API under /u/<slug>/.cp/api/, the workspace page at /u/<slug>/.cp/ even while the editor runs, and nothing else under .cp', async () => {
    const ada = await runningStudent();
    const cp = (rest: string, init: RequestInit = {}) => fetch(`${app.url}/u/${ada.workspace.slug}/.cp/${rest}`, init);
    const view = await cp('api/workspace', { headers: { cookie: ada.cookie } });
    expect(view.status).toBe(200);
    expect(((await view.json()) as { workspace: { slug: string; ready: boolean } }).workspace).toMatchObject({ slug: ada.workspace.slug, ready: true });
    expect((await cp('api/workspace', { headers: { cookie: bob.cookie } })).status).toBe(403);
    // A state change from another site is refused there too.
    expect((await cp('api/workspace/keep', { method: 'POST', headers: { cookie: ada.cookie, origin: 'http://evil.example' } })).status).toBe(403);
    const pageAnswer = await cp('', { headers: { cookie: ada.cookie, accept: 'text/html' } });
    expect(pageAnswer.status).toBe(200);
    expect(await pageAnswer.text()).toContain(`<h1>Workspace ${ada.workspace.slug}</h1>`);
    // The editor itself is still at /u/<slug>/.
    expect(await (await fetch(`${app.url}/u/${ada.workspace.slug}/`, { headers: { cookie: ada.cookie } })).text()).toContain('editor stand-in');
    expect((await cp('handoff', { headers: { cookie: ada.cookie } })).status).toBe(404);
    // As sent (fetch would resolve the dots itself).
    const climbing = await new Promise<number>((resolve, reject) =>
      http
        .get(
          { host: '127.0.0.1', port: new URL(app.url).port, path: `/u/${ada.workspace.slug}/.cp/api/../../admin/status`, headers: { cookie: ada.cookie } },
          (answer) => resolve(answer.resume().statusCode ?? 0),
        )
        .on('error', reject),
    );
    expect(climbing).toBe(400);
  }, 60_000);
});

describe("the simulator's NetworkTables through the proxy", () => {
  /** Connects to a workspace's NetworkTables as `as` would from the browser; resolves with the socket, or the status it was refused with. */
  function nt4(workspace: Student, as: Student, origin = app.url): Promise<WebSocket | number> {
    const url = `${app.url.replace('http', 'ws')}/u/${workspace.workspace.slug}/.cp/nt4/nt/test-client`;
    const socket = new WebSocket(url, ['v4.1.networktables.first.wpi.edu'], { headers: { cookie: as.cookie, origin } });
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(socket));
      socket.once('unexpected-response', (_request, answer) => resolve(answer.statusCode ?? 0));
      socket.once('error', reject);
    });
  }

  it('lets the owner subscribe to the running simulator: the robot pose is announced and moves', async () => {
    runs = await startRuns(FAST);
    const ada = await runningStudent();
    expect(await nt4(ada, ada)).toBe(503);
    const runId = await startRun(ada);
    await eventually('the run running', async () => (await runOf(runId)).status.phase === 'running', 30_000);
    const socket = (await nt4(ada, ada)) as WebSocket;
    expect(socket.protocol).toBe('v4.1.networktables.first.wpi.edu');
    const announced = new Map<number, string>();
    const poses: number[][] = [];
    socket.on('message', (data: Buffer, binary: boolean) => {
      if (!binary) {
        for (const { method, params } of JSON.parse(data.toString()) as { method: string; params: { name: string; id: number } }[])
          if (method === 'announce') announced.set(params.id, params.name);
        return;
      }
      for (const message of decodeMulti(data) as Iterable<[number, number, number, unknown]>)
        if (announced.get(message[0]) === '/SmartDashboard/Field/Robot') poses.push(message[3] as number[]);
    });
    socket.send(JSON.stringify([{ method: 'subscribe', params: { topics: ['/'], subuid: 1, options: { prefix: true } } }]));
    // Time synchronisation answers too.
    socket.send(encode([-1, 0, 2, 123]));
    await eventually('two different poses', async () => poses.length > 1 && JSON.stringify(poses[0]) !== JSON.stringify(poses.at(-1)), 10_000);
    expect([...announced.values()]).toEqual(expect.arrayContaining(['/SmartDashboard/Field/Robot', '/classroom/time', '/classroom/mode']));
    expect(poses[0]).toHaveLength(3);
    socket.close();
  }, 60_000);

  it("carries a simulator's flood to the owner without holding it in memory: a reader that stops holds the simulator back, and the control plane answers meanwhile", async () => {
    // Each flooded update is a trajectory of 100 poses (2.7 kB), so that the sockets' buffers between
    // the simulator and a stalled client (several MB of the kernel's) fill within seconds even on a
    // busy machine: a flood of 38-byte updates took over 30 s to fill them on CI.
    runs = await startRuns(`${FAST} SIM_NT4_FLOOD=1 SIM_NT4_FLOOD_POSES=100`);
    const ada = await runningStudent();
    const runId = await startRun(ada);
    await eventually('the run running', async () => (await runOf(runId)).status.phase === 'running', 30_000);
    const subscribe = (socket: WebSocket) =>
      socket.send(JSON.stringify([{ method: 'subscribe', params: { topics: ['/SmartDashboard/Field/Robot'], subuid: 1, options: {} } }]));
    const reader = (await nt4(ada, ada)) as WebSocket;
    let received = 0;
    reader.on('message', (_data: Buffer, binary: boolean) => void (binary && received++));
    subscribe(reader);
    await eventually('the flood to come', async () => received > 5000, 30_000);
    // The control plane answers while the flood goes through it.
    expect((await fetch(api(bob, '/workspace'), { headers: { cookie: bob.cookie } })).status).toBe(200);
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);

    // A second client that takes nothing: the simulator (which waits on its slowest client) is held
    // back through the proxy, so the flood stops for everyone rather than piling up in the control plane.
    const stalled = (await nt4(ada, ada)) as WebSocket;
    stalled.pause();
    subscribe(stalled);
    // Stopped: under 500 in a second, where the flood brought thousands (what is left is the
    // simulator's regular 50 poses a second, which do not wait on its clients).
    const looks: { at: number; count: number }[] = [];
    await eventually(
      'the flood to stop while a client takes nothing',
      async () => {
        looks.push({ at: performance.now(), count: received });
        const since = looks.findLast((look) => look.at <= performance.now() - 1000);
        return since !== undefined && received - since.count < 500;
      },
      30_000,
    );
    // It takes again: the flood goes on.
    stalled.resume();
    const before = received;
    await eventually('the flood to go on', async () => received > before + 5000, 30_000);
    stalled.close();
    reader.close();
  }, 90_000);

  it('refuses another student, an admin (path mode, as for the editor), and another site', async () => {
    runs = await startRuns(FAST);
    const ada = await runningStudent();
    const runId = await startRun(ada);
    await eventually('the run running', async () => (await runOf(runId)).status.phase === 'running', 30_000);
    expect(await nt4(ada, bob)).toBe(403);
    expect(await nt4(ada, coach)).toBe(403);
    expect(await nt4(ada, ada, 'http://evil.example')).toBe(403);
    const owner = await nt4(ada, ada);
    expect(owner).toBeInstanceOf(WebSocket);
    (owner as WebSocket).close();
  }, 60_000);
});
