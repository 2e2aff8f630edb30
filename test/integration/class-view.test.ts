/**
 * Issue 43, the class view's answer (`GET /admin/class`) on the real app and real PostgreSQL: every
 * student and no coach, by name; the run in progress and how the last one ended, each outcome from
 * the runs recorded as the run controller records them (RunStore.create, markReady, finish: the
 * compile errors counted from the output it keeps); the open help request and the coach coming;
 * presence from the live replicas only (a stale replica's is not read); admins only. Every answer
 * is checked against the OpenAPI document (test/helpers/contract.ts).
 */
import { randomUUID } from 'node:crypto';
import type { ClassStudent, ClassView, ErrorBody } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
let app: TestApp;
let coach: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource);
});
// Each test starts on empty tables (useTestDatabase).
beforeEach(async () => {
  coach = await newStudent(app.store, 'coach', randomUUID().slice(0, 8), 'admin');
});
afterAll(async () => app?.close());

async function classView(as: Student = coach): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${app.url}/admin/class`, { headers: { cookie: as.cookie, accept: 'application/json' } });
  return { status: response.status, body: await response.json() };
}

/** The rows of these students, by email, from a fresh read. */
async function rowsOf(...students: Student[]): Promise<Map<string, ClassStudent>> {
  const answer = await classView();
  expect(answer.status).toBe(200);
  const emails = new Set(students.map((student) => student.email));
  return new Map((answer.body as ClassView).students.filter((row) => emails.has(row.student.email)).map((row) => [row.student.email, row]));
}
const rowOf = async (student: Student) => (await rowsOf(student)).get(student.email)!;

const JAVAC = [
  '> Task :compileJava FAILED',
  "/home/student/src/main/java/frc/robot/Robot.java:12: error: ';' expected",
  '    int x = 1',
  '             ^',
  '/home/student/src/main/java/frc/robot/Drive.java:30: error: cannot find symbol',
  '2 errors',
].join('\n');

/** A student whose workspace is wanted running (no controller runs here: only what is recorded counts). */
async function openStudent(name: string, tag = randomUUID().slice(0, 8)): Promise<Student> {
  const student = await newStudent(app.store, name, tag);
  await app.store.workspaces.open(student.workspace.id);
  return student;
}

/** A run of `student`'s, ended as asked (ready first when `ready`). */
async function endedRun(
  student: Student,
  outcome: { status: 'stopped' | 'failed' | 'canceled'; ready: boolean; exitCode?: number; output?: string; reason?: string },
) {
  const run = await app.store.runs.create(student.workspace.id);
  if (outcome.ready) await app.store.runs.markReady(run.id);
  await app.store.runs.finish(run.id, {
    status: outcome.status,
    reason: outcome.reason ?? 'ended',
    exitCode: outcome.exitCode ?? null,
    output: outcome.output ?? '',
  });
  return run;
}

describe('GET /admin/class', () => {
  it('lists every student and no coach, with their workspace and no run, result, presence or help yet', async () => {
    const tag = randomUUID().slice(0, 8);
    const ada = await newStudent(app.store, 'ada', tag);
    const answer = await classView();
    expect(answer.status).toBe(200);
    const view = answer.body as ClassView;
    expect(Number.isNaN(Date.parse(view.readAt))).toBe(false);
    expect(view.students.some((row) => row.student.email === coach.email)).toBe(false);
    expect(view.students.find((row) => row.student.email === ada.email)).toEqual({
      student: { id: ada.userId, name: '', email: ada.email },
      workspace: { id: ada.workspace.id, slug: ada.workspace.slug, desiredState: 'stopped', observedState: 'unknown', statusMessage: '' },
      online: false,
      lastActivityAt: null,
      run: null,
      lastResult: null,
      robot: null,
      ntConnected: false,
      help: null,
    });
  });

  it('sorts the class by name, else email', async () => {
    const tag = randomUUID().slice(0, 8);
    const zed = await newStudent(app.store, 'bzed', tag);
    const amy = await newStudent(app.store, 'zamy', tag);
    await db.dataSource.query('UPDATE users SET name = $2 WHERE id = $1', [amy.userId, 'Abe']);
    const emails = ((await classView()).body as ClassView).students.map((row) => row.student.email).filter((email) => email.endsWith(`${tag}@school.test`));
    expect(emails).toEqual([amy.email, zed.email]);
  });

  it('shows the run in progress: building (queued) then running since it was ready', async () => {
    const bo = await openStudent('bo');
    const run = await app.store.runs.create(bo.workspace.id);
    expect((await rowOf(bo)).run).toEqual({ id: run.id, phase: 'queued', queuedAt: run.status.queuedAt.toISOString(), readyAt: null });
    const ready = await app.store.runs.markReady(run.id);
    expect((await rowOf(bo)).run).toEqual({
      id: run.id,
      phase: 'running',
      queuedAt: run.status.queuedAt.toISOString(),
      readyAt: ready!.status.readyAt!.toISOString(),
    });
  });

  it('names how the last run ended: compile errors (counted, the first named), a failed build, a crash with its exit code, built, canceled', async () => {
    const tag = randomUUID().slice(0, 8);
    const [errors, failedBuild, crash, built, canceled] = await Promise.all(['ce', 'bf', 'cr', 'bu', 'ca'].map((name) => openStudent(name, tag)));
    const compileRun = await endedRun(errors!, { status: 'failed', ready: false, exitCode: 1, output: JAVAC, reason: 'compile or boot failed (exit code 1)' });
    await endedRun(failedBuild!, { status: 'failed', ready: false, output: 'error: compilation failed', reason: 'compile or boot ran out of memory' });
    await endedRun(crash!, { status: 'failed', ready: true, exitCode: 3, output: 'sim crashed', reason: 'the simulator crashed (exit code 3)' });
    await endedRun(built!, { status: 'stopped', ready: true });
    await endedRun(canceled!, { status: 'canceled', ready: false });
    const rows = await rowsOf(errors!, failedBuild!, crash!, built!, canceled!);
    expect(rows.get(errors!.email)!.lastResult).toEqual({
      runId: compileRun.id,
      outcome: 'compile_errors',
      endedAt: expect.any(String),
      exitCode: 1,
      reason: 'compile or boot failed (exit code 1)',
      errors: 2,
      firstError: "Robot.java:12: ';' expected",
    });
    expect(rows.get(failedBuild!.email)!.lastResult).toMatchObject({
      outcome: 'build_failed',
      errors: 0,
      firstError: null,
      reason: 'compile or boot ran out of memory',
    });
    expect(rows.get(crash!.email)!.lastResult).toMatchObject({ outcome: 'crashed', exitCode: 3 });
    expect(rows.get(built!.email)!.lastResult).toMatchObject({ outcome: 'built' });
    expect(rows.get(canceled!.email)!.lastResult).toMatchObject({ outcome: 'canceled' });
    expect([...rows.values()].every((row) => row.run === null)).toBe(true);
  });

  it('keeps the last ended run beside a new one in progress, and the newest ended run as the last result', async () => {
    const cy = await openStudent('cy');
    await endedRun(cy, { status: 'failed', ready: false, output: JAVAC });
    const fixed = await endedRun(cy, { status: 'stopped', ready: true });
    const next = await app.store.runs.create(cy.workspace.id);
    const row = await rowOf(cy);
    expect(row.lastResult).toMatchObject({ runId: fixed.id, outcome: 'built' });
    expect(row.run).toMatchObject({ id: next.id, phase: 'queued' });
  });

  it('shows an open help request with its message, then the coach coming by name', async () => {
    const di = await newStudent(app.store, 'di', randomUUID().slice(0, 8));
    const raised = await app.store.help.raise({ id: di.userId, email: di.email }, di.workspace, 'My robot spins');
    expect((await rowOf(di)).help).toEqual({
      id: raised.id,
      state: 'waiting',
      message: 'My robot spins',
      createdAt: raised.createdAt.toISOString(),
      takenBy: null,
    });
    await db.dataSource.query('UPDATE users SET name = $2 WHERE id = $1', [coach.userId, 'Coach Grace']);
    await app.store.help.take({ id: coach.userId, email: coach.email }, raised.id);
    expect((await rowOf(di)).help).toMatchObject({ state: 'taken', takenBy: 'Coach Grace' });
    await app.store.help.resolve({ id: coach.userId, email: coach.email }, raised.id);
    expect((await rowOf(di)).help).toBeNull();
  });

  it("shows presence summed over the live replicas (online, the robot, NetworkTables), and not a stale replica's", async () => {
    const tag = randomUUID().slice(0, 8);
    const eve = await newStudent(app.store, 'eve', tag);
    const fay = await newStudent(app.store, 'fay', tag);
    const live = { id: randomUUID(), publicUrl: 'http://127.0.0.1:1', hostname: 'live', pid: 1, pidNamespace: 'test' };
    const stale = { id: randomUUID(), publicUrl: 'http://127.0.0.1:2', hostname: 'stale', pid: 2, pidNamespace: 'test' };
    await app.store.servers.heartbeat(live);
    await app.store.servers.heartbeat(stale);
    await db.dataSource.query("UPDATE servers SET seen_at = now() - interval '1 hour' WHERE id = $1", [stale.id]);
    const none = { pages: 0, editors: 0, ntClients: 0, driver: false, robotEnabled: false, robotMode: null };
    await app.store.presence.write(live.id, [
      { ...none, workspaceId: eve.workspace.id, editors: 1, ntClients: 1, driver: true, robotEnabled: true, robotMode: 'autonomous' },
    ]);
    await app.store.presence.write(stale.id, [{ ...none, workspaceId: fay.workspace.id, editors: 2, driver: true }]);
    const rows = await rowsOf(eve, fay);
    expect(rows.get(eve.email)).toMatchObject({ online: true, ntConnected: true, robot: { enabled: true, mode: 'autonomous' } });
    expect(rows.get(fay.email)).toMatchObject({ online: false, ntConnected: false, robot: null });
    await app.store.presence.clear(live.id);
    expect(await rowOf(eve)).toMatchObject({ online: false, ntConnected: false, robot: null });
  });

  it('is for admins: a student is refused (403), a caller without a session is told to sign in (401)', async () => {
    const gus = await newStudent(app.store, 'gus', randomUUID().slice(0, 8));
    const refused = await classView(gus);
    expect(refused.status).toBe(403);
    expect((refused.body as ErrorBody).error.code).toBe('forbidden');
    const anonymous = await fetch(`${app.url}/admin/class`, { headers: { accept: 'application/json' } });
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as ErrorBody).error.code).toBe('authentication_required');
  });
});
