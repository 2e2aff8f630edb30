import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { VOLUME_ARCHIVE_ROOT, type WorkspaceRuntime } from '../docker/runtime.ts';
import { ConflictError, ValidationError } from '../errors.ts';
import { HOME_DIR, relativeName, tarHeader, type BackupManifest } from './backup-format.ts';
import { readBackup } from './read-backup.ts';
import { outcome, packEntry } from './streams.ts';
import { verifyBackup } from './verify-backup.ts';

export interface RestoreBackupOptions {
  runtime: WorkspaceRuntime;
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
  /** Called as files are written, with the bytes of file data so far and the backup's total (excluded files count in the total only). */
  onProgress?: (bytes: number, total: number) => void;
}

/**
 * Restores a backup file into a fresh staging volume, which the caller then swaps in for the
 * workspace's home volume: a failure at any point leaves the current volume as it was. Verifies the
 * whole file first (nothing is touched when it fails: see verifyBackup for its errors), then
 * streams its `home/` entries into the volume with their owners, modes and mtimes, leaving out
 * `exclude`d paths (and hard links to them), checking the file again as it goes. Resolves with the
 * manifest. Rejects with ConflictError `restore_target_exists` when the volume already exists,
 * ValidationError `invalid_exclude` for an exclude that is not a path inside home, and removes the
 * staging volume itself when anything fails once it may exist (the engine, the file changing since
 * it was verified).
 */
export async function restoreBackup({ runtime, path, volume, image, workspace, exclude = [], onProgress }: RestoreBackupOptions): Promise<BackupManifest> {
  const excluded = excludeMatcher(exclude);
  if (await runtime.volumeExists(volume)) {
    throw ConflictError('restore_target_exists', `Volume ${volume} already exists: a restore goes into a fresh staging volume.`);
  }
  const manifest = await verifyBackup(path);

  const pack = tar.pack();
  const body = new PassThrough();
  const packing = outcome(pipeline(pack, body));
  // The first thing to go wrong is the error reported; an engine failure stops the read at once.
  let failure: unknown;
  const abort = new AbortController();
  const importing = (async () => {
    const error = await outcome(runtime.importVolume(volume, workspace, image, body));
    if (!error) return;
    failure ??= error;
    abort.abort(error);
  })();
  try {
    let bytes = 0;
    const again = await readBackup(path, {
      signal: abort.signal,
      onEntry: (entry) => {
        if (excluded(entry.path) || (entry.type === 'link' && excluded(entry.linkname))) return undefined;
        const sink = packEntry(pack, tarHeader(entry, VOLUME_ARCHIVE_ROOT));
        return {
          write: async (chunk) => {
            await sink.write(chunk);
            bytes += chunk.length;
            onProgress?.(bytes, manifest.bytes);
          },
          end: () => sink.end(),
        };
      },
    });
    // Another valid backup put in its place since the verification.
    if (again.sha256 !== manifest.sha256) {
      throw ValidationError('backup_tampered', `The backup file ${path} changed while it was being restored.`);
    }
    pack.finalize();
    await importing;
    if (failure) throw failure;
    await packing;
    return manifest;
  } catch (error) {
    failure ??= error;
    pack.destroy(failure as Error);
    await Promise.all([importing, packing]);
    // A failed removal leaves a labelled volume of this control plane; the restore's own failure is what to report.
    await runtime.removeVolumeNamed(volume).catch(() => undefined);
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
