import { open, rename, rm } from 'node:fs/promises';
import { addAbortSignal, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { VOLUME_ARCHIVE_ROOT, type VolumeArchives } from '../docker/runtime.ts';
import { ConflictError, ValidationError } from '../errors.ts';
import {
  BACKUP_FORMAT,
  backupEntry,
  ContentHash,
  HOME_DIR,
  MANIFEST_NAME,
  MAX_OWNER_ID,
  shownPath,
  tarHeader,
  TreeCheck,
  type BackupEntry,
  type BackupManifest,
} from './backup-format.ts';
import { firstError, outcome, packEntry } from './streams.ts';

/** gzip's default level (6), in 64 KiB chunks rather than 16 KiB: fewer hand-offs to zlib's thread. */
const GZIP_OPTIONS = { chunkSize: 64 * 1024 };

export interface WriteBackupOptions {
  runtime: VolumeArchives;
  /** The volume to back up (a workspace's home volume). */
  volume: string;
  /** The workspace image, through which the volume is read (nothing runs from it). */
  image: string;
  /** Whose volume it is: recorded in the manifest. */
  workspace: { workspaceId: string; slug: string; ownerEmail: string };
  out: Writable;
  /** Called as content is read, with the bytes of file data so far. */
  onProgress?: (bytes: number) => void;
  /** Gives up the backup (its reading ends, and it rejects as on any failure). */
  signal?: AbortSignal;
}

/**
 * Streams a backup of the volume into `out`: the engine's archive of it, repacked as the backup
 * format (entries under `home/`, owners, modes and mtimes kept, FIFOs and devices left out with
 * their hard links) and hashed as it passes, then the manifest as the last entry, gzip'd. Every
 * entry is checked as a restore checks it (TreeCheck) and for names a backup can carry, so a backup
 * restores what it took: a home holding what a restore could not bring back is refused with 409
 * `backup_unrestorable`, naming the file (a name or symbolic link target that is not UTF-8). Resolves
 * with the manifest once `out` has finished; rejects with the first failure (engine, volume content,
 * `out`), after which `out` has been destroyed and the helper container is on its way out. Memory
 * stays bounded: nothing waits in it longer than a few chunks (and the check holds every path).
 * Stopping the workspace first gives a consistent copy; a file changing while it is read fails the
 * export.
 */
export async function writeBackup({ runtime, volume, image, workspace, out, onProgress, signal }: WriteBackupOptions): Promise<BackupManifest> {
  const created = new Date().toISOString();
  signal?.throwIfAborted();
  const archive = await runtime.exportVolume(volume, { workspaceId: workspace.workspaceId, slug: workspace.slug }, image);
  if (signal) addAbortSignal(signal, archive);
  const extract = tar.extract();
  const pack = tar.pack();
  const gzip = createGzip(GZIP_OPTIONS);
  const failed = firstError([archive, extract, pack, gzip, out]);
  const reading = outcome(pipeline(archive, extract));
  const writing = outcome(pipeline(pack, gzip, out));
  try {
    const hash = new ContentHash();
    const tree = new TreeCheck();
    // The engine's names of what is left out: a hard link to one of them is another name of it.
    const leftOut = new Set<string>();
    let files = 0;
    let bytes = 0;
    for await (const tarEntry of extract) {
      const { header } = tarEntry;
      const entry = header.type === 'link' && leftOut.has(header.linkname ?? '') ? undefined : volumeEntry(volume, header);
      if (!entry) {
        // A FIFO or a device: no data to keep.
        leftOut.add(header.name);
        tarEntry.resume();
        continue;
      }
      const problem = tree.problem(entry) ?? unencodable(entry);
      if (problem) {
        throw ConflictError(
          'backup_unrestorable',
          `The home of ${workspace.slug} was not backed up: ${problem}, which a restore could not bring back as it is. Rename or remove it, then back up again.`,
        );
      }
      hash.entry(entry);
      const sink = packEntry(pack, tarHeader(entry, HOME_DIR));
      for await (const data of tarEntry) {
        const chunk = data as Buffer;
        hash.data(chunk);
        await sink.write(chunk);
        bytes += chunk.length;
        onProgress?.(bytes);
      }
      await sink.end();
      if (entry.type === 'file') files++;
    }
    const readError = await reading;
    if (readError) throw readError;
    const manifest: BackupManifest = {
      format: BACKUP_FORMAT,
      slug: workspace.slug,
      workspaceId: workspace.workspaceId,
      ownerEmail: workspace.ownerEmail,
      created,
      image,
      files,
      bytes,
      sha256: hash.digest(),
    };
    const data = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);
    const sink = packEntry(pack, { name: MANIFEST_NAME, type: 'file', mode: 0o100644, mtime: new Date(created), size: data.length });
    await sink.write(data);
    await sink.end();
    pack.finalize();
    const writeError = await writing;
    if (writeError) throw writeError;
    return manifest;
  } catch (error) {
    const cause = failed.error ?? error;
    archive.destroy();
    pack.destroy();
    out.destroy();
    await Promise.all([reading, writing]);
    throw cause;
  }
}

/**
 * Writes a backup (see writeBackup) to `<path>.partial`, readable by its owner only (it holds
 * everything in a student's home, keys included), flushed to disk, then renamed to `path`
 * (replacing any file there). On any failure (disk full, engine error) the partial file is removed
 * and the error rethrown: `path` then holds what it held before.
 */
export async function writeBackupFile(path: string, options: Omit<WriteBackupOptions, 'out'>): Promise<BackupManifest> {
  const partial = `${path}.partial`;
  const handle = await open(partial, 'w', 0o600);
  try {
    const manifest = await writeBackup({ ...options, out: handle.createWriteStream({ flush: true }) });
    await rename(partial, path);
    return manifest;
  } catch (error) {
    // The stream closes the handle when it ends or fails; one it never used is closed here.
    await handle.close().catch(() => undefined);
    await rm(partial, { force: true });
    throw error;
  }
}

/** The backup entry of an entry of the engine's archive of `volume`; undefined for FIFOs and devices. */
function volumeEntry(volume: string, header: tar.Header): BackupEntry | undefined {
  const entry = backupEntry(header, VOLUME_ARCHIVE_ROOT);
  switch (entry) {
    case 'kind':
      return undefined;
    case 'outside':
      throw new Error(`The engine's archive of volume ${volume} holds an unexpected entry: ${header.name}.`);
    case 'owner':
      throw ValidationError(
        'backup_unsupported_owner',
        `${header.name} in volume ${volume} is owned by ${header.uid}:${header.gid}, above the ${MAX_OWNER_ID} a backup can record.`,
      );
    default:
      return entry;
  }
}

/** U+FFFD, which stands for every byte that is not UTF-8 in a name decoded from the engine's archive. */
const REPLACEMENT = '\uFFFD';

/**
 * Why `entry` would not come back as it is, or undefined. The archive's names and link targets reach
 * us decoded as UTF-8 (tar-stream's only encoding for the PAX records the engine writes them in),
 * with U+FFFD for every byte that is not: such a file would come back under another name. A name
 * that holds U+FFFD itself cannot be told apart, and is refused with them.
 */
function unencodable(entry: BackupEntry): string | undefined {
  if (entry.path.includes(REPLACEMENT)) return `${shownPath(entry.path)} has a name that is not UTF-8 text`;
  if (entry.type === 'symlink' && entry.linkname.includes(REPLACEMENT)) return `${shownPath(entry.path)} is a symbolic link to a target that is not UTF-8 text`;
  return undefined;
}
