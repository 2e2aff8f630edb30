/**
 * A coach's read-only looks at a student's workspace (table `workspace_looks`). A coach begins one
 * (audit `workspace.view`: each look once, not each file read), their page says every
 * LOOK_KEEP_SECONDS that it is still open, and ends it when it closes; a look not kept for
 * LOOK_TTL_SECONDS has ended too (a closed laptop). While a look is live, the student's page and
 * editor say who is looking (activeOn), and the coach may read the workspace's files (liveLook).
 * Each change is announced as a `status` change of the workspace.
 */
import type { DataSource } from 'typeorm';
import { NotFoundError } from '../errors.ts';
import type { Actor } from './audit.ts';
import { isUuid } from './ids.ts';
import type { Mutate } from './mutation.ts';
import { col, rowCodec } from './row-codec.ts';

/** How often a coach's open look says it is still open. */
export const LOOK_KEEP_SECONDS = 20;
/** A look not kept for this long has ended. */
export const LOOK_TTL_SECONDS = 60;

/** A look as the store reads it. */
export interface LookRecord {
  id: string;
  workspaceId: string;
  coach: { id: string | null; email: string; name: string };
  startedAt: Date;
  /** When it ends unless kept (or ended: when it ended). */
  endsAt: Date;
  live: boolean;
}

const LOOK = rowCodec(
  'workspace_looks',
  {
    id: col.text,
    workspace_id: col.text,
    coach_id: col.nullable(col.text),
    coach_email: col.text,
    coach_name: col.text,
    started_at: col.timestamp,
    ends_at: col.timestamp,
    live: col.boolean,
  },
  (row): LookRecord => ({
    id: row.id,
    workspaceId: row.workspace_id,
    coach: { id: row.coach_id, email: row.coach_email, name: row.coach_name },
    startedAt: row.started_at,
    endsAt: row.ends_at,
    live: row.live,
  }),
);

/** The id a write returns, and the workspace of a look ended. */
const IDS = rowCodec('workspace_looks', { id: col.text });
const ENDED = rowCodec('workspace_looks', { workspace_id: col.text });

const LIVE = `l.ended_at IS NULL AND l.seen_at > now() - make_interval(secs => ${LOOK_TTL_SECONDS})`;
const SELECT_LOOK = `SELECT l.id, l.workspace_id, l.coach_id, l.coach_email, coalesce(u.name, '') AS coach_name, l.started_at,
    coalesce(l.ended_at, l.seen_at + make_interval(secs => ${LOOK_TTL_SECONDS})) AS ends_at, (${LIVE}) AS live
  FROM workspace_looks l LEFT JOIN users u ON u.id = l.coach_id`;

const lookGone = () => NotFoundError('look_not_found', 'This look has ended (closed, or not kept for a minute): open the workspace again to look.');

/** The looks (see the file comment). */
export class LookStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;

  constructor(db: DataSource, mutate: Mutate) {
    this.db = db;
    this.mutate = mutate;
  }

  /** A coach begins a look at a workspace (audit `workspace.view`, naming its slug); 404 `workspace_not_found`. */
  async begin(actor: Actor, workspace: { id: string; slug: string }): Promise<LookRecord> {
    const id = await this.mutate(async (tx) => {
      const row = await IDS.first(
        tx,
        `INSERT INTO workspace_looks (workspace_id, coach_id, coach_email) SELECT id, $2, $3 FROM workspaces WHERE id = $1 AND desired_state <> 'deleted' RETURNING id`,
        [workspace.id, actor.id, actor.email.toLowerCase()],
      );
      if (!row) throw NotFoundError('workspace_not_found', 'No such workspace.');
      return {
        value: row.id,
        changed: [{ kind: 'status' as const, id: workspace.id }],
        audit: {
          actor,
          action: 'workspace.view' as const,
          target: { kind: 'workspace', id: workspace.id },
          metadata: { slug: workspace.slug, lookId: row.id },
        },
      };
    });
    return this.found(id);
  }

  /** The coach's page says the look is still open: it lasts LOOK_TTL_SECONDS more; 404 `look_not_found` once it ended, or when it is another coach's. */
  async keep(actor: Actor, lookId: string): Promise<LookRecord> {
    if (!isUuid(lookId)) throw lookGone();
    const kept = await IDS.first(this.db, `UPDATE workspace_looks l SET seen_at = now() WHERE id = $1 AND coach_email = $2 AND ${LIVE} RETURNING id`, [
      lookId,
      actor.email.toLowerCase(),
    ]);
    if (!kept) throw lookGone();
    return this.found(lookId);
  }

  /** The coach closed the look; ending one that ended already changes nothing; 404 `look_not_found` for another coach's or none. */
  async end(actor: Actor, lookId: string): Promise<LookRecord> {
    if (!isUuid(lookId)) throw lookGone();
    const look = await this.mutate(async (tx) => {
      const row = await ENDED.first(
        tx,
        `UPDATE workspace_looks SET ended_at = coalesce(ended_at, least(now(), seen_at + make_interval(secs => ${LOOK_TTL_SECONDS})))
          WHERE id = $1 AND coach_email = $2 RETURNING workspace_id`,
        [lookId, actor.email.toLowerCase()],
      );
      if (!row) throw lookGone();
      return { value: lookId, changed: [{ kind: 'status' as const, id: row.workspace_id }], audit: null };
    });
    return this.found(look);
  }

  /** The coach's live look at a workspace, or 404 `look_not_found`: what reading its files requires. */
  async liveLook(actor: Actor, workspaceId: string): Promise<LookRecord> {
    const look = await LOOK.first(this.db, `${SELECT_LOOK} WHERE l.workspace_id = $1 AND l.coach_email = $2 AND ${LIVE} ORDER BY l.seen_at DESC LIMIT 1`, [
      workspaceId,
      actor.email.toLowerCase(),
    ]);
    if (!look) throw lookGone();
    return look;
  }

  /** Who is looking at a workspace now (the latest live look), for the student's page and editor; undefined: no one. */
  activeOn(workspaceId: string): Promise<LookRecord | undefined> {
    return LOOK.first(this.db, `${SELECT_LOOK} WHERE l.workspace_id = $1 AND ${LIVE} ORDER BY l.started_at DESC LIMIT 1`, [workspaceId]);
  }

  private async found(id: string): Promise<LookRecord> {
    const look = await LOOK.first(this.db, `${SELECT_LOOK} WHERE l.id = $1`, [id]);
    if (!look) throw lookGone();
    return look;
  }
}
