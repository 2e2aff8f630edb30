/**
 * What an import or a reset replaces in a home, and how an imported project's files go into it.
 * The home is the project (the starter is copied into its root, and a run builds what is there), so
 * "the project" is everything in the home but the account's own files: ACCOUNT_FILES.
 */
import { createReadStream } from 'node:fs';
import { lstat, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import type tar from 'tar-stream';
import { VOLUME_ARCHIVE_ROOT } from '../docker/runtime.ts';
import { ValidationError } from '../errors.ts';
import { HOME_DIR, shownPath, STUDENT_ID, tarHeader, TreeCheck, type BackupEntry } from '../backup/backup-format.ts';
import { HAND_OVER_EXCLUDES } from '../backup/hand-over-excludes.ts';
import { packEntry } from '../backup/streams.ts';

/**
 * The home's own files, which belong to the student's account and not to a project, by their
 * top-level names: Debian's shell start-up files, the editor's settings and state, caches (Gradle's
 * and the JDK's, slow or impossible to fetch again offline), and the credentials, identity and
 * histories a hand-over leaves behind (HAND_OVER_EXCLUDES). An import keeps them as they are, and an
 * imported project's files under these names are left out. The starter's `.gitignore` names the same.
 */
export const ACCOUNT_FILES: readonly string[] = Object.freeze([
  ...new Set([
    '.bashrc',
    '.bash_logout',
    '.profile',
    '.local',
    '.config',
    '.cache',
    '.gradle',
    '.m2',
    '.java',
    ...HAND_OVER_EXCLUDES.map((name) => name.split('/')[0]!),
  ]),
]);

/** Whether a path relative to the home (`a/b`) is one of the account's own files or under one. */
export const isAccountFile = (relative: string): boolean => ACCOUNT_FILES.includes(relative.split('/')[0]!);

/** What was put into the home: regular files and their bytes. */
export interface PackedProject {
  files: number;
  bytes: number;
}

/**
 * Adds the files under `root` (an imported project: the clone, or a folder of it) to `pack` as
 * entries of the home (`<VOLUME_ARCHIVE_ROOT>/<path>`), in name order, all the student's: folders
 * 0755, files 0644 or 0755 (executable as git keeps it), symbolic links as links, but only those
 * whose target stays inside `root` (a relative target that does not climb out of it). Account files
 * (isAccountFile) are left out. Nothing is followed: a link's target is never read. Calls `onBytes`
 * with the bytes of file data added so far. Throws 400 `import_link_outside` (naming the link and
 * its target), `import_name_unsupported` (a name that is not UTF-8, or too long for a home), and the
 * pack's failure.
 */
export async function packProject(root: string, pack: tar.Pack, onBytes: (bytes: number) => void): Promise<PackedProject> {
  const tree = new TreeCheck();
  tree.problem({ path: HOME_DIR, type: 'directory', mode: 0o755, uid: STUDENT_ID, gid: STUDENT_ID, mtime: 0, size: 0, linkname: '' });
  const packed: PackedProject = { files: 0, bytes: 0 };

  const add = async (entry: BackupEntry, file?: string) => {
    const problem = tree.problem(entry);
    if (problem) throw ValidationError('import_name_unsupported', `The project cannot go into a home: ${problem}.`);
    const sink = packEntry(pack, tarHeader(entry, VOLUME_ARCHIVE_ROOT));
    if (file) {
      for await (const chunk of createReadStream(file)) {
        await sink.write(chunk as Buffer);
        packed.bytes += (chunk as Buffer).length;
        onBytes(packed.bytes);
      }
      packed.files++;
    }
    await sink.end();
  };

  const walk = async (relative: string) => {
    const names = await readdir(path.join(root, relative), { encoding: 'buffer' });
    for (const raw of names.toSorted((a, b) => Buffer.compare(a, b))) {
      const name = raw.toString('utf8');
      const child = relative === '' ? name : `${relative}/${name}`;
      if (!Buffer.from(name, 'utf8').equals(raw)) {
        throw ValidationError(
          'import_name_unsupported',
          `The project holds a name that is not UTF-8 (in ${shownPath(relative || '.')}): rename it in the repository.`,
        );
      }
      if (relative === '' && isAccountFile(name)) continue;
      const file = path.join(root, child);
      const info = await lstat(file);
      const entry = { path: `${HOME_DIR}/${child}`, uid: STUDENT_ID, gid: STUDENT_ID, mtime: Math.floor(info.mtimeMs / 1000), size: 0, linkname: '' };
      if (info.isDirectory()) {
        await add({ ...entry, type: 'directory', mode: 0o755 });
        await walk(child);
      } else if (info.isSymbolicLink()) {
        const target = await readlink(file);
        const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(child), target));
        if (path.posix.isAbsolute(target) || resolved === '..' || resolved.startsWith('../')) {
          throw ValidationError(
            'import_link_outside',
            `The project holds a symbolic link, ${shownPath(child)}, to ${shownPath(target)}, outside the project: nothing was imported (remove the link, or import a folder without it).`,
          );
        }
        await add({ ...entry, type: 'symlink', mode: 0o777, linkname: target });
      } else if (info.isFile()) {
        await add({ ...entry, type: 'file', mode: info.mode & 0o111 ? 0o755 : 0o644, size: info.size }, file);
      } else {
        throw ValidationError('import_name_unsupported', `The project holds ${shownPath(child)}, which is neither a file, a folder nor a link.`);
      }
    }
  };
  await walk('');
  return packed;
}
