/**
 * Issue 43 item 6, the usage report, on the real app, the real CLI and real PostgreSQL: the hours a
 * workspace ran come from the stretches the controller's status writes open and close
 * (`workspace_uptime`), cut to the span; runs and failed builds are those started within it; every
 * student and no coach; the JSON answer (checked against the OpenAPI document), the CSV file (a
 * hostile name kept as text), `cli usage`, an empty span refused, admins only.
 */
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EXIT } from '../../src/cli/command.ts';
import type { ErrorBody, UsageReport } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { cli } from '../helpers/cli.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
let app: TestApp;
let coach: Student;
let ada: Student;
let bob: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource);
});
beforeEach(async () => {
  const tag = Date.now().toString(36);
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
  await db.dataSource.query('UPDATE users SET name = \'=HYPERLINK("http://evil","Ada")\' WHERE id = $1', [ada.userId]);
});
afterAll(async () => app?.close());

/** Writes a workspace's observed state as the controller does. */
const observe = (student: Student, state: 'running' | 'stopped' | 'starting') =>
  app.store.workspaces.writeStatus(student.workspace.id, { observedState: state, observedGeneration: 1, statusMessage: '' });

const stretches = async (student: Student) =>
  (await db.dataSource.query('SELECT started_at, ended_at FROM workspace_uptime WHERE workspace_id = $1 ORDER BY id', [student.workspace.id])) as {
    started_at: Date;
    ended_at: Date | null;
  }[];

async function usage(query = '', as: Student = coach): Promise<{ status: number; body: unknown; headers: Headers; text: string }> {
  const response = await fetch(`${app.url}/admin/usage${query}`, { headers: { cookie: as.cookie, accept: 'application/json' } });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : undefined,
  };
}

describe('uptime', () => {
  it('opens a stretch when the workspace is seen running, keeps it through other writes, and closes it when it is seen in another state', async () => {
    await observe(ada, 'starting');
    expect(await stretches(ada)).toEqual([]);
    await observe(ada, 'running');
    await app.store.workspaces.writeStatus(ada.workspace.id, { observedState: 'running', observedGeneration: 1, statusMessage: 'still running' });
    const [open] = await stretches(ada);
    expect(await stretches(ada)).toHaveLength(1);
    expect(open!.ended_at).toBeNull();
    await observe(ada, 'stopped');
    const [closed] = await stretches(ada);
    expect(closed!.ended_at).not.toBeNull();
    await observe(ada, 'running');
    expect((await stretches(ada)).map((stretch) => stretch.ended_at === null)).toEqual([false, true]);
  });
});

describe('GET /admin/usage', () => {
  it('counts the hours within the span (a stretch cut at both ends), the runs started within it and the failed builds, for every student and no coach', async () => {
    await app.store.workspaces.open(ada.workspace.id);
    // Ada's workspace ran 08:00–12:00 and 14:00–now (open) on 2026-11-02; the span is 10:00–16:00 of that day.
    await db.dataSource.query(
      `INSERT INTO workspace_uptime (workspace_id, started_at, ended_at) VALUES
         ($1, '2026-11-02T08:00:00Z', '2026-11-02T12:00:00Z'), ($1, '2026-11-02T14:00:00Z', NULL), ($1, '2026-10-01T08:00:00Z', '2026-10-01T09:00:00Z')`,
      [ada.workspace.id],
    );
    const failed = await app.store.runs.create(ada.workspace.id);
    await app.store.runs.finish(failed.id, { status: 'failed', reason: 'compile or boot failed (exit code 1)', exitCode: 1, output: '' });
    const crashed = await app.store.runs.create(ada.workspace.id);
    await app.store.runs.markReady(crashed.id);
    await app.store.runs.finish(crashed.id, { status: 'failed', reason: 'the simulator crashed (exit code 3)', exitCode: 3, output: '' });
    const outside = await app.store.runs.create(ada.workspace.id);
    await app.store.runs.finish(outside.id, { status: 'canceled', reason: 'stopped by request', exitCode: null, output: '' });
    await db.dataSource.query("UPDATE runs SET queued_at = '2026-11-02T11:00:00Z' WHERE id = ANY($1)", [[failed.id, crashed.id]]);
    await db.dataSource.query("UPDATE runs SET queued_at = '2026-11-03T11:00:00Z' WHERE id = $1", [outside.id]);

    const answer = await usage('?since=2026-11-02T10:00:00Z&until=2026-11-02T16:00:00Z');
    expect(answer.status).toBe(200);
    const report = answer.body as UsageReport;
    expect(report.since).toBe('2026-11-02T10:00:00.000Z');
    expect(report.until).toBe('2026-11-02T16:00:00.000Z');
    expect(report.students.map((row) => row.student.email)).toEqual([ada.email, bob.email]);
    expect(report.students[0]).toEqual({
      student: { id: ada.userId, name: '=HYPERLINK("http://evil","Ada")', email: ada.email },
      workspaceSeconds: 4 * 3600,
      runs: 2,
      failedBuilds: 1,
      lastSeenAt: expect.any(String),
    });
    expect(report.students[1]).toEqual({
      student: { id: bob.userId, name: '', email: bob.email },
      workspaceSeconds: 0,
      runs: 0,
      failedBuilds: 0,
      lastSeenAt: null,
    });
  });

  it('covers the last 30 days by default', async () => {
    const report = (await usage()).body as UsageReport;
    expect(Date.parse(report.until) - Date.parse(report.since)).toBe(30 * 86_400_000);
  });

  it('gives the CSV file to download, a hostile name kept as text', async () => {
    await db.dataSource.query("INSERT INTO workspace_uptime (workspace_id, started_at, ended_at) VALUES ($1, '2026-11-02T10:00:00Z', '2026-11-02T11:30:00Z')", [
      ada.workspace.id,
    ]);
    const answer = await usage('.csv?since=2026-11-02T00:00:00Z&until=2026-11-03T00:00:00Z');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(answer.headers.get('content-disposition')).toBe('attachment; filename="usage-2026-11-02-to-2026-11-03.csv"');
    expect(answer.text.split('\r\n')).toEqual([
      'email,name,workspace_hours,runs,failed_builds,last_seen',
      `${ada.email},"'=HYPERLINK(""http://evil"",""Ada"")",1.50,0,0,`,
      `${bob.email},,0.00,0,0,`,
      '',
    ]);
  });

  it('refuses an empty span and a date that is none, and is for admins only', async () => {
    const empty = await usage('?since=2026-11-02T00:00:00Z&until=2026-11-01T00:00:00Z');
    expect(empty.status).toBe(400);
    expect((empty.body as ErrorBody).error).toEqual({
      code: 'invalid_span',
      message: 'since (2026-11-02T00:00:00.000Z) must be before until (2026-11-01T00:00:00.000Z).',
    });
    const garbage = await usage('?since=yesterday');
    expect(garbage.status).toBe(400);
    expect((garbage.body as ErrorBody).error.code).toBe('validation_error');
    const student = await usage('', ada);
    expect(student.status).toBe(403);
    expect((await usage('.csv', ada)).status).toBe(403);
  });
});

describe('cli usage', () => {
  it('prints the report, its CSV with --csv, and refuses a date that is none in one line', async () => {
    const env = { DATABASE_URL: db.url, DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'cp-usage-')), NODE_ENV: 'test' };
    await db.dataSource.query("INSERT INTO workspace_uptime (workspace_id, started_at, ended_at) VALUES ($1, '2026-11-02T10:00:00Z', '2026-11-02T13:00:00Z')", [
      bob.workspace.id,
    ]);
    const table = await cli(['usage', '--since', '2026-11-01', '--until', '2026-11-03'], env);
    expect(table.code).toBe(EXIT.ok);
    expect(table.stdout).toContain('Usage from 2026-11-01T00:00:00.000Z to 2026-11-03T00:00:00.000Z:');
    expect(table.stdout.split('\n').find((line) => line.includes(bob.email))).toMatch(/3\.0\s+0\s+0\s+never/);
    const csv = await cli(['usage', '--since', '2026-11-01', '--until', '2026-11-03', '--csv'], env);
    expect(csv.stdout.split(/\r?\n/).slice(0, 3)).toEqual([
      'email,name,workspace_hours,runs,failed_builds,last_seen',
      `${ada.email},"'=HYPERLINK(""http://evil"",""Ada"")",0.00,0,0,`,
      `${bob.email},,3.00,0,0,`,
    ]);
    const bad = await cli(['usage', '--since', 'last week'], env);
    expect(bad.code).not.toBe(EXIT.ok);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toContain('--since must be a date');
  });
});
