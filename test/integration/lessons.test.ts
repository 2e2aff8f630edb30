/**
 * Issue 43 item 4, lessons, on the real app, real PostgreSQL and the real Docker Engine, with the
 * lesson controller and the workspace controller live: a lesson made from an uploaded archive
 * (audited `lesson.create`), handed out (`lesson.handout`) into a running workspace's home and a
 * home that never started, a later version landing beside the first (the student's files as they
 * left them, the student told), a student's folder reset after a backup (`lesson.reset`), a
 * collection now and at a deadline (`lesson.collect`) downloaded as one archive with a folder per
 * student, a home replaced by a restore getting its lesson back; and every bad upload refused with
 * its code, nothing kept. Every answer is checked against the OpenAPI document.
 */
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import tar from 'tar-stream';
import { DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { names } from '../../src/docker/runtime.ts';
import { LessonFiles } from '../../src/lessons/lessons.ts';
import type { ErrorBody, StudentWorkspaceAnswer } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { eventually, execIn, inspectByName, newControlPlaneId, removeEverything, TEST_ENV, TEST_IMAGE } from '../helpers/controllers.ts';
import { entriesOf, tarOf, zipOf } from '../helpers/archives.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const controlPlaneId = newControlPlaneId();
const runtime = new DockerRuntime({ controlPlaneId });
let app: TestApp;
let coach: Student;
let ada: Student;
let bob: Student;

interface Lesson {
  id: string;
  name: string;
  latest: { version: number; files: number; sizeBytes: number; sha256: string };
  deliveries: { pending: number; delivered: number; failed: number };
}
interface Delivery {
  workspaceId: string;
  slug: string;
  version: number;
  state: string;
  folder: string | null;
  message: string;
  resetBackup: string | null;
  resetAt: string | null;
}
interface Collection {
  id: string;
  doneAt: string | null;
  snapshots: { slug: string; state: string; folders: string[]; files: number }[];
}
interface Detail {
  lesson: Lesson;
  students: Delivery[];
  collections: Collection[];
}

beforeAll(async () => {
  app = await startApp(
    db.dataSource,
    { ...TEST_ENV, CONTROL_PLANE_ID: controlPlaneId, LESSON_MAX_SIZE: '1m' },
    { parts: ['changes', 'http', 'workspaces', 'lessons'], tuning: { lessons: { resyncIntervalMs: 1000 } } },
  );
}, 30_000);
beforeEach(async () => {
  const tag = Date.now().toString(36);
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
});
afterAll(async () => {
  await app?.close();
  await removeEverything(controlPlaneId);
}, 60_000);

/** The lesson "Drive Intro" as a coach would tar its folder: one top-level folder, a gradlew that runs. */
const intro = (robot = 'class Robot {}\n') =>
  tarOf([
    { name: 'drive-intro/', type: 'directory', mode: 0o755 },
    { name: 'drive-intro/src/Robot.java', text: robot },
    { name: 'drive-intro/gradlew', text: '#!/bin/sh\necho build\n', mode: 0o755 },
    { name: 'drive-intro/README.md', text: '# Drive\n' },
  ]);

async function call(method: 'GET' | 'POST', url: string, body?: unknown, as: Student = coach): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { cookie: as.cookie, accept: 'application/json' };
  if (method === 'POST') headers.origin = app.url;
  let payload: Uint8Array | string | undefined;
  if (Buffer.isBuffer(body)) {
    headers['content-type'] = 'application/gzip';
    payload = new Uint8Array(body);
  } else if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const init: RequestInit = { method, headers };
  if (payload !== undefined) init.body = payload;
  const response = await fetch(`${app.url}${url}`, init);
  const type = response.headers.get('content-type') ?? '';
  return { status: response.status, body: type.includes('json') ? await response.json() : Buffer.from(await response.arrayBuffer()) };
}
const errorOf = (answer: { body: unknown }) => (answer.body as ErrorBody).error;

async function createLesson(name = 'Drive Intro', files?: Buffer): Promise<Lesson> {
  const made = await call('POST', `/admin/lessons?name=${encodeURIComponent(name)}`, files ?? (await intro()));
  expect(made.status).toBe(201);
  return (made.body as { lesson: Lesson }).lesson;
}
const detail = async (lessonId: string) => (await call('GET', `/admin/lessons/${lessonId}`)).body as Detail;

/** Waits until every delivery of the lesson is settled (none pending) and answers the lesson's detail. */
const settled = (lessonId: string, version: number) =>
  eventually(
    'deliveries settled',
    async () => {
      const now = await detail(lessonId);
      const ofVersion = now.students.filter((each) => each.version === version);
      return ofVersion.length > 0 && ofVersion.every((each) => each.state !== 'pending' && each.resetAt === null) ? now : undefined;
    },
    30_000,
  );

/** The files of a student's home under `lessons/` (path → text), read from the volume by an export. */
async function lessonFiles(student: Student): Promise<Map<string, { text: string; mode: number; uid: number }>> {
  const workspace = (await app.store.workspaces.get(student.workspace.id))!;
  const stream = await runtime.exportVolume(names.home(workspace), { workspaceId: workspace.id, slug: workspace.slug }, TEST_IMAGE);
  const extract = tar.extract();
  stream.pipe(extract);
  const found = new Map<string, { text: string; mode: number; uid: number }>();
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    const name = entry.header.name.replace(/^student\//, '');
    if (name.startsWith('lessons/') && entry.header.type === 'file')
      found.set(name, { text: Buffer.concat(chunks).toString('utf8'), mode: entry.header.mode! & 0o777, uid: entry.header.uid! });
  }
  return found;
}

/** Runs a shell command in a student's running editor container, as the student (uid 1000) unless `user` says otherwise. */
async function inEditor(student: Student, command: string, user = '1000:1000'): Promise<string> {
  const container = await inspectByName(names.code(student.workspace.slug));
  const { code, output } = await execIn(container!.Id, ['sh', '-c', command], { user });
  if (code !== 0) throw new Error(`${command} exited with ${code}: ${output}`);
  return output;
}

const audits = async (action: string) =>
  (await db.dataSource.query('SELECT actor_email, target_id, metadata FROM audit_log WHERE action = $1 ORDER BY id', [action])) as {
    actor_email: string;
    target_id: string;
    metadata: Record<string, unknown>;
  }[];

describe('a lesson', () => {
  it('is made from an archive of its folder (audited), handed out into a running home and one never started, owned by the student', async () => {
    await app.store.workspaces.open(ada.workspace.id);
    await waitForState(app.store, ada.workspace.id, 'running');
    const lesson = await createLesson();
    expect(lesson).toMatchObject({ name: 'Drive Intro', latest: { version: 1, files: 3 }, deliveries: { pending: 0, delivered: 0, failed: 0 } });
    expect((await audits('lesson.create'))[0]).toMatchObject({
      actor_email: coach.email,
      target_id: lesson.id,
      metadata: { name: 'Drive Intro', version: 1, files: 3 },
    });

    const handed = await call('POST', `/admin/lessons/${lesson.id}/handout`, { all: true });
    expect(handed).toEqual({ status: 202, body: { version: 1, students: 2 } });
    const done = await settled(lesson.id, 1);
    expect(done.students.map((each) => [each.slug, each.state, each.folder]).toSorted((a, b) => a[0]!.localeCompare(b[0]!))).toEqual([
      [ada.workspace.slug, 'delivered', 'Drive Intro'],
      [bob.workspace.slug, 'delivered', 'Drive Intro'],
    ]);
    expect((await audits('lesson.handout'))[0]).toMatchObject({ metadata: { name: 'Drive Intro', version: 1, students: 2, all: true } });

    // In Ada's running editor, as the student sees it.
    expect(await inEditor(ada, 'cd "lessons/Drive Intro" && cat src/Robot.java && ./gradlew && stat -c %u:%g src/Robot.java')).toBe(
      'class Robot {}\nbuild\n1000:1000\n',
    );
    // Bob never opened his workspace: his home was made for it.
    const bobs = await lessonFiles(bob);
    expect([...bobs.keys()].toSorted()).toEqual(['lessons/Drive Intro/README.md', 'lessons/Drive Intro/gradlew', 'lessons/Drive Intro/src/Robot.java']);
    expect(bobs.get('lessons/Drive Intro/gradlew')).toMatchObject({ mode: 0o755, uid: 1000 });
    // He opens it later and finds the lesson there (his editor runs as the student).
    await app.store.workspaces.open(bob.workspace.id);
    await waitForState(app.store, bob.workspace.id, 'running');
    expect(await inEditor(bob, 'cat "lessons/Drive Intro/README.md"')).toBe('# Drive\n');

    // Handing it out again asks nothing of those who have it.
    expect((await call('POST', `/admin/lessons/${lesson.id}/handout`, { all: true })).body).toEqual({ version: 1, students: 0 });
  });

  it("lands a later version beside the first, the student's files as they left them, and tells the student", async () => {
    await app.store.workspaces.open(ada.workspace.id);
    await waitForState(app.store, ada.workspace.id, 'running');
    const lesson = await createLesson();
    await call('POST', `/admin/lessons/${lesson.id}/handout`, { workspaceIds: [ada.workspace.id] });
    await settled(lesson.id, 1);
    await inEditor(ada, 'echo "class Robot { int mine; }" > "lessons/Drive Intro/src/Robot.java"');

    const next = await call('POST', `/admin/lessons/${lesson.id}/versions`, await intro('class Robot { /* v2 */ }\n'));
    expect(next.status).toBe(201);
    expect((next.body as { lesson: Lesson }).lesson.latest.version).toBe(2);
    await call('POST', `/admin/lessons/${lesson.id}/handout`, { workspaceIds: [ada.workspace.id] });
    const done = await settled(lesson.id, 2);
    expect(done.students.find((each) => each.version === 2)).toMatchObject({ state: 'delivered', folder: 'Drive Intro (v2)' });
    expect(await inEditor(ada, 'cat "lessons/Drive Intro/src/Robot.java" "lessons/Drive Intro (v2)/src/Robot.java"')).toBe(
      'class Robot { int mine; }\nclass Robot { /* v2 */ }\n',
    );
    const page = (await call('GET', `/u/${ada.workspace.slug}/api/workspace`, undefined, ada)).body as StudentWorkspaceAnswer;
    expect(page.workspace.lessons?.map(({ name, version, folder, beside }) => ({ name, version, folder, beside }))).toEqual([
      { name: 'Drive Intro', version: 2, folder: 'Drive Intro (v2)', beside: true },
      { name: 'Drive Intro', version: 1, folder: 'Drive Intro', beside: false },
    ]);
  });

  it("resets one student's folder to the handed-out files after a backup (audited), and refuses one who does not have it", async () => {
    await app.store.workspaces.open(ada.workspace.id);
    await waitForState(app.store, ada.workspace.id, 'running');
    const lesson = await createLesson();
    await call('POST', `/admin/lessons/${lesson.id}/handout`, { workspaceIds: [ada.workspace.id] });
    await settled(lesson.id, 1);
    await inEditor(ada, 'cd "lessons/Drive Intro" && echo broken > src/Robot.java && echo extra > src/Extra.java');

    const refused = await call('POST', `/admin/lessons/${lesson.id}/reset`, { workspaceId: bob.workspace.id });
    expect(refused.status).toBe(409);
    expect(errorOf(refused).code).toBe('lesson_not_delivered');

    const asked = await call('POST', `/admin/lessons/${lesson.id}/reset`, { workspaceId: ada.workspace.id });
    expect(asked.status).toBe(202);
    const reset = await eventually('the reset done', async () => (await detail(lesson.id)).students.find((each) => each.resetAt !== null));
    expect(reset.resetBackup).toMatch(new RegExp(`^${ada.workspace.slug}-`));
    expect(await inEditor(ada, 'cd "lessons/Drive Intro" && ls src && cat src/Robot.java')).toBe('Robot.java\nclass Robot {}\n');
    expect((await audits('lesson.reset'))[0]).toMatchObject({
      actor_email: coach.email,
      target_id: ada.workspace.id,
      metadata: { lesson: 'Drive Intro', version: 1, slug: ada.workspace.slug },
    });
    // Her changes are in the backup made first.
    const backups = (await call('GET', '/admin/backups')).body as { backups: { name: string }[] };
    expect(backups.backups.map((each) => each.name)).toContain(reset.resetBackup);
  });

  it('is collected now, as one archive with a folder per student (a note for one whose folder is gone), and at a deadline', async () => {
    await app.store.workspaces.open(ada.workspace.id);
    await waitForState(app.store, ada.workspace.id, 'running');
    await app.store.workspaces.open(bob.workspace.id);
    await waitForState(app.store, bob.workspace.id, 'running');
    const lesson = await createLesson();
    await call('POST', `/admin/lessons/${lesson.id}/handout`, { all: true });
    await settled(lesson.id, 1);
    await inEditor(ada, 'cd "lessons/Drive Intro" && echo "class Robot { int done; }" > src/Robot.java && ln -s /etc/passwd src/link');
    await inEditor(bob, 'rm -r "lessons/Drive Intro"');

    const asked = await call('POST', `/admin/lessons/${lesson.id}/collections`, {});
    expect(asked.status).toBe(202);
    const { id } = (asked.body as { collection: Collection }).collection;
    const collection = await eventually('the collection done', async () => {
      const now = ((await call('GET', `/admin/lessons/${lesson.id}/collections/${id}`)).body as { collection: Collection }).collection;
      return now.doneAt ? now : undefined;
    });
    expect(
      collection.snapshots.map(({ slug, state, folders, files }) => ({ slug, state, folders, files })).toSorted((a, b) => a.slug.localeCompare(b.slug)),
    ).toEqual([
      { slug: ada.workspace.slug, state: 'taken', folders: ['Drive Intro'], files: 3 },
      { slug: bob.workspace.slug, state: 'missing', folders: [], files: 0 },
    ]);
    const download = await call('GET', `/admin/lessons/${lesson.id}/collections/${id}/archive`);
    expect(download.status).toBe(200);
    const entries = await entriesOf(download.body as Buffer);
    expect(entries.get(`Drive Intro/${ada.workspace.slug}/Drive Intro/src/Robot.java`)).toBe('class Robot { int done; }\n');
    expect(entries.has(`Drive Intro/${ada.workspace.slug}/Drive Intro/src/link`)).toBe(false);
    expect(entries.get(`Drive Intro/${bob.workspace.slug}/NOT-COLLECTED.txt`)).toMatch(/no folder of Drive Intro was in their home/);
    expect((await audits('lesson.collect'))[0]).toMatchObject({ metadata: { name: 'Drive Intro', collectionId: id } });
    // A snapshot whose file is gone from the server: a note in its folder, the rest of the download whole.
    await rm(new LessonFiles(app.dataDir).snapshot(lesson.id, id, ada.workspace.id));
    const without = await entriesOf((await call('GET', `/admin/lessons/${lesson.id}/collections/${id}/archive`)).body as Buffer);
    expect(without.get(`Drive Intro/${ada.workspace.slug}/NOT-COLLECTED.txt`)).toMatch(/is not on this server any more/);
    expect(without.get(`Drive Intro/${bob.workspace.slug}/NOT-COLLECTED.txt`)).toMatch(/no folder of Drive Intro was in their home/);

    // At a deadline: nothing until it is due.
    const later = await call('POST', `/admin/lessons/${lesson.id}/collections`, { dueAt: new Date(Date.now() + 3_600_000).toISOString() });
    const due = (later.body as { collection: Collection }).collection;
    const early = await call('GET', `/admin/lessons/${lesson.id}/collections/${due.id}/archive`);
    expect(early.status).toBe(409);
    expect(errorOf(early).code).toBe('collection_not_done');
    expect(((await call('GET', `/admin/lessons/${lesson.id}/collections/${due.id}`)).body as { collection: Collection }).collection.snapshots).toEqual([]);
    await db.dataSource.query("UPDATE lesson_collections SET due_at = now() - interval '1 second' WHERE id = $1", [due.id]);
    const taken = await eventually('the deadline met', async () => {
      const now = ((await call('GET', `/admin/lessons/${lesson.id}/collections/${due.id}`)).body as { collection: Collection }).collection;
      return now.doneAt ? now : undefined;
    });
    expect(taken.snapshots.find((each) => each.slug === ada.workspace.slug)?.state).toBe('taken');
  });

  it('comes back into a home that a restore replaced without it', async () => {
    const lesson = await createLesson();
    // A backup of Ada's home from before the lesson (her home exists: she opened it once).
    await app.store.workspaces.open(ada.workspace.id);
    await waitForState(app.store, ada.workspace.id, 'running');
    await app.store.workspaces.stop({ id: null, email: 'cli' }, ada.workspace.id, 'coach');
    await waitForState(app.store, ada.workspace.id, 'stopped');
    const before = await call('POST', `/admin/workspaces/${ada.workspace.id}/backup`, {});
    expect(before.status).toBe(201);
    await call('POST', `/admin/lessons/${lesson.id}/handout`, { workspaceIds: [ada.workspace.id] });
    const first = await settled(lesson.id, 1);
    const restored = await call('POST', `/admin/workspaces/${ada.workspace.id}/restore`, { backup: (before.body as { backup: { name: string } }).backup.name });
    expect(restored.status).toBe(200);
    const back = await eventually('the lesson written again', async () => {
      const now = (await detail(lesson.id)).students[0]!;
      const workspace = (await app.store.workspaces.get(ada.workspace.id))!;
      return now.state === 'delivered' && names.home(workspace) !== names.home(ada.workspace) ? now : undefined;
    });
    expect(back.folder).toBe(first.students[0]!.folder);
    await eventually('in the new home', async () => (await lessonFiles(ada)).has('lessons/Drive Intro/src/Robot.java'));
  });

  it('fails a delivery, saying why, when the home has a file named lessons', async () => {
    await app.store.workspaces.open(ada.workspace.id);
    await waitForState(app.store, ada.workspace.id, 'running');
    // The test image leaves a new home to root (the real one's entrypoint gives it to the student).
    await inEditor(ada, 'echo mine > lessons', '0');
    const lesson = await createLesson();
    await call('POST', `/admin/lessons/${lesson.id}/handout`, { workspaceIds: [ada.workspace.id] });
    const failed = await eventually('the delivery failed', async () => (await detail(lesson.id)).students.find((each) => each.state === 'failed'), 30_000);
    expect(failed.message).toMatch(/lessons is not a folder of the home/);
    expect(await inEditor(ada, 'cat lessons')).toBe('mine\n');
  });
});

describe('a lesson from a zip', () => {
  const refused = async (name: string, body: Buffer, status: number, code: string) => {
    const answer = await call('POST', `/admin/lessons?name=${encodeURIComponent(name)}`, body);
    expect({ status: answer.status, code: errorOf(answer).code }).toEqual({ status, code });
    return errorOf(answer).message;
  };
  // Whole seconds, even (a zip's own time has a 2-second step; yazl also writes the exact time).
  const mtime = new Date('2026-11-02T10:00:00Z');

  it('is the same lesson as the tar of the same folder (one top folder taken off, gradlew executable)', async () => {
    const fromTar = await createLesson(
      'Tarred',
      await tarOf([
        { name: 'drive-intro/', type: 'directory', mode: 0o755, mtime },
        { name: 'drive-intro/src/', type: 'directory', mode: 0o755, mtime },
        { name: 'drive-intro/src/Robot.java', text: 'class Robot {}\n', mtime },
        { name: 'drive-intro/gradlew', text: '#!/bin/sh\necho build\n', mode: 0o755, mtime },
      ]),
    );
    const fromZip = await createLesson(
      'Zipped',
      await zipOf([
        { name: 'drive-intro/', mtime },
        { name: 'drive-intro/src/', mtime },
        { name: 'drive-intro/src/Robot.java', text: 'class Robot {}\n', mtime },
        { name: 'drive-intro/gradlew', text: '#!/bin/sh\necho build\n', mode: 0o100755, mtime },
        // What macOS adds: left out.
        { name: '__MACOSX/drive-intro/._gradlew', text: 'resource fork', mtime },
      ]),
    );
    expect(fromZip.latest).toMatchObject({ files: 2, sizeBytes: fromTar.latest.sizeBytes });
    expect(fromZip.latest.sha256).toBe(fromTar.latest.sha256);
  });

  it('refuses a zip holding a link, a path out, an absolute path, an encrypted or a lying entry, or more than the limit, and keeps nothing', async () => {
    const before = ((await call('GET', '/admin/lessons')).body as { lessons: Lesson[] }).lessons.length;
    expect(
      await refused(
        'Link',
        await zipOf([
          { name: 'ok.txt', text: 'x' },
          { name: 'secrets', text: '/etc/shadow', mode: 0o120777 },
        ]),
        400,
        'lesson_archive_unsafe',
      ),
    ).toMatch(/"secrets" is a symlink/);
    expect(await refused('Climb', await zipOf([{ name: 'xx/xx/etc/evil', text: 'x' }], [['xx/xx/etc', '../../etc']]), 400, 'lesson_archive_unsafe')).toMatch(
      /climbs out/,
    );
    expect(await refused('Abs', await zipOf([{ name: 'xetc/passwd', text: 'x' }], [['xetc/passwd', '/etc/passwd']]), 400, 'lesson_archive_unsafe')).toMatch(
      /absolute/,
    );
    // An entry marked encrypted (the general purpose flag's first bit, in its local and central headers).
    const locked = await zipOf([{ name: 'locked.txt', text: 'secret' }]);
    locked[6] = locked[6]! | 1;
    locked[locked.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])) + 8]! |= 1;
    expect(await refused('Locked', locked, 400, 'lesson_archive_invalid')).toMatch(/encrypted/);
    // An entry that unpacks to more than it declares (a zip bomb's trick): stopped at what it declared.
    const lying = await zipOf([{ name: 'bomb.txt', text: 'y'.repeat(50_000) }]);
    const central = lying.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    lying.writeUInt32LE(100, central + 24);
    expect(await refused('Bomb', lying, 400, 'lesson_archive_invalid')).toMatch(/damaged or cut short/);
    // LESSON_MAX_SIZE is 1m here: declared larger, refused before it is read.
    expect(await refused('Big', await zipOf([{ name: 'big.bin', text: 'x'.repeat(2 * 1024 * 1024) }]), 413, 'lesson_too_large')).toMatch(/at most 1 MB/);
    expect(await refused('Cut', (await zipOf([{ name: 'a.txt', text: 'x' }])).subarray(0, 40), 400, 'lesson_archive_invalid')).toMatch(/damaged or cut short/);
    expect(((await call('GET', '/admin/lessons')).body as { lessons: Lesson[] }).lessons).toHaveLength(before);
    expect(await readdir(path.join(app.dataDir, 'lessons', 'tmp'))).toEqual([]);
  });
});

describe('bad uploads', () => {
  const refused = async (name: string, body: Buffer, status: number, code: string) => {
    const answer = await call('POST', `/admin/lessons?name=${encodeURIComponent(name)}`, body);
    expect({ status: answer.status, code: errorOf(answer).code }).toEqual({ status, code });
    return errorOf(answer).message;
  };

  it('refuses what is not a lesson, each with its code, and keeps nothing', async () => {
    const before: string[] = await readdir(path.join(app.dataDir, 'lessons')).catch(() => []);
    expect(await refused('Junk', Buffer.from('just some text, not an archive'), 400, 'lesson_archive_invalid')).toMatch(/not a .zip, .tar or .tar.gz/);
    expect(await refused('Cut', (await intro()).subarray(0, 60), 400, 'lesson_archive_invalid')).toMatch(/damaged or cut short/);
    expect(
      await refused(
        'Climb',
        await tarOf([
          { name: 'ok.txt', text: 'x' },
          { name: '../../etc/cron.d/evil', text: 'x' },
        ]),
        400,
        'lesson_archive_unsafe',
      ),
    ).toMatch(/climbs out/);
    expect(await refused('Abs', await tarOf([{ name: '/etc/passwd', text: 'x' }]), 400, 'lesson_archive_unsafe')).toMatch(/absolute/);
    expect(await refused('Link', await tarOf([{ name: 'secrets', type: 'symlink', linkname: '/etc/shadow' }]), 400, 'lesson_archive_unsafe')).toMatch(
      /symlink/,
    );
    expect(
      await refused(
        'Hard',
        await tarOf([
          { name: 'a', text: 'x' },
          { name: 'b', type: 'link', linkname: 'a' },
        ]),
        400,
        'lesson_archive_unsafe',
      ),
    ).toMatch(/link/);
    expect(await refused('Dev', await tarOf([{ name: 'null', type: 'character-device', devmajor: 1, devminor: 3 }]), 400, 'lesson_archive_unsafe')).toMatch(
      /character device/,
    );
    expect(await refused('Empty', await tarOf([{ name: 'folder/', type: 'directory' }]), 400, 'lesson_archive_empty')).toMatch(/no file/);
    // LESSON_MAX_SIZE is 1m here: a file of 2 MB (that gzips small) is refused as it unpacks.
    expect(await refused('Big', await tarOf([{ name: 'big.bin', text: 'x'.repeat(2 * 1024 * 1024) }]), 413, 'lesson_too_large')).toMatch(/at most 1 MB/);
    expect(await refused('../up', await intro(), 400, 'invalid_lesson_name')).toMatch(/folder/);
    await createLesson('Same');
    expect(await refused('same', await intro(), 409, 'lesson_exists')).toMatch(/exists/);
    // Only the one lesson made is kept: no version of a refused upload, no scratch folder left.
    const [same] = ((await call('GET', '/admin/lessons')).body as { lessons: Lesson[] }).lessons;
    const kept = await readdir(path.join(app.dataDir, 'lessons'));
    expect(kept.filter((name) => !before.includes(name)).toSorted()).toEqual([same!.id, 'tmp'].filter((name) => !before.includes(name)).toSorted());
    expect(await readdir(path.join(app.dataDir, 'lessons', 'tmp'))).toEqual([]);
  });

  it('is for admins, of lessons that exist', async () => {
    expect((await call('GET', '/admin/lessons', undefined, ada)).status).toBe(403);
    expect(errorOf(await call('GET', '/admin/lessons/00000000-0000-4000-8000-000000000000')).code).toBe('lesson_not_found');
    expect(errorOf(await call('POST', '/admin/lessons/nope/handout', { all: true })).code).toBe('lesson_not_found');
    const lesson = await createLesson('Some');
    expect(errorOf(await call('POST', `/admin/lessons/${lesson.id}/handout`, { workspaceIds: ['00000000-0000-4000-8000-000000000000'] })).code).toBe(
      'workspace_not_found',
    );
    expect(errorOf(await call('GET', `/admin/lessons/${lesson.id}/collections/00000000-0000-4000-8000-000000000000`)).code).toBe('collection_not_found');
  });
});
