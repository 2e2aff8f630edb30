/**
 * The lesson controller (controllers/lessons.ts), one test per branch of its reconcile, over the
 * real store on the test PostgreSQL and the in-memory runtime (whose homes say what is in `lessons/`,
 * and whose volumes keep the last archive written); the backups are a recorder standing in for
 * Backups.create. The real engine (files as the student sees them, snapshots, a restore) is
 * test/integration/lessons.test.ts. Also where a version lands (landingFolder).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { landingCandidates, landingFolder, LessonController } from '../../controllers/lessons.ts';
import { names } from '../../src/docker/runtime.ts';
import { packFolder } from '../../src/lessons/files.ts';
import { LessonFiles } from '../../src/lessons/lessons.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import type { Actor } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import { DELIVERY_ATTEMPTS, type DeliveryRecord } from '../../src/store/lessons.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { captureLogger } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { MemoryRuntime } from '../helpers/memory-runtime.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
const coach: Actor = { id: null, email: 'coach@school.test' };
let store: Store;
let runtime: MemoryRuntime;
let metrics: Metrics;
let files: LessonFiles;
let backedUp: string[];
let workspace: WorkspaceRecord;
let slugs = 0;

const backups = {
  create: async (_actor: Actor, backedUpOf: WorkspaceRecord) => {
    backedUp.push(backedUpOf.slug);
    return { name: `${backedUpOf.slug}-backup.tar.gz`, sizeBytes: 1, manifest: {} as never };
  },
};

beforeEach(async () => {
  store = testStore(db.dataSource);
  runtime = new MemoryRuntime();
  metrics = createMetrics();
  files = new LessonFiles(mkdtempSync(path.join(os.tmpdir(), 'cp-lesson-controller-')));
  backedUp = [];
  ({ workspace } = await store.users.create({ email: `ada-${++slugs}@school.test` }));
});

const controller = () =>
  new LessonController({ store, runtime, backups, files, image: 'test', maxBytes: 1024 * 1024, metrics, log: categoryLogger(captureLogger().root, 'lessons') });

/** A lesson "Intro" (one file, src/Robot.java) handed out to the workspace: its pending delivery. */
async function handedOut(name = 'Intro'): Promise<DeliveryRecord> {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'cp-lesson-files-'));
  mkdirSync(path.join(folder, 'src'));
  writeFileSync(path.join(folder, 'src', 'Robot.java'), 'class Robot {}\n');
  const lesson = await store.lessons.create(coach, name, { files: 1, sizeBytes: 15, sha256: 'x' }, async (id, version) => {
    mkdirSync(path.dirname(files.version(id, version)), { recursive: true });
    await packFolder(folder, files.version(id, version), 1024 * 1024);
  });
  await store.lessons.handout(coach, lesson.id, { workspaceIds: [workspace.id] });
  return only();
}
const only = async () => (await store.lessons.deliveriesOf(workspace.id))[0]!;
const home = () => names.home(workspace);
/** The names (and owners) in the archives last written into the home: the folders, then the lesson's own tar into its folder. */
async function written(): Promise<string[]> {
  const into = runtime.importedInto.get(home())!;
  return [...(await namesIn(runtime.volumeArchives.get(home())!)), `then into ${into.path}:`, ...(await namesIn(into.tar))];
}
async function namesIn(archive: Buffer): Promise<string[]> {
  const extract = tar.extract();
  Readable.from([archive]).pipe(extract);
  const found: string[] = [];
  for await (const entry of extract) {
    found.push(`${entry.header.name} ${entry.header.uid}`);
    entry.resume();
  }
  return found;
}
const counted = async (outcome: string) => (await metrics.lessonDeliveries.get()).values.find((value) => value.labels.outcome === outcome)?.value ?? 0;

describe('landingFolder', () => {
  it("is the lesson's name while free, else beside it by version, else numbered, up to ten", () => {
    expect(landingFolder('Intro', 1, new Set())).toBe('Intro');
    expect(landingFolder('Intro', 2, new Set(['Intro']))).toBe('Intro (v2)');
    expect(landingFolder('Intro', 2, new Set(['Intro', 'Intro (v2)']))).toBe('Intro (v2, 2)');
    expect(landingFolder('Intro', 2, new Set(['Intro', 'Intro (v2)', 'Intro (v2, 2)']))).toBe('Intro (v2, 3)');
    expect(landingFolder('Intro', 2, new Set(landingCandidates('Intro', 2)))).toBeUndefined();
    expect(landingCandidates('Intro', 2)).toHaveLength(10);
  });
});

describe('a pending delivery', () => {
  it('into a home never made: the home is made with the lesson, all of it the student’s, and it is delivered', async () => {
    await handedOut();
    await controller().reconcile(workspace.id);
    expect(await written()).toEqual([
      'student 1000',
      'student/lessons 1000',
      'student/lessons/Intro 1000',
      'then into lessons/Intro:',
      'src 1000',
      'src/Robot.java 1000',
    ]);
    expect(await only()).toMatchObject({ state: 'delivered', folder: 'Intro', volume: home(), attempts: 0 });
    expect(await counted('delivered')).toBe(1);
  });

  it('into a home whose lessons/ has a folder of that name: beside it, the home’s root left alone', async () => {
    runtime.volumes.add(home());
    runtime.homes.set(home(), new Map([['lessons/Intro/mine.txt', { kind: 'file', bytes: Buffer.from('mine') }]]));
    await handedOut();
    await controller().reconcile(workspace.id);
    expect((await written()).slice(0, 3)).toEqual(['student/lessons 1000', 'student/lessons/Intro (v1) 1000', 'then into lessons/Intro (v1):']);
    expect(await only()).toMatchObject({ state: 'delivered', folder: 'Intro (v1)' });
  });

  it('tried again writes the folder chosen before, even now that it is there', async () => {
    runtime.volumes.add(home());
    const delivery = await handedOut();
    await store.lessons.choose(delivery, 'Intro');
    runtime.homes.set(home(), new Map([['lessons/Intro/src/Robot.java', { kind: 'file', bytes: Buffer.from('half') }]]));
    await controller().reconcile(workspace.id);
    expect(await only()).toMatchObject({ state: 'delivered', folder: 'Intro' });
  });

  it('that fails is noted and tried again (the reconcile fails), then failed with why at the last attempt', async () => {
    await handedOut();
    runtime.failures.set('importVolume', new Error('the disk is full'));
    await expect(controller().reconcile(workspace.id)).rejects.toThrow('the disk is full');
    expect(await only()).toMatchObject({ state: 'pending', attempts: 1, message: 'the disk is full' });
    await db.dataSource.query('UPDATE lesson_deliveries SET attempts = $1', [DELIVERY_ATTEMPTS - 1]);
    runtime.failures.set('importVolume', new Error('the disk is still full'));
    await controller().reconcile(workspace.id);
    expect(await only()).toMatchObject({ state: 'failed', message: 'the disk is still full' });
    expect(await counted('failed')).toBe(1);
  });

  it('into a home where lessons is not a folder fails without writing', async () => {
    runtime.volumes.add(home());
    runtime.homes.set(home(), new Map([['lessons', { kind: 'file', bytes: Buffer.from('mine') }]]));
    await handedOut();
    await expect(controller().reconcile(workspace.id)).rejects.toThrow(/lessons is not a folder of the home/);
    expect(runtime.volumeArchives.has(home())).toBe(false);
  });
});

describe('a delivered lesson', () => {
  const delivered = async () => {
    await handedOut();
    await controller().reconcile(workspace.id);
    runtime.actions.length = 0;
    return only();
  };

  it('with a reset asked: the home backed up, the folder removed and written again, the backup recorded', async () => {
    await delivered();
    runtime.homes.set(home(), new Map([['lessons/Intro/src/Extra.java', { kind: 'file', bytes: Buffer.from('extra') }]]));
    const lesson = (await store.lessons.list())[0]!;
    await store.lessons.requestReset(coach, lesson.id, workspace);
    await controller().reconcile(workspace.id);
    expect(backedUp).toEqual([workspace.slug]);
    expect(runtime.actions).toEqual([`remove lessons/Intro from ${home()}`, `import volume ${home()}`]);
    expect(await only()).toMatchObject({ state: 'delivered', resetRequestedAt: null, resetBackup: `${workspace.slug}-backup.tar.gz` });
  });

  it('in the home it was written to: nothing to do', async () => {
    await delivered();
    await controller().reconcile(workspace.id);
    expect(runtime.actions).toEqual([]);
  });

  it('whose home was replaced and still holds its folder: the new volume recorded, nothing written', async () => {
    await delivered();
    workspace = await replaceHome('ws-restored-1');
    runtime.homes.set(home(), new Map([['lessons/Intro/src/Robot.java', { kind: 'file', bytes: Buffer.from('kept') }]]));
    await controller().reconcile(workspace.id);
    expect(runtime.actions).toEqual([]);
    expect(await only()).toMatchObject({ state: 'delivered', volume: 'ws-restored-1' });
  });

  it('whose home was replaced without its folder: written again into the same folder', async () => {
    await delivered();
    workspace = await replaceHome('ws-restored-2');
    await controller().reconcile(workspace.id);
    expect(runtime.actions).toEqual([`import volume ${home()}`]);
    expect(await only()).toMatchObject({ state: 'delivered', folder: 'Intro', volume: 'ws-restored-2' });
  });
});

it("ends a deleted workspace's snapshots as failed", async () => {
  await handedOut();
  await controller().reconcile(workspace.id);
  const lesson = (await store.lessons.list())[0]!;
  const collection = await store.lessons.collect(coach, lesson.id, undefined);
  await store.lessons.workspacesWithWork();
  await db.dataSource.query("UPDATE workspaces SET desired_state = 'deleted' WHERE id = $1", [workspace.id]);
  await controller().reconcile(workspace.id);
  const done = await store.lessons.collection(lesson.id, collection.id);
  expect(done.doneAt).not.toBeNull();
  expect(done.snapshots).toMatchObject([{ state: 'failed', message: "the student's workspace was deleted" }]);
});

/** The workspace's home replaced by a volume of this name (as a restore swaps it), which exists. */
async function replaceHome(volume: string): Promise<WorkspaceRecord> {
  runtime.volumes.add(volume);
  await db.dataSource.query('UPDATE workspaces SET home_volume = $2 WHERE id = $1', [workspace.id, volume]);
  return (await store.workspaces.get(workspace.id))!;
}

it('ends a collection whose snapshots are all done but whose end was missed, at the next resync', async () => {
  await handedOut();
  await controller().reconcile(workspace.id);
  const lesson = (await store.lessons.list())[0]!;
  const collection = await store.lessons.collect(coach, lesson.id, undefined);
  await store.lessons.workspacesWithWork();
  await db.dataSource.query("UPDATE lesson_snapshots SET state = 'missing' WHERE collection_id = $1", [collection.id]);
  expect((await store.lessons.collection(lesson.id, collection.id)).doneAt).toBeNull();
  expect(await store.lessons.workspacesWithWork()).toEqual([]);
  expect((await store.lessons.collection(lesson.id, collection.id)).doneAt).not.toBeNull();
});
