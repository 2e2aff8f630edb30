import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { createReadStream, createWriteStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import type { Backups } from '../src/backup/backups.ts';
import { packEntry, type TarEntry } from '../src/backup/streams.ts';
import { engineAway, names, VOLUME_ARCHIVE_ROOT, type RuntimeEnvironment, type RuntimeEvents, type RuntimeVolumes } from '../src/docker/runtime.ts';
import { AppError } from '../src/errors.ts';
import { foldersTar } from '../src/lessons/files.ts';
import type { LessonFiles } from '../src/lessons/lessons.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { SYSTEM_ACTOR } from '../src/store/audit.ts';
import type { Store } from '../src/store/index.ts';
import type { Fence } from '../src/store/leases.ts';
import { DELIVERY_ATTEMPTS, type DeliveryRecord, type SnapshotRecord } from '../src/store/lessons.ts';
import type { WorkspaceRecord } from '../src/store/workspaces.ts';
import { Controller } from './controller.ts';
import type { ReconcileResult } from './workqueue.ts';

/** The folder of the home lessons go in. */
export const LESSONS_FOLDER = 'lessons';

export interface LessonControllerOptions {
  store: Pick<Store, 'lessons' | 'workspaces' | 'changes'>;
  runtime: Pick<RuntimeVolumes, 'importVolume' | 'exportVolume' | 'statHome' | 'volumeExists' | 'removeHomeFolder'> &
    RuntimeEvents &
    Pick<RuntimeEnvironment, 'reachability'>;
  backups: Pick<Backups, 'create'>;
  files: LessonFiles;
  /** The workspace image: the helpers that read and write homes are made from it. */
  image: string;
  /** LESSON_MAX_SIZE: the most one student's collected folders may hold. */
  maxBytes: number;
  metrics: Metrics;
  /** Logger of `control.lessons`. */
  log: Logger;
  fence?: Fence;
  /** Full resync period (a collection's deadline is met within it). */
  resyncIntervalMs?: number;
}

/**
 * Where the version of a lesson called `name` lands in a home whose `lessons/` holds `taken`: its
 * own name when that is free, else beside it, `<name> (v<version>)`, then `<name> (v<version>, 2)`
 * up to `, 9`: never over a student's folder. Undefined when all ten are taken.
 */
export function landingFolder(name: string, version: number, taken: ReadonlySet<string>): string | undefined {
  return landingCandidates(name, version).find((folder) => !taken.has(folder));
}

/** The folders a version may land in, in the order landingFolder tries them. */
export function landingCandidates(name: string, version: number): string[] {
  return [name, `${name} (v${version})`, ...Array.from({ length: 8 }, (_, n) => `${name} (v${version}, ${n + 2})`)];
}

/**
 * The lesson controller (leader only): one key per workspace. Takes each of a workspace's lessons
 * from wanted to there, whether the workspace runs or not, writing into its home volume through a
 * helper container (never through the student's editor):
 * - a `pending` delivery: the folder is chosen (landingFolder, recorded first so that a retry
 *   writes the same one), the version's files are written under `lessons/<folder>/`, owned by the
 *   student, and it is `delivered` with the volume written to. A home never started gets its volume
 *   made (the image's entrypoint still copies the starter into a home holding only `lessons/`).
 * - a reset asked: a backup of the home (Backups.create, audited `workspace.backup`), then the
 *   folder removed and written again from the version handed out; the backup is recorded.
 * - a `delivered` one whose home is another volume now (a restore, a reset, a move swapped it): if
 *   its folder is in the new home, the volume is recorded; if not (the backup predates it), it is
 *   written again into the same folder.
 * - each snapshot due of a collection: the student's folders of that lesson are read from the home
 *   (files and folders only; links and the rest left out) into a tar kept with the lesson: `taken`,
 *   or `missing` when none is there, or `failed` past LESSON_MAX_SIZE.
 * A step that fails is tried again with the queue's backoff, DELIVERY_ATTEMPTS times in all, then
 * the delivery is `failed` with why (a reset is given up, the delivery kept); the engine being away
 * counts no attempt. A workspace deleted ends its snapshots as `failed`.
 */
export class LessonController extends Controller {
  private readonly options: LessonControllerOptions;

  constructor(options: LessonControllerOptions) {
    super(
      { name: 'lessons', metrics: options.metrics, log: options.log, concurrency: 4, saidElsewhere: (error) => engineAway(options.runtime, error) },
      options.fence,
    );
    this.options = options;
  }

  override async start(): Promise<void> {
    const { store, runtime, log } = this.options;
    this.follow({
      changes: store.changes,
      // A `lessons` change names a workspace, or a lesson (a collection asked: those due are opened); a workspace changed may have a new home.
      keysOfChange: async (change) =>
        change.kind === 'workspaces'
          ? [change.id]
          : change.kind !== 'lessons'
            ? []
            : (await store.lessons.isLesson(change.id))
              ? store.lessons.workspacesWithWork()
              : [change.id],
      runtime,
      keyOfEvent: () => undefined,
      storedKeys: () => store.lessons.workspacesWithWork(),
      resyncIntervalMs: this.options.resyncIntervalMs ?? 15_000,
      log,
    });
    await this.resyncAll();
  }

  /** See the class comment. */
  override async reconcile(workspaceId: string): Promise<ReconcileResult | void> {
    const { store } = this.options;
    const workspace = await store.workspaces.get(workspaceId);
    if (!workspace || workspace.spec.desiredState === 'deleted') {
      for (const snapshot of await store.lessons.snapshotsDue(workspaceId))
        await store.lessons.snapshotDone(snapshot, { state: 'failed', message: "the student's workspace was deleted" });
      return;
    }
    const volume = names.home(workspace);
    let failure: unknown;
    for (const delivery of await store.lessons.deliveriesOf(workspaceId)) {
      const step =
        delivery.state === 'pending'
          ? () => this.deliver(workspace, delivery)
          : delivery.state === 'delivered' && delivery.resetRequestedAt
            ? () => this.reset(workspace, delivery)
            : delivery.state === 'delivered' && delivery.volume !== volume
              ? () => this.catchUp(workspace, delivery)
              : undefined;
      if (step) failure ??= await this.attempt(delivery, step);
    }
    for (const snapshot of await store.lessons.snapshotsDue(workspaceId))
      failure ??= await this.snapshot(workspace, snapshot).then(
        () => undefined,
        (error: unknown) => error,
      );
    if (failure) throw failure;
  }

  /** Runs one delivery's step; a failure is noted (or, at the last attempt, the delivery failed) and answered for the queue to retry. */
  private async attempt(delivery: DeliveryRecord, step: () => Promise<void>): Promise<unknown> {
    try {
      await step();
      return undefined;
    } catch (error) {
      if (engineAway(this.options.runtime, error)) return error;
      const message = error instanceof Error ? error.message : String(error);
      const where = { workspaceId: delivery.workspaceId, slug: delivery.slug, lesson: delivery.lessonName, version: delivery.version };
      if (delivery.attempts + 1 >= DELIVERY_ATTEMPTS) {
        await this.options.store.lessons.markFailed(delivery, message);
        this.options.metrics.lessonDeliveries.inc({ outcome: 'failed' });
        this.options.log.warning(
          { ...where, error: message },
          `${delivery.lessonName} could not reach ${delivery.slug}'s home; given up after ${DELIVERY_ATTEMPTS} attempts`,
        );
        return undefined;
      }
      await this.options.store.lessons.noteAttempt(delivery, message);
      this.options.log.info({ ...where, error: message }, `${delivery.lessonName} did not reach ${delivery.slug}'s home yet; trying again`);
      return error;
    }
  }

  private async deliver(workspace: WorkspaceRecord, delivery: DeliveryRecord): Promise<void> {
    const { store, metrics, log } = this.options;
    const volume = names.home(workspace);
    let folder = delivery.folder;
    if (folder === null) {
      const taken = await this.takenFolders(workspace, landingCandidates(delivery.lessonName, delivery.version));
      const free = landingFolder(delivery.lessonName, delivery.version, taken);
      if (free === undefined) throw new Error(`${LESSONS_FOLDER}/ holds ten folders of ${delivery.lessonName} already: nothing was written`);
      folder = free;
      await store.lessons.choose(delivery, folder);
    }
    await this.write(workspace, delivery, folder);
    await store.lessons.markDelivered(delivery, volume);
    metrics.lessonDeliveries.inc({ outcome: 'delivered' });
    log.info(
      { workspaceId: workspace.id, slug: workspace.slug, lesson: delivery.lessonName, version: delivery.version, folder },
      `${delivery.lessonName} reached ${workspace.slug}'s home in ${LESSONS_FOLDER}/${folder}`,
    );
  }

  private async reset(workspace: WorkspaceRecord, delivery: DeliveryRecord): Promise<void> {
    const { store, runtime, backups, image, log } = this.options;
    const volume = names.home(workspace);
    const target = { workspaceId: workspace.id, slug: workspace.slug };
    const folder = delivery.folder!;
    const backup = (await runtime.volumeExists(volume)) ? (await backups.create(SYSTEM_ACTOR, workspace)).name : null;
    if ((await runtime.removeHomeFolder(volume, target, image, `${LESSONS_FOLDER}/${folder}`)) === 'outside')
      throw new Error(`${LESSONS_FOLDER}/${folder} leads out of the home (a link): it was left as it is`);
    await this.write(workspace, delivery, folder);
    await store.lessons.markDelivered(delivery, volume, { backup });
    log.info(
      { workspaceId: workspace.id, slug: workspace.slug, lesson: delivery.lessonName, folder, backup },
      `reset ${workspace.slug}'s ${LESSONS_FOLDER}/${folder} to the handed-out ${delivery.lessonName} (backup ${backup ?? 'none: no home yet'})`,
    );
  }

  private async catchUp(workspace: WorkspaceRecord, delivery: DeliveryRecord): Promise<void> {
    const volume = names.home(workspace);
    if ((await this.takenFolders(workspace, [delivery.folder!])).has(delivery.folder!)) return this.options.store.lessons.moved(delivery, volume);
    await this.write(workspace, delivery, delivery.folder!);
    await this.options.store.lessons.markDelivered(delivery, volume);
    this.options.log.info(
      { workspaceId: workspace.id, slug: workspace.slug, lesson: delivery.lessonName, folder: delivery.folder },
      `${workspace.slug}'s home was replaced without ${LESSONS_FOLDER}/${delivery.folder}: written again`,
    );
  }

  /**
   * Which of `folders` (under `lessons/`) are taken in the home (all free when it has no home or no
   * `lessons/` yet); a `lessons` that is not a folder (a file of the student's, a link) fails the step.
   */
  private async takenFolders(workspace: WorkspaceRecord, folders: readonly string[]): Promise<Set<string>> {
    const { runtime, image } = this.options;
    const volume = names.home(workspace);
    if (!(await runtime.volumeExists(volume))) return new Set();
    const paths = [LESSONS_FOLDER, ...folders.map((folder) => `${LESSONS_FOLDER}/${folder}`)];
    const kinds = await runtime.statHome(volume, { workspaceId: workspace.id, slug: workspace.slug }, image, paths);
    const lessons = kinds.get(LESSONS_FOLDER);
    if (lessons === 'missing') return new Set();
    if (lessons !== 'dir') throw new Error(`the home's ${LESSONS_FOLDER} is not a folder of the home (a ${lessons}): nothing was written`);
    return new Set(folders.filter((folder) => kinds.get(`${LESSONS_FOLDER}/${folder}`) !== 'missing'));
  }

  /** Writes a version's files into `lessons/<folder>/` of the home: the folders on the way, then the version's own tar as it is kept. */
  private async write(workspace: WorkspaceRecord, delivery: DeliveryRecord, folder: string): Promise<void> {
    const { runtime, image, files } = this.options;
    const volume = names.home(workspace);
    const root = `${VOLUME_ARCHIVE_ROOT}/${LESSONS_FOLDER}`;
    // A home made here (never started) gets its root from the tar too: the student's, as the controller would make it.
    const home = (await runtime.volumeExists(volume)) ? [] : [VOLUME_ARCHIVE_ROOT];
    await runtime.importVolume(volume, { workspaceId: workspace.id, slug: workspace.slug }, image, foldersTar([...home, root, `${root}/${folder}`]), {
      path: `${LESSONS_FOLDER}/${folder}`,
      tar: createReadStream(files.version(delivery.lessonId, delivery.version)),
    });
  }

  /** Takes one student's snapshot of a collection (see the class comment). */
  private async snapshot(workspace: WorkspaceRecord, snapshot: SnapshotRecord & { collectionId: string; lessonId: string }): Promise<void> {
    const { store, runtime, image, files, maxBytes, log } = this.options;
    const volume = names.home(workspace);
    const target = { workspaceId: workspace.id, slug: workspace.slug };
    const folders = [
      ...new Set(
        (await store.lessons.deliveriesOf(workspace.id))
          .filter((delivery) => delivery.lessonId === snapshot.lessonId && delivery.state === 'delivered' && delivery.folder !== null)
          .map((delivery) => delivery.folder!),
      ),
    ];
    if (!(await runtime.volumeExists(volume))) return store.lessons.snapshotDone(snapshot, { state: 'missing', message: 'their home does not exist' });
    const file = files.snapshot(snapshot.lessonId, snapshot.collectionId, workspace.id);
    await mkdir(path.dirname(file), { recursive: true });
    const pack = tar.pack();
    const written = pipeline(pack, createWriteStream(file));
    written.catch(() => undefined);
    const taken: string[] = [];
    let count = 0;
    let bytes = 0;
    try {
      for (const folder of folders) {
        let archive: Readable;
        try {
          archive = await runtime.exportVolume(volume, target, image, { path: `${LESSONS_FOLDER}/${folder}` });
        } catch (error) {
          if (error instanceof AppError && error.code === 'home_path_not_found') continue;
          throw error;
        }
        const extract = tar.extract();
        const reading = pipeline(archive, extract);
        reading.catch(() => undefined);
        for await (const entry of extract as AsyncIterable<TarEntry>) {
          const { type, name } = entry.header;
          // The engine names them from the folder's own name; only files and folders are kept.
          const inside = name === folder || name.startsWith(`${folder}/`);
          if (!inside || (type !== 'file' && type !== 'directory')) {
            entry.resume();
            continue;
          }
          bytes += type === 'file' ? (entry.header.size ?? 0) : 0;
          if (bytes > maxBytes) {
            archive.destroy();
            throw new TooLarge();
          }
          const sink = packEntry(pack, {
            name,
            type,
            mode: type === 'directory' ? 0o755 : (entry.header.mode ?? 0o644) & 0o755,
            size: entry.header.size,
            mtime: entry.header.mtime,
          });
          for await (const chunk of entry) await sink.write(chunk as Buffer);
          await sink.end();
          if (type === 'file') count++;
        }
        await reading;
        taken.push(folder);
      }
      pack.finalize();
      await written;
    } catch (error) {
      pack.destroy();
      await rm(file, { force: true });
      if (error instanceof TooLarge)
        return store.lessons.snapshotDone(snapshot, {
          state: 'failed',
          message: `their lesson folders hold more than LESSON_MAX_SIZE (${Math.round(maxBytes / 1024 / 1024)} MB)`,
        });
      throw error;
    }
    if (taken.length === 0) {
      await rm(file, { force: true });
      return store.lessons.snapshotDone(snapshot, { state: 'missing', message: 'no folder of the lesson is in their home (deleted or renamed)' });
    }
    await store.lessons.snapshotDone(snapshot, { state: 'taken', folders: taken, files: count, sizeBytes: bytes });
    log.info(
      { workspaceId: workspace.id, slug: workspace.slug, collectionId: snapshot.collectionId, files: count, bytes },
      `collected ${workspace.slug}'s ${taken.join(', ')}`,
    );
  }
}

/** A student's lesson folders past LESSON_MAX_SIZE (their snapshot is `failed`). */
class TooLarge extends Error {}
