import type { DataSource } from 'typeorm';
import type { Queryable } from '../db/sql.ts';
import type { Mutate } from './mutation.ts';
import { col, rowCodec } from './row-codec.ts';

/** Who did something: a user (id and email), or a named actor such as `system` or `cli` (id null). */
export interface Actor {
  id: string | null;
  email: string;
}

/** The actor of background work (bootstrap, idle sweep). */
export const SYSTEM_ACTOR: Actor = { id: null, email: 'system' };

/** The actor of the operator CLI. */
export const CLI_ACTOR: Actor = { id: null, email: 'cli' };

/**
 * The action names of the spec, and those of what its ten do not name: `audit.prune` (the
 * operator's pruning of the log itself), `auth.setup` (the first-run setup link used: someone became
 * the first admin), `auth.sign-in-link` (a one-time sign-in link made) and `auth.sign-in-link.use`
 * (one used to sign in), `run.stop` (an admin stopped someone's run: a student's own runs are theirs and
 * not audited), `node.drain` and `node.undrain` (a swarm node asked to be emptied, or taken back),
 * `workspace.reset` and `workspace.import` (a home's project replaced by the image's starter, or by
 * a team's repository: each names the backup made of the home first), `help.request`, `help.take`
 * and `help.resolve` (a student raised a hand, a coach took it, a coach resolved it; a student's
 * withdrawal of their own request is not audited), `workspace.view` (a coach began a read-only look
 * at a student's workspace: its files, its run, its robot), `join_code.open` and `join_code.close` (a
 * coach opened a join code, or closed it early), `join_code.join` (a guest joined with one),
 * `join_code.refused` (an address locked out after too many wrong or expired codes: one entry per
 * lockout, so that a guesser cannot flood the log) and `join_code.expire` (a code's guests backed up
 * and removed after it expired or was closed, naming the backups), `lesson.create` (a lesson made,
 * or a new version of its files), `lesson.handout`, `lesson.collect` and `lesson.reset` (a student's
 * lesson folder made the handed-out files again, after a backup of their home).
 */
export type AuditAction =
  | 'audit.prune'
  | 'run.stop'
  | 'auth.setup'
  | 'auth.sign-in-link'
  | 'auth.sign-in-link.use'
  | 'user.promote'
  | 'user.demote'
  | 'user.delete'
  | 'container.stop'
  | 'container.restart-code'
  | 'workspace.backup'
  | 'workspace.restore'
  | 'workspace.reset'
  | 'workspace.import'
  | 'allowlist.add'
  | 'allowlist.remove'
  | 'config.max-active-containers'
  | 'node.drain'
  | 'node.undrain'
  | 'help.request'
  | 'help.take'
  | 'help.resolve'
  | 'workspace.view'
  | 'join_code.open'
  | 'join_code.close'
  | 'join_code.join'
  | 'join_code.refused'
  | 'join_code.expire'
  | 'lesson.create'
  | 'lesson.handout'
  | 'lesson.collect'
  | 'lesson.reset';

/** An audit entry to write. */
export interface AuditInput {
  actor: Actor;
  action: AuditAction;
  target: { kind: string; id: string };
  metadata?: Record<string, unknown>;
}

/** Appends one audit entry. The store's mutation helper calls it in the transaction of the change it records. */
export async function writeAudit(db: Queryable, entry: AuditInput): Promise<void> {
  await db.query('INSERT INTO audit_log (actor_id, actor_email, action, target_kind, target_id, metadata) VALUES ($1, $2, $3, $4, $5, $6)', [
    entry.actor.id,
    entry.actor.email.toLowerCase(),
    entry.action,
    entry.target.kind,
    entry.target.id,
    entry.metadata ?? null,
  ]);
}

/** Which entries listAudit returns: every field is optional except the page size. */
export interface AuditFilter {
  /** Prefix of the action name, matched literally (`user.` matches `user.promote`). */
  action?: string;
  /** Case-insensitive substring of the actor's email, matched literally. */
  actor?: string;
  /** Cursor: only entries with an id below this one. */
  before?: number;
  /** Only entries at or after this time. */
  since?: Date;
  /** Only entries strictly before this time. */
  until?: Date;
  /** Page size. */
  limit: number;
}

/** One audit entry. */
export interface AuditEntry {
  id: number;
  timestamp: Date;
  actor: Actor;
  action: string;
  target: { kind: string; id: string };
  metadata: Record<string, unknown> | null;
}

/** A page of entries, newest first; nextCursor is the `before` of the next page, null on the last one. */
export interface AuditPage {
  entries: AuditEntry[];
  nextCursor: number | null;
}

/** The audit_log table: its rows as the store reads them. */
const AUDIT_LOG = rowCodec(
  'audit_log',
  {
    id: col.bigint,
    timestamp: col.timestamp,
    actor_id: col.nullable(col.text),
    actor_email: col.text,
    action: col.text,
    target_kind: col.text,
    target_id: col.text,
    metadata: col.nullable(col.jsonObject),
  },
  // bigserial arrives as a string; ids stay far below 2^53, so a JSON number is exact.
  (row): AuditEntry => ({
    id: row.id,
    timestamp: row.timestamp,
    actor: { id: row.actor_id, email: row.actor_email },
    action: row.action,
    target: { kind: row.target_kind, id: row.target_id },
    metadata: row.metadata,
  }),
);

/** The id bounds of a time range (idBounds). */
const ID_BOUNDS = rowCodec('audit_log', { above: col.nullable(col.bigintText), below: col.nullable(col.bigintText) });

/** What a prune would delete (previewPrune). */
const PRUNE_PREVIEW = rowCodec('audit_log', { count: col.bigint, oldest: col.nullable(col.timestamp), newest: col.nullable(col.timestamp) });

/** How many entries one prune statement deleted. */
const PRUNED = rowCodec('audit_log', { n: col.bigint });

/** Escapes LIKE's metacharacters (`%`, `_` and the escape `\` itself) so that `text` matches literally. */
function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, '\\$&');
}

/**
 * How much older an entry may be than one with a smaller id. An entry's timestamp is the start of
 * the transaction that wrote it (`now()`), and no transaction that writes one runs anywhere near
 * this long; a bigger value stays correct and only costs more rows scanned.
 */
const MAX_DISORDER = '1 day';

/**
 * Bounds on the ids of the entries in [since, until), from one probe of the timestamp index each:
 * no entry with an id above `below` is more than MAX_DISORDER older than that row, found at or
 * after until + MAX_DISORDER, so none is before `until` (and likewise for `above` and since). The
 * primary key then serves time ranges that lie far in the past, where the planner, which does not
 * know that ids follow time, would otherwise walk it from the newest entry (40-80 ms at a million).
 */
async function idBounds(db: DataSource, since: Date | undefined, until: Date | undefined): Promise<{ above: string | null; below: string | null }> {
  return ID_BOUNDS.one(
    db,
    `SELECT (SELECT id FROM audit_log WHERE timestamp < $1::timestamptz - interval '${MAX_DISORDER}' ORDER BY timestamp DESC LIMIT 1) AS above,
            (SELECT id FROM audit_log WHERE timestamp >= $2::timestamptz + interval '${MAX_DISORDER}' ORDER BY timestamp LIMIT 1) AS below`,
    [since ?? null, until ?? null],
  );
}

/**
 * Lists audit entries matching `filter`, newest first (id DESC), at most `filter.limit` of them.
 * nextCursor is the smallest id of a full page (there may be more), else null.
 */
export async function listAudit(db: DataSource, filter: AuditFilter): Promise<AuditPage> {
  const params: unknown[] = [];
  const where: string[] = [];
  const add = (condition: (param: string) => string, value: unknown) => {
    params.push(value);
    where.push(condition(`$${params.length}`));
  };
  if (filter.action !== undefined) add((p) => `action LIKE ${p}`, `${escapeLike(filter.action)}%`);
  // Stored lower-case (a CHECK), so a lower-cased LIKE is the case-insensitive match.
  if (filter.actor !== undefined) add((p) => `actor_email LIKE ${p}`, `%${escapeLike(filter.actor.toLowerCase())}%`);
  if (filter.before !== undefined) add((p) => `id < ${p}`, filter.before);
  if (filter.since !== undefined) add((p) => `timestamp >= ${p}`, filter.since);
  if (filter.until !== undefined) add((p) => `timestamp < ${p}`, filter.until);
  if (filter.since !== undefined || filter.until !== undefined) {
    // Bounds as values, not subqueries, so that the planner sees how many rows they keep.
    const { above, below } = await idBounds(db, filter.since, filter.until);
    if (above !== null) add((p) => `id > ${p}`, above);
    if (below !== null) add((p) => `id < ${p}`, below);
  }
  params.push(filter.limit);
  const entries = await AUDIT_LOG.all(
    db,
    `SELECT ${AUDIT_LOG.columns} FROM audit_log
     ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.length}`,
    params,
  );
  const last = entries.at(-1);
  return { entries, nextCursor: entries.length === filter.limit && last !== undefined ? last.id : null };
}

/** What pruning before a time would delete: how many entries, and the oldest and newest of them. */
export interface PrunePreview {
  count: number;
  oldest: Date | null;
  newest: Date | null;
}

/** How many entries one prune statement deletes: small enough that audit writes and queries never wait long on it. */
export const PRUNE_BATCH = 5000;

/** The audit log as callers read it (entries are written by the store's mutations, never directly), and its pruning. */
export class AuditStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;

  constructor(db: DataSource, mutate: Mutate) {
    this.db = db;
    this.mutate = mutate;
  }

  /** A page of entries matching `filter`, newest first (see listAudit). */
  list(filter: AuditFilter): Promise<AuditPage> {
    return listAudit(this.db, filter);
  }

  /** The entries older than `before` (what prune would delete), without deleting anything. */
  previewPrune(before: Date): Promise<PrunePreview> {
    return PRUNE_PREVIEW.one(this.db, 'SELECT count(*) AS count, min(timestamp) AS oldest, max(timestamp) AS newest FROM audit_log WHERE timestamp < $1', [
      before,
    ]);
  }

  /**
   * Deletes the entries older than `before`, oldest first, in statements of PRUNE_BATCH rows each
   * committed on its own (never one giant transaction holding the table), reporting the running
   * total to `onProgress`; then audits `audit.prune` with `{before, deleted}`. Returns how many went.
   */
  async prune(actor: Actor, before: Date, onProgress: (deleted: number) => void = () => undefined): Promise<number> {
    let deleted = 0;
    for (;;) {
      const { n: batch } = await PRUNED.one(
        this.db,
        `WITH gone AS (DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE timestamp < $1 ORDER BY id LIMIT $2) RETURNING 1)
         SELECT count(*) AS n FROM gone`,
        [before, PRUNE_BATCH],
      );
      deleted += batch;
      if (batch > 0) onProgress(deleted);
      if (batch < PRUNE_BATCH) break;
    }
    return this.mutate(async () => ({
      value: deleted,
      changed: [],
      audit: { actor, action: 'audit.prune', target: { kind: 'audit_log', id: 'audit_log' }, metadata: { before: before.toISOString(), deleted } },
    }));
  }
}
