import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { signalChannel } from '../db/changes.ts';
import { col, rowCodec } from './row-codec.ts';
import { GUEST_UNTIL, USERS, type Role } from './users.ts';

/** How long a session lives without use when koa-session gives no maxAge ("session" cookies). */
const SESSION_COOKIE_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * The whole life of a session without a signed-in user (a sign-in under way: grant's state, the
 * return path). Nothing renews it: anyone can start sign-ins, and each would otherwise keep a row
 * for as long as a signed-in session lives.
 */
export const ANONYMOUS_SESSION_TTL_MS = 10 * 60 * 1000;

/**
 * What names a session where its id may not go (the id is a credential): in the NOTIFY that tells
 * every replica a session ended, and in what each replica compares it with. SHA-256, base64url.
 */
export const sessionDigest = (id: string): string => createHash('sha256').update(id).digest('base64url');

/** The sessions table: its rows' columns the store reads. */
const SESSIONS = rowCodec('sessions', { id: col.text, user_id: col.nullable(col.text), data: col.jsonObject, expires_at: col.timestamp });
const DATA = SESSIONS.pick('data');
const IDS = SESSIONS.pick('id');
/** The user behind a session: the users table's columns the proxy needs. */
const SESSION_USERS = USERS.pick('id', 'email', 'role', 'guest_until');

/** The external store koa-session calls. */
interface KoaSessionStore {
  get(key: string): Promise<Record<string, unknown> | undefined>;
  set(key: string, session: Record<string, unknown>, maxAge: number | 'session' | undefined): Promise<void>;
  destroy(key: string): Promise<void>;
}

/** The user behind a live session, as the proxy's fast path needs it. */
export interface SessionUser {
  id: string;
  email: string;
  role: Role;
  /** A guest of a join code: until when they may act; null: not a guest (UserRecord.guestUntil). */
  guestUntil: Date | null;
}

/**
 * Sessions in PostgreSQL: rows carry `user_id`, so that deleting a user ends their sessions (a
 * demotion keeps them: the role is read on every request); expired rows are never returned. A session without a signed-in user lives
 * ANONYMOUS_SESSION_TTL_MS from its first write, whatever koa-session asks and however often it is
 * written again; a signed-in one lives as long as koa-session says, renewed on each write.
 */
export class SessionStore {
  private readonly db: DataSource;
  /** What koa-session reads and writes through. */
  readonly koa: KoaSessionStore;

  constructor(db: DataSource) {
    this.db = db;
    this.koa = {
      get: async (key) => {
        return (await DATA.first(db, 'SELECT data FROM sessions WHERE id = $1 AND expires_at > now()', [key]))?.data;
      },
      set: async (key, session, maxAge) => {
        const userId = typeof session.userId === 'string' ? session.userId : null;
        const requested = typeof maxAge === 'number' ? maxAge : SESSION_COOKIE_TTL_MS;
        const ttl = userId === null ? Math.min(requested, ANONYMOUS_SESSION_TTL_MS) : requested;
        // A user deleted meanwhile leaves user_id NULL rather than failing; the gate then ignores the session.
        // An anonymous session's end never moves later ($5): saving it again renews nothing.
        await db.query(
          `INSERT INTO sessions (id, user_id, data, expires_at)
           VALUES ($1, (SELECT id FROM users WHERE id::text = $2), $3, now() + make_interval(secs => $4))
           ON CONFLICT (id) DO UPDATE SET user_id = EXCLUDED.user_id, data = EXCLUDED.data,
             expires_at = CASE WHEN $5 THEN LEAST(sessions.expires_at, EXCLUDED.expires_at) ELSE EXCLUDED.expires_at END`,
          [key, userId, JSON.stringify(session), ttl / 1000, userId === null],
        );
      },
      // Every replica hears that it ended (its open WebSockets and live views end at once).
      destroy: async (key) => {
        await db.query('WITH gone AS (DELETE FROM sessions WHERE id = $1 RETURNING id) SELECT pg_notify($2, $3) FROM gone', [
          key,
          signalChannel('session_ended'),
          sessionDigest(key),
        ]);
      },
    };
  }

  /** Deletes expired sessions; returns how many. */
  async prune(): Promise<number> {
    return (await IDS.all(this.db, 'DELETE FROM sessions WHERE expires_at <= now() RETURNING id')).length;
  }

  /** The user behind a live session (id, email, role, and until when a guest may act), or undefined. */
  async userOf(sessionId: string): Promise<SessionUser | undefined> {
    const row = await SESSION_USERS.first(
      this.db,
      `SELECT u.id, u.email, u.role, ${GUEST_UNTIL} FROM sessions s JOIN users u ON u.id = s.user_id LEFT JOIN join_codes c ON c.id = u.join_code_id
       WHERE s.id = $1 AND s.expires_at > now()`,
      [sessionId],
    );
    return row && { id: row.id, email: row.email, role: row.role, guestUntil: row.guest_until };
  }
}
