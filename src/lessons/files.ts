/**
 * A lesson's files on the control plane's disk: an upload (a .tar or .tar.gz archive) unpacked and
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
 * Unpacks an uploaded archive (.tar or .tar.gz, told by its first bytes) into the empty folder
 * `into`, checking every entry (see the file comment), and answers the folder that is the lesson:
 * `into`, or the one folder everything is in. Reads at most `maxBytes` of the upload too.
 */
export async function unpackUpload(body: Readable, into: string, maxBytes: number): Promise<string> {
  const { head, stream } = await peek(body, 512);
  const kind = kindOf(head);
  if (head.length === 0) throw ValidationError('lesson_archive_invalid', 'The upload is empty: send a .tar or .tar.gz archive of the lesson.');
  if (kind === 'zip') throw ValidationError('lesson_archive_invalid', 'Zip archives are not taken: send the lesson as a .tar or .tar.gz, or its folder.');
  if (kind === 'unknown') throw ValidationError('lesson_archive_invalid', 'The upload is not a .tar or .tar.gz archive.');
  const budget = new Budget(maxBytes);
  let received = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received += chunk.length;
      if (received > maxBytes) return done(tooLarge(`The upload is larger than ${formatMb(maxBytes)} (LESSON_MAX_SIZE).`));
      done(null, chunk);
    },
  });
  const extract = tar.extract();
  // Times as the archive has them (a version is then the same bytes however it was sent): each file's at once, the folders' at the end.
  const folders = new Map<string, Date | undefined>();
  let newest = new Date(0);
  const source = kind === 'gzip' ? [stream, counted, createGunzip()] : [stream, counted];
  const feeding = pipeline([...source, extract] as unknown as [Readable, PassThrough]).catch((error: unknown) => error);
  try {
    for await (const raw of extract as AsyncIterable<TarEntry>) {
      const entry = raw;
      const relative = lessonPath(entry.header.name);
      const type = entry.header.type ?? 'file';
      if (relative === undefined) {
        entry.resume();
        continue;
      }
      if (type !== 'file' && type !== 'contiguous-file' && type !== 'directory')
        throw ValidationError(
          'lesson_archive_unsafe',
          `The archive's entry ${JSON.stringify(relative)} is a ${type.replace('-', ' ')}: a lesson holds files and folders only; nothing was kept.`,
        );
      budget.entry();
      const target = path.join(into, relative);
      const mtime = entry.header.mtime ?? new Date();
      if (mtime > newest) newest = mtime;
      for (let above = path.posix.dirname(relative); above !== '.'; above = path.posix.dirname(above)) if (!folders.has(above)) folders.set(above, undefined);
      if (type === 'directory') {
        await mkdir(target, { recursive: true });
        folders.set(relative, mtime);
        entry.resume();
        continue;
      }
      await mkdir(path.dirname(target), { recursive: true });
      budget.add(entry.header.size ?? 0);
      const executable = ((entry.header.mode ?? 0o644) & 0o111) !== 0;
      await pipeline(entry as unknown as Readable, createWriteStream(target, { mode: executable ? 0o755 : 0o644 }));
      await utimes(target, mtime, mtime);
    }
  } catch (error) {
    extract.destroy();
    await feeding;
    throw readable(error);
  }
  const failure = await feeding;
  if (failure) throw readable(failure);
  if (budget.entries === 0) throw ValidationError('lesson_archive_empty', 'The archive holds no file.');
  // Deepest first: setting a folder's time after its contents are in place keeps it. One the archive does not list gets its newest entry's.
  for (const [folder, mtime] of [...folders].toSorted(([a], [b]) => b.split('/').length - a.split('/').length))
    await utimes(path.join(into, folder), mtime ?? newest, mtime ?? newest);
  const top = await readdir(into, { withFileTypes: true });
  return top.length === 1 && top[0]!.isDirectory() ? path.join(into, top[0]!.name) : into;
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
