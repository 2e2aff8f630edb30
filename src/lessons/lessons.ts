/**
 * Lessons on the control plane's disk, for the API and the CLI: a lesson's versions made from an
 * upload or a folder (checked and packed by ./files.ts, then recorded by the store in the same
 * step), where each version's tar and each collected snapshot is kept (`DATA_DIR/lessons/<lesson>/`,
 * which replicas share as they share backups), and a collection as one download: a .tar.gz with a
 * folder per student (`<lesson>/<slug>/<their lesson folders>`), and a note in the folder of each
 * student whose files could not be collected saying why. What reaches homes is the lesson
 * controller's (controllers/lessons.ts).
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { packEntry, type TarEntry } from '../backup/streams.ts';
import { ConflictError } from '../errors.ts';
import type { Imports } from '../import/imports.ts';
import type { Actor } from '../store/audit.ts';
import type { ImportRequest } from '../store/imports.ts';
import type { CollectionRecord, LessonRecord, LessonStore } from '../store/lessons.ts';
import { packFolder, unpackUpload } from './files.ts';

export interface LessonsOptions {
  lessons: LessonStore;
  /** DATA_DIR: lessons are kept under `lessons/` there. */
  dataDir: string;
  /** LESSON_MAX_SIZE in bytes. */
  maxBytes: number;
  /** Clones of a repository, as a student's import makes them (its checks and bounds): a lesson from a git URL. */
  imports?: Pick<Imports, 'withProject'>;
}

/** Where a lesson's files are kept (`DATA_DIR/lessons/`), by lesson, version and collection (the controller writes snapshots there). */
export class LessonFiles {
  readonly dir: string;
  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'lessons');
  }

  /** A version's tar. */
  version(lessonId: string, version: number): string {
    return path.join(this.dir, lessonId, `v${version}.tar`);
  }

  /** One student's snapshot in a collection (a tar of their lesson folders). */
  snapshot(lessonId: string, collectionId: string, workspaceId: string): string {
    return path.join(this.dir, lessonId, 'collections', collectionId, `${workspaceId}.tar`);
  }

  /** A fresh folder for an upload to be unpacked and packed in (removed by the caller). */
  async scratch(): Promise<string> {
    await mkdir(path.join(this.dir, 'tmp'), { recursive: true });
    return mkdtemp(path.join(this.dir, 'tmp', 'upload-'));
  }
}

/** Lessons made and downloaded (one per process; see the file comment). */
export class Lessons {
  readonly files: LessonFiles;
  private readonly options: LessonsOptions;

  constructor(options: LessonsOptions) {
    this.options = options;
    this.files = new LessonFiles(options.dataDir);
  }

  /** Makes a lesson of an uploaded archive (.zip, .tar, .tar.gz), or (`lessonId`) its next version; audited `lesson.create`. */
  async upload(actor: Actor, target: { name: string } | { lessonId: string }, body: Readable): Promise<LessonRecord> {
    return this.fromScratch(actor, target, async (scratch) => unpackUpload(body, path.join(scratch, 'files'), this.options.maxBytes));
  }

  /** Makes a lesson of a folder on this machine (the CLI), or (`lessonId`) its next version. */
  async fromFolder(actor: Actor, target: { name: string } | { lessonId: string }, folder: string): Promise<LessonRecord> {
    return this.fromScratch(actor, target, async () => folder);
  }

  /**
   * Makes a lesson of a git repository's project (or, `lessonId`, its next version): the address,
   * branch and subfolder checked and the clone made as a student's import's are (IMPORT_* settings,
   * the same errors), its `.git` left out.
   */
  async fromGit(actor: Actor, target: { name: string } | { lessonId: string }, request: ImportRequest): Promise<LessonRecord> {
    const { imports } = this.options;
    if (!imports) throw new Error('lessons from git need the imports of this process');
    return imports.withProject(request, (root) => this.fromFolder(actor, target, root));
  }

  private async fromScratch(actor: Actor, target: { name: string } | { lessonId: string }, root: (scratch: string) => Promise<string>): Promise<LessonRecord> {
    const scratch = await this.files.scratch();
    try {
      await mkdir(path.join(scratch, 'files'));
      const packed = path.join(scratch, 'lesson.tar');
      const content = await packFolder(await root(scratch), packed, this.options.maxBytes);
      const keep = async (lessonId: string, version: number) => {
        const file = this.files.version(lessonId, version);
        await mkdir(path.dirname(file), { recursive: true });
        await rename(packed, file);
      };
      return 'name' in target
        ? await this.options.lessons.create(actor, target.name, content, keep)
        : await this.options.lessons.addVersion(actor, target.lessonId, content, keep);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }

  /**
   * A collection as one .tar.gz (see the file comment) and its file name; 409
   * `collection_not_done` while its snapshots are being taken.
   */
  async archive(lessonId: string, collectionId: string): Promise<{ fileName: string; stream: Readable }> {
    const lesson = await this.options.lessons.get(lessonId);
    const collection = await this.options.lessons.collection(lessonId, collectionId);
    if (!collection.doneAt)
      throw ConflictError(
        'collection_not_done',
        collection.dueAt > new Date()
          ? `This collection is due at ${collection.dueAt.toISOString()}.`
          : 'Its snapshots are still being taken: try again in a moment.',
      );
    const pack = tar.pack();
    const out = new PassThrough();
    pipeline(pack, createGzip(), out).catch((error: unknown) => out.destroy(error as Error));
    void this.fill(pack, lesson, collection).catch((error: unknown) => pack.destroy(error as Error));
    const stamp = collection.doneAt.toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-');
    return { fileName: `${lesson.name.replace(/\s+/g, '-')}-collected-${stamp}.tar.gz`, stream: out };
  }

  private async fill(pack: tar.Pack, lesson: LessonRecord, collection: CollectionRecord): Promise<void> {
    const root = lesson.name;
    const when = new Date();
    await packEntry(pack, { name: root, type: 'directory', mode: 0o755, mtime: when }).end();
    for (const snapshot of collection.snapshots) {
      const folder = `${root}/${snapshot.slug}`;
      await packEntry(pack, { name: folder, type: 'directory', mode: 0o755, mtime: snapshot.takenAt ?? when }).end();
      const file = this.files.snapshot(lesson.id, collection.id, snapshot.workspaceId);
      // A snapshot whose file is gone (removed by hand, or a replica whose DATA_DIR is not shared) gets a note, not a download cut short.
      const kept =
        snapshot.state === 'taken' &&
        (await access(file).then(
          () => true,
          () => false,
        ));
      if (!kept) {
        const note = Buffer.from(
          snapshot.state === 'missing'
            ? `Nothing was collected from ${snapshot.slug}: no folder of ${lesson.name} was in their home (deleted or renamed).\n`
            : snapshot.state === 'taken'
              ? `The snapshot of ${snapshot.slug} is not on this server any more (its file under DATA_DIR/lessons/ is gone).\n`
              : `Nothing was collected from ${snapshot.slug}: ${snapshot.message || 'the snapshot failed'}.\n`,
        );
        const sink = packEntry(pack, { name: `${folder}/NOT-COLLECTED.txt`, type: 'file', mode: 0o644, size: note.length, mtime: when });
        await sink.write(note);
        await sink.end();
        continue;
      }
      const extract = tar.extract();
      const reading = pipeline(createReadStream(file), extract);
      reading.catch(() => undefined);
      for await (const entry of extract as AsyncIterable<TarEntry>) {
        const sink = packEntry(pack, { ...entry.header, name: `${folder}/${entry.header.name}` });
        for await (const chunk of entry) await sink.write(chunk as Buffer);
        await sink.end();
      }
      await reading;
    }
    pack.finalize();
  }
}

/** A name for a temporary file beside `file` (written, then renamed over it). */
export const partOf = (file: string): string => `${file}.${randomBytes(4).toString('hex')}.part`;
