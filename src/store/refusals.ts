import type { DataSource } from 'typeorm';
import { signalChannel, type ChangeFeed } from '../db/changes.ts';
import { col, rowCodec } from './row-codec.ts';

/** How long refusals are kept for the panel: the last hour (since their last repeat). */
export const REFUSALS_KEPT_MS = 60 * 60_000;

/**
 * A student's repeats within this long of their refusal's first time fold into that refusal (its
 * count and last time grow): one row, one panel event and one log line per student a minute at most.
 */
export const REFUSAL_FOLD_MS = 60_000;

/** A student refused at the cap: the coach's notification. */
export interface RefusalRecord {
  id: string;
  /** The first refusal of this fold. */
  at: Date;
  /** The latest refusal folded into it (`at` when there was one). */
  lastAt: Date;
  /** How many opens were refused in it (1, then one more for each repeat folded in). */
  count: number;
  workspaceId: string;
  slug: string;
  /** Who was refused (the workspace's owner). */
  email: string | null;
  /** The cap and the workspaces wanted running at the latest refusal. */
  cap: number;
  running: number;
}

/** The capacity_refusals table: its rows as the store reads them. */
const REFUSALS = rowCodec(
  'capacity_refusals',
  {
    id: col.bigintText,
    at: col.timestamp,
    last_at: col.timestamp,
    count: col.integer,
    workspace_id: col.text,
    slug: col.text,
    email: col.nullable(col.text),
    cap: col.integer,
    running: col.integer,
  },
  (row): RefusalRecord => ({
    id: row.id,
    at: row.at,
    lastAt: row.last_at,
    count: row.count,
    workspaceId: row.workspace_id,
    slug: row.slug,
    email: row.email,
    cap: row.cap,
    running: row.running,
  }),
);
const COLUMNS = REFUSALS.columns;

/**
 * Capacity refusals of the last hour, in the database so that every replica's panel shows those
 * any replica made, and folds a student's repeats whichever replica refused them: each new refusal
 * is signalled (`refusal`, its id) to every replica as it is recorded; a repeat is not.
 * Observed, not audited (each new one is also a warning in the log; capacity_rejections_total counts
 * every refused open, repeats included).
 */
export class RefusalStore {
  private readonly db: DataSource;
  private readonly changes: ChangeFeed;

  constructor(db: DataSource, changes: ChangeFeed) {
    this.db = db;
    this.changes = changes;
  }

  /**
   * Records a refusal: folded into the workspace's refusal whose first time is less than
   * REFUSAL_FOLD_MS ago (`first` false), else a new one (`first` true: signalled to every replica,
   * and those older than the hour kept are cleared). Serialised per workspace by a transaction-level
   * advisory lock, so that concurrent refusals on any replicas fold into one.
   */
  async record(refusal: Omit<RefusalRecord, 'id' | 'at' | 'lastAt' | 'count'>): Promise<{ refusal: RefusalRecord; first: boolean }> {
    const recorded = await this.db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock(hashtext('capacity_refusals:' || $1))", [refusal.workspaceId]);
      const folded = await REFUSALS.first(
        tx,
        `UPDATE capacity_refusals SET count = count + 1, last_at = greatest(last_at, now()), cap = $2, running = $3
         WHERE id = (SELECT id FROM capacity_refusals WHERE workspace_id = $1 AND at > now() - make_interval(secs => $4) ORDER BY at DESC, id DESC LIMIT 1)
         RETURNING ${COLUMNS}`,
        [refusal.workspaceId, refusal.cap, refusal.running, REFUSAL_FOLD_MS / 1000],
      );
      if (folded) return { refusal: folded, first: false };
      const fresh = await REFUSALS.one(
        tx,
        `WITH fresh AS (
           INSERT INTO capacity_refusals (workspace_id, slug, email, cap, running) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}
         ), old AS (
           DELETE FROM capacity_refusals WHERE last_at < now() - make_interval(secs => $6)
         ), told AS (
           SELECT pg_notify($7, id::text) FROM fresh
         )
         SELECT ${REFUSALS.columnsOf('fresh')} FROM fresh, told`,
        [refusal.workspaceId, refusal.slug, refusal.email, refusal.cap, refusal.running, REFUSALS_KEPT_MS / 1000, signalChannel('refusal')],
      );
      return { refusal: fresh, first: true };
    });
    if (recorded.first) this.changes.publishSignal('refusal', recorded.refusal.id);
    return recorded;
  }

  /** A refusal by id, or undefined (gone after the hour, or never). */
  async get(id: string): Promise<RefusalRecord | undefined> {
    if (!/^\d{1,18}$/.test(id)) return undefined;
    return REFUSALS.first(this.db, `SELECT ${COLUMNS} FROM capacity_refusals WHERE id = $1`, [id]);
  }

  /** The refusals of the last hour (by their latest repeat), newest first. */
  recent(): Promise<RefusalRecord[]> {
    return REFUSALS.all(this.db, `SELECT ${COLUMNS} FROM capacity_refusals WHERE last_at >= now() - make_interval(secs => $1) ORDER BY last_at DESC, id DESC`, [
      REFUSALS_KEPT_MS / 1000,
    ]);
  }
}
