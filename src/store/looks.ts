/**
 * A coach's read-only looks at a student's workspace (table `workspace_looks`). A coach begins one
 * (audit `workspace.view`: each look once, not each file read), their page says every
 * LOOK_KEEP_SECONDS that it is still open, and ends it when it closes; a look not kept for
 * LOOK_TTL_SECONDS has ended too (a closed laptop). With LOOK_CONSENT=ask a look begins `asking`,
 * and the student lets it happen or says no (answer, from their page or editor); with `always` it
 * begins `accepted`. While a look is live and not declined, the student's page and editor say who
 * is looking, or asks (activeOn); the coach reads the workspace's files only once it is accepted
 * (liveLook). Each change is announced as a `status` change of the workspace.
 */
import type { DataSource } from 'typeorm';
import { ConflictError, NotFoundError, TooManyError } from '../errors.ts';
import type { Actor } from './audit.ts';
import { isUuid } from './ids.ts';
import type { Mutate } from './mutation.ts';
import { overLimit, type RateLimitStore } from './rate-limits.ts';
import { col, rowCodec } from './row-codec.ts';

/** How often a coach's open look says it is still open. */
export const LOOK_KEEP_SECONDS = 20;
/** A look not kept for this long has ended. */
export const LOOK_TTL_SECONDS = 60;
/** How many folders and files one coach may read in a minute (each read starts a helper container: about 0.2 s of the engine's work). */
export const LOOK_READS_PER_MINUTE = 60;

/** Where a look stands with its student: `asking` them, `accepted` (or not asked: LOOK_CONSENT=always), `declined`. */
export const LOOK_STATES = ['asking', 'accepted', 'declined'] as const;
export type LookState = (typeof LOOK_STATES)[number];

/** A look as the store reads it. */
export interface LookRecord {
  state: LookState;
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
    state: col.oneOf(LOOK_STATES),
  },
  (row): LookRecord => ({
    state: row.state,
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
    coalesce(l.ended_at, l.seen_at + make_interval(secs => ${LOOK_TTL_SECONDS})) AS ends_at, (${LIVE}) AS live, l.state
  FROM workspace_looks l LEFT JOIN users u ON u.id = l.coach_id`;

/** 404 `look_not_found` told to the student who answers a look that ended meanwhile. */
const answerGone = () => NotFoundError('look_not_found', "Your coach's look has ended: there is nothing to answer.");
const lookGone = () => NotFoundError('look_not_found', 'This look has ended (closed, or not kept for a minute): open the workspace again to look.');

/** The looks (see the file comment). */
export class LookStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;
  private readonly reads: ReturnType<RateLimitStore['limiter']>;

  constructor(db: DataSource, mutate: Mutate, rateLimits: RateLimitStore) {
    this.db = db;
    this.mutate = mutate;
    this.reads = rateLimits.limiter('look_reads', LOOK_READS_PER_MINUTE, 60);
  }

  /**
   * A coach begins a look at a workspace (audit `workspace.view`, naming its slug and whether the
   * student is asked): `asking` with consent `ask`, else `accepted`; 404 `workspace_not_found`.
   */
  async begin(actor: Actor, workspace: { id: string; slug: string }, consent: 'always' | 'ask'): Promise<LookRecord> {
    const id = await this.mutate(async (tx) => {
      const row = await IDS.first(
        tx,
        `INSERT INTO workspace_looks (workspace_id, coach_id, coach_email, state) SELECT id, $2, $3, $4 FROM workspaces WHERE id = $1 AND desired_state <> 'deleted' RETURNING id`,
        [workspace.id, actor.id, actor.email.toLowerCase(), consent === 'ask' ? 'asking' : 'accepted'],
      );
      if (!row) throw NotFoundError('workspace_not_found', 'No such workspace.');
      return {
        value: row.id,
        changed: [{ kind: 'status' as const, id: workspace.id }],
        audit: {
          actor,
          action: 'workspace.view' as const,
          target: { kind: 'workspace', id: workspace.id },
          metadata: { slug: workspace.slug, lookId: row.id, asked: consent === 'ask' },
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

  /**
   * The coach's live look at a workspace, accepted, which reading its files requires: 404
   * `look_not_found`, 409 `look_not_accepted`; each read of files (`counted`) counts against the
   * coach's LOOK_READS_PER_MINUTE (429 `too_many_look_reads` past it); the robot's field, read from
   * memory every second while a look is open, does not.
   */
  async liveLook(actor: Actor, workspaceId: string, counted = true): Promise<LookRecord> {
    const seconds = counted ? await overLimit(this.reads, actor.email.toLowerCase()) : undefined;
    if (seconds !== undefined)
      throw TooManyError('too_many_look_reads', `You read ${LOOK_READS_PER_MINUTE} folders and files in the last minute: try again in ${seconds} s.`, seconds);
    const look = await LOOK.first(this.db, `${SELECT_LOOK} WHERE l.workspace_id = $1 AND l.coach_email = $2 AND ${LIVE} ORDER BY l.seen_at DESC LIMIT 1`, [
      workspaceId,
      actor.email.toLowerCase(),
    ]);
    if (!look) throw lookGone();
    if (look.state !== 'accepted')
      throw ConflictError(
        'look_not_accepted',
        look.state === 'asking'
          ? 'The student has not let you look yet: they are asked on their page and in their editor.'
          : 'The student said no to this look.',
      );
    return look;
  }

  /**
   * The student lets a look asking them happen, or says no (their own choice: not audited; the
   * look's row keeps it). Answering again as before changes nothing; 404 `look_not_found` when the
   * look is not live on this workspace; 409 `look_answered` when it was answered the other way.
   */
  async answer(workspaceId: string, lookId: string, accept: boolean): Promise<LookRecord> {
    if (!isUuid(lookId)) throw answerGone();
    const wanted: LookState = accept ? 'accepted' : 'declined';
    const id = await this.mutate(async (tx) => {
      const look = await LOOK.first(tx, `${SELECT_LOOK} WHERE l.id = $1 AND l.workspace_id = $2 AND ${LIVE} FOR UPDATE OF l`, [lookId, workspaceId]);
      if (!look) throw answerGone();
      if (look.state === wanted) return { value: look.id, changed: [], audit: null };
      if (look.state !== 'asking')
        throw ConflictError('look_answered', `You ${look.state === 'accepted' ? 'let this look happen' : 'said no to this look'} already.`);
      await tx.query('UPDATE workspace_looks SET state = $2, answered_at = now() WHERE id = $1', [look.id, wanted]);
      return { value: look.id, changed: [{ kind: 'status' as const, id: workspaceId }], audit: null };
    });
    return this.found(id);
  }

  /** Who is looking at a workspace now, or asks to (the latest live look not declined), for the student's page and editor; undefined: no one. */
  activeOn(workspaceId: string): Promise<LookRecord | undefined> {
    return LOOK.first(this.db, `${SELECT_LOOK} WHERE l.workspace_id = $1 AND ${LIVE} AND l.state <> 'declined' ORDER BY l.started_at DESC LIMIT 1`, [
      workspaceId,
    ]);
  }

  private async found(id: string): Promise<LookRecord> {
    const look = await LOOK.first(this.db, `${SELECT_LOOK} WHERE l.id = $1`, [id]);
    if (!look) throw lookGone();
    return look;
  }
}
