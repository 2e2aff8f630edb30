/**
 * A lesson's files on the control plane's disk: an upload (a .zip, .tar or .tar.gz archive) unpacked and
 * checked into a folder, and a folder packed into the one form a version is kept in, a plain tar
 * whose entries are the lesson's own paths (`src/Robot.java`), folders 0755, files 0644 or 0755
 * (executable when any execute bit was set: `gradlew`), owned by the student (uid 1000). Nothing in
 * an upload is trusted: a path that is absolute or climbs out (`..`), a link of either kind, a
 * device, a FIFO are each refused with the entry's name (400 `lesson_archive_unsafe`), before any
 * home is touched; what is not an archive is 400 `lesson_archive_invalid`; past LESSON_MAX_SIZE
 * unpacked or MAX_ENTRIES entries, 413 `lesson_too_large`. macOS's `__MACOSX/` and `.DS_Store`, and a
 * git repository's `.git/` at the top (its history), are left out. An archive whose entries are all in one folder is that folder's contents (a lesson
 * zipped or tarred as its folder, as people do).
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, rm, utimes } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform, type PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import yauzl from 'yauzl';
import { AppError, ValidationError } from '../errors.ts';
import { packEntry, type TarEntry } from '../backup/streams.ts';
import type { LessonContent } from '../store/lessons.ts';

/** The most entries (files and folders) a lesson may hold. */
export const MAX_ENTRIES = 20_000;

/** The longest path in a lesson, in bytes (a home's path, with room for `lessons/<name> (v9)/`, stays under PATH_MAX). */
const MAX_PATH_BYTES = 1024;

/** The student's uid and gid, owner of everything handed out. */
const STUDENT = 1000;

/** What an upload's first bytes say it is. */
type Kind = 'gzip' | 'tar' | 'zip' | 'unknown';

function kindOf(head: Buffer): Kind {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 4 && head.readUInt32BE(0) === 0x504b0304) return 'zip';
  if (head.length >= 262 && head.subarray(257, 262).toString('latin1') === 'ustar') return 'tar';
  return 'unknown';
}

/** The first `bytes` of a stream, and the whole stream again (those bytes put back in front). */
async function peek(body: Readable, bytes: number): Promise<{ head: Buffer; stream: Readable }> {
  const chunks: Buffer[] = [];
  let length = 0;
  const iterator = body[Symbol.asyncIterator]();
  while (length < bytes) {
    const next = (await iterator.next()) as IteratorResult<Buffer>;
    if (next.done) break;
    chunks.push(next.value);
    length += next.value.length;
  }
  const head = Buffer.concat(chunks);
  const rest = Readable.from(
    (async function* () {
      yield head;
      for (let next = (await iterator.next()) as IteratorResult<Buffer>; !next.done; next = (await iterator.next()) as IteratorResult<Buffer>) yield next.value;
    })(),
    { objectMode: false },
  );
  return { head, stream: rest };
}

/** A path of an archive as the lesson's own (`a/b`), or undefined for one left out (macOS's); throws for one that is not safe. */
export function lessonPath(name: string): string | undefined {
  const unsafe = (why: string) =>
    ValidationError('lesson_archive_unsafe', `The archive's entry ${JSON.stringify(name.slice(0, 200))} ${why}; nothing was kept.`);
  if (name.includes('\u0000')) throw unsafe('holds a NUL character');
  if (name.startsWith('/')) throw unsafe('is an absolute path');
  const parts = name.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) throw unsafe('climbs out of its folder (..)');
  if (parts.length === 0) return undefined;
  if (parts[0] === '__MACOSX' || parts[0] === '.git' || parts.at(-1) === '.DS_Store') return undefined;
  const joined = parts.join('/');
  if (Buffer.byteLength(joined) > MAX_PATH_BYTES) throw unsafe(`is longer than ${MAX_PATH_BYTES} bytes`);
  return joined;
}

/** 413 `lesson_too_large`. */
const tooLarge = (message: string) => new AppError('lesson_too_large', message);

/** Counts what goes in, refusing past the limits. */
class Budget {
  entries = 0;
  bytes = 0;
  private readonly maxBytes: number;
  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  entry(): void {
    if (++this.entries > MAX_ENTRIES) throw tooLarge(`A lesson holds at most ${MAX_ENTRIES.toLocaleString('en')} files and folders.`);
  }

  add(bytes: number): void {
    this.bytes += bytes;
    if (this.bytes > this.maxBytes) throw tooLarge(`A lesson holds at most ${formatMb(this.maxBytes)} once unpacked (LESSON_MAX_SIZE).`);
  }
}

const formatMb = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MB`;

/**
 * Writes an archive's entries into the empty folder `into`, each checked (see the file comment), and
 * gives their times back as the archive has them (a version is then the same bytes however it was
 * sent): each file's at once, the folders' at the end (`finish`).
 */
class Unpacking {
  private readonly into: string;
  private readonly budget: Budget;
  private readonly folders = new Map<string, Date | undefined>();
  private newest = new Date(0);

  constructor(into: string, maxBytes: number) {
    this.into = into;
    this.budget = new Budget(maxBytes);
  }

  /**
   * The entry `name` of `type` (a tar's types; a zip's as the same names): its lesson path, or
   * undefined when it is left out (macOS's, a `.git`); throws for one that is not safe, or past the limits.
   */
  admit(name: string, type: string, size: number): string | undefined {
    const relative = lessonPath(name);
    if (relative === undefined) return undefined;
    if (type !== 'file' && type !== 'contiguous-file' && type !== 'directory')
      throw ValidationError(
        'lesson_archive_unsafe',
        `The archive's entry ${JSON.stringify(relative)} is a ${type.replace('-', ' ')}: a lesson holds files and folders only; nothing was kept.`,
      );
    this.budget.entry();
    if (type !== 'directory') this.budget.add(size);
    return relative;
  }

  /** A folder the archive lists (admitted). */
  async folder(relative: string, mtime: Date): Promise<void> {
    this.seen(relative, mtime);
    await mkdir(path.join(this.into, relative), { recursive: true });
    this.folders.set(relative, mtime);
  }

  /** A file (admitted) and its content. */
  async file(relative: string, mtime: Date, executable: boolean, content: Readable): Promise<void> {
    this.seen(relative, mtime);
    const target = path.join(this.into, relative);
    await mkdir(path.dirname(target), { recursive: true });
    await pipeline(content, createWriteStream(target, { mode: executable ? 0o755 : 0o644 }));
    await utimes(target, mtime, mtime);
  }

  /** Sets the folders' times and answers the lesson's folder: `into`, or the one folder everything is in. */
  async finish(): Promise<string> {
    if (this.budget.entries === 0) throw ValidationError('lesson_archive_empty', 'The archive holds no file.');
    // Deepest first: setting a folder's time after its contents are in place keeps it. One the archive does not list gets its newest entry's.
    for (const [folder, mtime] of [...this.folders].toSorted(([a], [b]) => b.split('/').length - a.split('/').length))
      await utimes(path.join(this.into, folder), mtime ?? this.newest, mtime ?? this.newest);
    const top = await readdir(this.into, { withFileTypes: true });
    return top.length === 1 && top[0]!.isDirectory() ? path.join(this.into, top[0]!.name) : this.into;
  }

  private seen(relative: string, mtime: Date): void {
    if (mtime > this.newest) this.newest = mtime;
    for (let above = path.posix.dirname(relative); above !== '.'; above = path.posix.dirname(above))
      if (!this.folders.has(above)) this.folders.set(above, undefined);
  }
}

/** A transform that passes at most `maxBytes` of an upload (413 `lesson_too_large` past it). */
function atMost(maxBytes: number): Transform {
  let received = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received += chunk.length;
      if (received > maxBytes) return done(tooLarge(`The upload is larger than ${formatMb(maxBytes)} (LESSON_MAX_SIZE).`));
      done(null, chunk);
    },
  });
}

/**
 * Unpacks an uploaded archive (.tar, .tar.gz or .zip, told by its first bytes) into the empty folder
 * `into`, checking every entry (see the file comment), and answers the folder that is the lesson:
 * `into`, or the one folder everything is in. Reads at most `maxBytes` of the upload too. A zip is
 * first written whole beside `into` (its index is at its end), then read from there.
 */
export async function unpackUpload(body: Readable, into: string, maxBytes: number): Promise<string> {
  const { head, stream } = await peek(body, 512);
  const kind = kindOf(head);
  if (head.length === 0) throw ValidationError('lesson_archive_invalid', 'The upload is empty: send a .zip, .tar or .tar.gz archive of the lesson.');
  if (kind === 'unknown') throw ValidationError('lesson_archive_invalid', 'The upload is not a .zip, .tar or .tar.gz archive.');
  const unpacking = new Unpacking(into, maxBytes);
  if (kind === 'zip') await unzip(stream, into, maxBytes, unpacking);
  else await untar(kind === 'gzip' ? [stream, atMost(maxBytes), createGunzip()] : [stream, atMost(maxBytes)], unpacking);
  return unpacking.finish();
}

/** A tar's entries, from `source` (the upload, counted, and gunzipped when it is gzip). */
async function untar(source: Readable[], unpacking: Unpacking): Promise<void> {
  const extract = tar.extract();
  const feeding = pipeline([...source, extract] as unknown as [Readable, PassThrough]).catch((error: unknown) => error);
  try {
    for await (const entry of extract as AsyncIterable<TarEntry>) {
      const type = entry.header.type ?? 'file';
      const relative = unpacking.admit(entry.header.name, type, entry.header.size ?? 0);
      const mtime = entry.header.mtime ?? new Date();
      if (relative === undefined || type === 'directory') {
        if (relative !== undefined) await unpacking.folder(relative, mtime);
        entry.resume();
        continue;
      }
      await unpacking.file(relative, mtime, ((entry.header.mode ?? 0o644) & 0o111) !== 0, entry as unknown as Readable);
    }
  } catch (error) {
    extract.destroy();
    await feeding;
    throw readable(error);
  }
  const failure = await feeding;
  if (failure) throw readable(failure);
}

/** What a zip entry's Unix mode (its external attributes' high half, when made on Unix) says it is, as a tar's type. */
const ZIP_TYPES: Record<number, string> = {
  0o040000: 'directory',
  0o100000: 'file',
  0o120000: 'symlink',
  0o010000: 'fifo',
  0o020000: 'character-device',
  0o060000: 'block-device',
  0o140000: 'socket',
};

/** A zip's entries: the upload written whole (counted) beside `into`, then read entry by entry (yauzl: each entry's size checked against what it holds). */
async function unzip(stream: Readable, into: string, maxBytes: number, unpacking: Unpacking): Promise<void> {
  const spooled = `${into}.zip`;
  let zip: yauzl.ZipFile | undefined;
  try {
    await pipeline(stream, atMost(maxBytes), createWriteStream(spooled));
    zip = await yauzl.openPromise(spooled, { lazyEntries: true });
    for await (const entry of zip.eachEntry()) {
      const unix = entry.versionMadeBy >> 8 === 3 ? entry.externalFileAttributes >>> 16 : 0;
      const type = entry.fileName.endsWith('/') ? 'directory' : unix & 0o170000 ? (ZIP_TYPES[unix & 0o170000] ?? 'special file') : 'file';
      const relative = unpacking.admit(entry.fileName, type, entry.uncompressedSize);
      if (relative === undefined) continue;
      if (type === 'directory') {
        await unpacking.folder(relative, entry.getLastModDate());
        continue;
      }
      if (entry.isEncrypted())
        throw ValidationError('lesson_archive_invalid', `The archive's entry ${JSON.stringify(relative)} is encrypted: send it without a password.`);
      const content = await zip.openReadStreamPromise(entry);
      // An entry that unpacks to more than it declares errs again after the first error ended the
      // copy (yauzl's size check, once per chunk): those later errors have no one else to hear them.
      content.on('error', () => undefined);
      await unpacking.file(relative, entry.getLastModDate(), (unix & 0o111) !== 0, content);
    }
  } catch (error) {
    // yauzl refuses a path that is absolute or climbs out before we see it: as unsafe as ours.
    const refused = /^(absolute path|invalid relative path): (.*)$/.exec((error as Error).message);
    if (refused)
      throw ValidationError(
        'lesson_archive_unsafe',
        `The archive's entry ${JSON.stringify(refused[2]!.slice(0, 200))} ${refused[1] === 'absolute path' ? 'is an absolute path' : 'climbs out of its folder (..)'}; nothing was kept.`,
      );
    throw readable(error);
  } finally {
    zip?.close();
    await rm(spooled, { force: true });
  }
}

/** An error of reading an archive, as the coach is told it: ours as they are, the rest as a damaged archive. */
function readable(error: unknown): unknown {
  if (error instanceof AppError) return error;
  return ValidationError('lesson_archive_invalid', `The archive is damaged or cut short (${(error as Error).message}).`);
}

/**
 * Packs the folder `root` into a lesson's tar at `file` (see the file comment), in name order;
 * refuses a link, a device, a FIFO (400 `lesson_archive_unsafe`, naming it), an empty lesson (400
 * `lesson_archive_empty`) and one past the limits (413 `lesson_too_large`). Answers what it holds
 * and the SHA-256 of the tar.
 */
export async function packFolder(root: string, file: string, maxBytes: number): Promise<LessonContent> {
  const budget = new Budget(maxBytes);
  const pack = tar.pack();
  const hash = createHash('sha256');
  let files = 0;
  const written = pipeline(
    pack,
    new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        done(null, chunk);
      },
    }),
    createWriteStream(file),
  );
  written.catch(() => undefined);
  const walk = async (relative: string): Promise<void> => {
    const names = (await readdir(path.join(root, relative))).toSorted();
    for (const name of names) {
      const inLesson = relative === '' ? name : `${relative}/${name}`;
      if (lessonPath(inLesson) === undefined) continue;
      const stats = await lstat(path.join(root, inLesson));
      budget.entry();
      const header = { name: inLesson, uid: STUDENT, gid: STUDENT, mtime: stats.mtime };
      if (stats.isDirectory()) {
        await packEntry(pack, { ...header, type: 'directory', mode: 0o755 }).end();
        await walk(inLesson);
      } else if (stats.isFile()) {
        budget.add(stats.size);
        const sink = packEntry(pack, { ...header, type: 'file', size: stats.size, mode: stats.mode & 0o111 ? 0o755 : 0o644 });
        for await (const chunk of createReadStream(path.join(root, inLesson))) await sink.write(chunk as Buffer);
        await sink.end();
        files++;
      } else {
        throw ValidationError(
          'lesson_archive_unsafe',
          `${JSON.stringify(inLesson)} is ${stats.isSymbolicLink() ? 'a link' : 'neither a file nor a folder'}: a lesson holds files and folders only; nothing was kept.`,
        );
      }
    }
  };
  try {
    await walk('');
    if (files === 0) throw ValidationError('lesson_archive_empty', 'The lesson holds no file.');
    pack.finalize();
    await written;
  } catch (error) {
    pack.destroy();
    await rm(file, { force: true });
    throw error;
  }
  return { files, sizeBytes: budget.bytes, sha256: hash.digest('hex') };
}

/** A tar of these folders alone (`student/lessons`, …), each the student's (0755, uid 1000): where a lesson's own tar is then extracted. */
export function foldersTar(folders: readonly string[]): Readable {
  const pack = tar.pack();
  for (const folder of folders) pack.entry({ name: folder, type: 'directory', mode: 0o755, uid: STUDENT, gid: STUDENT, mtime: new Date() });
  pack.finalize();
  return pack as unknown as Readable;
}
