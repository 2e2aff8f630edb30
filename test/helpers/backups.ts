import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { BACKUP_FORMAT, ContentHash, MANIFEST_NAME, type BackupEntry } from '../../src/backup/backup-format.ts';

/** One entry of a crafted backup: a BackupEntry with defaults (a 0644 file of 1000:1000 at a fixed time), and its data. */
export type CraftedEntry = Partial<BackupEntry> & Pick<BackupEntry, 'path' | 'type'> & { data?: Buffer };

/**
 * Writes a backup file at `file` made by hand from `entries`, with a manifest that matches them
 * (checksum and counts), as a forger who knows the format would: only what it builds is wrong.
 */
export async function craftBackup(file: string, entries: CraftedEntry[], about: { slug: string; workspaceId: string; image: string }): Promise<void> {
  const hash = new ContentHash();
  const pack = tar.pack();
  let files = 0;
  let bytes = 0;
  for (const { data = Buffer.alloc(0), ...given } of entries) {
    const entry: BackupEntry = {
      mode: 0o644,
      uid: 1000,
      gid: 1000,
      mtime: 1_700_000_000,
      linkname: '',
      ...given,
      size: given.type === 'file' ? data.length : 0,
    };
    hash.entry(entry);
    hash.data(data);
    if (entry.type === 'file') {
      files++;
      bytes += data.length;
    }
    const type = { file: 0o100000, directory: 0o040000, symlink: 0o120000, link: 0o100000 }[entry.type];
    pack.entry({ ...entry, name: entry.path, mode: type | entry.mode, mtime: new Date(entry.mtime * 1000) }, data);
  }
  const manifest = {
    format: BACKUP_FORMAT,
    ...about,
    ownerEmail: 'forger@school.test',
    created: new Date().toISOString(),
    files,
    bytes,
    sha256: hash.digest(),
  };
  pack.entry({ name: MANIFEST_NAME }, JSON.stringify(manifest));
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  writeFileSync(file, gzipSync(Buffer.concat(chunks)));
}

/** Crafted backups that build no tree a volume can hold, by what is wrong with them; each is refused as backup_not_ours. */
export const UNBUILDABLE: Record<string, CraftedEntry[]> = {
  'a home that is a regular file': [{ path: 'home', type: 'file', data: Buffer.from('not a directory\n') }],
  'a hard link through a symbolic link': [
    { path: 'home', type: 'directory', mode: 0o755 },
    { path: 'home/etc', type: 'symlink', linkname: '/etc' },
    { path: 'home/passwd', type: 'link', linkname: 'home/etc/passwd' },
  ],
  'a file under a symbolic link': [
    { path: 'home', type: 'directory', mode: 0o755 },
    { path: 'home/up', type: 'symlink', linkname: '..' },
    { path: 'home/up/planted', type: 'file', data: Buffer.from('x\n') },
  ],
  'a hard link to a file it does not hold': [
    { path: 'home', type: 'directory', mode: 0o755 },
    { path: 'home/broken', type: 'link', linkname: 'home/missing' },
  ],
  'a name longer than a file system holds': [
    { path: 'home', type: 'directory', mode: 0o755 },
    { path: `home/${'n'.repeat(256)}`, type: 'file', data: Buffer.from('x\n') },
  ],
};
