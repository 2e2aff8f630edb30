/**
 * Issue 43 item 4, a lesson made from a git URL, on the real app and PostgreSQL against a real git
 * server on loopback (git http-backend over https, its own CA): checked and cloned as a student's
 * import is, with the same bounds and errors: the repository's project (or one subfolder of it)
 * becomes version 1, its `.git` left out; a later commit becomes version 2 through
 * `.../versions/git`; an address not allowed, a branch that is not there, a repository past
 * IMPORT_MAX_SIZE and one holding a link are refused with their codes, and nothing is kept.
 */
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import type { ErrorBody } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startGitServer, type GitServer } from '../helpers/git-server.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
let app: TestApp;
let git: GitServer;
let coach: Student;

beforeAll(async () => {
  git = await startGitServer();
  await git.repository('season', {
    'README.md': '# Season\n',
    gradlew: { text: '#!/bin/sh\necho build\n', executable: true },
    'lessons/drive/Drive.java': 'class Drive {}\n',
    'lessons/drive/notes.txt': 'drive\n',
  });
  await git.repository('linked', { 'README.md': 'x\n', secret: { link: '/etc/passwd' } });
  await git.repository('big', { 'field.bin': randomBytes(3 * 1024 * 1024) });
  app = await startApp(db.dataSource, {
    IMPORT_CA_FILE: git.caFile,
    IMPORT_ALLOWED_HOSTS: 'localhost,127.0.0.1',
    IMPORT_ALLOWED_ADDRESSES: '127.0.0.1',
    IMPORT_MAX_SIZE: '2m',
    IMPORT_TIMEOUT_SECONDS: '20',
  });
}, 60_000);
beforeEach(async () => {
  coach = await newStudent(app.store, 'coach', Date.now().toString(36), 'admin');
});
afterAll(async () => {
  await app?.close();
  await git?.close();
}, 30_000);

async function post(address: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${app.url}${address}`, {
    method: 'POST',
    headers: { cookie: coach.cookie, origin: app.url, accept: 'application/json', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}
const errorOf = (answer: { body: unknown }) => (answer.body as ErrorBody).error;

/** The paths in a version's kept tar. */
async function versionPaths(lessonId: string, version: number): Promise<string[]> {
  const { stdout } = await promisify(execFile)('tar', ['-tvf', path.join(app.dataDir, 'lessons', lessonId, `v${version}.tar`)]);
  return stdout
    .trim()
    .split('\n')
    .map((line) => `${line.split(/\s+/)[0]} ${line.split(/\s+/).slice(5).join(' ')}`);
}

it("makes a lesson of a repository's project, or of one of its folders, without its .git, and a new version from git", async () => {
  const whole = await post('/admin/lessons/git', { name: 'Season', url: `${git.origin()}/git/season.git` });
  expect(whole.status).toBe(201);
  const lesson = (whole.body as { lesson: { id: string; latest: { version: number; files: number } } }).lesson;
  expect(lesson.latest).toMatchObject({ version: 1, files: 4 });
  expect(await versionPaths(lesson.id, 1)).toEqual([
    '-rw-r--r-- README.md',
    '-rwxr-xr-x gradlew',
    'drwxr-xr-x lessons',
    'drwxr-xr-x lessons/drive',
    '-rw-r--r-- lessons/drive/Drive.java',
    '-rw-r--r-- lessons/drive/notes.txt',
  ]);

  const part = await post('/admin/lessons/git', { name: 'Drive', url: `${git.origin()}/git/season.git`, subfolder: 'lessons/drive' });
  expect(part.status).toBe(201);
  const drive = (part.body as { lesson: { id: string } }).lesson;
  expect(await versionPaths(drive.id, 1)).toEqual(['-rw-r--r-- Drive.java', '-rw-r--r-- notes.txt']);

  const next = await post(`/admin/lessons/${drive.id}/versions/git`, { url: `${git.origin()}/git/season.git`, subfolder: 'lessons/drive', branch: 'main' });
  expect(next.status).toBe(201);
  expect((next.body as { lesson: { latest: { version: number } } }).lesson.latest.version).toBe(2);
  const audit = (await db.dataSource.query("SELECT metadata FROM audit_log WHERE action = 'lesson.create' ORDER BY id")) as {
    metadata: { name: string; version: number };
  }[];
  expect(audit.map((row) => [row.metadata.name, row.metadata.version])).toEqual([
    ['Season', 1],
    ['Drive', 1],
    ['Drive', 2],
  ]);
});

it('refuses what an import refuses, and a repository holding a link, keeping nothing', async () => {
  const refused = async (body: Record<string, unknown>, status: number, code: string) => {
    const answer = await post('/admin/lessons/git', { name: 'Refused', ...body });
    expect({ status: answer.status, code: errorOf(answer).code }).toEqual({ status, code });
  };
  await refused({ url: 'http://localhost/git/season.git' }, 400, 'import_not_https');
  await refused({ url: 'https://example.org/team/robot.git' }, 403, 'import_host_refused');
  await refused({ url: `${git.origin()}/git/season.git`, branch: 'no-such-branch' }, 404, 'import_branch_not_found');
  await refused({ url: `${git.origin()}/git/season.git`, subfolder: '../up' }, 400, 'import_subfolder_invalid');
  await refused({ url: `${git.origin()}/git/big.git` }, 413, 'import_too_large');
  await refused({ url: `${git.origin()}/git/linked.git` }, 400, 'lesson_archive_unsafe');
  expect(await db.dataSource.query('SELECT count(*)::int AS count FROM lessons')).toEqual([{ count: 0 }]);
  expect(await readdir(path.join(app.dataDir, 'imports')).catch(() => [])).toEqual([]);
});
