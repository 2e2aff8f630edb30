import type { DataSource } from 'typeorm';
import { queryRows } from '../db/sql.ts';

/** How long a session lives without use when koa-session gives no maxAge ("session" cookies). */
const SESSION_COOKIE_TTL_MS = 24 * 60 * 60 * 1000;

/** The session store koa-session calls; rows carry `user_id` so that deleting a user ends their sessions. */
export interface SessionStore {
  get(key: string): Promise<Record<string, unknown> | undefined>;
  set(key: string, session: Record<string, unknown>, maxAge: number | 'session' | undefined): Promise<void>;
  destroy(key: string): Promise<void>;
}

/** Sessions in PostgreSQL: expired rows are never returned, and `pruneExpiredSessions` deletes them. */
export function sessionStore(db: DataSource): SessionStore {
  return {
    async get(key) {
      const rows: { data: Record<string, unknown> }[] = await db.query('SELECT data FROM sessions WHERE id = $1 AND expires_at > now()', [key]);
      return rows[0]?.data;
    },
    async set(key, session, maxAge) {
      const ttl = typeof maxAge === 'number' ? maxAge : SESSION_COOKIE_TTL_MS;
      const userId = typeof session.userId === 'string' ? session.userId : null;
      // A user deleted meanwhile leaves user_id NULL rather than failing; the gate then ignores the session.
      await db.query(
        `INSERT INTO sessions (id, user_id, data, expires_at)
         VALUES ($1, (SELECT id FROM users WHERE id::text = $2), $3, now() + make_interval(secs => $4))
         ON CONFLICT (id) DO UPDATE SET user_id = EXCLUDED.user_id, data = EXCLUDED.data, expires_at = EXCLUDED.expires_at`,
        [key, userId, JSON.stringify(session), ttl / 1000],
      );
    },
    async destroy(key) {
      await db.query('DELETE FROM sessions WHERE id = $1', [key]);
    },
  };
}

/** Deletes expired sessions; returns how many. */
export async function pruneExpiredSessions(db: DataSource): Promise<number> {
  return (await queryRows(db, 'DELETE FROM sessions WHERE expires_at <= now() RETURNING id')).length;
}

/** The user behind a live session, for the proxy's fast path: id, email and role, or undefined. */
export async function findSessionUser(db: DataSource, sessionId: string): Promise<{ id: string; email: string; role: 'user' | 'admin' } | undefined> {
  const rows: { id: string; email: string; role: 'user' | 'admin' }[] = await db.query(
    'SELECT u.id, u.email, u.role FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1 AND s.expires_at > now()',
    [sessionId],
  );
  return rows[0];
}
