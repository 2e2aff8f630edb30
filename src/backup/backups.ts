import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { names, VOLUME_ARCHIVE_ROOT, type VolumeArchives } from '../docker/runtime.ts';
import { isAccountFile } from '../import/project-files.ts';
import type { Tx } from '../store/mutation.ts';
import { AppError, ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { Actor } from '../store/audit.ts';
import type { Store } from '../store/index.ts';
import { assertStopped, type WorkspaceRecord } from '../store/workspaces.ts';
import { STUDENT_ID, type BackupManifest } from './backup-format.ts';
import { HAND_OVER_EXCLUDES } from './hand-over-excludes.ts';
import { restoreBackup } from './restore-backup.ts';
import { verifyBackup } from './verify-backup.ts';
import { writeBackup, writeBackupFile } from './write-backup.ts';

/** A stored backup as it is listed: its file name, size, time, and its manifest (from the sidecar written with it). */
export interface StoredBackup {
  name: string;
  sizeBytes: number;
  /** When the file was written. */
  modified: Date;
  /** The manifest, as written beside the file; null for a file put in the directory by hand (verify it by restoring). */
  manifest: BackupManifest | null;
}

/** What a backup made, and where it went. */
export interface BackupResult {
  manifest: BackupManifest;
  /** The stored backup's file name, or null when it went elsewhere (a file named by the operator, or stdout). */
  name: string | null;
  sizeBytes: number | null;
}

/** What a restore did. */
export interface RestoreResult {
  manifest: BackupManifest;
  workspace: WorkspaceRecord;
  /** The volume the workspace's home is now on. */
  volume: string;
  /** True when the files went to another workspace than the one backed up (what must not travel was left out). */
  handedOver: boolean;
  /** The stored backup that keeps the files the restore replaced; null when the workspace had no home yet. */
  kept: string | null;
}

/** What replaceProject did: the workspace on its new home, and the stored backup of the home it replaced (null: it had none yet). */
export interface ReplacedProject {
  workspace: WorkspaceRecord;
  backup: string | null;
}

/** How replaceProject replaces a project: with an import's files, or (none) with a new home; audited as `action`. */
export interface ReplaceProjectOptions {
  action: 'workspace.reset' | 'workspace.import';
  /** More of the audit entry (what was imported), asked for once the new home is filled; the backup's name is added. */
  metadata: () => Record<string, unknown>;
  /** Adds the new project's entries (under VOLUME_ARCHIVE_ROOT); none: the home becomes a new one, which the image fills with its starter. */
  project?: (pack: tar.Pack) => Promise<void>;
  /** Told when the backup is made and the new home is being filled (an import's progress). */
  onFilling?: (backup: string | null) => void;
  /** Told the bytes backed up so far. */
  onBackupProgress?: (bytes: number) => void;
  /** Runs in the transaction that swaps the home (an import's record of its end). */
  within?: (tx: Tx, backup: string | null) => Promise<void>;
}

/** A stored backup's name: `<slug>-<UTC time>[-n].tar.gz`, nothing that could leave the directory. */
const NAME = /^[a-z0-9][a-z0-9-]*-\d{8}T\d{6}Z(?:-\d+)?\.tar\.gz$/;
const SIDECAR = '.json';

/** `20261123T104141Z`: a time as file names carry it. */
const stamp = (date: Date) =>
  date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');

/**
 * Workspace backups: a workspace's home volume to a `tar.gz` (under `DATA_DIR/backups/`, or a
 * stream), and back into the same or another workspace. The one path on which the API and the CLI
 * reach Docker, for data only: through the runtime's helper containers, which never run anything;
 * starting and stopping workspaces stays the controllers'. Audited `workspace.backup` and
 * `workspace.restore` (through the store's replaceHome).
 */
export class Backups {
  readonly dir: string;
  private readonly store: Store;
  private readonly runtime: VolumeArchives;
  private readonly image: string;

  constructor(options: { store: Store; runtime: VolumeArchives; dataDir: string; image: string }) {
    this.store = options.store;
    this.runtime = options.runtime;
    this.image = options.image;
    this.dir = path.join(options.dataDir, 'backups');
  }

  /** The stored backups, newest first. */
  async list(): Promise<StoredBackup[]> {
    let files: string[];
    try {
      files = await readdir(this.dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const backups = await Promise.all(
      files
        .filter((file) => NAME.test(file))
        .map(async (name): Promise<StoredBackup> => {
          const info = await stat(path.join(this.dir, name));
          const manifest = (await readSidecar(path.join(this.dir, name))) ?? null;
          return { name, sizeBytes: info.size, modified: info.mtime, manifest };
        }),
    );
    return backups.toSorted((a, b) => b.modified.getTime() - a.modified.getTime() || b.name.localeCompare(a.name));
  }

  /** The path of a stored backup by its name; 404 `backup_not_found` for a name that is not one (or would leave the directory). */
  async pathOf(name: string): Promise<string> {
    const file = path.join(this.dir, name);
    if (
      !NAME.test(name) ||
      !(await stat(file).then(
        (info) => info.isFile(),
        () => false,
      ))
    ) {
      throw NotFoundError('backup_not_found', `No backup named ${JSON.stringify(name)} (see the list of backups).`);
    }
    return file;
  }

  /** The workspace named by a slug or its owner's email; 404 `workspace_not_found`. */
  workspace(slugOrEmail: string): Promise<WorkspaceRecord> {
    return this.store.workspaces.resolve(slugOrEmail);
  }

  /**
   * Backs up a workspace's home volume, streamed end to end: into `DATA_DIR/backups/<slug>-<time>.tar.gz`
   * (mode 0600, with its manifest beside it as `.json` for the list), into `file`, or into `out`. Audits
   * `workspace.backup` with the slug, the backup's name, files, bytes and checksum (and `scheduled`
   * when the schedule made it: BackupSchedule). Works while the
   * workspace runs (read through a helper that mounts the volume read-only and never runs anything),
   * but a file changing as it is read fails it: stop the workspace for a quiet copy.
   */
  async create(
    actor: Actor,
    workspace: WorkspaceRecord,
    options: { out?: Writable; file?: string; onProgress?: (bytes: number) => void; scheduled?: boolean; signal?: AbortSignal } = {},
  ): Promise<BackupResult> {
    const owner = workspace.userId ? await this.store.users.get(workspace.userId) : undefined;
    const source = {
      runtime: this.runtime,
      volume: names.home(workspace),
      image: this.image,
      workspace: { workspaceId: workspace.id, slug: workspace.slug, ownerEmail: owner?.email ?? '' },
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    };
    let result: BackupResult;
    if (options.out) {
      result = { manifest: await writeBackup({ ...source, out: options.out }), name: null, sizeBytes: null };
    } else if (options.file) {
      const manifest = await writeBackupFile(options.file, source);
      result = { manifest, name: null, sizeBytes: (await stat(options.file)).size };
    } else {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      const name = await this.freeName(workspace.slug, new Date());
      const file = path.join(this.dir, name);
      const manifest = await writeBackupFile(file, source);
      await writeFile(`${file}${SIDECAR}`, `${JSON.stringify(manifest)}\n`, { mode: 0o600 });
      result = { manifest, name, sizeBytes: (await stat(file)).size };
    }
    try {
      await this.store.workspaces.recordBackup(actor, workspace.id, {
        slug: workspace.slug,
        backup: result.name ?? (options.file ? path.resolve(options.file) : '-'),
        files: result.manifest.files,
        bytes: result.manifest.bytes,
        sha256: result.manifest.sha256,
        ...(options.scheduled ? { scheduled: true } : {}),
      });
    } catch (error) {
      // Not audited, not kept: a stored backup nobody knows of would never be listed as made, nor pruned.
      if (result.name) await this.remove(result.name).catch(() => undefined);
      throw error;
    }
    return result;
  }

  /**
   * Replaces a stopped workspace's project (docs/students.md, "Reset and import"): first a stored
   * backup of its whole home (audited `workspace.backup`; none when it never had a home), then a
   * fresh volume that the workspace is pointed at in one transaction with `within` (audited `action`,
   * naming the backup). With `project` (an import), that volume gets the home's account files
   * (ACCOUNT_FILES, from the backup just made) and the project's files; without (a reset), it is
   * not made here: the controller makes it empty at the next start, as for a new workspace, and the
   * image's entrypoint copies its starter into it. Refused (409 `workspace_running`) unless the
   * workspace is stopped, before anything is done and again at the swap; any failure leaves the
   * home as it was (a backup already made stays, listed, and the fresh volume goes).
   */
  async replaceProject(actor: Actor, workspace: WorkspaceRecord, options: ReplaceProjectOptions): Promise<ReplacedProject> {
    await this.assertRestorable(workspace);
    const home = names.home(workspace);
    const hasHome = await this.runtime.volumeExists(home);
    const backup = hasHome ? (await this.create(actor, workspace, options.onBackupProgress ? { onProgress: options.onBackupProgress } : {})).name : null;
    options.onFilling?.(backup);
    const volume = names.restoreVolume(workspace.slug, randomBytes(4).toString('hex'));
    const target = { workspaceId: workspace.id, slug: workspace.slug };
    try {
      if (options.project && backup) {
        await restoreBackup({
          runtime: this.runtime,
          path: path.join(this.dir, backup),
          volume,
          image: this.image,
          workspace: target,
          keep: isAccountFile,
          append: options.project,
        });
      } else if (options.project) {
        await this.runtime.importVolume(volume, target, this.image, newHome(options.project));
      }
      const replaced = await this.store.workspaces.replaceHome(
        actor,
        workspace.id,
        volume,
        { ...options.metadata(), backup },
        names.home,
        options.action,
        options.within && ((tx) => options.within!(tx, backup)),
      );
      return { workspace: replaced, backup };
    } catch (error) {
      if (options.project) await this.runtime.removeVolumeNamed(volume).catch(() => undefined);
      throw error;
    }
  }

  /**
   * Moves a workspace's home to a new volume, which the runtime places on another node (a swarm
   * node drained, docs/swarm.md): a fresh backup of it, stored and audited as any, restored into
   * that volume. Its editor must be stopped first, for a quiet copy. Answers the new volume and the
   * backup's name; a failure leaves the home as it was (and no new volume).
   */
  async moveOff(actor: Actor, workspace: WorkspaceRecord): Promise<{ volume: string; backup: string }> {
    const made = await this.create(actor, workspace);
    const volume = names.restoreVolume(workspace.slug, randomBytes(4).toString('hex'));
    await restoreBackup({
      runtime: this.runtime,
      path: path.join(this.dir, made.name!),
      volume,
      image: this.image,
      workspace: { workspaceId: workspace.id, slug: workspace.slug },
    });
    return { volume, backup: made.name! };
  }

  /**
   * Brings a workspace's home back from its newest stored backup (by when it began) into a new
   * volume, which the runtime places on another node (its node was lost). Null when it has no
   * stored backup with a manifest.
   */
  async recoverLatest(workspace: WorkspaceRecord): Promise<{ volume: string; backup: string; backupAt: Date } | null> {
    const newest = (await this.list())
      .filter((backup) => backup.manifest?.workspaceId === workspace.id)
      .toSorted((a, b) => Date.parse(b.manifest!.created) - Date.parse(a.manifest!.created))[0];
    if (!newest) return null;
    const volume = names.restoreVolume(workspace.slug, randomBytes(4).toString('hex'));
    await restoreBackup({
      runtime: this.runtime,
      path: path.join(this.dir, newest.name),
      volume,
      image: this.image,
      workspace: { workspaceId: workspace.id, slug: workspace.slug },
      newName: true,
    });
    return { volume, backup: newest.name, backupAt: new Date(newest.manifest!.created) };
  }

  /** Removes a stored backup and its manifest (the schedule's pruning); 404 `backup_not_found` for a name that is not one. */
  async remove(name: string): Promise<void> {
    const file = await this.pathOf(name);
    // The file first: a backup is never left without its manifest; one removed meanwhile is removed.
    await rm(file, { force: true });
    await rm(`${file}${SIDECAR}`, { force: true });
  }

  /**
   * Restores a backup file into a workspace (default: the one it was made of, by id, else by slug):
   * refused (409 `workspace_running`) while that workspace runs; reads its manifest from the file
   * beside it (or verifies the whole file when there is none); fills a fresh volume, checking the
   * file as it streams, then points the workspace at it in one transaction
   * (audited `workspace.restore`, naming the backup kept), so a failure anywhere leaves its home as
   * it was. Before that, the files it replaces are kept as a stored backup of their own (audited
   * `workspace.backup`; none when the workspace never had a home): a restore that cannot keep them
   * restores nothing. The controller then removes the old volume. Into another workspace, what must not travel (HAND_OVER_EXCLUDES:
   * the editor's state, credentials, git identity, shell history) is left out.
   */
  async restore(
    actor: Actor,
    file: string,
    options: { to?: WorkspaceRecord; onProgress?: (bytes: number, total: number) => void } = {},
  ): Promise<RestoreResult> {
    // Refused before anything is read when the target is named; else once the backup says which.
    if (options.to) await this.assertRestorable(options.to);
    const source = await this.manifestOf(file);
    const target = options.to ?? (await this.targetOf(source));
    await this.assertRestorable(target);
    const handedOver = source.workspaceId !== target.id;
    const volume = names.restoreVolume(target.slug, randomBytes(4).toString('hex'));
    const manifest = await restoreBackup({
      runtime: this.runtime,
      path: file,
      volume,
      image: this.image,
      workspace: { workspaceId: target.id, slug: target.slug },
      exclude: handedOver ? HAND_OVER_EXCLUDES : [],
      ...(options.onProgress ? { onProgress: (bytes: number) => options.onProgress!(bytes, source.bytes) } : {}),
    });
    try {
      // The sidecar chose what to leave out; the file, checked as it was read, must agree with it.
      if (manifest.workspaceId !== source.workspaceId) {
        throw ValidationError('backup_tampered', `The manifest beside ${path.basename(file)} is not the backup's own; nothing was restored.`);
      }
      const kept = await this.keepHome(actor, target);
      const workspace = await this.store.workspaces.replaceHome(
        actor,
        target.id,
        volume,
        {
          backup: path.basename(file),
          from: manifest.slug,
          files: manifest.files,
          bytes: manifest.bytes,
          sha256: manifest.sha256,
          kept,
          ...(handedOver ? { handedOver: true } : {}),
        },
        names.home,
      );
      return { manifest, workspace, volume, handedOver, kept };
    } catch (error) {
      // Started meanwhile, deleted, or the sidecar lied: the home stays as it was, and the filled volume goes.
      await this.runtime.removeVolumeNamed(volume).catch(() => undefined);
      throw error;
    }
  }

  /**
   * Refuses (409 `workspace_running`) a workspace wanted running, or whose editor was last seen
   * running: with a server running, it is still stopping; with none, nothing will stop it until
   * one starts, and the refusal says so.
   */
  private async assertRestorable(workspace: WorkspaceRecord): Promise<void> {
    if (workspace.spec.desiredState !== 'running' && (workspace.status.observedState === 'running' || workspace.status.observedState === 'starting')) {
      if ((await this.store.servers.live()).length === 0) {
        throw ConflictError(
          'workspace_running',
          `Workspace ${workspace.slug} was last seen running, and no control plane is running to stop it: start the server (it stops the workspace), then restore.`,
        );
      }
    }
    assertStopped(workspace);
  }

  /** Keeps a workspace's home as a stored backup before a restore replaces it: its name, or null when it has no home volume yet. */
  private async keepHome(actor: Actor, workspace: WorkspaceRecord): Promise<string | null> {
    if (!(await this.runtime.volumeExists(names.home(workspace)))) return null;
    try {
      return (await this.create(actor, workspace)).name;
    } catch (error) {
      // A home that cannot be kept as it is (backup_unrestorable) is refused by a rule (409); anything else may pass (503, to try again).
      throw new AppError(
        error instanceof AppError && error.status === 409 ? 'restore_not_kept' : 'restore_backup_failed',
        `The files of ${workspace.slug} could not be kept as a backup before the restore (${(error as Error).message}); nothing was restored.`,
      );
    }
  }

  /** The workspace a backup was made of: by its id, else by its slug; 404 when neither exists (name one). */
  private async targetOf(manifest: BackupManifest): Promise<WorkspaceRecord> {
    const byId = await this.store.workspaces.get(manifest.workspaceId);
    if (byId && byId.spec.desiredState !== 'deleted') return byId;
    const bySlug = await this.store.workspaces.find(manifest.slug);
    if (bySlug && bySlug.spec.desiredState !== 'deleted') return bySlug;
    throw NotFoundError('workspace_not_found', `The workspace ${manifest.slug} of this backup no longer exists; name the workspace to restore it into.`);
  }

  /** A backup file's manifest: from the sidecar written with it, else by reading (and so verifying) the whole file. */
  private async manifestOf(file: string): Promise<BackupManifest> {
    return (await readSidecar(file)) ?? verifyBackup(file);
  }

  /** `<slug>-<time>.tar.gz`, with `-2`, `-3`… when a backup of the same second exists. */
  private async freeName(slug: string, at: Date): Promise<string> {
    for (let n = 1; ; n++) {
      const name = `${slug}-${stamp(at)}${n === 1 ? '' : `-${n}`}.tar.gz`;
      if (
        !(await stat(path.join(this.dir, name)).then(
          () => true,
          () => false,
        ))
      )
        return name;
    }
  }
}

/** The archive of a new home holding only what `fill` adds: the home's root (the student's, 0755), then the entries. */
function newHome(fill: (pack: tar.Pack) => Promise<void>): Readable {
  const pack = tar.pack();
  const body = new PassThrough();
  // A failure of either side destroys the other: the import of the volume then fails with it.
  pipeline(pack, body).catch(() => undefined);
  pack.entry({ name: VOLUME_ARCHIVE_ROOT, type: 'directory', mode: 0o40755, uid: STUDENT_ID, gid: STUDENT_ID });
  fill(pack).then(
    () => pack.finalize(),
    (error: unknown) => pack.destroy(error as Error),
  );
  return body;
}

/**
 * The manifest written beside a backup file; undefined when there is none, or when it is not JSON
 * of a manifest's shape (edited or damaged by hand: the file itself is then what tells).
 */
async function readSidecar(file: string): Promise<BackupManifest | undefined> {
  try {
    const manifest = JSON.parse(await readFile(`${file}${SIDECAR}`, 'utf8')) as Partial<BackupManifest> | null;
    const valid = typeof manifest?.slug === 'string' && typeof manifest.workspaceId === 'string' && typeof manifest.bytes === 'number';
    return valid ? (manifest as BackupManifest) : undefined;
  } catch {
    return undefined;
  }
}
