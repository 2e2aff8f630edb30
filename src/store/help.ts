import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { DataSource } from 'typeorm';
import type { Queryable } from '../db/sql.ts';
import { storableText } from '../db/text.ts';
import { ConflictError, NotFoundError, TooManyError, ValidationError } from '../errors.ts';
import { HELP_STATES, type HelpState } from '../wire/vocabulary.ts';
import type { Actor } from './audit.ts';
import { isUuid } from './ids.ts';
import type { Mutate, Outcome, Tx } from './mutation.ts';
import { overLimit, type RateLimitStore } from './rate-limits.ts';
import { col, rowCodec } from './row-codec.ts';

// Its result class alone, not the package's index, which the store (loaded at every start) does without (src/store/rate-limits.ts).

/** The most characters a help request's message may hold (the API refuses a longer one, naming `message`). */
export const HELP_MESSAGE_MAX = 500;

/** How many hands a workspace may raise in HELP_RAISE_WINDOW_SECONDS (429 `too_many_help_requests` past it). */
export const HELP_RAISES_PER_WINDOW = 5;

/** The window of HELP_RAISES_PER_WINDOW: 10 minutes. */
export const HELP_RAISE_WINDOW_SECONDS = 600;

/** The states in which a request is open (in the queue): a workspace has at most one. */
const OPEN_STATES: readonly HelpState[] = ['waiting', 'taken'];

/** A student's help request, with whose it is and where it stands in the queue. */
export interface HelpRequestRecord {
  id: string;
  workspace: { id: string; slug: string };
  /** The workspace's student (null fields: never, but for a workspace whose user row went first). */
  student: { id: string | null; name: string; email: string | null };
  /** What the student wrote (plain text, at most HELP_MESSAGE_MAX characters), or null. */
  message: string | null;
  state: HelpState;
  createdAt: Date;
  /** Seconds since it was raised, by the database's clock. */
  ageSeconds: number;
  /** 1-based, among waiting requests oldest first; null unless waiting. */
  place: number | null;
  /** The coach who took it (their name as the users table holds it now, '' when unknown). */
  takenBy: { id: string | null; name: string; email: string } | null;
  takenAt: Date | null;
  /** Who resolved it (a coach) or withdrew it (the student), by email; and when. */
  endedBy: string | null;
  endedAt: Date | null;
}

/** A help request's row with its workspace, student, coach and place. */
const HELP = rowCodec(
  'help_requests',
  {
    id: col.text,
    workspace_id: col.text,
    slug: col.text,
    student_id: col.nullable(col.text),
    student_name: col.nullable(col.text),
    student_email: col.nullable(col.text),
    message: col.nullable(col.text),
    state: col.oneOf(HELP_STATES),
    created_at: col.timestamp,
    age_seconds: col.integer,
    place: col.nullable(col.bigint),
    taken_by: col.nullable(col.text),
    taken_by_email: col.nullable(col.text),
    taken_by_name: col.nullable(col.text),
    taken_at: col.nullable(col.timestamp),
    ended_by_email: col.nullable(col.text),
    ended_at: col.nullable(col.timestamp),
  },
  (row): HelpRequestRecord => ({
    id: row.id,
    workspace: { id: row.workspace_id, slug: row.slug },
    student: { id: row.student_id, name: row.student_name ?? '', email: row.student_email },
    message: row.message,
    state: row.state,
    createdAt: row.created_at,
    ageSeconds: row.age_seconds,
    place: row.place,
    takenBy: row.taken_by_email === null ? null : { id: row.taken_by, name: row.taken_by_name ?? '', email: row.taken_by_email },
    takenAt: row.taken_at,
    endedBy: row.ended_by_email,
    endedAt: row.ended_at,
  }),
);

/** The requests as HELP reads them (`WHERE` and `ORDER BY` follow); places are counted among waiting requests, oldest first. */
const SELECT_HELP = `WITH places AS (SELECT id, row_number() OVER (ORDER BY created_at, id) AS place FROM help_requests WHERE state = 'waiting')
  SELECT h.id, h.workspace_id, w.slug, u.id AS student_id, u.name AS student_name, u.email AS student_email, h.message, h.state, h.created_at,
         floor(extract(epoch FROM clock_timestamp() - h.created_at))::integer AS age_seconds, p.place,
         h.taken_by, h.taken_by_email, t.name AS taken_by_name, h.taken_at, h.ended_by_email, h.ended_at
    FROM help_requests h JOIN workspaces w ON w.id = h.workspace_id LEFT JOIN users u ON u.id = w.user_id
    LEFT JOIN users t ON t.id = h.taken_by LEFT JOIN places p ON p.id = h.id`;

/** What a change of one request needs of it, its row locked. */
const LOCKED = rowCodec('help_requests', {
  id: col.text,
  workspace_id: col.text,
  slug: col.text,
  student_email: col.nullable(col.text),
  state: col.oneOf(HELP_STATES),
  taken_by_email: col.nullable(col.text),
  taken_by_name: col.nullable(col.text),
  ended_by_email: col.nullable(col.text),
});
type Locked = Awaited<ReturnType<typeof LOCKED.one>>;

/** A request's id (an insert's RETURNING, a workspace's open request). */
const IDS = rowCodec('help_requests', { id: col.text });

const LOCK_HELP = `SELECT h.id, h.workspace_id, w.slug, u.email AS student_email, h.state, h.taken_by_email, t.name AS taken_by_name, h.ended_by_email
  FROM help_requests h JOIN workspaces w ON w.id = h.workspace_id LEFT JOIN users u ON u.id = w.user_id LEFT JOIN users t ON t.id = h.taken_by`;

/** A coach as a message names them: "Name (email)", or the email alone. */
const named = (name: string | null, email: string): string => (name ? `${name} (${email})` : email);

/** Why a closed request cannot be taken or resolved, in words. */
function closedError(request: Locked) {
  return request.state === 'withdrawn'
    ? ConflictError('help_request_closed', 'The student withdrew this help request.')
    : ConflictError('help_request_closed', `This help request was resolved already, by ${request.ended_by_email ?? 'a coach'}.`);
}

/** A message as it is kept: trimmed, null when empty; refused past HELP_MESSAGE_MAX characters. */
function keptMessage(message: string | undefined | null): string | null {
  const trimmed = storableText(message ?? '').trim();
  // Characters as the API's schema counts them (code points, as ajv's maxLength).
  if (Array.from(trimmed).length > HELP_MESSAGE_MAX) throw ValidationError('validation_error', `message: at most ${HELP_MESSAGE_MAX} characters.`);
  return trimmed === '' ? null : trimmed;
}

/**
 * The help queue (table `help_requests`): a student raises a hand (one open request per workspace,
 * rate-limited per workspace), sees their place, and may withdraw it; a coach takes it (the first
 * wins) and resolves it. Every change goes through the store's mutation (audited `help.request`,
 * `help.take`, `help.resolve`; a withdrawal is the student's own and not audited) and is announced
 * as a `help` change, which the panel's live events carry. Nothing converges on it: one record, no
 * spec and status halves.
 */
export class HelpStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;
  private readonly raises: RateLimiterAbstract;

  constructor(db: DataSource, mutate: Mutate, rateLimits: RateLimitStore) {
    this.db = db;
    this.mutate = mutate;
    this.raises = rateLimits.limiter('help_raises', HELP_RAISES_PER_WINDOW, HELP_RAISE_WINDOW_SECONDS);
  }

  /**
   * Raises a hand for `workspace` with an optional message (audit `help.request`): 409
   * `help_request_open` while one of it is open, 429 `too_many_help_requests` past
   * HELP_RAISES_PER_WINDOW (only raises that would be accepted count), 400 for a message too long.
   */
  async raise(actor: Actor, workspace: { id: string; slug: string }, message?: string | null): Promise<HelpRequestRecord> {
    const kept = keptMessage(message);
    // A second click is told at once, and not counted against the limit.
    if (await this.openOf(workspace.id)) throw openError();
    await this.consume(workspace.id);
    const id = await this.mutate(async (tx) => {
      // The workspace's row serialises two raises at once: one is kept, the other told (the unique index backs it).
      await tx.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE', [workspace.id]);
      if (await openId(tx, workspace.id)) throw openError();
      const { id: raised } = await IDS.one(tx, 'INSERT INTO help_requests (workspace_id, raised_by, message) VALUES ($1, $2, $3) RETURNING id', [
        workspace.id,
        actor.id,
        kept,
      ]);
      return {
        value: raised,
        changed: [{ kind: 'help' as const, id: raised }],
        audit: {
          actor,
          action: 'help.request' as const,
          target: { kind: 'help_request', id: raised },
          metadata: { workspaceId: workspace.id, slug: workspace.slug },
        },
      };
    });
    return this.found(id);
  }

  /** The workspace's open request (waiting or taken), if any. */
  openOf(workspaceId: string): Promise<HelpRequestRecord | undefined> {
    return HELP.first(this.db, `${SELECT_HELP} WHERE h.workspace_id = $1 AND h.state IN ('waiting', 'taken')`, [workspaceId]);
  }

  /** The queue: every open request (waiting and taken), oldest first. */
  queue(): Promise<HelpRequestRecord[]> {
    return HELP.all(this.db, `${SELECT_HELP} WHERE h.state IN ('waiting', 'taken') ORDER BY h.created_at, h.id`);
  }

  /**
   * A coach takes a request ("coming"; audit `help.take`): the first wins. Taking one the same
   * coach took already changes nothing; one another coach took is 409 `help_request_taken` naming
   * them; a resolved or withdrawn one 409 `help_request_closed`; an unknown id 404.
   */
  take(actor: Actor, id: string): Promise<HelpRequestRecord> {
    return this.change(id, async (tx, request) => {
      if (request.state === 'taken') {
        if (request.taken_by_email === actor.email.toLowerCase()) return { value: request.id, changed: [], audit: null };
        throw ConflictError('help_request_taken', `${named(request.taken_by_name, request.taken_by_email ?? 'another coach')} is on the way already.`);
      }
      if (request.state !== 'waiting') throw closedError(request);
      await tx.query(`UPDATE help_requests SET state = 'taken', taken_by = $2, taken_by_email = $3, taken_at = now() WHERE id = $1`, [
        request.id,
        actor.id,
        actor.email.toLowerCase(),
      ]);
      return {
        value: request.id,
        changed: [{ kind: 'help', id: request.id }],
        audit: { actor, action: 'help.take', target: { kind: 'help_request', id: request.id }, metadata: metadataOf(request) },
      };
    });
  }

  /**
   * A coach resolves a request, waiting or taken by anyone (audit `help.resolve`, with the state it
   * had and who had taken it); 409 `help_request_closed` when it was resolved or withdrawn already; 404.
   */
  resolve(actor: Actor, id: string): Promise<HelpRequestRecord> {
    return this.change(id, async (tx, request) => {
      if (!OPEN_STATES.includes(request.state)) throw closedError(request);
      await tx.query(`UPDATE help_requests SET state = 'resolved', ended_by_email = $2, ended_at = now() WHERE id = $1`, [
        request.id,
        actor.email.toLowerCase(),
      ]);
      return {
        value: request.id,
        changed: [{ kind: 'help', id: request.id }],
        audit: {
          actor,
          action: 'help.resolve',
          target: { kind: 'help_request', id: request.id },
          metadata: { ...metadataOf(request), from: request.state, takenBy: request.taken_by_email },
        },
      };
    });
  }

  /**
   * The student takes their open request back (state `withdrawn`; not audited: it is theirs, and
   * the raise it ends was); 404 `help_request_not_found` when the workspace has none open.
   */
  async withdraw(actor: Actor, workspaceId: string): Promise<HelpRequestRecord> {
    const id = await this.mutate(async (tx) => {
      const open = await openId(tx, workspaceId, true);
      if (!open) throw NotFoundError('help_request_not_found', 'You have no help request open.');
      await tx.query(`UPDATE help_requests SET state = 'withdrawn', ended_by_email = $2, ended_at = now() WHERE id = $1`, [open, actor.email.toLowerCase()]);
      return { value: open, changed: [{ kind: 'help' as const, id: open }], audit: null };
    });
    return this.found(id);
  }

  /** Changes one request, its row locked: 404 `help_request_not_found` for an unknown id. */
  private async change(id: string, work: (tx: Tx, request: Locked) => Promise<Outcome<string>>): Promise<HelpRequestRecord> {
    if (!isUuid(id)) throw notFound(id);
    const changed = await this.mutate(async (tx) => {
      const request = await LOCKED.first(tx, `${LOCK_HELP} WHERE h.id = $1 FOR UPDATE OF h`, [id]);
      if (!request) throw notFound(id);
      return work(tx, request);
    });
    return this.found(changed);
  }

  /** A request just written (it is there: rows go only with their workspace). */
  private async found(id: string): Promise<HelpRequestRecord> {
    return HELP.one(this.db, `${SELECT_HELP} WHERE h.id = $1`, [id]);
  }

  /** Counts one raise of the workspace; 429 `too_many_help_requests` past the limit. */
  private async consume(workspaceId: string): Promise<void> {
    const seconds = await overLimit(this.raises, workspaceId);
    if (seconds === undefined) return;
    throw TooManyError(
      'too_many_help_requests',
      `You asked for help ${HELP_RAISES_PER_WINDOW} times in the last ${HELP_RAISE_WINDOW_SECONDS / 60} minutes: try again in ${Math.ceil(seconds / 60)} minute${seconds > 60 ? 's' : ''}.`,
      seconds,
    );
  }
}

/** 409 `help_request_open`. */
const openError = () => ConflictError('help_request_open', 'You have a help request open already: a coach will come, or you can take it back first.');

/** 404 `help_request_not_found` for `id`. */
const notFound = (id: string) => NotFoundError('help_request_not_found', `No help request ${JSON.stringify(id)}.`);

/** What the audit entries of a take and a resolve say of the request. */
const metadataOf = (request: Locked) => ({ workspaceId: request.workspace_id, slug: request.slug, student: request.student_email });

/** The id of the workspace's open request (locked with `lock`), if any. */
async function openId(db: Queryable, workspaceId: string, lock = false): Promise<string | undefined> {
  const row = await IDS.first(db, `SELECT id FROM help_requests WHERE workspace_id = $1 AND state IN ('waiting', 'taken')${lock ? ' FOR UPDATE' : ''}`, [
    workspaceId,
  ]);
  return row?.id;
}
