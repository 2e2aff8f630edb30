/**
 * Issue 43 item 3, the robot's field in a coach's look, on the real app, PostgreSQL and Docker
 * Engine with real runs (the stand-in simulator, test/fixtures/workspace/sim.mjs, whose robot drives
 * a circle on `/SmartDashboard/Field`): the control plane reads the run's NetworkTables itself, over
 * a connection verified to reach that run's simulator. Without a look nothing is read; with one and
 * no run it says so; a run in progress gives its robot's pose, moving; a simulator that floods
 * NetworkTables is cut off (`too_much`) while the control plane keeps answering.
 */
import type { RunController } from '../../controllers/runs.ts';
import type { ErrorBody, LookField } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, eventually, removeEverything, type Harness, testRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let harness: Harness;
let app: TestApp;
let runs: RunController | undefined;
let coach: Student;
let counter = 0;

beforeAll(async () => {
  harness = createHarness(db.dataSource, { environmentCap: 10 });
  await harness.controller.start();
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

const FAST = 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100';

/** A student whose workspace runs, and a run controller whose simulators run the stand-in with `sim` settings. */
async function runningStudent(sim: string): Promise<Student> {
  const { controller } = testRunController(harness, `${sim} node /app/sim.mjs`);
  runs = controller;
  await controller.start();
  const student = await newStudent(harness.store, `ada${counter++}`, tag);
  student.workspace = await openAndWait(harness.store, student.workspace);
  return student;
}

async function startRun(student: Student): Promise<string> {
  const answer = await fetch(`${app.url}/u/${student.workspace.slug}/api/runs`, { method: 'POST', headers: { cookie: student.cookie, origin: app.url } });
  expect(answer.status).toBe(202);
  return ((await answer.json()) as { run: { id: string } }).run.id;
}

async function beginLook(student: Student): Promise<void> {
  const answer = await fetch(`${app.url}/admin/workspaces/${student.workspace.id}/looks`, {
    method: 'POST',
    headers: { cookie: coach.cookie, origin: app.url },
  });
  expect(answer.status).toBe(201);
}

async function field(student: Student): Promise<{ status: number; body: LookField & ErrorBody }> {
  const answer = await fetch(`${app.url}/admin/workspaces/${student.workspace.id}/field`, { headers: { cookie: coach.cookie, accept: 'application/json' } });
  return { status: answer.status, body: (await answer.json()) as LookField & ErrorBody };
}

const robotOf = (reading: LookField) =>
  reading.fields.find((each) => each.table === '/SmartDashboard/Field')?.objects.find((object) => object.drawn === 'robot')?.poses[0];

describe("the robot's field in a coach's look", () => {
  it("reads nothing without a look, says when no run is in progress, then gives the run's robot as it moves", async () => {
    const ada = await runningStudent(FAST);
    const without = await field(ada);
    expect(without.status).toBe(404);
    expect(without.body.error.code).toBe('look_not_found');

    await beginLook(ada);
    expect((await field(ada)).body).toEqual({ runId: null, state: 'no_run', fields: [] });

    const runId = await startRun(ada);
    const first = await eventually('the robot on the field', async () => {
      const { body } = await field(ada);
      expect(body.runId).toBe(runId);
      return body.state === 'live' && robotOf(body) ? body : undefined;
    });
    expect(first.fields[0]).toMatchObject({ table: '/SmartDashboard/Field', name: 'Field' });
    const at = robotOf(first)!;
    // The stand-in drives a circle of 2 m around (3, 3).
    expect(Math.hypot(at.x - 3, at.y - 3)).toBeCloseTo(2, 1);
    await eventually('the robot moving', async () => {
      const now = robotOf((await field(ada)).body);
      return now && (now.x !== at.x || now.y !== at.y) ? now : undefined;
    });
    // Not counted against the look's reads of files (60 a minute): a page reads it every second.
    for (let i = 0; i < 61; i++) expect((await field(ada)).status).toBe(200);
  }, 90_000);

  it('cuts off a simulator that floods its NetworkTables (too_much) while the control plane keeps answering', async () => {
    const ada = await runningStudent(`${FAST} SIM_NT4_FLOOD=1`);
    await beginLook(ada);
    await startRun(ada);
    await eventually('the flood cut off', async () => (await field(ada)).body.state === 'too_much' || undefined, 30_000);
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
    // It stays cut off (for half a minute, not tried again at each read).
    expect((await field(ada)).body).toMatchObject({ state: 'too_much', fields: [] });
  }, 90_000);
});
