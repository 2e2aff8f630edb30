import type { DataSource } from 'typeorm';
import type { Queryable } from '../db/sql.ts';
import { storableText } from '../db/text.ts';
import { ConflictError } from '../errors.ts';
import { IMPORT_PHASES, type ImportPhase } from '../wire/vocabulary.ts';
import type { Tx } from './mutation.ts';
import { col, rowCodec } from './row-codec.ts';

/** An import of a team's project into a workspace, as its student follows it. */
export interface ImportRecord {
  id: string;
  workspaceId: string;
  url: string;
  branch: string | null;
  subfolder: string | null;
  phase: ImportPhase;
  bytes: number;
  /** The commit imported (once cloned). */
  commit: string | null;
  /** The stored backup of the home made before it was replaced (once made). */
  backup: string | null;
  /** Why it failed: an error of src/errors.ts's vocabulary. */
  error: { code: string; message: string } | null;
  startedAt: Date;
  endedAt: Date | null;
}

/** What a student asks to import. */
export interface ImportRequest {
  url: string;
  branch?: string;
  subfolder?: string;
}

/**
 * How long an import may go without a sign of life (its heartbeat every 15 s) before it counts as
 * ended: the server doing it stopped. It is then recorded as failed, and a new one may start.
 */
export const IMPORT_STALE_SECONDS = 60;

/** The workspace_imports table: its rows as the store reads them. */
const IMPORTS = rowCodec(
  'workspace_imports',
  {
    id: col.text,
    workspace_id: col.text,
    url: col.text,
    branch: col.nullable(col.text),
    subfolder: col.nullable(col.text),
    phase: col.oneOf(IMPORT_PHASES),
    bytes: col.bigint,
    commit: col.nullable(col.text),
    backup: col.nullable(col.text),
    error_code: col.nullable(col.text),
    error_message: col.nullable(col.text),
    started_at: col.timestamp,
    ended_at: col.nullable(col.timestamp),
  },
  (row): ImportRecord => ({
    id: row.id,
    workspaceId: row.workspace_id,
    url: row.url,
    branch: row.branch,
    subfolder: row.subfolder,
    phase: row.phase,
    bytes: row.bytes,
    commit: row.commit,
    backup: row.backup,
    error: row.error_code ? { code: row.error_code, message: row.error_message ?? '' } : null,
    startedAt: row.started_at,
    endedAt: row.ended_at,
  }),
);
const COLUMNS = IMPORTS.columns;
const IDS = IMPORTS.pick('id');

/** Ends, as failed, the imports of a workspace whose server stopped (no heartbeat for IMPORT_STALE_SECONDS). */
async function endStale(db: Queryable, workspaceId: string): Promise<void> {
  await db.query(
    `UPDATE workspace_imports SET phase = 'failed', ended_at = now(), error_code = 'import_interrupted',
       error_message = 'The import was interrupted: the server doing it stopped. If a backup is named, your home may have been replaced; otherwise nothing changed. Try again.'
     WHERE workspace_id = $1 AND ended_at IS NULL AND updated_at < now() - make_interval(secs => $2)`,
    [workspaceId, IMPORT_STALE_SECONDS],
  );
}

/**
 * Imports of teams' projects (table `workspace_imports`), in the database so that every replica
 * shows a student the progress of the import another replica does. Not desired state: nothing
 * converges on it; what an import changes is audited when its home is swapped (WorkspaceStore.replaceHome).
 */
export class ImportStore {
  private readonly db: DataSource;

  constructor(db: DataSource) {
    this.db = db;
  }

  /**
   * Records a new import of a workspace, in phase `checking`; 409 `import_in_progress` while another
   * of its imports is (one whose server stopped is ended first).
   */
  async begin(workspaceId: string, userId: string | null, request: ImportRequest): Promise<ImportRecord> {
    return this.db.transaction(async (tx) => {
      // The workspace's row serialises two imports asked at once: one begins, the other is told.
      await tx.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE', [workspaceId]);
      await endStale(tx, workspaceId);
      const active = await IDS.first(tx, 'SELECT id FROM workspace_imports WHERE workspace_id = $1 AND ended_at IS NULL', [workspaceId]);
      if (active) throw ConflictError('import_in_progress', 'An import into this workspace is in progress: wait for it to end.');
      return IMPORTS.one(tx, `INSERT INTO workspace_imports (workspace_id, user_id, url, branch, subfolder) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`, [
        workspaceId,
        userId,
        request.url,
        request.branch ?? null,
        request.subfolder ?? null,
      ]);
    });
  }

  /** Records how far an import got (also its heartbeat); `backup` once made, `commit` once cloned. Nothing for an ended one. */
  async progress(id: string, phase: ImportPhase, bytes: number, found: { commit?: string; backup?: string | null } = {}): Promise<void> {
    await this.db.query(
      `UPDATE workspace_imports SET phase = $2, bytes = $3, commit = coalesce($4, commit), backup = coalesce($5, backup), updated_at = now()
       WHERE id = $1 AND ended_at IS NULL`,
      [id, phase, Math.round(bytes), found.commit ?? null, found.backup ?? null],
    );
  }

  /** Ends an import as failed with `error` (its message kept as storableText makes it). */
  async fail(id: string, error: { code: string; message: string }): Promise<void> {
    await this.db.query(
      `UPDATE workspace_imports SET phase = 'failed', error_code = $2, error_message = $3, updated_at = now(), ended_at = now() WHERE id = $1 AND ended_at IS NULL`,
      [id, error.code, storableText(error.message)],
    );
  }

  /** Ends an import as done, in the transaction that swapped its workspace's home (so the two cannot disagree). */
  async complete(tx: Tx, id: string, backup: string | null): Promise<void> {
    await tx.query(`UPDATE workspace_imports SET phase = 'done', backup = $2, updated_at = now(), ended_at = now() WHERE id = $1 AND ended_at IS NULL`, [
      id,
      backup,
    ]);
  }

  /** The workspace's import in progress, if any (one whose server stopped is ended first). */
  async active(workspaceId: string): Promise<ImportRecord | undefined> {
    await endStale(this.db, workspaceId);
    return IMPORTS.first(this.db, `SELECT ${COLUMNS} FROM workspace_imports WHERE workspace_id = $1 AND ended_at IS NULL`, [workspaceId]);
  }

  /** The workspace's latest import, in progress or ended; undefined when it never had one. */
  async latest(workspaceId: string): Promise<ImportRecord | undefined> {
    await endStale(this.db, workspaceId);
    return IMPORTS.first(this.db, `SELECT ${COLUMNS} FROM workspace_imports WHERE workspace_id = $1 ORDER BY started_at DESC, id DESC LIMIT 1`, [workspaceId]);
  }

  /** Marks an import alive (see IMPORT_STALE_SECONDS). */
  async heartbeat(id: string): Promise<void> {
    await this.db.query('UPDATE workspace_imports SET updated_at = now() WHERE id = $1 AND ended_at IS NULL', [id]);
  }
}
