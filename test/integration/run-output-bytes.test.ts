/**
 * Issue 39, finding 3: a run's output takes any byte. PostgreSQL text holds no NUL, so a NUL a
 * student's program printed used to fail the collector's batched write (every run's output in it)
 * and the run's end (its last lines): the run could never be stopped and its workspace never ran
 * again. Now what text cannot hold is kept as U+FFFD (src/db/text.ts), one code unit for one, and
 * every reader shows it. Real PostgreSQL, real Docker (the stand-in simulator's SIM_PRINT_HEX), the
 * real app.
 */
import type { RunController } from '../../controllers/runs.ts';
import { names } from '../../src/docker/runtime.ts';
import type { RunRecord } from '../../src/store/runs.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, docker, eventually, removeEverything, type Harness, testRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let harness: Harness;
let app: TestApp;
let runs: RunController | undefined;
let coach: Student;
let counter = 0;

beforeAll(async () => {
  harness = createHarness(db.dataSource, { environmentCap: 20 });
  await harness.controller.start();
  // One change feed: the app hears the collector's output and the controller's status at once.
  app = await startApp(db.dataSource, {}, { changes: harness.changes });
  coach = await newStudent(harness.store, 'coach', tag, 'admin');
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

/** NUL, then bytes that are no UTF-8 (two stray bytes, an encoded surrogate, a cut 4-byte sequence), text between. */
const BYTES = Buffer.concat([
  Buffer.from('bytes: a'),
  Buffer.from([0x00]),
  Buffer.from('b'),
  Buffer.from([0xff, 0xfe]),
  Buffer.from('c'),
  Buffer.from([0xed, 0xa0, 0x80]),
  Buffer.from('d'),
  Buffer.from([0xf0, 0x9f]),
  Buffer.from(' end'),
]);
/** BYTES as kept: each NUL and each byte that is no UTF-8 a U+FFFD (how many for a bad sequence is the decoder's). */
const SHOWN = /bytes: a\uFFFDb\uFFFD+c\uFFFD+d\uFFFD+ end\n/;

/**
 * A run controller whose simulator first prints the bytes of `print.hex` in its workspace's home, if
 * there is one (SIM_PRINT_HEX), then runs the stand-in with `sim` settings; with the records it logs.
 */
async function startRuns(sim: string): Promise<{ controller: RunController; records: Record<string, unknown>[] }> {
  const started = testRunController(harness, `SIM_PRINT_HEX=$(cat print.hex 2>/dev/null) ${sim} node /app/sim.mjs`);
  await started.controller.start();
  return started;
}

/** A student whose workspace runs (its editor up); with `bytes`, its simulator prints them first. */
async function runningStudent(bytes?: Buffer): Promise<Student> {
  const student = await newStudent(harness.store, `ada${counter++}`, tag);
  student.workspace = await openAndWait(harness.store, student.workspace);
  if (bytes) await writeHome(student, 'print.hex', bytes.toString('hex'));
  return student;
}

/** Writes a file into a student's home, through their editor's container (docker exec). */
async function writeHome(student: Student, file: string, text: string): Promise<void> {
  const exec = await docker.getContainer(names.code(student.workspace.slug)).exec({ Cmd: ['sh', '-c', 'printf %s "$1" > "$2"', 'sh', text, file] });
  await exec.start({ Detach: true });
  const done = await eventually('the file written', async () => {
    const info = await exec.inspect();
    return !info.Running && info.ExitCode !== null && info;
  });
  expect(done.ExitCode).toBe(0);
}

const FAST = 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100';
const api = (student: Student, rest: string) => `${app.url}/u/${student.workspace.slug}/api${rest}`;
const post = (student: Student, rest: string) => fetch(api(student, rest), { method: 'POST', headers: { cookie: student.cookie, origin: app.url } });
const get = (student: Student, rest: string) => fetch(api(student, rest), { headers: { cookie: student.cookie } });

async function startRun(student: Student): Promise<string> {
  const answer = await post(student, '/runs');
  expect(answer.status).toBe(202);
  return ((await answer.json()) as { run: { id: string } }).run.id;
}

const runOf = async (id: string): Promise<RunRecord> => (await harness.store.runs.get(id))!;

/** The kept output of a run, whole (`output.txt`). */
async function keptOutput(student: Student, runId: string): Promise<string> {
  const answer = await get(student, `/runs/${runId}/output.txt`);
  expect(answer.status).toBe(200);
  return answer.text();
}

/** Opens a run's output stream (server-sent events); `events` resolves with every event once the stream ends (after the run's `end`). */
async function openOutput(student: Student, runId: string): Promise<{ events: Promise<{ type: string; id?: string; data: unknown }[]> }> {
  const answer = await get(student, `/runs/${runId}/output`);
  expect(answer.status).toBe(200);
  const events = answer.text().then((body) =>
    body
      .split('\n\n')
      .map((block) => Object.fromEntries(block.split('\n').map((line) => [line.slice(0, line.indexOf(': ')), line.slice(line.indexOf(': ') + 2)])))
      .filter((fields: Record<string, string>) => fields.event !== undefined)
      .map((fields: Record<string, string>) => ({ type: fields.event!, id: fields.id, data: JSON.parse(fields.data!) as unknown })),
  );
  return { events };
}

const outputText = (events: { type: string; data: unknown }[]) =>
  events
    .filter((event) => event.type === 'output')
    .map((event) => (event.data as { text: string }).text)
    .join('');

describe('output with bytes that text cannot hold', () => {
  it('is kept, NUL and invalid UTF-8 as U+FFFD, while a run beside it in the same writes keeps its output whole and never fails', async () => {
    const started = await startRuns(`${FAST} SIM_PRINT_EVERY_MS=20`);
    runs = started.controller;
    const [ada, bob] = await Promise.all([runningStudent(BYTES), runningStudent()]);
    // Both at once: their first output (Ada's bytes, Bob's compile) goes into the same writes.
    const [adaRun, bobRun] = await Promise.all([startRun(ada), startRun(bob)]);
    const [adaLive, bobLive] = await Promise.all([openOutput(ada, adaRun), openOutput(bob, bobRun)]);

    // Bob's output: whole (every tick once, in order), and none of his writes failed.
    await eventually('tick 10 of Bob kept', async () => (await keptOutput(bob, bobRun)).includes('tick 10 '), 30_000);
    expect((await post(bob, `/runs/${bobRun}/stop`)).status).toBe(202);
    await eventually("Bob's run stopped", async () => (await runOf(bobRun)).status.phase === 'stopped', 30_000);
    const failed = started.records.filter((record) => record.runId === bobRun && String(record.message).startsWith('following the output of a run failed'));
    expect(failed).toEqual([]);
    const bobKept = await keptOutput(bob, bobRun);
    const ticks = [...bobKept.matchAll(/^tick (\d+) /gm)].map((match) => Number(match[1]));
    expect(ticks.length).toBeGreaterThanOrEqual(10);
    expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, i) => i + 1));
    expect(bobKept.match(/compiling\.\.\. 1\/3/g)).toHaveLength(1);
    expect(outputText(await bobLive.events)).toBe(bobKept);

    // Ada's output: the bytes shown, and everything after them kept, in the file and the stream.
    await eventually('tick 10 of Ada kept', async () => (await keptOutput(ada, adaRun)).includes('tick 10 '), 30_000);
    expect((await post(ada, `/runs/${adaRun}/stop`)).status).toBe(202);
    await eventually("Ada's run stopped", async () => (await runOf(adaRun)).status.phase === 'stopped', 30_000);
    const adaKept = await keptOutput(ada, adaRun);
    expect(adaKept).toMatch(SHOWN);
    expect(adaKept).not.toContain('\u0000');
    expect(adaKept.indexOf('bytes: a')).toBeLessThan(adaKept.indexOf('compiling... 1/3'));
    expect((await runOf(adaRun)).status.outputLength).toBe(adaKept.length);
    const adaEvents = await adaLive.events;
    expect(outputText(adaEvents)).toBe(adaKept);
    expect(adaEvents.at(-1)).toMatchObject({ type: 'end', data: { status: 'stopped' } });
  }, 90_000);

  it('in its last lines: the run stops when asked, its end is recorded with them, its container goes, and the next run starts', async () => {
    runs = (await startRuns(FAST)).controller;
    const ada = await runningStudent(BYTES);
    const runId = await startRun(ada);
    await eventually('the run running', async () => (await runOf(runId)).status.phase === 'running', 30_000);
    // A second run while one is active: refused, as ever.
    expect((await post(ada, '/runs')).status).toBe(409);
    expect((await post(ada, `/runs/${runId}/stop`)).status).toBe(202);
    const stopped = await eventually('the run stopped', async () => ((await runOf(runId)).status.phase === 'stopped' ? runOf(runId) : undefined), 30_000);
    expect(stopped.status.reason).toBe('stopped by request');
    expect(stopped.status.output).toMatch(SHOWN);
    expect(stopped.status.output).toContain('sim: SIGTERM, exiting');
    await eventually(
      'the sim container removed',
      async () => (await docker.listContainers({ all: true, filters: { label: [`service.run-id=${runId}`] } })).length === 0,
    );

    // The student's and the coach's answers show the same.
    const mine = (await (await get(ada, `/runs/${runId}`)).json()) as { run: { output: string } };
    expect(mine.run.output).toBe(stopped.status.output);
    const theirs = await fetch(`${app.url}/admin/runs/${runId}`, { headers: { cookie: coach.cookie } });
    expect(theirs.status).toBe(200);
    expect(((await theirs.json()) as { run: { output: string } }).run.output).toBe(stopped.status.output);

    const next = await startRun(ada);
    await eventually('the next run running', async () => (await runOf(next)).status.phase === 'running', 30_000);
  }, 90_000);
});

describe('the store, given text with what PostgreSQL text cannot hold', () => {
  /** A run row as the store writes it, with no simulator (nothing converges on it here). */
  const insertRun = async (workspaceId: string, status: 'running' | 'stopped') =>
    (
      (await db.dataSource.query('INSERT INTO runs (workspace_id, status, desired_state) VALUES ($1, $2, $3) RETURNING id', [
        workspaceId,
        status,
        status === 'running' ? 'running' : 'stopped',
      ])) as { id: string }[]
    )[0]!.id;

  it("appends a batch whole when one run's piece holds a NUL and a lone surrogate: U+FFFD each, every length and offset as given", async () => {
    const [ada, bob] = await Promise.all([newStudent(harness.store, `ada${counter++}`, tag), newStudent(harness.store, `bob${counter++}`, tag)]);
    const adaRun = await insertRun(ada.workspace.id, 'stopped');
    const bobRun = await insertRun(bob.workspace.id, 'stopped');
    const piece = (runId: string, offset: number, text: string) => ({ runId, offset, text, sourceBytes: offset + text.length, truncated: false });
    const bad = 'a\u0000b \uD83E cut\n';
    expect(await harness.store.runs.appendOutput([piece(adaRun, 0, bad), piece(bobRun, 0, 'fine\n')])).toEqual(new Set([adaRun, bobRun]));
    expect(await harness.store.runs.appendOutput([piece(adaRun, bad.length, 'next\n'), piece(bobRun, 5, 'more\n')])).toEqual(new Set([adaRun, bobRun]));
    expect(await harness.store.runs.outputText(adaRun)).toBe('a\uFFFDb \uFFFD cut\nnext\n');
    expect(await harness.store.runs.outputText(bobRun)).toBe('fine\nmore\n');
    expect(await runOf(adaRun)).toMatchObject({ status: { outputLength: bad.length + 5 } });
    expect(await harness.store.runs.outputFrom(adaRun, 2)).toEqual([
      { offset: 2, text: 'b \uFFFD cut\n' },
      { offset: bad.length, text: 'next\n' },
    ]);
  });

  it("records a run's end whose last lines and reason hold a NUL", async () => {
    const ada = await newStudent(harness.store, `ada${counter++}`, tag);
    const runId = await insertRun(ada.workspace.id, 'running');
    const ended = await harness.store.runs.finish(runId, { status: 'failed', reason: 'exit\u0000', exitCode: 1, output: 'last\u0000line\n' });
    expect(ended).toMatchObject({ status: { phase: 'failed', reason: 'exit\uFFFD', output: 'last\uFFFDline\n' } });
    expect(await runOf(runId)).toMatchObject({ status: { phase: 'failed', output: 'last\uFFFDline\n' } });
  });

  it("records a workspace's status whose message (the engine's words) holds a NUL", async () => {
    const ada = await newStudent(harness.store, `ada${counter++}`, tag);
    // The controller's own first status of it written (so that it does not write over ours below).
    await waitForState(harness.store, ada.workspace.id, 'stopped');
    await harness.store.workspaces.writeStatus(ada.workspace.id, { observedState: 'failed', observedGeneration: 0, statusMessage: 'engine: bad\u0000name' });
    expect(await harness.store.workspaces.get(ada.workspace.id)).toMatchObject({ status: { observedState: 'failed', statusMessage: 'engine: bad\uFFFDname' } });
  });
});
