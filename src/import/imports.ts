/**
 * Replacing a workspace's project, for its student: with the image's starter (a reset), or with a
 * team's git repository (an import: checked, cloned on the control plane's host, copied in). Both
 * back the whole home up first and swap it in one transaction, so nothing is ever lost and a
 * failure leaves the home as it was. See docs/students.md ("Reset and import") and docs/security.md
 * ("Importing a team's project").
 */
import { randomUUID } from 'node:crypto';
import { readFile, realpath, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Backups, ReplacedProject } from '../backup/backups.ts';
import type { ImportLimits } from '../config.ts';
import { AppError, ConflictError, NotFoundError, TooManyError, UnavailableError, ValidationError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { Actor } from '../store/audit.ts';
import type { ImportRecord, ImportRequest } from '../store/imports.ts';
import type { SurfaceStore } from '../store/index.ts';
import { overLimit } from '../store/rate-limits.ts';
import type { WorkspaceRecord } from '../store/workspaces.ts';
import type { ImportPhase } from '../wire/vocabulary.ts';
import { checkUrl, resolveChecked, type AddressRules } from './address.ts';
import { cloneRepository } from './clone.ts';
import { discover } from './discover.ts';
import { packProject, type PackedProject } from './project-files.ts';

/** How many resets and imports one workspace's student may ask for in REPLACEMENT_WINDOW_SECONDS (each makes a backup and a clone). */
export const REPLACEMENTS_PER_WINDOW = 5;
export const REPLACEMENT_WINDOW_SECONDS = 600;

/** What refuses an import, or a lesson from git, before anything is fetched: its address, branch and subfolder, its host, and how many run. */
export const IMPORT_REQUEST_ERRORS = [
  'import_url_invalid',
  'import_not_https',
  'import_branch_invalid',
  'import_subfolder_invalid',
  'import_host_unknown',
  'import_host_refused',
  'import_address_refused',
  'imports_busy',
] as const;

/**
 * How fetching a project can fail (`withProject`: discovery, the clone, its folder): a student's
 * import says it in its status (GET .../workspace/import), a lesson from git answers it.
 */
export const IMPORT_FETCH_ERRORS = [
  'import_timeout',
  'import_redirect_invalid',
  'import_not_git',
  'import_empty',
  'import_repository_not_found',
  'import_branch_not_found',
  'import_subfolder_not_found',
  'import_subfolder_outside',
  'import_too_large',
  'import_unreachable',
  'import_unavailable',
] as const;

/** How many imports one replica runs at once (each a git, up to IMPORT_MAX_SIZE on disk); past it a new one is refused for a while. */
export const IMPORTS_AT_ONCE = 4;

/** How often a running import tells the database it is alive (IMPORT_STALE_SECONDS is the store's bound). */
const HEARTBEAT_MS = 15_000;

/** The most often an import's bytes are written while a phase goes on. */
const PROGRESS_MS = 1000;

/** A branch name git takes (its check-ref-format rules, in short), never an option. */
const BRANCH = /^(?!-)(?!.*\.\.)(?!.*\/\/)(?!.*@\{)(?!.*\.lock$)(?!\/)(?!.*\/$)(?!.*\.$)[^\p{Cc}\s~^:?*[\\]{1,200}$/u;

export interface ImportsOptions {
  store: SurfaceStore;
  backups: Backups;
  limits: ImportLimits;
  /** DATA_DIR: clones are made under `imports/` there, and removed after. */
  dataDir: string;
  /** `control.imports`. */
  log: Logger;
  metrics: Metrics;
}

/** Resets and imports of workspaces' projects (one per replica, made by the HTTP surface). */
export class Imports {
  private readonly options: ImportsOptions;
  private readonly rules: AddressRules;
  private readonly limiter: RateLimiterAbstract;
  /** The imports this replica runs, by id: aborting one kills its git. */
  private readonly running = new Map<string, AbortController>();
  private ca: Promise<Buffer | undefined> | undefined;

  constructor(options: ImportsOptions) {
    this.options = options;
    this.rules = { allowedHosts: options.limits.allowedHosts, allowedAddresses: options.limits.allowedAddresses };
    this.limiter = options.store.rateLimits.limiter('home_replacements', REPLACEMENTS_PER_WINDOW, REPLACEMENT_WINDOW_SECONDS);
  }

  /**
   * Puts a workspace's home back to what a new workspace gets (the image's starter project, which
   * its entrypoint copies into the empty home at the next start), after a stored backup of the whole
   * home (Backups.replaceProject; audited `workspace.reset` naming it). Refused while a run is active
   * (409 `run_active`), while the workspace runs (409 `workspace_running`), during an import (409
   * `import_in_progress`), and past the student's limit (429 `too_many_replacements`).
   */
  async reset(actor: Actor, workspace: WorkspaceRecord): Promise<ReplacedProject> {
    await this.assertReplaceable(workspace);
    await this.consume(workspace);
    try {
      const replaced = await this.options.backups.replaceProject(actor, workspace, { action: 'workspace.reset', metadata: () => ({}) });
      this.options.metrics.projectReplacements.inc({ kind: 'reset', outcome: 'done' });
      this.options.log.info({ workspaceId: workspace.id, slug: workspace.slug, backup: replaced.backup, by: actor.email }, 'project reset to the starter');
      return replaced;
    } catch (error) {
      this.options.metrics.projectReplacements.inc({ kind: 'reset', outcome: 'failed' });
      throw error;
    }
  }

  /**
   * Starts an import of a team's project into a workspace and answers its record (phase
   * `checking`); the rest goes on after the answer, its progress and end written to the record
   * (ImportStore), audited `workspace.import` when the home is swapped. Refused before anything
   * starts: a request that is not valid (400 `import_url_invalid`, `import_not_https`,
   * `import_branch_invalid`, `import_subfolder_invalid`), a host not allowed (403
   * `import_host_refused`), as reset refuses, too many imports on this replica (503 `imports_busy`),
   * then (counted against the limit) a host that does not resolve (400 `import_host_unknown`) or
   * resolves to an address not allowed (403 `import_address_refused`).
   */
  async start(actor: Actor, workspace: WorkspaceRecord, request: ImportRequest): Promise<ImportRecord> {
    const url = checkUrl(request.url, this.rules);
    const branch = request.branch?.trim() || undefined;
    if (branch !== undefined && !BRANCH.test(branch)) throw ValidationError('import_branch_invalid', `${JSON.stringify(branch)} is not a branch name.`);
    const subfolder = normalSubfolder(request.subfolder);
    await this.assertReplaceable(workspace);
    if (this.running.size >= IMPORTS_AT_ONCE) {
      throw UnavailableError('imports_busy', 'The server is importing other projects right now; try again in a minute.', 30);
    }
    await this.consume(workspace);
    const checked = await resolveChecked(url, this.rules);
    const record = await this.options.store.imports.begin(workspace.id, actor.id, {
      url: url.url,
      ...(branch ? { branch } : {}),
      ...(subfolder ? { subfolder } : {}),
    });
    const abort = new AbortController();
    this.running.set(record.id, abort);
    this.options.log.info({ workspaceId: workspace.id, slug: workspace.slug, importId: record.id, url: url.url, branch, subfolder }, 'import started');
    void this.run(actor, workspace, record, checked, abort).finally(() => this.running.delete(record.id));
    return record;
  }

  /**
   * A repository's project for a coach's lesson (synchronous, whatever workspace): the address,
   * branch and subfolder checked as an import's, and the host's addresses; the clone made under
   * `DATA_DIR/imports/` within IMPORT_TIMEOUT_SECONDS and IMPORT_MAX_SIZE (one of this replica's
   * IMPORTS_AT_ONCE; stopped with the server); then `use` is given the folder that is the project
   * (its `.git` beside it at the clone's top) and the commit, and the clone is removed after. Fails
   * as an import does, with the same codes.
   */
  async withProject<T>(request: ImportRequest, use: (root: string, commit: string) => Promise<T>): Promise<T> {
    const url = checkUrl(request.url, this.rules);
    const branch = request.branch?.trim() || undefined;
    if (branch !== undefined && !BRANCH.test(branch)) throw ValidationError('import_branch_invalid', `${JSON.stringify(branch)} is not a branch name.`);
    const subfolder = normalSubfolder(request.subfolder) ?? null;
    if (this.running.size >= IMPORTS_AT_ONCE) {
      throw UnavailableError('imports_busy', 'The server is importing other projects right now; try again in a minute.', 30);
    }
    const checked = await resolveChecked(url, this.rules);
    const id = randomUUID();
    const abort = new AbortController();
    this.running.set(id, abort);
    const work = path.join(this.options.dataDir, 'imports', id);
    const timer = this.deadline(checked.host, abort);
    try {
      const { root, commit } = await this.fetch(checked, { branch: branch ?? null, subfolder }, work, abort.signal, () => undefined);
      clearTimeout(timer);
      return await use(root, commit);
    } finally {
      clearTimeout(timer);
      this.running.delete(id);
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Aborts `abort` with 504 `import_timeout` once IMPORT_TIMEOUT_SECONDS have passed (the network's part: clear the timer once the clone is made). */
  private deadline(host: string, abort: AbortController): NodeJS.Timeout {
    const { timeoutMs } = this.options.limits;
    return setTimeout(
      () =>
        abort.abort(
          new AppError(
            'import_timeout',
            `${host} did not finish answering within ${Math.round(timeoutMs / 1000)} s: the server is too slow or does not answer; nothing was changed.`,
          ),
        ),
      timeoutMs,
    );
  }

  /** Discovery (the redirects, each checked), the clone of `branch` under `work`, and the folder that is the project (its subfolder). */
  private async fetch(
    checked: Awaited<ReturnType<typeof resolveChecked>>,
    wanted: { branch: string | null; subfolder: string | null },
    work: string,
    signal: AbortSignal,
    onBytes: (bytes: number) => void,
  ): Promise<{ found: Awaited<ReturnType<typeof discover>>; commit: string; root: string }> {
    const { limits } = this.options;
    const found = await discover(checked, this.rules, await this.authorities(), signal);
    onBytes(0);
    const clone = path.join(work, 'clone');
    const { commit } = await cloneRepository({
      checked: found,
      branch: wanted.branch ?? undefined,
      dir: clone,
      home: path.join(work, 'home'),
      maxBytes: limits.maxBytes,
      caFile: limits.caFile,
      signal,
      onBytes,
    });
    return { found, commit, root: await projectRoot(clone, wanted.subfolder) };
  }

  /** The workspace's latest import (in progress or ended), or undefined. */
  latest(workspaceId: string): Promise<ImportRecord | undefined> {
    return this.options.store.imports.latest(workspaceId);
  }

  /** Stops every import of this replica (the server stops): each git is killed, and its import recorded as interrupted. */
  stop(): void {
    for (const abort of this.running.values()) {
      abort.abort(UnavailableError('import_interrupted', 'The server stopped during the import; nothing was changed: try again.', 30));
    }
  }

  /** The refusals a reset and an import share: a run active, the workspace running or still stopping, an import in progress. */
  private async assertReplaceable(workspace: WorkspaceRecord): Promise<void> {
    const run = await this.options.store.runs.active(workspace.id);
    if (run) {
      throw ConflictError('run_active', 'Your robot code is running: stop the run first (a reset or an import replaces the files it runs from).');
    }
    if (workspace.spec.desiredState === 'running') {
      throw ConflictError(
        'workspace_running',
        'Stop your workspace first: a reset or an import replaces the files your editor has open. Your files are kept in a backup; Open starts it again after.',
      );
    }
    if (workspace.status.observedState === 'running' || workspace.status.observedState === 'starting') {
      throw ConflictError('workspace_running', 'Your workspace is still stopping; try again in a moment.');
    }
    if (await this.options.store.imports.active(workspace.id)) {
      throw ConflictError('import_in_progress', 'An import into this workspace is in progress: wait for it to end.');
    }
  }

  /** Counts one reset or import against the workspace's limit; 429 `too_many_replacements` past it. */
  private async consume(workspace: WorkspaceRecord): Promise<void> {
    const seconds = await overLimit(this.limiter, workspace.id);
    if (seconds === undefined) return;
    throw TooManyError(
      'too_many_replacements',
      `You reset or imported ${REPLACEMENTS_PER_WINDOW} times in the last ${REPLACEMENT_WINDOW_SECONDS / 60} minutes: try again in ${Math.ceil(seconds / 60)} minute${seconds > 60 ? 's' : ''}.`,
      seconds,
    );
  }

  /** IMPORT_CA_FILE's certificates, read once (undefined: the system's authorities). */
  private authorities(): Promise<Buffer | undefined> {
    const file = this.options.limits.caFile;
    return (this.ca ??= file ? readFile(file) : Promise.resolve(undefined));
  }

  /**
   * The import after its answer: discovery (the redirects, each checked) and the clone under the
   * time limit, the subfolder, then the backup and the copy (Backups.replaceProject, whose swap also
   * ends the record as done). Any failure ends the record as failed with its error, the home as it
   * was; the clone is removed either way.
   */
  private async run(
    actor: Actor,
    workspace: WorkspaceRecord,
    record: ImportRecord,
    checked: Awaited<ReturnType<typeof resolveChecked>>,
    abort: AbortController,
  ) {
    const { store, log, metrics } = this.options;
    const started = Date.now();
    const where = { workspaceId: workspace.id, slug: workspace.slug, importId: record.id };
    const work = path.join(this.options.dataDir, 'imports', record.id);
    const progress = progressWriter(store, record.id, (error) => log.error({ ...where, error }, 'recording an import’s progress failed'));
    const heartbeat = setInterval(() => void store.imports.heartbeat(record.id).catch(() => undefined), HEARTBEAT_MS);
    const timer = this.deadline(checked.host, abort);
    try {
      const { found, commit, root } = await this.fetch(checked, record, work, abort.signal, (bytes) => progress.write('cloning', bytes));
      clearTimeout(timer);
      progress.write('backing-up', 0, { commit }, true);
      // As it is now: the student may have opened it meanwhile (then refused, nothing changed).
      const current = (await store.workspaces.get(workspace.id)) ?? workspace;
      let packed: PackedProject = { files: 0, bytes: 0 };
      const replaced = await this.options.backups.replaceProject(actor, current, {
        action: 'workspace.import',
        metadata: () => ({ url: found.url, branch: record.branch, subfolder: record.subfolder, commit, files: packed.files, bytes: packed.bytes }),
        onBackupProgress: (bytes) => progress.write('backing-up', bytes),
        onFilling: (backup) => progress.write('copying', 0, { backup }, true),
        project: async (pack) => {
          packed = await packProject(root, pack, (bytes) => progress.write('copying', bytes));
          // Written before the swap's transaction begins: the embedded database runs one connection's work at a time.
          await progress.settled();
        },
        within: (tx, backup) => store.imports.complete(tx, record.id, backup),
      });
      metrics.projectReplacements.inc({ kind: 'import', outcome: 'done' });
      log.info(
        { ...where, url: found.url, commit, backup: replaced.backup, files: packed.files, bytes: packed.bytes, seconds: (Date.now() - started) / 1000 },
        'import done',
      );
    } catch (caught) {
      const error = caught instanceof AppError ? caught : undefined;
      if (!error) log.error({ ...where, error: caught }, 'import failed unexpectedly');
      const failure = error ?? new AppError('internal_error', 'The import failed on the server’s side; it has been logged. Nothing was changed.');
      await progress.settled();
      await store.imports
        .fail(record.id, { code: failure.code, message: failure.message })
        .catch((failed: unknown) => log.error({ ...where, error: failed }, 'recording an import’s failure failed'));
      metrics.projectReplacements.inc({ kind: 'import', outcome: 'failed' });
      log.warning({ ...where, code: failure.code, reason: failure.message }, 'import failed');
    } finally {
      clearTimeout(timer);
      clearInterval(heartbeat);
      await rm(work, { recursive: true, force: true });
    }
  }
}

/**
 * The writer of an import's progress: phase changes at once, bytes at most every PROGRESS_MS, in
 * order (one write after another); `settled` waits for what was asked.
 */
function progressWriter(store: SurfaceStore, id: string, onError: (error: unknown) => void) {
  let chain: Promise<void> = Promise.resolve();
  let phase: ImportPhase | undefined;
  let last = 0;
  return {
    write(next: ImportPhase, bytes: number, found: { commit?: string; backup?: string | null } = {}, always = false) {
      const now = Date.now();
      if (!always && next === phase && now - last < PROGRESS_MS) return;
      phase = next;
      last = now;
      chain = chain.then(() => store.imports.progress(id, next, bytes, found)).catch(onError);
    },
    settled: () => chain,
  };
}

/**
 * The subfolder as asked, checked by its text: a relative path in the repository, without `.`, `..`
 * or `.git` segments (trailing and doubled slashes dropped); undefined for none. 400
 * `import_subfolder_invalid` otherwise.
 */
function normalSubfolder(text: string | undefined): string | undefined {
  const trimmed = text
    ?.trim()
    .replace(/^\.\/+/, '')
    .replace(/\/+$/, '');
  if (!trimmed) return undefined;
  const segments = trimmed.split(/\/+/);
  if (trimmed.startsWith('/') || segments.some((segment) => segment === '.' || segment === '..' || segment === '.git')) {
    throw ValidationError(
      'import_subfolder_invalid',
      `The subfolder ${JSON.stringify(text)} must be a relative path inside the repository (without ., .. or .git).`,
    );
  }
  return segments.join('/');
}

/**
 * The folder of the clone to import: the clone itself, or its subfolder, which must be a folder
 * whose real path (symbolic links followed) stays inside the clone and outside its `.git`. 404
 * `import_subfolder_not_found`, 400 `import_subfolder_outside`.
 */
async function projectRoot(clone: string, subfolder: string | null): Promise<string> {
  if (!subfolder) return clone;
  const top = await realpath(clone);
  const notFound = () => NotFoundError('import_subfolder_not_found', `The repository has no folder ${JSON.stringify(subfolder)}.`);
  const target = await realpath(path.join(clone, subfolder)).catch(() => {
    throw notFound();
  });
  const relative = path.relative(top, target);
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative) || relative.split(path.sep)[0] === '.git') {
    throw ValidationError(
      'import_subfolder_outside',
      `The subfolder ${JSON.stringify(subfolder)} is a symbolic link that leads outside it (or to the repository's top or .git).`,
    );
  }
  if (!(await stat(target)).isDirectory()) throw notFound();
  return target;
}
