import type { BackupManifest } from './backup-format.ts';
import { readBackup } from './read-backup.ts';

/**
 * Reads the whole backup file at `path`, recomputes its checksum and counts and compares them with
 * its manifest, which it returns. Touches nothing but the file. Rejects with a ValidationError of
 * code `backup_truncated`, `backup_tampered` or `backup_not_ours` (see readBackup), or NotFoundError
 * `backup_not_found`.
 */
export function verifyBackup(path: string): Promise<BackupManifest> {
  return readBackup(path);
}
