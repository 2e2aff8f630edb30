import type { DataSource } from 'typeorm';
import { signalChannel, type ChangeFeed } from '../db/changes.ts';
import { queryRows } from '../db/sql.ts';

/** How long refusals are kept for the panel: the last hour. */
export const REFUSALS_KEPT_MS = 60 * 60_000;

/** A student refused at the cap: the coach's notification. */
export interface RefusalRecord {
  id: string;
  at: Date;
  workspaceId: string;
  slug: string;
  /** Who was refused (the workspace's owner). */
  email: string | null;
  cap: number;
  running: number;
}

interface RefusalRow {
  /** bigserial: a string from node-postgres, perhaps a number or bigint from another driver. */
  id: string | number | bigint;
  at: Date;
  workspace_id: string;
  slug: string;
  email: string | null;
  cap: number;
  running: number;
}

const toRefusal = (row: RefusalRow): RefusalRecord => ({
  id: String(row.id),
  at: row.at,
  workspaceId: row.workspace_id,
  slug: row.slug,
  email: row.email,
  cap: row.cap,
  running: row.running,
});

const COLUMNS = 'id, at, workspace_id, slug, email, cap, running';

/**
 * Capacity refusals of the last hour, in the database so that every replica's panel shows those
 * any replica made: each is signalled (`refusal`, its id) to every replica as it is recorded.
 * Observed, not audited (each is also a warning in the log and counted in capacity_rejections_total).
 */
export class RefusalStore {
  private readonly db: DataSource;
  private readonly changes: ChangeFeed;

  constructor(db: DataSource, changes: ChangeFeed) {
    this.db = db;
    this.changes = changes;
  }

  /** Records a refusal (clearing those older than the hour kept) and signals it to every replica. */
  async record(refusal: Omit<RefusalRecord, 'id' | 'at'>): Promise<RefusalRecord> {
    const rows = await queryRows<RefusalRow>(
      this.db,
      `WITH fresh AS (
         INSERT INTO capacity_refusals (workspace_id, slug, email, cap, running) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}
       ), old AS (
         DELETE FROM capacity_refusals WHERE at < now() - make_interval(secs => $6)
       ), told AS (
         SELECT pg_notify($7, id::text) FROM fresh
       )
       SELECT fresh.* FROM fresh, told`,
      [refusal.workspaceId, refusal.slug, refusal.email, refusal.cap, refusal.running, REFUSALS_KEPT_MS / 1000, signalChannel('refusal')],
    );
    const recorded = toRefusal(rows[0]!);
    this.changes.publishSignal('refusal', recorded.id);
    return recorded;
  }

  /** A refusal by id, or undefined (gone after the hour, or never). */
  async get(id: string): Promise<RefusalRecord | undefined> {
    if (!/^\d{1,18}$/.test(id)) return undefined;
    const rows = await queryRows<RefusalRow>(this.db, `SELECT ${COLUMNS} FROM capacity_refusals WHERE id = $1`, [id]);
    return rows[0] && toRefusal(rows[0]);
  }

  /** The refusals of the last hour, newest first. */
  async recent(): Promise<RefusalRecord[]> {
    const rows = await queryRows<RefusalRow>(
      this.db,
      `SELECT ${COLUMNS} FROM capacity_refusals WHERE at >= now() - make_interval(secs => $1) ORDER BY at DESC, id DESC`,
      [REFUSALS_KEPT_MS / 1000],
    );
    return rows.map(toRefusal);
  }
}
