/**
 * Join codes (issue 43, item 5): for shared school computers and outreach days, a coach opens a
 * code valid for 1 to 12 hours; a student types it and a display name and gets a guest account
 * bound to that code (`users.join_code_id`: no identity provider, not on the allowlist), with a
 * workspace of its own. A guest may act until the code expires or is closed (`guestUntil`,
 * api/policy.ts); then the leader backs up each guest's home and removes the guest
 * (controllers/join-code-expiry.ts). Guessing is bounded per address (a lockout) and overall; the
 * bounds and why are in docs/security.md.
 */
import { randomInt, randomUUID } from 'node:crypto';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { DataSource } from 'typeorm';
import type { Change } from '../db/changes.ts';
import { AppError, NotFoundError, TooManyError, UnavailableError, ValidationError } from '../errors.ts';
import type { Actor } from './audit.ts';
import { isUuid } from './ids.ts';
import type { Mutate } from './mutation.ts';
import { overLimit, type RateLimitStore } from './rate-limits.ts';
import { col, rowCodec } from './row-codec.ts';
import { insertWorkspace, type WorkspaceRecord } from './workspaces.ts';

/** The characters of a code: no 0/O, 1/I/L, which read alike on a projector and on paper. */
export const JOIN_CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
/** A code's length (31^8, about 8.5 × 10^11 codes). */
export const JOIN_CODE_LENGTH = 8;
/** The shortest and longest a code may be opened for, in hours. */
export const JOIN_CODE_MIN_HOURS = 1;
export const JOIN_CODE_MAX_HOURS = 12;
/** The most characters of a code's label and of a guest's display name. */
export const JOIN_LABEL_MAX = 60;
export const DISPLAY_NAME_MAX = 60;
/** Wrong (or expired) codes one address may try in JOIN_FAILURE_WINDOW_SECONDS before it is locked out for JOIN_LOCKOUT_SECONDS. */
export const JOIN_FAILURES_PER_ADDRESS = 10;
export const JOIN_FAILURE_WINDOW_SECONDS = 600;
export const JOIN_LOCKOUT_SECONDS = 900;
/** Tries (right or wrong) the server takes from all addresses together in a minute. */
export const JOIN_TRIES_PER_MINUTE = 120;
/** The domain of guests' emails: a name reserved never to resolve (RFC 2606), so no guest's email is anyone's. */
export const GUEST_EMAIL_DOMAIN = 'join.invalid';

/** Where a code stands: `open` (guests may join), `expired` (its hours passed), `closed` (a coach closed it early). */
export type JoinCodeState = 'open' | 'expired' | 'closed';

/** A guest of a code, as the coach sees them. */
export interface JoinGuest {
  userId: string;
  name: string;
  workspaceId: string | null;
  workspaceSlug: string | null;
}

/** A join code, with its guests now. */
export interface JoinCodeRecord {
  id: string;
  /** As shown and typed: `ABCD-EFGH`. */
  code: string;
  label: string;
  openedBy: { id: string | null; email: string };
  openedAt: Date;
  expiresAt: Date;
  closedAt: Date | null;
  closedBy: string | null;
  state: JoinCodeState;
  /** How many guests ever joined with it. */
  joined: number;
  /** Its guests still here (none once its expiry is handled). */
  guests: JoinGuest[];
  /** When its expiry was handled: every guest backed up and removed; null until then. */
  handledAt: Date | null;
  /** The backups its expiry made, one per guest's home. */
  backups: string[];
}

/** A guest just made: the user and their workspace. */
export interface JoinedGuest {
  userId: string;
  email: string;
  name: string;
  workspace: WorkspaceRecord;
  code: { id: string; code: string; expiresAt: Date };
}

const STATE_SQL = "CASE WHEN c.closed_at IS NOT NULL THEN 'closed' WHEN c.expires_at <= now() THEN 'expired' ELSE 'open' END AS state";
const JOIN_CODES = rowCodec('join_codes', {
  id: col.text,
  code: col.text,
  label: col.text,
  opened_by_id: col.nullable(col.text),
  opened_by_email: col.text,
  opened_at: col.timestamp,
  expires_at: col.timestamp,
  closed_at: col.nullable(col.timestamp),
  closed_by_email: col.nullable(col.text),
  joined: col.integer,
  handled_at: col.nullable(col.timestamp),
  backups: col.textArray,
  state: col.oneOf(['open', 'expired', 'closed'] as const),
});
type CodeRow = ReturnType<typeof JOIN_CODES.decode>;
const SELECT_CODES = `SELECT c.id, c.code, c.label, c.opened_by_id, c.opened_by_email, c.opened_at, c.expires_at, c.closed_at, c.closed_by_email,
  c.joined, c.handled_at, c.backups, ${STATE_SQL} FROM join_codes c`;

const GUESTS = rowCodec('users', {
  id: col.text,
  name: col.text,
  join_code_id: col.text,
  workspace_id: col.nullable(col.text),
  workspace_slug: col.nullable(col.text),
});
const SELECT_GUESTS = `SELECT u.id, u.name, u.join_code_id, w.id AS workspace_id, w.slug AS workspace_slug
  FROM users u LEFT JOIN workspaces w ON w.user_id = u.id`;
const IDS = rowCodec('users', { id: col.text });
const NEXT = rowCodec('join_codes', { at: col.nullable(col.timestamp) });

/** A code as stored: JOIN_CODE_LENGTH characters of the alphabet. */
const STORED_CODE = new RegExp(`^[${JOIN_CODE_ALPHABET}]{${JOIN_CODE_LENGTH}}$`);

/** `ABCDEFGH` → `ABCD-EFGH`. */
export const formatJoinCode = (code: string): string => `${code.slice(0, 4)}-${code.slice(4)}`;

/**
 * A code as someone typed it, in its stored form (upper case, no dash), or undefined when it cannot
 * be one: case-insensitive, with or without the dash, surrounding and inner spaces ignored.
 */
export function typedJoinCode(typed: string): string | undefined {
  const compact = typed.replace(/[\s-]/g, '').toUpperCase();
  return STORED_CODE.test(compact) ? compact : undefined;
}

/** Control and invisible format characters, which no name shown to others may hold. */
const HIDDEN = /[\p{Cc}\p{Cf}]/u;

/** A text shown to others (a label, a display name), trimmed; or what is wrong with it. */
function shownText(text: string, max: number, what: string, required: boolean): { value: string } | { problem: string } {
  const value = text.trim();
  if (required && value === '') return { problem: `Enter ${what}.` };
  if (value.length > max) return { problem: `${what[0]!.toUpperCase()}${what.slice(1)} has at most ${max} characters.` };
  if (HIDDEN.test(value) || !value.isWellFormed()) return { problem: `${what[0]!.toUpperCase()}${what.slice(1)} cannot hold control or invisible characters.` };
  return { value };
}

const codeChange = (id: string): Change => ({ kind: 'join_codes', id });

const toRecord = (row: CodeRow, guests: JoinGuest[]): JoinCodeRecord => ({
  id: row.id,
  code: formatJoinCode(row.code),
  label: row.label,
  openedBy: { id: row.opened_by_id, email: row.opened_by_email },
  openedAt: row.opened_at,
  expiresAt: row.expires_at,
  closedAt: row.closed_at,
  closedBy: row.closed_by_email,
  state: row.state,
  joined: row.joined,
  guests,
  handledAt: row.handled_at,
  backups: row.backups,
});

/** 404 `join_code_not_found`. */
const notFound = (id: string) => NotFoundError('join_code_not_found', `No join code ${JSON.stringify(id)}.`);

/** What a refused try says, by why (the page shows it as it is). */
export const WRONG_CODE_MESSAGE = 'That join code is not right. Check it on the board and type it again.';
export const EXPIRED_CODE_MESSAGE = 'This join code has expired. Ask your coach for a new one.';

/** The join codes and their guests (see the file comment). */
export class JoinCodeStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;
  private readonly failures: RateLimiterAbstract;
  private readonly tries: RateLimiterAbstract;

  constructor(db: DataSource, mutate: Mutate, rateLimits: RateLimitStore) {
    this.db = db;
    this.mutate = mutate;
    this.failures = rateLimits.limiter('join_failures', JOIN_FAILURES_PER_ADDRESS, JOIN_FAILURE_WINDOW_SECONDS);
    this.tries = rateLimits.limiter('join_tries', JOIN_TRIES_PER_MINUTE, 60);
  }

  /**
   * Opens a code valid for `hours` (a whole number from 1 to 12) with an optional label (trimmed, at
   * most 60 characters, no control characters): audited `join_code.open`. 400 `validation_error`
   * naming the field otherwise. Several may be open at once.
   */
  async open(actor: Actor, input: { hours: number; label?: string | null }): Promise<JoinCodeRecord> {
    if (!Number.isInteger(input.hours) || input.hours < JOIN_CODE_MIN_HOURS || input.hours > JOIN_CODE_MAX_HOURS) {
      throw ValidationError('validation_error', `hours: a join code is open for ${JOIN_CODE_MIN_HOURS} to ${JOIN_CODE_MAX_HOURS} whole hours.`);
    }
    const label = shownText(input.label ?? '', JOIN_LABEL_MAX, 'a label', false);
    if ('problem' in label) throw ValidationError('validation_error', `label: ${label.problem}`);
    const id = await this.mutate(async (tx) => {
      // 31^8 codes: a clash with a kept code is all but impossible; one is drawn again.
      for (;;) {
        const code = Array.from({ length: JOIN_CODE_LENGTH }, () => JOIN_CODE_ALPHABET[randomInt(JOIN_CODE_ALPHABET.length)]).join('');
        const made = await IDS.first(
          tx,
          `INSERT INTO join_codes (code, label, opened_by_id, opened_by_email, expires_at)
           VALUES ($1, $2, $3, $4, now() + $5 * interval '1 hour') ON CONFLICT (code) DO NOTHING RETURNING id`,
          [code, label.value, actor.id, actor.email, input.hours],
        );
        if (!made) continue;
        return {
          value: made.id,
          changed: [codeChange(made.id)],
          audit: {
            actor,
            action: 'join_code.open',
            target: { kind: 'join-code', id: made.id },
            metadata: { code: formatJoinCode(code), label: label.value, hours: input.hours },
          },
        };
      }
    });
    return (await this.get(id))!;
  }

  /**
   * When a guest's code ends (closed early, or its expiry) for the user `userId`, whose workspace is
   * then backed up and removed; undefined for anyone who is not a guest still here.
   */
  async guestEnds(userId: string): Promise<Date | undefined> {
    const row = await NEXT.first(
      this.db,
      'SELECT COALESCE(c.closed_at, c.expires_at) AS at FROM users u JOIN join_codes c ON c.id = u.join_code_id WHERE u.id = $1 AND c.handled_at IS NULL',
      [userId],
    );
    return row?.at ?? undefined;
  }

  /** The codes, newest first (the 50 newest: open ones and the latest past ones), with their guests. */
  async list(): Promise<JoinCodeRecord[]> {
    const rows = await JOIN_CODES.all(this.db, `${SELECT_CODES} ORDER BY c.opened_at DESC LIMIT 50`);
    return this.withGuests(rows);
  }

  /** The code with this id, with its guests; undefined when there is none. */
  async get(id: string): Promise<JoinCodeRecord | undefined> {
    if (!isUuid(id)) return undefined;
    const row = await JOIN_CODES.first(this.db, `${SELECT_CODES} WHERE c.id = $1`, [id]);
    return row && (await this.withGuests([row]))[0];
  }

  /** The code as typed (`ABCD-EFGH`, any case, with or without the dash), or undefined. */
  async byCode(typed: string): Promise<JoinCodeRecord | undefined> {
    const code = typedJoinCode(typed);
    if (!code) return undefined;
    const row = await JOIN_CODES.first(this.db, `${SELECT_CODES} WHERE c.code = $1`, [code]);
    return row && (await this.withGuests([row]))[0];
  }

  /**
   * Closes an open code early (audited `join_code.close`): no one may join with it any more, its
   * guests may no longer act, and its expiry follows as for one whose hours passed. A code expired or
   * closed already is left as it is (no entry). 404 `join_code_not_found`.
   */
  async close(actor: Actor, id: string): Promise<JoinCodeRecord> {
    if (!isUuid(id)) throw notFound(id);
    await this.mutate(async (tx) => {
      const row = await JOIN_CODES.first(tx, `${SELECT_CODES} WHERE c.id = $1 FOR UPDATE`, [id]);
      if (!row) throw notFound(id);
      if (row.state !== 'open') return { value: undefined, changed: [], audit: null };
      await tx.query('UPDATE join_codes SET closed_at = now(), closed_by_email = $2 WHERE id = $1', [id, actor.email]);
      const guests = await IDS.all(tx, 'SELECT id FROM users WHERE join_code_id = $1', [id]);
      return {
        value: undefined,
        // Its guests' changes make the proxy forget them and check their open connections again.
        changed: [codeChange(id), ...guests.map((guest): Change => ({ kind: 'users', id: guest.id }))],
        audit: {
          actor,
          action: 'join_code.close',
          target: { kind: 'join-code', id },
          metadata: { code: formatJoinCode(row.code), label: row.label, guests: guests.length },
        },
      };
    });
    return (await this.get(id))!;
  }

  /**
   * A student joins with a code they typed and a display name, from `address`: a guest user bound to
   * the code (role `user`, email `guest-<random>@join.invalid`, a stopped workspace named after it),
   * audited `join_code.join`. Refused, in this order: 429 `too_many_join_attempts` while the address
   * is locked out; 503 `joins_busy` past JOIN_TRIES_PER_MINUTE tries from everyone; 400
   * `invalid_display_name`; 400 `join_code_wrong` (no such code) and 410 `join_code_expired`
   * (expired or closed), each counted against the address: the JOIN_FAILURES_PER_ADDRESS-th in its
   * window locks it out for JOIN_LOCKOUT_SECONDS, audited once as `join_code.refused`.
   */
  async join(input: { code: string; name: string; address: string }): Promise<JoinedGuest> {
    // A locked-out address is refused before it counts against everyone's limit, so that it cannot use that up.
    await this.assertNotLockedOut(input.address);
    const busy = await overLimit(this.tries, 'all');
    if (busy !== undefined) {
      throw UnavailableError('joins_busy', `Many people are joining right now: try again in ${busy} second${busy === 1 ? '' : 's'}.`, busy);
    }
    const name = shownText(input.name, DISPLAY_NAME_MAX, 'a display name', true);
    if ('problem' in name) throw new AppError('invalid_display_name', name.problem);
    const code = typedJoinCode(input.code);
    const row = code ? await JOIN_CODES.first(this.db, `${SELECT_CODES} WHERE c.code = $1`, [code]) : undefined;
    if (!row) return this.refuse(input.address, new AppError('join_code_wrong', WRONG_CODE_MESSAGE));
    const local = `guest-${randomUUID().slice(0, 8)}`;
    const email = `${local}@${GUEST_EMAIL_DOMAIN}`;
    const joined = await this.mutate(async (tx) => {
      // Locked, so that a close and a join do not cross: a guest joins an open code or none.
      const live = await JOIN_CODES.first(tx, `${SELECT_CODES} WHERE c.id = $1 FOR UPDATE`, [row.id]);
      if (live?.state !== 'open') return { value: undefined, changed: [], audit: null };
      const user = await IDS.one(tx, "INSERT INTO users (email, name, role, join_code_id) VALUES ($1, $2, 'user', $3) RETURNING id", [
        email,
        name.value,
        row.id,
      ]);
      const workspace = await insertWorkspace(tx, user.id, email);
      await tx.query('UPDATE join_codes SET joined = joined + 1 WHERE id = $1', [row.id]);
      const value: JoinedGuest = {
        userId: user.id,
        email,
        name: name.value,
        workspace,
        code: { id: row.id, code: formatJoinCode(row.code), expiresAt: live.expires_at },
      };
      return {
        value,
        changed: [{ kind: 'users', id: user.id }, { kind: 'workspaces', id: workspace.id }, codeChange(row.id)],
        audit: {
          actor: { id: user.id, email },
          action: 'join_code.join',
          target: { kind: 'join-code', id: row.id },
          metadata: { code: formatJoinCode(row.code), name: name.value, userId: user.id, workspaceSlug: workspace.slug, address: input.address },
        },
      };
    });
    if (!joined) return this.refuse(input.address, new AppError('join_code_expired', EXPIRED_CODE_MESSAGE));
    return joined;
  }

  /** 429 `too_many_join_attempts` while the address is locked out, saying until when. */
  private async assertNotLockedOut(address: string): Promise<void> {
    const counted = await this.failures.get(address);
    if (!counted || counted.consumedPoints <= JOIN_FAILURES_PER_ADDRESS) return;
    throw lockedOut(counted.msBeforeNext);
  }

  /**
   * Counts a wrong or expired code against the address and throws `refusal`; the try that reaches
   * JOIN_FAILURES_PER_ADDRESS locks the address out instead (audited `join_code.refused`, once).
   */
  private async refuse(address: string, refusal: AppError): Promise<never> {
    const counted = await this.failures.consume(address).catch((rejection: unknown) => {
      // Counted past the limit by tries that crossed this one: locked out already.
      if (rejection instanceof Error) throw rejection;
      return undefined;
    });
    if (counted && counted.remainingPoints > 0) throw refusal;
    if (!counted) throw lockedOut(JOIN_LOCKOUT_SECONDS * 1000);
    await this.failures.block(address, JOIN_LOCKOUT_SECONDS);
    const until = new Date(Date.now() + JOIN_LOCKOUT_SECONDS * 1000);
    await this.mutate(async () => ({
      value: undefined,
      changed: [],
      audit: {
        actor: { id: null, email: 'anonymous' },
        action: 'join_code.refused',
        target: { kind: 'address', id: address },
        metadata: {
          failures: JOIN_FAILURES_PER_ADDRESS,
          windowMinutes: JOIN_FAILURE_WINDOW_SECONDS / 60,
          lockedUntil: until.toISOString(),
          last: refusal.code,
        },
      },
    }));
    throw lockedOut(JOIN_LOCKOUT_SECONDS * 1000);
  }

  /** The codes whose expiry is due (expired or closed, guests not yet all removed), oldest first. */
  async due(): Promise<JoinCodeRecord[]> {
    const rows = await JOIN_CODES.all(
      this.db,
      `${SELECT_CODES} WHERE c.handled_at IS NULL AND (c.closed_at IS NOT NULL OR c.expires_at <= now()) ORDER BY c.expires_at`,
    );
    return this.withGuests(rows);
  }

  /** When the next open code expires (for the expiry's timer), or undefined when none is open. */
  async nextExpiry(): Promise<Date | undefined> {
    const row = await NEXT.one(this.db, 'SELECT min(expires_at) AS at FROM join_codes WHERE handled_at IS NULL AND closed_at IS NULL');
    return row.at ?? undefined;
  }

  /** Records a backup that a code's expiry made of a guest's home, before the guest is removed (so a restart still names it). */
  recordBackup(codeId: string, backup: string): Promise<void> {
    return this.mutate(async (tx) => {
      await tx.query('UPDATE join_codes SET backups = array_append(backups, $2) WHERE id = $1', [codeId, backup]);
      return { value: undefined, changed: [], audit: null };
    });
  }

  /**
   * Marks a due code's expiry handled once none of its guests is left, audited `join_code.expire`
   * with the backups made; false (nothing done) while a guest is left or when it was handled already.
   */
  markHandled(actor: Actor, codeId: string): Promise<boolean> {
    return this.mutate(async (tx) => {
      const row = await JOIN_CODES.first(tx, `${SELECT_CODES} WHERE c.id = $1 AND c.handled_at IS NULL FOR UPDATE`, [codeId]);
      const left = await IDS.all(tx, 'SELECT id FROM users WHERE join_code_id = $1 LIMIT 1', [codeId]);
      if (!row || row.state === 'open' || left.length > 0) return { value: false, changed: [], audit: null };
      await tx.query('UPDATE join_codes SET handled_at = now() WHERE id = $1', [codeId]);
      return {
        value: true,
        changed: [codeChange(codeId)],
        audit: {
          actor,
          action: 'join_code.expire',
          target: { kind: 'join-code', id: codeId },
          metadata: { code: formatJoinCode(row.code), label: row.label, closed: row.state === 'closed', guests: row.joined, backups: row.backups },
        },
      };
    });
  }

  /** The rows as records, with the guests of each (one query, by the index on users.join_code_id). */
  private async withGuests(rows: CodeRow[]): Promise<JoinCodeRecord[]> {
    if (rows.length === 0) return [];
    const guests = await GUESTS.all(this.db, `${SELECT_GUESTS} WHERE u.join_code_id = ANY($1::uuid[]) ORDER BY u.created_at`, [rows.map((row) => row.id)]);
    return rows.map((row) =>
      toRecord(
        row,
        guests
          .filter((guest) => guest.join_code_id === row.id)
          .map((guest) => ({ userId: guest.id, name: guest.name, workspaceId: guest.workspace_id, workspaceSlug: guest.workspace_slug })),
      ),
    );
  }
}

/** 429 `too_many_join_attempts`, saying when to try again. */
function lockedOut(msBeforeNext: number): AppError {
  const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
  const minutes = Math.ceil(seconds / 60);
  return TooManyError(
    'too_many_join_attempts',
    `Too many wrong join codes were typed on this network. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
    seconds,
  );
}
