/**
 * The workspace backup file: a gzip'd tar. Its content entries are the home volume's files under
 * `home/` (the `home/` entry itself carries the volume root's owner and mode), in the order the
 * engine archived them; its LAST entry is `manifest.json`, which can only be known once everything
 * before it has streamed past. Only regular files, directories, symbolic links and hard links are
 * carried; owners and groups are numeric (no user or group names).
 */
import { createHash, type Hash } from 'node:crypto';
import type tar from 'tar-stream';
import { HOME_PATH } from '../docker/runtime.ts';
import type { PackHeader } from './streams.ts';

/** The format number in every manifest this version writes, and the only one it reads. */
export const BACKUP_FORMAT = 1;

/** The name of the manifest entry, the last of the archive. */
export const MANIFEST_NAME = 'manifest.json';

/** The top directory of the content entries: the home volume's root. */
export const HOME_DIR = 'home';

/** What the manifest says about a backup. */
export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  slug: string;
  workspaceId: string;
  ownerEmail: string;
  /** When the backup started (ISO 8601). */
  created: string;
  /** The workspace image the backup was read through (nothing ran from it). */
  image: string;
  /** How many regular files it holds. */
  files: number;
  /** Their total size in bytes. */
  bytes: number;
  /** Hex SHA-256 of the canonical encoding of every content entry, in order (see ContentHash). */
  sha256: string;
}

/** The kinds of entry a backup carries. */
export type BackupEntryType = 'file' | 'directory' | 'symlink' | 'link';

/** One content entry, as it is hashed and written. */
export interface BackupEntry {
  /** `home` for the volume's root, `home/<path>` for what is in it; never a trailing slash. */
  path: string;
  type: BackupEntryType;
  /** Permission bits only (07777: setuid, setgid and sticky included). */
  mode: number;
  uid: number;
  gid: number;
  /** Modification time, whole seconds since the epoch. */
  mtime: number;
  /** Bytes of data: a regular file's size, 0 for every other type. */
  size: number;
  /** A symbolic link's target as stored; a hard link's target (`home/<path>`); '' otherwise. */
  linkname: string;
}

/**
 * The student: uid and gid of the workspace image's user. A restore gives every file to them and
 * keeps no setuid or setgid bit, whatever the backup says: a crafted backup cannot plant a
 * root-owned setuid program in a home.
 */
export const STUDENT_ID = 1000;

/** The mode bits a restore never sets: setuid and setgid (the sticky bit stays). */
export const PRIVILEGE_BITS = 0o6000;

/** The largest uid or gid a tar header holds here (six octal digits). */
export const MAX_OWNER_ID = 0o777777;

/** The latest mtime a tar header holds here (a signed 32-bit count of seconds). */
const MAX_MTIME = 2 ** 31 - 1;

/** Why a tar entry cannot be a backup entry: a kind backups do not carry (a FIFO, a device), a name or hard link target not safely inside the top directory, an owner id too large to record. */
export type EntryProblem = 'kind' | 'outside' | 'owner';

/**
 * The backup entry a tar header describes, its name (and a hard link's target) rebased from top
 * directory `root` onto `home/`, or why it cannot be one. Modes keep their permission bits only;
 * mtimes before 1970 or after 2038 are clamped to those years.
 */
export function backupEntry(header: tar.Header, root: string): BackupEntry | EntryProblem {
  const type = entryType(header.type);
  if (!type) return 'kind';
  const relative = relativeName(header.name, root);
  if (relative === undefined) return 'outside';
  let linkname = type === 'symlink' || type === 'link' ? (header.linkname ?? '') : '';
  if (type === 'link') {
    const target = relativeName(linkname, root);
    if (!target) return 'outside';
    linkname = underRoot(target, HOME_DIR);
  }
  const uid = header.uid ?? 0;
  const gid = header.gid ?? 0;
  if (uid > MAX_OWNER_ID || gid > MAX_OWNER_ID) return 'owner';
  return {
    path: underRoot(relative, HOME_DIR),
    type,
    mode: (header.mode ?? 0) & 0o7777,
    uid,
    gid,
    mtime: Math.min(MAX_MTIME, Math.max(0, Math.floor((header.mtime?.getTime() ?? 0) / 1000))),
    size: type === 'file' ? (header.size ?? 0) : 0,
    linkname,
  };
}

/** The backup entry type of a tar entry type; undefined for the kinds backups do not carry (FIFOs, devices). */
function entryType(type: tar.Header['type'] | undefined): BackupEntryType | undefined {
  switch (type) {
    case 'file':
    case 'contiguous-file':
      return 'file';
    case 'directory':
    case 'symlink':
    case 'link':
      return type;
    case 'fifo':
    case 'character-device':
    case 'block-device':
    case undefined:
      return undefined;
  }
}

/**
 * The path of tar entry name `name` below top directory `root`: '' for `root` itself, undefined
 * when the name is not safely inside it (another top directory, an absolute path, or an empty,
 * `.` or `..` segment).
 */
export function relativeName(name: string, root: string): string | undefined {
  const trimmed = name.endsWith('/') ? name.slice(0, -1) : name;
  if (trimmed === root) return '';
  if (!trimmed.startsWith(`${root}/`)) return undefined;
  const rest = trimmed.slice(root.length + 1);
  return rest.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..') ? rest : undefined;
}

/** `relative` (from relativeName) below top directory `root`. */
function underRoot(relative: string, root: string): string {
  return relative === '' ? root : `${root}/${relative}`;
}

// tar-stream replaces a zero mode with its default (0644 or 0755) and masks the type bits away when
// it encodes, so giving it the type bits keeps a mode of 000 as 000.
const TYPE_BITS: Record<BackupEntryType, number> = { file: 0o100000, directory: 0o040000, symlink: 0o120000, link: 0o100000 };

/** The tar header of `entry`, its `home/` names rebased onto top directory `root`. */
export function tarHeader(entry: BackupEntry, root: string): PackHeader {
  const rebase = (name: string) => underRoot(relativeName(name, HOME_DIR) ?? '', root);
  return {
    name: rebase(entry.path),
    type: entry.type,
    mode: TYPE_BITS[entry.type] | entry.mode,
    uid: entry.uid,
    gid: entry.gid,
    mtime: new Date(entry.mtime * 1000),
    size: entry.size,
    linkname: entry.type === 'link' ? rebase(entry.linkname) : entry.linkname,
  };
}

/**
 * The running SHA-256 of a backup's content entries. Canonical encoding, entry after entry in
 * archive order: the UTF-8 JSON array `[path, type, mode, uid, gid, mtime, size, linkname]` (the
 * fields of BackupEntry, mode as a number of its permission bits), a newline, then the entry's
 * `size` bytes of data. A renamed, re-owned, re-moded, retargeted, reordered, added or removed entry
 * changes it, as does any changed byte of data.
 */
export class ContentHash {
  private readonly hash: Hash = createHash('sha256');

  /** Starts an entry: hashes its header record. */
  entry(entry: BackupEntry): void {
    const record = [entry.path, entry.type, entry.mode, entry.uid, entry.gid, entry.mtime, entry.size, entry.linkname];
    this.hash.update(`${JSON.stringify(record)}\n`);
  }

  /** Hashes the next chunk of the current entry's data. */
  data(chunk: Buffer): void {
    this.hash.update(chunk);
  }

  /** The hex digest; call once, after the last entry. */
  digest(): string {
    return this.hash.digest('hex');
  }
}

/** NAME_MAX: the longest name (one path segment), in bytes, a volume's file system holds. */
const MAX_NAME_BYTES = 255;

/**
 * PATH_MAX less its terminating NUL: the longest path, in bytes, that a workspace container can name
 * (`/home/student/...`, HOME_PATH), and so the longest the engine's archive API reads and writes
 * through the same mount point (it leaves deeper files out of an archive without a word); also the
 * longest target a symbolic link holds.
 */
const MAX_PATH_BYTES = 4095;

/** The bytes of backup path `path` (`home/...`) as a workspace container names it (`/home/student/...`). */
const containerPathBytes = (path: string) => Buffer.byteLength(path) - HOME_DIR.length + Buffer.byteLength(HOME_PATH);

/** A path as a message shows it: quoted (a name may hold any character), its middle left out when it is long. */
export function shownPath(path: string): string {
  return JSON.stringify(path.length > 120 ? `${path.slice(0, 60)}…${path.slice(-60)}` : path);
}

/**
 * What a backup's content entries may build, checked in archive order (the order the engine writes
 * a volume in): `home` first, and a directory; every other entry once, inside a directory that came
 * before it (never under a file or a symbolic link, which the engine would refuse to write into or
 * follow); a hard link only to a regular file or a symbolic link that came before it (a hard link to
 * a symbolic link is one more name of the link itself, never followed); names, paths and link
 * targets a workspace holds (MAX_NAME_BYTES, MAX_PATH_BYTES as the container names them). Holds
 * every path seen. Reading a backup checks it, and so does writing one, so that a backup is never
 * written that its restore would refuse.
 */
export class TreeCheck {
  private readonly kinds = new Map<string, BackupEntryType>();

  /** Why `entry` cannot come next (a phrase for "it is not a workspace backup: ..."), or undefined when it can; records it. */
  problem(entry: BackupEntry): string | undefined {
    if (this.kinds.size === 0 && (entry.path !== HOME_DIR || entry.type !== 'directory')) return `its first entry is not the ${HOME_DIR}/ directory`;
    const path = shownPath(entry.path);
    if (entry.path.split('/').some((name) => Buffer.byteLength(name) > MAX_NAME_BYTES)) return `${path} has a name longer than ${MAX_NAME_BYTES} bytes`;
    if (containerPathBytes(entry.path) > MAX_PATH_BYTES) return `${path} is longer than ${MAX_PATH_BYTES} bytes as ${HOME_PATH}/…`;
    if (entry.type === 'symlink' && Buffer.byteLength(entry.linkname) > MAX_PATH_BYTES)
      return `${path} is a symbolic link to a target longer than ${MAX_PATH_BYTES} bytes`;
    if (this.kinds.has(entry.path)) return `it holds ${path} twice`;
    if (entry.path !== HOME_DIR && this.kinds.get(entry.path.slice(0, entry.path.lastIndexOf('/'))) !== 'directory') {
      return `${path} is not inside a directory that comes before it`;
    }
    if (entry.type === 'link' && !LINKABLE.has(this.kinds.get(entry.linkname))) {
      return `${path} is a hard link to ${shownPath(entry.linkname)}, which is not a file or symbolic link before it`;
    }
    this.kinds.set(entry.path, entry.type);
    return undefined;
  }
}

/** What a hard link in a backup may name: one more name of a regular file or of a symbolic link (never a directory, never a path through a link). */
const LINKABLE = new Set<BackupEntryType | undefined>(['file', 'symlink']);
