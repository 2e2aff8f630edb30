/**
 * A student's Restart, Reset to starter and import of a team's project through the student API, on
 * real PostgreSQL and Docker, against a git server on loopback (`git http-backend` behind https with
 * a certificate made for the test, trusted through IMPORT_CA_FILE): a successful import whose files
 * show up in the home (read from the volume), a branch and a subfolder, every bad input and fault
 * refused with its error and the home untouched, the per-student limit, a reset (backup made,
 * audited, a new home), and a restart of a run (the simulator stand-in of the test image).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CONTROL_PLANE_LABEL } from '../../src/docker/docker-runtime.ts';
import { names } from '../../src/docker/runtime.ts';
import { cloneRepository } from '../../src/import/clone.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { ImportAnswer, RestartAnswer, ResetAnswer, RunAnswer, WorkspaceImport } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, docker, eventually, removeEverything, TEST_IMAGE, testRunController, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startGitServer, type GitServer } from '../helpers/git-server.ts';
import { newStudent, openAndWait, waitForState, type Student } from '../helpers/workspaces.ts';

const run = promisify(execFile);
const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let harness: Harness;
let app: TestApp;
/** A second server with the default address rules: nothing private, loopback included. */
let strict: TestApp;
/** A third, as `app` but allowing an import's network part only 5 s (a server that never answers). */
let hurried: TestApp;
let git: GitServer;
let dataDir: string;
let count = 0;

/** What a home of a student holds before an import: the account's files, and a project of their own. */
const HOME = `set -e
cd /home/student
mkdir -p src/main/java/frc/robot .config/code-server .local/share/code-server
printf 'class Old {}\\n' > src/main/java/frc/robot/Old.java
printf 'my build\\n' > build.gradle
printf 'alias ll="ls -l"\\n' > .bashrc
printf '[user]\\n\\tname = Ada\\n' > .gitconfig
printf 'bind-addr: 0\\n' > .config/code-server/config.yaml
printf '{}' > .local/share/code-server/state.json
chown -R 1000:1000 .`;

/** Every entry of the home but git's own objects: path, type, mode and owner, sorted. */
const LISTING = `cd /home/student && find . -path ./.git/objects -prune -o -print | LC_ALL=C sort | while IFS= read -r f; do stat -c '%n %F %a %u' "$f"; done`;

/** Runs a busybox script with `volume` at /home/student (never student code: the test's own). */
async function sh(volume: string, script: string): Promise<string> {
  const args = [
    'run',
    '--rm',
    '--network',
    'none',
    '--label',
    `${CONTROL_PLANE_LABEL}=${harness.controlPlaneId}`,
    '-v',
    `${volume}:/home/student`,
    TEST_IMAGE,
    'sh',
    '-c',
    script,
  ];
  return (await run('docker', args)).stdout;
}

const workspaceOf = async (student: Student) => (await harness.store.workspaces.get(student.workspace.id))!;
const homeOf = async (student: Student) => names.home(await workspaceOf(student));

/** A new student whose home holds HOME (each test its own: the limit counts per workspace). */
async function studentWithHome(): Promise<Student> {
  const student = await newStudent(harness.store, `team${count++}`, tag);
  await harness.runtime.ensureVolume({ workspaceId: student.workspace.id, slug: student.workspace.slug }, names.volume(student.workspace.slug));
  await sh(names.volume(student.workspace.slug), HOME);
  return student;
}

/** The home as it is: its volume and every entry in it. */
async function homeState(student: Student): Promise<{ volume: string; listing: string }> {
  const volume = await homeOf(student);
  return { volume, listing: await sh(volume, LISTING) };
}

const api = (server: TestApp, student: Student, rest: string) => `${server.url}/u/${student.workspace.slug}/api${rest}`;

function post(student: Student, rest: string, body?: unknown, server = app): Promise<Response> {
  const headers: Record<string, string> = { cookie: student.cookie, origin: server.url, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  return fetch(api(server, student, rest), { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function errorOf(response: Response): Promise<{ status: number; code: string; message: string }> {
  const { error } = (await response.json()) as { error: { code: string; message: string } };
  return { status: response.status, ...error };
}

/** Starts an import on `server` and waits for its end (the record's phase, as the page polls it). */
async function importAndWait(student: Student, body: Record<string, string>, server = app): Promise<WorkspaceImport> {
  const started = await post(student, '/workspace/import', body, server);
  expect({ status: started.status, phase: ((await started.json()) as ImportAnswer).import?.phase }).toEqual({ status: 202, phase: 'checking' });
  return eventually(
    'the import ended',
    async () => {
      const answer = await fetch(api(server, student, '/workspace/import'), { headers: { cookie: student.cookie } });
      const record = ((await answer.json()) as ImportAnswer).import;
      return record && (record.phase === 'done' || record.phase === 'failed') ? record : undefined;
    },
    45_000,
  );
}

const auditOf = async (student: Student) =>
  (
    (await db.dataSource.query('SELECT actor_email, action, metadata FROM audit_log WHERE target_id = $1 ORDER BY id', [student.workspace.id])) as {
      actor_email: string;
      action: string;
      metadata: Record<string, unknown>;
    }[]
  ).map((row) => ({ actor: row.actor_email, action: row.action, metadata: row.metadata }));

/** This test's volumes a failed import or reset may have left: fresh homes no workspace points at. */
async function strayVolumes(): Promise<string[]> {
  const { Volumes } = await docker.listVolumes({ filters: { label: [`${CONTROL_PLANE_LABEL}=${harness.controlPlaneId}`] } });
  const homes = new Set((await harness.store.workspaces.list()).flatMap((workspace) => [names.home(workspace), ...workspace.spec.retiredVolumes]));
  return (Volumes ?? []).map((volume) => volume.Name).filter((name) => !homes.has(name));
}

beforeAll(async () => {
  git = await startGitServer();
  await git.repository(
    'team',
    {
      'README.md': '# Team 9999\n',
      'build.gradle': 'plugins { id "java" }\n',
      'src/main/java/frc/robot/Robot.java': 'public class Robot { /* main */ }\n',
      gradlew: { text: '#!/bin/sh\necho gradle\n', executable: true },
      'docs/readme-link': { link: '../README.md' },
      // A repository's own shell file never replaces the student's.
      '.bashrc': 'echo from the repository\n',
    },
    { branches: { competition: { 'src/main/java/frc/robot/Robot.java': 'public class Robot { /* competition */ }\n' } } },
  );
  await git.repository('season', {
    'README.md': 'Two robots\n',
    'robot/build.gradle': 'plugins { id "java" }\n',
    'robot/src/main/java/frc/robot/Robot.java': 'public class Robot { /* season */ }\n',
    'practice/notes.txt': 'practice bot\n',
    'robot/secret': { link: '/etc/passwd' },
    'robot-up': { link: '..' },
    'tools/lib': { link: '../practice' },
  });
  await git.repository('big', { 'assets/field.bin': randomBytes(3 * 1024 * 1024) });
  git.redirect('inside', git.origin());
  git.redirect('loopback', git.origin('127.0.0.2'));
  git.redirect('elsewhere', 'https://example.org');

  dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-imports-'));
  harness = createHarness(db.dataSource);
  const common = { DATA_DIR: dataDir, CONTROL_PLANE_ID: harness.controlPlaneId, WORKSPACE_IMAGE: TEST_IMAGE, IMPORT_CA_FILE: git.caFile };
  const loopback = {
    ...common,
    IMPORT_ALLOWED_HOSTS: 'localhost,127.0.0.1,127.0.0.2',
    // The git server's own address, and no other loopback one.
    IMPORT_ALLOWED_ADDRESSES: '127.0.0.1',
    IMPORT_MAX_SIZE: '2m',
  };
  // The default IMPORT_TIMEOUT_SECONDS (120). With 5 s, the file's first import failed in two CI
  // runs (2026-11-29, 2026-12-01), started beside the suite's heaviest files: likely its timeout.
  app = await startApp(db.dataSource, loopback, { changes: harness.changes });
  hurried = await startApp(db.dataSource, { ...loopback, IMPORT_TIMEOUT_SECONDS: '5' }, { changes: harness.changes });
  strict = await startApp(db.dataSource, { ...common, IMPORT_ALLOWED_HOSTS: 'localhost' }, { changes: harness.changes });
  await harness.controller.start();
}, 60_000);

afterAll(async () => {
  await harness?.stop();
  await app?.close();
  await hurried?.close();
  await strict?.close();
  await git?.close();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

describe('importing a team project', () => {
  it("replaces the home's project with the repository's default branch, keeping the account's files, after an audited backup", async () => {
    const student = await studentWithHome();
    const before = await homeState(student);
    const record = await importAndWait(student, { url: `${git.origin()}/git/team.git` });
    // A failed import made no backup: its record's error says why, before the backups are read.
    expect({ phase: record.phase, error: record.error }).toEqual({ phase: 'done', error: null });
    const backups = (await readdir(path.join(dataDir, 'backups'))).filter((name) => name.startsWith(`${student.workspace.slug}-`) && name.endsWith('.tar.gz'));
    expect(backups).toHaveLength(1);
    expect(record).toMatchObject({
      phase: 'done',
      url: `${git.origin()}/git/team.git`,
      branch: null,
      subfolder: null,
      commit: expect.stringMatching(/^[0-9a-f]{40}$/),
      backup: backups[0],
      error: null,
    });

    const after = await homeState(student);
    expect(after.volume).not.toBe(before.volume);
    const listing = after.listing.split('\n');
    // The project: the repository's files, the student's; its executable stays so, its link a link, its .git kept.
    expect(listing).toEqual(
      expect.arrayContaining([
        './README.md regular file 644 1000',
        './gradlew regular file 755 1000',
        './src/main/java/frc/robot/Robot.java regular file 644 1000',
        './docs/readme-link symbolic link 777 1000',
        './.git directory 755 1000',
      ]),
    );
    // The old project is gone; the account's files are as they were.
    expect(after.listing).not.toContain('Old.java');
    expect(
      await sh(after.volume, 'cat /home/student/build.gradle /home/student/.bashrc /home/student/.gitconfig /home/student/.config/code-server/config.yaml'),
    ).toBe('plugins { id "java" }\nalias ll="ls -l"\n[user]\n\tname = Ada\nbind-addr: 0\n');
    expect(await sh(after.volume, 'cat /home/student/.git/HEAD')).toBe('ref: refs/heads/main\n');
    // Audited: the backup of the whole home, then the import naming it; the backup brings the old project back.
    expect((await auditOf(student)).slice(-2)).toEqual([
      { actor: student.email, action: 'workspace.backup', metadata: expect.objectContaining({ backup: backups[0] }) },
      {
        actor: student.email,
        action: 'workspace.import',
        metadata: {
          slug: student.workspace.slug,
          url: record.url,
          branch: null,
          subfolder: null,
          commit: record.commit,
          files: expect.any(Number),
          bytes: expect.any(Number),
          backup: backups[0],
        },
      },
    ]);
    const { stdout } = await run('tar', ['-xzOf', path.join(dataDir, 'backups', backups[0]!), 'home/src/main/java/frc/robot/Old.java']);
    expect(stdout).toBe('class Old {}\n');
    // The clone does not stay on the control plane's disk.
    await eventually('the clone removed', async () => (await readdir(path.join(dataDir, 'imports'))).length === 0);
    expect(app.logs.some((line) => line.category === 'control.imports' && line.message === 'import done' && line.importId === record.id)).toBe(true);
  }, 90_000);

  it('imports a branch, and a subfolder alone (without .git), refusing a link that leads out of it', async () => {
    const student = await studentWithHome();
    const branch = await importAndWait(student, { url: `${git.origin()}/git/team.git`, branch: 'competition' });
    expect(branch).toMatchObject({ phase: 'done', branch: 'competition' });
    expect(await sh(await homeOf(student), 'cat /home/student/src/main/java/frc/robot/Robot.java')).toBe('public class Robot { /* competition */ }\n');

    const outside = await importAndWait(student, { url: `${git.origin()}/git/season.git`, subfolder: 'robot' });
    expect(outside).toMatchObject({ phase: 'failed', error: { code: 'import_link_outside' } });
    expect(outside.error!.message).toContain('"secret"');
    const tools = await importAndWait(student, { url: `${git.origin()}/git/season.git`, subfolder: 'tools' });
    expect(tools).toMatchObject({ phase: 'failed', error: { code: 'import_link_outside' } });
  }, 90_000);

  it('imports a subfolder into the home, without the repository around it', async () => {
    const student = await studentWithHome();
    // `practice` has no links: the whole folder comes in, at the home's top.
    const record = await importAndWait(student, { url: `${git.origin()}/git/season.git/`, subfolder: './practice/' });
    expect(record).toMatchObject({ phase: 'done', subfolder: 'practice' });
    const listing = (await homeState(student)).listing;
    expect(listing).toContain('./notes.txt regular file 644 1000');
    expect(listing).not.toContain('./.git ');
    expect(listing).not.toContain('README.md');
    expect(listing).toContain('./.bashrc regular file');
  }, 60_000);

  it('connects git only to the addresses checked (the pin), whatever the name resolves to when git asks', async () => {
    const work = await mkdtemp(path.join(os.tmpdir(), 'cp-pin-'));
    const clone = (address: string) =>
      cloneRepository({
        checked: { url: `${git.origin()}/git/team.git`, host: 'localhost', port: git.port, addresses: [address] },
        branch: undefined,
        dir: path.join(work, address),
        home: path.join(work, 'home'),
        maxBytes: 10 * 1024 * 1024,
        caFile: git.caFile,
        signal: new AbortController().signal,
        onBytes: () => undefined,
      });
    try {
      // localhost resolves to 127.0.0.1, where the server listens; pinned to 127.0.0.2, where nothing does, git fails.
      await expect(clone('127.0.0.2')).rejects.toMatchObject({ code: 'import_unreachable' });
      await expect(clone('127.0.0.1')).resolves.toEqual({ commit: expect.stringMatching(/^[0-9a-f]{40}$/), bytes: expect.any(Number) });
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });

  it('follows a redirect to an allowed address', async () => {
    const student = await studentWithHome();
    const record = await importAndWait(student, { url: `${git.origin()}/redirect/inside/git/team.git` });
    expect(record).toMatchObject({ phase: 'done', url: `${git.origin()}/redirect/inside/git/team.git` });
  }, 60_000);
});

describe('refusing what an import must not do, the home untouched', () => {
  /** One student for the refusals made before anything starts (one of them counts against the limit). */
  let quick: Student | undefined;
  it.each([
    ['not https', { url: 'http://localhost/git/team.git' }, 400, 'import_not_https'],
    ['a refused host', { url: 'https://example.org/team/robot.git' }, 403, 'import_host_refused'],
    ['a name and password in the address', { url: 'https://team:secret@localhost/git/team.git' }, 400, 'import_url_invalid'],
    ['a subfolder that climbs out', { url: 'https://localhost/git/team.git', subfolder: '../etc' }, 400, 'import_subfolder_invalid'],
    ['a branch that is an option', { url: 'https://localhost/git/team.git', branch: '--upload-pack=touch /tmp/x' }, 400, 'import_branch_invalid'],
    ['an address of a refused network (loopback, not the allowed one)', { url: 'https://127.0.0.2/git/team.git' }, 403, 'import_address_refused'],
    ['no address at all', {}, 400, 'validation_error'],
  ])('refuses %s at once', async (_what, body, status, code) => {
    const student = (quick ??= await studentWithHome());
    const before = await homeState(student);
    const asked = git.requests.length;
    const answer = await post(student, '/workspace/import', body);
    expect(await errorOf(answer)).toMatchObject({ status, code });
    expect(await homeState(student)).toEqual(before);
    const latest = await fetch(api(app, student, '/workspace/import'), { headers: { cookie: student.cookie } });
    expect(((await latest.json()) as ImportAnswer).import).toBeNull();
    expect(git.requests.length).toBe(asked);
  });

  it('refuses a name that resolves to a loopback address under the default rules, saying which', async () => {
    const student = await studentWithHome();
    const before = await homeState(student);
    const asked = git.requests.length;
    const refused = await errorOf(await post(student, '/workspace/import', { url: `${git.origin()}/git/team.git` }, strict));
    expect(refused).toEqual({
      status: 403,
      code: 'import_address_refused',
      message: expect.stringContaining(`leads to localhost (127.0.0.1), a loopback address`),
    });
    expect(await homeState(student)).toEqual(before);
    expect(git.requests.length).toBe(asked);
  });

  // Each row names its server: Jest takes a test function with more parameters than its row has values for one that calls `done`.
  it.each([
    ['a redirect to a refused address', '/redirect/loopback/git/team.git', 'import_address_refused', 'It redirects to https://127.0.0.2:', 'app'],
    ['a redirect to a refused host', '/redirect/elsewhere/git/team.git', 'import_host_refused', 'It redirects to https://example.org/git/team.git', 'app'],
    ['a page that is no repository', '/page/team', 'import_not_git', 'is not a git repository', 'app'],
    ['a repository that does not exist', '/git/nothing.git', 'import_repository_not_found', 'There is no public repository at', 'app'],
    ['a server that never answers', '/hang/team.git', 'import_timeout', 'did not finish answering within 5 s', 'hurried'],
    ['a repository too large', '/git/big.git', 'import_too_large', 'larger than 2 MB', 'app'],
  ])(
    'ends an import of %s as failed, saying why',
    async (_what, where, code, words, server) => {
      const student = await studentWithHome();
      const before = await homeState(student);
      const record = await importAndWait(student, { url: `${git.origin()}${where}` }, server === 'hurried' ? hurried : app);
      expect(record).toMatchObject({ phase: 'failed', backup: null, error: { code } });
      expect(record.error!.message).toContain(words);
      expect(await homeState(student)).toEqual(before);
      expect((await auditOf(student)).map((entry) => entry.action)).toEqual([]);
      expect(await strayVolumes()).toEqual([]);
    },
    60_000,
  );

  it.each([
    ['a branch that does not exist', { branch: 'nope' }, 'import_branch_not_found', 'has no branch "nope"'],
    ['a subfolder that does not exist', { subfolder: 'nope' }, 'import_subfolder_not_found', 'has no folder "nope"'],
    ['a subfolder that is a link out of the repository', { subfolder: 'robot-up' }, 'import_subfolder_outside', 'leads outside'],
  ])(
    'ends an import naming %s as failed',
    async (_what, extra, code, words) => {
      const student = await studentWithHome();
      const before = await homeState(student);
      const record = await importAndWait(student, { url: `${git.origin()}/git/${'branch' in extra ? 'team' : 'season'}.git`, ...extra });
      expect(record).toMatchObject({ phase: 'failed', error: { code } });
      expect(record.error!.message).toContain(words);
      expect(await homeState(student)).toEqual(before);
      expect(await strayVolumes()).toEqual([]);
    },
    60_000,
  );

  it('refuses an import while the workspace runs, while a run is active, and a second import at once', async () => {
    const student = await studentWithHome();
    await openAndWait(harness.store, await workspaceOf(student));
    expect(await errorOf(await post(student, '/workspace/import', { url: `${git.origin()}/git/team.git` }))).toMatchObject({
      status: 409,
      code: 'workspace_running',
      message: expect.stringContaining('Stop your workspace first'),
    });
    const active = await harness.store.runs.create(student.workspace.id);
    expect(await errorOf(await post(student, '/workspace/import', { url: `${git.origin()}/git/team.git` }))).toMatchObject({ status: 409, code: 'run_active' });
    await db.dataSource.query("UPDATE runs SET status = 'canceled', ended_at = now() WHERE id = $1", [active.id]);
    await harness.store.workspaces.stop(SYSTEM_ACTOR, student.workspace.id, 'student');
    await waitForState(harness.store, student.workspace.id, 'stopped');
    // On the server that gives up after 5 s, so that the hanging import does not outlast the test.
    const first = await post(student, '/workspace/import', { url: `${git.origin()}/hang/slow.git` }, hurried);
    expect(first.status).toBe(202);
    expect(await errorOf(await post(student, '/workspace/import', { url: `${git.origin()}/git/team.git` }))).toMatchObject({
      status: 409,
      code: 'import_in_progress',
    });
    expect(await errorOf(await post(student, '/workspace/reset'))).toMatchObject({ status: 409, code: 'import_in_progress' });
  }, 60_000);

  it('limits a student to 5 resets and imports in 10 minutes (429 with Retry-After), not the class', async () => {
    const student = await studentWithHome();
    for (let i = 0; i < 5; i++) {
      expect(await errorOf(await post(student, '/workspace/import', { url: 'https://127.0.0.2/git/team.git' }))).toMatchObject({
        code: 'import_address_refused',
      });
    }
    const limited = await post(student, '/workspace/import', { url: `${git.origin()}/git/team.git` });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(500);
    expect(await errorOf(limited)).toEqual({ status: 429, code: 'too_many_replacements', message: expect.stringContaining('5 times in the last 10 minutes') });
    expect((await errorOf(await post(student, '/workspace/reset'))).code).toBe('too_many_replacements');
    // Another student is not held back.
    const other = await studentWithHome();
    expect((await errorOf(await post(other, '/workspace/import', { url: 'https://127.0.0.2/git/team.git' }))).code).toBe('import_address_refused');
  });

  it("refuses another student's workspace and a request from another origin", async () => {
    const student = await studentWithHome();
    const other = await studentWithHome();
    const foreign = await fetch(api(app, other, '/workspace/import'), {
      method: 'POST',
      headers: { cookie: student.cookie, origin: app.url, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${git.origin()}/git/team.git` }),
    });
    expect(foreign.status).toBe(403);
    const crossSite = await fetch(api(app, student, '/workspace/reset'), {
      method: 'POST',
      headers: { cookie: student.cookie, origin: 'https://evil.example' },
    });
    expect((await errorOf(crossSite)).code).toBe('csrf_failed');
  });
});

describe('reset to starter', () => {
  it('backs the whole home up, audits it, and gives the workspace a new home (the image copies its starter into it)', async () => {
    const student = await studentWithHome();
    const before = await homeState(student);
    const answer = await post(student, '/workspace/reset');
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as ResetAnswer;
    expect(body.backup).toMatch(new RegExp(`^${student.workspace.slug}-\\d{8}T\\d{6}Z\\.tar\\.gz$`));
    expect(await readdir(path.join(dataDir, 'backups'))).toContain(body.backup);
    expect((await auditOf(student)).slice(-2)).toEqual([
      { actor: student.email, action: 'workspace.backup', metadata: expect.objectContaining({ backup: body.backup, files: 6 }) },
      { actor: student.email, action: 'workspace.reset', metadata: { slug: student.workspace.slug, backup: body.backup } },
    ]);
    const after = await homeOf(student);
    expect(after).not.toBe(before.volume);
    // Opened, it starts on a new, empty home, as a new workspace's (the workspace image's entrypoint then copies the starter in).
    await openAndWait(harness.store, await workspaceOf(student));
    expect(await sh(after, 'ls -A /home/student')).toBe('');
    const [code] = (await harness.runtime.listContainers({ workspaceId: student.workspace.id })).filter((container) => container.role === 'code');
    expect(code!.homeVolume).toBe(after);
    // Nothing was lost: the backup holds the old project.
    const { stdout } = await run('tar', ['-tzf', path.join(dataDir, 'backups', body.backup!)]);
    expect(stdout).toContain('home/src/main/java/frc/robot/Old.java');
    // While it runs, and while a run is active, a reset is refused with what to do.
    expect(await errorOf(await post(student, '/workspace/reset'))).toMatchObject({ status: 409, code: 'workspace_running' });
    const active = await harness.store.runs.create(student.workspace.id);
    expect(await errorOf(await post(student, '/workspace/reset'))).toEqual({
      status: 409,
      code: 'run_active',
      message: 'Your robot code is running: stop the run first (a reset or an import replaces the files it runs from).',
    });
    // No run controller here: the run is ended by hand, and the workspace stopped, for the tests after.
    await db.dataSource.query("UPDATE runs SET status = 'canceled', ended_at = now() WHERE id = $1", [active.id]);
    await harness.store.workspaces.stop(SYSTEM_ACTOR, student.workspace.id, 'student');
  }, 60_000);
});

describe('restart', () => {
  it('stops the active run, waits for its end, and starts a new one; with none active it just starts', async () => {
    const student = await newStudent(harness.store, `racer${count++}`, tag);
    const runs = testRunController(harness, 'SIM_COMPILE_MS=200 SIM_BOOT_MS=100 node /app/sim.mjs');
    await runs.controller.start();
    try {
      expect(await errorOf(await post(student, '/runs/restart'))).toMatchObject({ status: 409, code: 'workspace_not_running' });
      await openAndWait(harness.store, student.workspace);
      const first = (await (await post(student, '/runs')).json()) as RunAnswer;
      await eventually('the first run running', async () => (await harness.store.runs.get(first.run.id))?.status.phase === 'running', 30_000);
      const restarted = await post(student, '/runs/restart');
      expect(restarted.status).toBe(202);
      const body = (await restarted.json()) as RestartAnswer;
      expect(body).toMatchObject({ stopped: first.run.id, run: { status: 'queued' } });
      expect(body.run.id).not.toBe(first.run.id);
      expect((await harness.store.runs.get(first.run.id))?.status.phase).toBe('stopped');
      await eventually('the new run running', async () => (await harness.store.runs.get(body.run.id))?.status.phase === 'running', 30_000);
      await harness.store.runs.requestStop(student.workspace.id, body.run.id);
      await eventually('the new run stopped', async () => (await harness.store.runs.get(body.run.id))?.status.phase === 'stopped', 30_000);
      const again = (await (await post(student, '/runs/restart')).json()) as RestartAnswer;
      expect(again).toMatchObject({ stopped: null, run: { status: 'queued' } });
    } finally {
      await runs.controller.stop();
    }
  }, 90_000);
});
