import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { VOLUME_ARCHIVE_ROOT, type VolumeArchives } from '../docker/runtime.ts';
import { ConflictError, ValidationError } from '../errors.ts';
import { HOME_DIR, PRIVILEGE_BITS, relativeName, STUDENT_ID, tarHeader, type BackupManifest } from './backup-format.ts';
import { readBackup } from './read-backup.ts';
import { outcome, packEntry } from './streams.ts';

export interface RestoreBackupOptions {
  runtime: VolumeArchives;
  /** The backup file. */
  path: string;
  /** A staging volume that does not exist yet: restoreBackup creates it, and removes it again when the restore fails. */
  volume: string;
  /** The workspace image, through which the volume is written (nothing runs from it). */
  image: string;
  /** The workspace the files go to: the staging volume and the helper container carry its labels. */
  workspace: { workspaceId: string; slug: string };
  /** Paths relative to the home directory left out, each with everything under it (HAND_OVER_EXCLUDES for another workspace). */
  exclude?: readonly string[];
  /** Whether a path relative to the home directory is kept; the rest is left out (an import keeps the account's files only). Default: all. */
  keep?: (relative: string) => boolean;
  /**
   * Adds entries of its own to the archive (under VOLUME_ARCHIVE_ROOT), after the backup's: an
   * imported project's files. Its failure fails the restore.
   */
  append?: (pack: tar.Pack) => Promise<void>;
  /** Called as files are written, with the bytes of file data written so far (excluded files do not count). */
  onProgress?: (bytes: number) => void;
  /**
   * The volume's name was just made up (a random suffix), so it is not looked for first: a home
   * moved off a lost swarm node, where a node that does not answer could not say it has none.
   */
  newName?: boolean;
}

/**
 * Restores a backup file into a fresh staging volume, which the caller then swaps in for the
 * workspace's home volume: a failure at any point leaves the current volume as it was. Reads the
 * file once, checking it as it goes (readBackup: names and kinds of entries, and at the end the
 * checksum and counts of its manifest), and streams its `home/` entries into the staging volume
 * with their modes (less setuid and setgid) and mtimes, every one owned by the student
 * (STUDENT_ID), leaving out `exclude`d paths and those `keep` does not keep (and hard links to them),
 * then what `append` adds. Resolves with the manifest. Rejects with ConflictError `restore_target_exists` when the volume
 * already exists, ValidationError `invalid_exclude` for an exclude that is not a path inside home,
 * readBackup's errors for a file that is truncated, tampered or not ours, and the engine's; the
 * staging volume is made at the first entry, so a file refused before it creates nothing, and one
 * refused later (or an engine failure) has its staging volume removed before the rejection.
 */
export async function restoreBackup({
  runtime,
  path,
  volume,
  image,
  workspace,
  exclude = [],
  keep = () => true,
  append,
  onProgress,
  newName = false,
}: RestoreBackupOptions): Promise<BackupManifest> {
  const listed = excludeMatcher(exclude);
  const excluded = (name: string) => {
    const relative = relativeName(name, HOME_DIR);
    return listed(name) || (!!relative && !keep(relative));
  };
  if (!newName && (await runtime.volumeExists(volume))) {
    throw ConflictError('restore_target_exists', `Volume ${volume} already exists: a restore goes into a fresh staging volume.`);
  }

  const pack = tar.pack();
  const body = new PassThrough();
  const packing = outcome(pipeline(pack, body));
  // The first thing to go wrong is the error reported; an engine failure stops the read at once.
  let failure: unknown;
  const abort = new AbortController();
  // Started by the first entry, so that a file refused at its first bytes makes no volume.
  let importing: Promise<void> | undefined;
  const startImport = () =>
    (importing ??= (async () => {
      const error = await outcome(runtime.importVolume(volume, workspace, image, body));
      if (!error) return;
      failure ??= error;
      abort.abort(error);
    })());
  try {
    let bytes = 0;
    const manifest = await readBackup(path, {
      signal: abort.signal,
      onEntry: (entry) => {
        void startImport();
        if (excluded(entry.path) || (entry.type === 'link' && excluded(entry.linkname))) return undefined;
        const header = tarHeader(entry, VOLUME_ARCHIVE_ROOT);
        const sink = packEntry(pack, { ...header, uid: STUDENT_ID, gid: STUDENT_ID, mode: header.mode! & ~PRIVILEGE_BITS });
        return {
          write: async (chunk) => {
            await sink.write(chunk);
            bytes += chunk.length;
            onProgress?.(bytes);
          },
          end: () => sink.end(),
        };
      },
    });
    await append?.(pack);
    pack.finalize();
    await startImport();
    if (failure) throw failure;
    await packing;
    return manifest;
  } catch (error) {
    failure ??= error;
    pack.destroy(failure as Error);
    await Promise.all([importing, packing]);
    // A failed removal leaves a labelled volume of this control plane; the restore's own failure is what to report.
    if (importing) await runtime.removeVolumeNamed(volume).catch(() => undefined);
    throw failure;
  }
}

/** Whether a backup path (`home/...`) falls under one of `exclude`; throws `invalid_exclude` for an exclude that is not a path inside home. */
function excludeMatcher(exclude: readonly string[]): (path: string) => boolean {
  const paths = exclude.map((candidate) => {
    const relative = relativeName(`${HOME_DIR}/${candidate}`, HOME_DIR);
    if (!relative) throw ValidationError('invalid_exclude', `The exclude "${candidate}" is not a path inside the home directory.`);
    return relative;
  });
  return (path) => {
    const relative = relativeName(path, HOME_DIR);
    return !!relative && paths.some((excluded) => relative === excluded || relative.startsWith(`${excluded}/`));
  };
}
