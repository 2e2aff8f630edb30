import { watch, type FSWatcher } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { AllowlistFormatError, maySignIn, serviceAdmins } from '../src/allowlist/allowlist.ts';
import type { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import type { ChangeFeed } from '../src/db/changes.ts';
import type { Logger } from '../src/log.ts';

/** How many emails' verdicts isAllowed keeps between reloads (a class is tens to hundreds). */
const VERDICTS_KEPT = 10_000;

export interface AllowlistWatcherOptions {
  file: AllowlistFile;
  /** The `control.auth` logger. */
  log: Logger;
  /** Emails always admitted whatever the file says (SERVICE_ADMIN_EMAIL). */
  implicit: readonly string[];
  /** Quiet time after a file event before reloading, so that a burst of events is one reload. */
  debounceMs?: number;
  /**
   * The change feed: an edit of the list through the store on any replica (an `allowlist` change)
   * reloads the file too, and so does a reconnect of the feed (an announcement may have been missed).
   */
  changes?: ChangeFeed;
}

/**
 * Keeps the allowlist of the running control plane in step with its file: loads it at start, then
 * reloads it after every event of the file's name in its directory (Node's own `fs.watch` on the
 * directory, inotify on Linux: an atomic rename replaces the file's inode, and a watch of the file
 * would stay on the old one). Every event counts, whatever the file's times say: chokidar, used
 * before, compared modification times and dropped an event that came within 5 ms of another, so a
 * replacement written within the same tick of the clock as the file before it was never loaded (a
 * script adding a class's students one by one lost its last edit). A malformed file keeps the last
 * good list and logs an error naming the problem; a missing file is an empty list (everyone blocked
 * but SERVICE_ADMIN_EMAIL) with a warning. Edits apply well within a second, and every reload is
 * announced to the listeners of `onChange` (the proxy ends the open WebSockets of those the new list
 * no longer admits). An edit through the store on another replica is announced by the change feed
 * as well: a file on a network filesystem (replicas on several hosts) reports no event for it.
 */
export class AllowlistWatcher {
  private readonly file: AllowlistFile;
  private readonly log: Logger;
  private readonly implicit: readonly string[];
  private readonly debounceMs: number;
  private readonly target: string;
  private list: readonly string[] = [];
  /**
   * isAllowed's answers for the current list, by email: the proxy asks for every request it
   * forwards, and the rule's checks of the email (IDNA, every entry) cost more than the forwarding.
   * Emptied at every reload, and when it holds more than VERDICTS_KEPT emails.
   */
  private readonly verdicts = new Map<string, boolean>();
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private reloading: Promise<void> | undefined;
  private reloadAgain = false;
  private stopped = false;
  private readonly listeners = new Set<() => void>();
  private readonly changes: ChangeFeed | undefined;
  private unsubscribe: (() => void)[] = [];

  constructor(options: AllowlistWatcherOptions) {
    this.changes = options.changes;
    this.file = options.file;
    this.log = options.log;
    this.implicit = serviceAdmins(options.implicit);
    this.debounceMs = options.debounceMs ?? 50;
    this.target = path.resolve(options.file.path);
  }

  /** Starts watching the file's directory (created when missing) and loads the list once; resolves when both are done. */
  async start(): Promise<void> {
    const directory = path.dirname(this.target);
    await mkdir(directory, { recursive: true });
    this.stopped = false;
    const name = path.basename(this.target);
    // Only the file's own name: temp files and the `.lock` directory beside it are noise. (A
    // platform that names no file in its events gets a reload for each.)
    const watcher = watch(directory, { persistent: false }, (_event, entry) => {
      if (entry === null || entry === name) this.schedule();
    });
    this.watcher = watcher;
    watcher.on('error', (error) => this.log.error({ error, path: this.file.path }, 'allowlist watcher failed'));
    if (this.changes) {
      this.unsubscribe = [this.changes.subscribe((change) => change.kind === 'allowlist' && this.schedule()), this.changes.onListening(() => this.schedule())];
    }
    // Loaded after the watch is in place, so that an edit made meanwhile is not missed.
    await this.reload();
  }

  /** Stops watching; the last list stays in force. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const unsubscribe of this.unsubscribe.splice(0)) unsubscribe();
    clearTimeout(this.timer);
    this.watcher?.close();
    this.watcher = undefined;
    await this.reloading;
  }

  /** Whether `email` may sign in now: the one rule (maySignIn) over SERVICE_ADMIN_EMAIL and the current list. */
  isAllowed(email: string): boolean {
    let verdict = this.verdicts.get(email);
    if (verdict === undefined) {
      verdict = maySignIn(email, { admins: this.implicit, entries: this.list });
      if (this.verdicts.size >= VERDICTS_KEPT) this.verdicts.clear();
      this.verdicts.set(email, verdict);
    }
    return verdict;
  }

  /** Calls `listener` after every reload of the file (whether or not the list changed); returns the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The current list (the last good one), sorted. */
  entries(): readonly string[] {
    return this.list;
  }

  /** Reloads `debounceMs` after the last of a burst of events. */
  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.reload(), this.debounceMs);
  }

  /** Reads the file now; one read at a time, and one more when asked again meanwhile (resolving after it). */
  reload(): Promise<void> {
    if (this.reloading) {
      this.reloadAgain = true;
      return this.reloading;
    }
    this.reloading = (async () => {
      do {
        this.reloadAgain = false;
        await this.load();
      } while (this.reloadAgain && !this.stopped);
    })().finally(() => (this.reloading = undefined));
    return this.reloading;
  }

  /** One read of the file, applied and logged under the rules of the class comment. */
  private async load(): Promise<void> {
    const where = { path: this.file.path };
    let entries: string[] | null;
    try {
      entries = await this.file.readIfExists();
    } catch (error) {
      if (error instanceof AllowlistFormatError) {
        this.log.error(
          { ...where, problem: error.message, entries: this.list.length },
          `allowlist file is malformed, keeping the last good list: ${error.message}`,
        );
      } else {
        this.log.error({ ...where, error, entries: this.list.length }, 'allowlist file could not be read, keeping the last good list');
      }
      return;
    }
    this.verdicts.clear();
    if (entries === null) {
      this.list = [];
      this.log.warning(where, 'allowlist file missing: everyone is blocked except SERVICE_ADMIN_EMAIL');
    } else {
      this.list = Object.freeze(entries);
      this.log.info({ ...where, entries: entries.length }, `allowlist loaded: ${entries.length} ${entries.length === 1 ? 'entry' : 'entries'}`);
    }
    this.announce();
  }

  /** Tells every listener of a reload; one that throws is logged and the others still hear it. */
  private announce(): void {
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (error) {
        this.log.error({ error }, 'an allowlist listener failed');
      }
    }
  }
}
