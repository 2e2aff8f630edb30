import { createHash, randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { col, rowCodec } from './row-codec.ts';

/** How long a hand-over code may wait to be used. */
export const HANDOFF_TTL_MS = 60 * 1000;

/** How many codes may wait at once; the oldest go first beyond that (each is a redirect a browser follows at once). */
export const MAX_WAITING_CODES = 10_000;

/** A waiting hand-over: for whom, from which session, to which workspace, for which browser, and where to land. */
export interface Handoff {
  userId: string;
  sessionId: string;
  workspaceId: string;
  /** SHA-256 of the state cookie the browser got on the workspace's host when it set out (binds the code to that browser). */
  stateHash: string;
  /** The path on the workspace's host to land on. */
  path: string;
}

/** The handoff_codes table: a code taken, and whether it was still live. */
const HANDOFF_CODES = rowCodec('handoff_codes', {
  user_id: col.text,
  session_id: col.text,
  workspace_id: col.text,
  state_hash: col.text,
  path: col.text,
  /** `expires_at > now()` as it was taken. */
  live: col.boolean,
});
const HASHES = rowCodec('handoff_codes', { code_hash: col.text });

/** SHA-256 of a code, base64url: what is stored (it lets no one in). */
const hashOf = (code: string) => createHash('sha256').update(code).digest('base64url');

/**
 * Host mode's one-time hand-over codes (api/proxy/host-mode.ts), in the database so that any
 * replica redeems what any replica issued: 32 random bytes each, stored only as their SHA-256,
 * usable once within HANDOFF_TTL_MS. Not audited: each is a redirect that a browser follows at once.
 */
export class HandoffStore {
  private readonly db: DataSource;

  constructor(db: DataSource) {
    this.db = db;
  }

  /**
   * Makes a code for `handoff`, clearing expired codes and, beyond MAX_WAITING_CODES waiting, the
   * oldest. Returns the code (the only time it exists outside the browser).
   */
  async issue(handoff: Handoff): Promise<string> {
    const code = randomBytes(32).toString('base64url');
    await this.db.query(
      `WITH fresh AS (
         INSERT INTO handoff_codes (code_hash, user_id, session_id, workspace_id, state_hash, path, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
       ), expired AS (
         DELETE FROM handoff_codes WHERE expires_at <= now()
       )
       DELETE FROM handoff_codes WHERE code_hash IN (SELECT code_hash FROM handoff_codes ORDER BY expires_at DESC OFFSET $8)`,
      [hashOf(code), handoff.userId, handoff.sessionId, handoff.workspaceId, handoff.stateHash, handoff.path, HANDOFF_TTL_MS / 1000, MAX_WAITING_CODES - 1],
    );
    return code;
  }

  /** Takes a code: its hand-over once, while it has not expired; undefined for an unknown, used or expired one. */
  async take(code: string): Promise<Handoff | undefined> {
    if (code.length === 0 || code.length > 100) return undefined;
    const row = await HANDOFF_CODES.first(
      this.db,
      'DELETE FROM handoff_codes WHERE code_hash = $1 RETURNING user_id, session_id, workspace_id, state_hash, path, expires_at > now() AS live',
      [hashOf(code)],
    );
    if (!row?.live) return undefined;
    return { userId: row.user_id, sessionId: row.session_id, workspaceId: row.workspace_id, stateHash: row.state_hash, path: row.path };
  }

  /** What is kept, for tests: the hashes under which codes wait. */
  async storedKeys(): Promise<string[]> {
    return (await HASHES.all(this.db, 'SELECT code_hash FROM handoff_codes ORDER BY expires_at')).map((row) => row.code_hash);
  }
}
