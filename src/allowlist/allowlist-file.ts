import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import { UnavailableError } from '../errors.ts';
import { AllowlistFormatError, formatAllowlist, normalizeEntry, parseAllowlist } from './allowlist.ts';

/**
 * The cross-process lock: a `<file>.lock` directory beside the file (`realpath: false`, so that the
 * file need not exist yet). Retried with a short randomised backoff for up to about ten seconds,
 * which is also when a lock left by a crashed process counts as stale and is taken over.
 */
const LOCK_OPTIONS = {
  realpath: false,
  stale: 10_000,
  retries: { retries: 50, factor: 1.3, minTimeout: 10, maxTimeout: 200, randomize: true },
} as const;

/** Edits of one file made by this process, chained, so that they do not contend for the lock among themselves. */
const queues = new Map<string, Promise<void>>();

/** Runs `task` after every earlier task queued under `key` has settled. */
function serialised<T>(key: string, task: () => Promise<T>): Promise<T> {
  const result = (queues.get(key) ?? Promise.resolve()).then(task);
  const settled = result.then(
    () => undefined,
    () => undefined,
  );
  queues.set(key, settled);
  void settled.then(() => queues.get(key) === settled && queues.delete(key));
  return result;
}

const errorCode = (error: unknown): unknown => (error as NodeJS.ErrnoException | null)?.code;

/**
 * The allowlist file (format: see allowlist.ts). Edits are read-modify-write under a cross-process
 * lock and replace the file atomically (a temp file in the same directory, fsynced, renamed over
 * it), so a reader (the watcher, another process) only ever sees a whole file, and concurrent
 * edits from the server, the CLI and other processes are never lost.
 */
export class AllowlistFile {
  /** The file's path as given. */
  readonly path: string;

  constructor(filePath: string) {
    this.path = filePath;
  }

  /** The allowlist file of a data directory (DATA_DIR): `allowlist.json` in it. */
  static in(dataDir: string): AllowlistFile {
    return new AllowlistFile(path.join(dataDir, 'allowlist.json'));
  }

  /** The entries of the file; [] when it does not exist; throws AllowlistFormatError (naming the file and the problem) when it is malformed. */
  async read(): Promise<string[]> {
    return (await this.readIfExists()) ?? [];
  }

  /** Like read(), but null when the file does not exist (so the watcher can tell a missing file from an empty list). */
  async readIfExists(): Promise<string[] | null> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return null;
      throw error;
    }
    try {
      // Editors on some systems save with a byte-order mark, which JSON.parse refuses.
      return parseAllowlist(text.replace(/^\uFEFF/, ''));
    } catch (error) {
      if (error instanceof AllowlistFormatError) throw new AllowlistFormatError(`${this.path}: ${error.message}`);
      throw error;
    }
  }

  /** Normalises `entry` (ValidationError when invalid) and adds it; added is false when it was already there (the file is then not rewritten). */
  async add(entry: string): Promise<{ entry: string; added: boolean }> {
    const normalized = normalizeEntry(entry);
    const changed = await this.edit((entries) => (entries.includes(normalized) ? undefined : [...entries, normalized]));
    return { entry: normalized, added: changed };
  }

  /** Normalises `entry` (ValidationError when invalid) and removes it; removed is false when it was not there (the file is then not rewritten). */
  async remove(entry: string): Promise<{ entry: string; removed: boolean }> {
    const normalized = normalizeEntry(entry);
    const changed = await this.edit((entries) => (entries.includes(normalized) ? entries.filter((item) => item !== normalized) : undefined));
    return { entry: normalized, removed: changed };
  }

  /**
   * Applies `change` (undefined: nothing to change) to the current entries under the lock and
   * writes the result; returns whether it wrote. A malformed file is left exactly as it is.
   */
  private edit(change: (entries: string[]) => string[] | undefined): Promise<boolean> {
    return serialised(path.resolve(this.path), async () => {
      await mkdir(path.dirname(this.path), { recursive: true });
      let compromised: Error | undefined;
      let release: () => Promise<void>;
      try {
        // Without onCompromised, a lock lost (e.g. to a stale takeover) throws from a timer and kills the process.
        release = await lockfile.lock(this.path, { ...LOCK_OPTIONS, onCompromised: (error) => (compromised = error) });
      } catch (error) {
        if (errorCode(error) === 'ELOCKED')
          throw UnavailableError('allowlist_locked', `The allowlist file ${this.path} is being edited by another process; try again.`, 1);
        throw error;
      }
      try {
        let current: string[] | null;
        try {
          current = await this.readIfExists();
        } catch (error) {
          if (error instanceof AllowlistFormatError) {
            throw new AllowlistFormatError(`cannot edit the allowlist, the file is malformed (left as it is; fix or remove it first): ${error.message}`);
          }
          throw error;
        }
        const next = change(current ?? []);
        if (next === undefined) return false;
        await this.replace(formatAllowlist(next), () => compromised);
        return true;
      } finally {
        // A release that fails leaves a lock directory that turns stale (and is taken over) after LOCK_OPTIONS.stale.
        await release().catch(() => undefined);
      }
    });
  }

  /** Writes `text` to a temp file beside the target (mode 0644), fsyncs it and renames it over the target, unless the lock was lost meanwhile. */
  private async replace(text: string, lostLock: () => Error | undefined): Promise<void> {
    const directory = path.dirname(this.path);
    const temp = path.join(directory, `.${path.basename(this.path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      const handle = await open(temp, 'wx', 0o644);
      try {
        // The mode of open() is masked by the umask; the file must be readable by other operators' tools.
        await handle.chmod(0o644);
        await handle.writeFile(text, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      const lost = lostLock();
      if (lost !== undefined) throw new Error(`lost the allowlist lock while editing ${this.path}: ${lost.message}`);
      await rename(temp, this.path);
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw error;
    }
    await syncDirectory(directory);
  }
}

/** Fsyncs a directory so that a rename in it survives a crash; a platform that cannot do it is left as it is. */
async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, 'r').catch(() => undefined);
  if (handle === undefined) return;
  try {
    await handle.sync();
  } catch {
    // Not supported everywhere (EINVAL, EISDIR); the file's own fsync already happened.
  } finally {
    await handle.close();
  }
}
