/**
 * Issue 43 item 3, a coach's read-only look at a student's workspace, on the real app, real
 * PostgreSQL and the real Docker Engine (the student's home is a real volume, read by a helper
 * container of the control plane's): a look begins audited (`workspace.view`, once per look), is
 * kept, ends, and ends by itself when not kept; while it is live the student's page is told who is
 * looking, and its coach (only) lists folders and reads files: text shown, binary named, a large
 * file cut, links shown and never followed, a path out of the home refused; without a look nothing
 * is read; a workspace that never started says so; admins only. Every answer is checked against the
 * OpenAPI document (test/helpers/contract.ts).
 */
import { PassThrough, pipeline } from 'node:stream';
import tar from 'tar-stream';
import { DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { names } from '../../src/docker/runtime.ts';
import { LOOK_READS_PER_MINUTE } from '../../src/store/looks.ts';
import type { ErrorBody, HomeFile, HomeListing, LookAnswer, StudentWorkspaceAnswer } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { newControlPlaneId, removeEverything, TEST_ENV, TEST_IMAGE } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const controlPlaneId = newControlPlaneId();
const runtime = new DockerRuntime({ controlPlaneId });
let app: TestApp;
let coach: Student;
let other: Student;
let ada: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource, { ...TEST_ENV, CONTROL_PLANE_ID: controlPlaneId });
}, 30_000);
beforeEach(async () => {
  const tag = Date.now().toString(36);
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  other = await newStudent(app.store, 'other', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  await db.dataSource.query("UPDATE users SET name = 'Coach Grace' WHERE id = $1", [coach.userId]);
});
afterAll(async () => {
  await app?.close();
  await removeEverything(controlPlaneId);
}, 60_000);

/** Fills a student's home volume with these files (text, or bytes), a folder, and links in and out. */
async function fillHome(student: Student): Promise<void> {
  const body = new PassThrough();
  const pack = tar.pack();
  const owner = { uid: 1000, gid: 1000 };
  pack.entry({ name: 'student', type: 'directory', mode: 0o40755, ...owner });
  pack.entry({ name: 'student/src', type: 'directory', mode: 0o40755, ...owner });
  pack.entry({ name: 'student/src/Robot.java', ...owner }, 'public class Robot {}\n');
  pack.entry({ name: 'student/notes <b>.txt', ...owner }, '<script>alert(1)</script>\n');
  pack.entry({ name: 'student/logo.png', ...owner }, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0x0d]));
  pack.entry({ name: 'student/big.log', ...owner }, 'x'.repeat(300 * 1024));
  pack.entry({ name: 'student/etc', type: 'symlink', linkname: '/etc', ...owner });
  pack.entry({ name: 'student/robot-link', type: 'symlink', linkname: 'src/Robot.java', ...owner });
  pack.entry({ name: 'student/secret.txt', mode: 0o600, uid: 0, gid: 0 }, 'mine\n');
  pack.finalize();
  pipeline(pack, body, () => undefined);
  await runtime.importVolume(names.home(student.workspace), { workspaceId: student.workspace.id, slug: student.workspace.slug }, TEST_IMAGE, body);
}

async function call(as: Student, method: 'GET' | 'POST', path: string): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { cookie: as.cookie, accept: 'application/json' };
  if (method === 'POST') headers.origin = app.url;
  const response = await fetch(`${app.url}${path}`, { method, headers });
  return { status: response.status, body: await response.json() };
}
const begin = async (as: Student = coach) => {
  const answer = await call(as, 'POST', `/admin/workspaces/${ada.workspace.id}/looks`);
  expect(answer.status).toBe(201);
  return (answer.body as LookAnswer).look;
};
const list = (path: string, as: Student = coach) => call(as, 'GET', `/admin/workspaces/${ada.workspace.id}/files?path=${encodeURIComponent(path)}`);
const read = (path: string, as: Student = coach) => call(as, 'GET', `/admin/workspaces/${ada.workspace.id}/files/content?path=${encodeURIComponent(path)}`);
const errorOf = (answer: { body: unknown }) => (answer.body as ErrorBody).error;
const lookedAt = async () => ((await call(ada, 'GET', `/u/${ada.workspace.slug}/api/workspace`)).body as StudentWorkspaceAnswer).workspace.lookedAt;

describe('a look', () => {
  it('begins audited (workspace.view), tells the student who is looking, is kept, and ends', async () => {
    expect(await lookedAt()).toBeNull();
    const look = await begin();
    expect(look).toMatchObject({ workspaceId: ada.workspace.id, coach: { name: 'Coach Grace', email: coach.email }, live: true });
    expect(await lookedAt()).toEqual({ by: 'Coach Grace', since: look.startedAt, lookId: look.id, asking: false });
    const audit = (await db.dataSource.query("SELECT actor_email, target_kind, target_id, metadata FROM audit_log WHERE action = 'workspace.view'")) as {
      actor_email: string;
      target_kind: string;
      target_id: string;
      metadata: Record<string, unknown>;
    }[];
    expect(audit).toEqual([
      {
        actor_email: coach.email,
        target_kind: 'workspace',
        target_id: ada.workspace.id,
        metadata: { slug: ada.workspace.slug, lookId: look.id, asked: false },
      },
    ]);
    const kept = await call(coach, 'POST', `/admin/looks/${look.id}/keep`);
    expect(kept.status).toBe(200);
    expect(Date.parse((kept.body as LookAnswer).look.endsAt)).toBeGreaterThanOrEqual(Date.parse(look.endsAt));
    // Another coach cannot keep or end it.
    expect(errorOf(await call(other, 'POST', `/admin/looks/${look.id}/keep`)).code).toBe('look_not_found');
    expect(errorOf(await call(other, 'POST', `/admin/looks/${look.id}/end`)).code).toBe('look_not_found');
    const ended = await call(coach, 'POST', `/admin/looks/${look.id}/end`);
    expect((ended.body as LookAnswer).look.live).toBe(false);
    expect(await lookedAt()).toBeNull();
    expect((await call(coach, 'POST', `/admin/looks/${look.id}/end`)).status).toBe(200);
    expect(errorOf(await call(coach, 'POST', `/admin/looks/${look.id}/keep`)).code).toBe('look_not_found');
  });

  it('ends by itself when not kept for a minute', async () => {
    const look = await begin();
    await db.dataSource.query("UPDATE workspace_looks SET seen_at = now() - interval '61 seconds' WHERE id = $1", [look.id]);
    expect(await lookedAt()).toBeNull();
    expect(errorOf(await call(coach, 'POST', `/admin/looks/${look.id}/keep`)).code).toBe('look_not_found');
    expect(errorOf(await list('')).code).toBe('look_not_found');
  });

  it('is for admins, of a workspace that exists', async () => {
    expect((await call(ada, 'POST', `/admin/workspaces/${ada.workspace.id}/looks`)).status).toBe(403);
    expect(errorOf(await call(coach, 'POST', '/admin/workspaces/00000000-0000-4000-8000-000000000000/looks')).code).toBe('workspace_not_found');
    expect(errorOf(await call(coach, 'POST', '/admin/looks/nope/keep')).code).toBe('look_not_found');
  });
});

describe("the student's files during a look", () => {
  it('reads nothing without a live look of this coach', async () => {
    await begin(other);
    expect(errorOf(await list('')).code).toBe('look_not_found');
    expect(errorOf(await read('src/Robot.java')).code).toBe('look_not_found');
  });

  it('says when the workspace never started (no home yet)', async () => {
    await begin();
    const answer = await list('');
    expect(answer.status).toBe(404);
    expect(errorOf(answer).code).toBe('volume_not_found');
  });

  it('lists folders (folders first, links shown and not followed), reads text as it is, names binary, cuts a large file', async () => {
    await fillHome(ada);
    await begin();
    const home = (await list('')).body as HomeListing;
    expect(home.path).toBe('');
    expect(home.truncated).toBe(false);
    expect(home.entries).toEqual([
      { name: 'src', kind: 'dir', size: 0 },
      { name: 'big.log', kind: 'file', size: 300 * 1024 },
      { name: 'etc', kind: 'link', size: expect.any(Number) },
      { name: 'logo.png', kind: 'file', size: 8 },
      { name: 'notes <b>.txt', kind: 'file', size: 26 },
      { name: 'robot-link', kind: 'link', size: expect.any(Number) },
      { name: 'secret.txt', kind: 'file', size: 5 },
    ]);
    expect(((await list('/src/')).body as HomeListing).entries).toEqual([{ name: 'Robot.java', kind: 'file', size: 22 }]);
    expect((await read('src/Robot.java')).body).toEqual({
      path: 'src/Robot.java',
      size: 22,
      shownBytes: 22,
      truncated: false,
      binary: false,
      text: 'public class Robot {}\n',
    });
    expect(((await read('notes <b>.txt')).body as HomeFile).text).toBe('<script>alert(1)</script>\n');
    expect((await read('logo.png')).body).toEqual({ path: 'logo.png', size: 8, shownBytes: 0, truncated: false, binary: true, text: null });
    const big = (await read('big.log')).body as HomeFile;
    expect(big).toMatchObject({ size: 300 * 1024, shownBytes: 256 * 1024, truncated: true, binary: false });
    expect(big.text).toHaveLength(256 * 1024);
  });

  it('refuses a path out of the home, through a link or by its text, and a link or a folder to read', async () => {
    await fillHome(ada);
    await begin();
    for (const path of ['../../etc', 'src/../../etc']) expect([path, errorOf(await list(path)).code]).toEqual([path, 'invalid_home_path']);
    expect(errorOf(await list('etc')).code).toBe('invalid_home_path');
    expect(errorOf(await read('etc/passwd')).code).toBe('invalid_home_path');
    expect(errorOf(await read('robot-link')).code).toBe('home_path_wrong_kind');
    expect(errorOf(await read('src')).code).toBe('home_path_wrong_kind');
    expect(errorOf(await list('src/Robot.java')).code).toBe('home_path_wrong_kind');
    // A file the workspace's own user cannot read (root's, 0600) is not read for the coach either.
    const unreadable = await read('secret.txt');
    expect(unreadable.status).toBe(409);
    expect(errorOf(unreadable).code).toBe('home_path_unreadable');
    const missing = await read('src/Nothing.java');
    expect(missing.status).toBe(404);
    expect(errorOf(missing)).toEqual({ code: 'home_path_not_found', message: 'Nothing is at "src/Nothing.java" in the home.' });
    expect(errorOf(await list('x'.repeat(1025))).code).toBe('validation_error');
  });
});

describe('reads per coach', () => {
  it(`refuses a coach past ${LOOK_READS_PER_MINUTE} reads a minute (each starts a helper container), with Retry-After`, async () => {
    await begin();
    // The coach's minute used up, as that many reads would (the counter every replica shares).
    await app.store.rateLimits.limiter('look_reads', LOOK_READS_PER_MINUTE, 60).consume(coach.email, LOOK_READS_PER_MINUTE);
    const response = await fetch(`${app.url}/admin/workspaces/${ada.workspace.id}/files?path=`, {
      headers: { cookie: coach.cookie, accept: 'application/json' },
    });
    expect(response.status).toBe(429);
    expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await response.json()) as ErrorBody).error.code).toBe('too_many_look_reads');
    // Another coach's reads are their own.
    await begin(other);
    expect(errorOf(await list('', other)).code).toBe('volume_not_found');
  });
});

describe('a look with LOOK_CONSENT=ask', () => {
  let asking: TestApp;
  beforeAll(async () => {
    asking = await startApp(db.dataSource, { ...TEST_ENV, CONTROL_PLANE_ID: controlPlaneId, LOOK_CONSENT: 'ask' });
  }, 30_000);
  afterAll(async () => asking?.close());

  async function on(as: Student, method: 'GET' | 'POST', path: string): Promise<{ status: number; body: unknown }> {
    const headers: Record<string, string> = { cookie: as.cookie, accept: 'application/json' };
    if (method === 'POST') headers.origin = asking.url;
    const response = await fetch(`${asking.url}${path}`, { method, headers });
    return { status: response.status, body: await response.json() };
  }
  const studentView = async (student: Student = ada) =>
    ((await on(student, 'GET', `/u/${student.workspace.slug}/api/workspace`)).body as StudentWorkspaceAnswer).workspace.lookedAt;
  const answer = (lookId: string, verdict: 'accept' | 'decline', student: Student = ada) =>
    on(student, 'POST', `/u/${student.workspace.slug}/api/looks/${lookId}/${verdict}`);

  it('asks the student first: no file is read until they let it happen', async () => {
    await fillHome(ada);
    const begun = await on(coach, 'POST', `/admin/workspaces/${ada.workspace.id}/looks`);
    expect(begun.status).toBe(201);
    const look = (begun.body as LookAnswer).look;
    expect(look.state).toBe('asking');
    expect(await studentView()).toEqual({ by: 'Coach Grace', since: look.startedAt, lookId: look.id, asking: true });
    const refused = await on(coach, 'GET', `/admin/workspaces/${ada.workspace.id}/files?path=`);
    expect(refused.status).toBe(409);
    expect(errorOf(refused).code).toBe('look_not_accepted');

    const accepted = await answer(look.id, 'accept');
    expect(accepted.status).toBe(200);
    expect((accepted.body as LookAnswer).look.state).toBe('accepted');
    expect((await studentView())?.asking).toBe(false);
    expect((await on(coach, 'GET', `/admin/workspaces/${ada.workspace.id}/files/content?path=src/Robot.java`)).status).toBe(200);
    // The same answer again changes nothing; the other one is refused.
    expect((await answer(look.id, 'accept')).status).toBe(200);
    expect(errorOf(await answer(look.id, 'decline')).code).toBe('look_answered');
  });

  it('lets the student say no: the coach reads nothing and the student is no longer told', async () => {
    const look = ((await on(coach, 'POST', `/admin/workspaces/${ada.workspace.id}/looks`)).body as LookAnswer).look;
    // Another student cannot answer for them.
    const bob = await newStudent(asking.store, 'bob', Date.now().toString(36));
    expect(errorOf(await answer(look.id, 'accept', bob))).toEqual({
      code: 'look_not_found',
      message: "Your coach's look has ended: there is nothing to answer.",
    });
    expect(((await answer(look.id, 'decline')).body as LookAnswer).look.state).toBe('declined');
    expect(await studentView()).toBeNull();
    const refused = await on(coach, 'GET', `/admin/workspaces/${ada.workspace.id}/files?path=`);
    expect(refused.status).toBe(409);
    expect(errorOf(refused)).toEqual({ code: 'look_not_accepted', message: 'The student said no to this look.' });
    expect(((await on(coach, 'POST', `/admin/looks/${look.id}/keep`)).body as LookAnswer).look.state).toBe('declined');
  });
});
