/**
 * Host mode's credentials (see host.ts): the signed cookie a workspace's own origin gets, and the
 * one-time codes that hand a control-plane session over to it.
 *
 * The cookie names the user, the workspace and the control-plane session it came from, and when it
 * ends; it is signed with an HMAC-SHA256 keyed from the session secret (a key of its own, so that
 * no signature of one kind can pass for the other). It grants nothing by itself: every request
 * checks again that the session lives, is still that user's, and that the user may open the
 * workspace (api/policy.ts).
 *
 * The codes live in the database (src/store/handoffs.ts), hashed (SHA-256: what is kept lets no one
 * in), for 60 seconds, and are taken once: a code issued by one replica is redeemed by another.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** How long a workspace's cookie lasts; then the next navigation hands over again (invisible while signed in). */
export const GRANT_TTL_MS = 24 * 60 * 60 * 1000;

/** What a workspace's cookie says. */
export interface WorkspaceGrant {
  userId: string;
  workspaceId: string;
  /** The control-plane session it was handed over from: when that ends, so does the cookie. */
  sessionId: string;
  /** When the cookie ends (epoch milliseconds). */
  expiresAt: number;
}

/** SHA-256 of a text, base64url. */
export function digest(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

/** Fresh random text of `bytes` bytes, base64url. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** Signs and reads workspace cookies (see the file comment). */
export class GrantSigner {
  private readonly key: Buffer;

  constructor(sessionSecret: string) {
    this.key = createHmac('sha256', sessionSecret).update('workspace-cookie/v1').digest();
  }

  /** The cookie value of a grant: its fields, base64url JSON, then `.` and their MAC. */
  sign(grant: WorkspaceGrant): string {
    const payload = Buffer.from(JSON.stringify([grant.userId, grant.workspaceId, grant.sessionId, grant.expiresAt])).toString('base64url');
    return `${payload}.${this.mac(payload)}`;
  }

  /** The grant a cookie value carries when its MAC is right and it has not ended; undefined for anything else. */
  verify(value: string, now = Date.now()): WorkspaceGrant | undefined {
    const dot = value.indexOf('.');
    if (dot <= 0 || value.length > 1024) return undefined;
    const payload = value.slice(0, dot);
    const given = Buffer.from(value.slice(dot + 1), 'base64url');
    const expected = Buffer.from(this.mac(payload), 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    let fields: unknown;
    try {
      fields = JSON.parse(Buffer.from(payload, 'base64url').toString());
    } catch {
      return undefined;
    }
    if (!Array.isArray(fields) || fields.length !== 4) return undefined;
    const [userId, workspaceId, sessionId, expiresAt] = fields as unknown[];
    if (typeof userId !== 'string' || typeof workspaceId !== 'string' || typeof sessionId !== 'string' || typeof expiresAt !== 'number') return undefined;
    if (expiresAt <= now) return undefined;
    return { userId, workspaceId, sessionId, expiresAt };
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.key).update(payload).digest('base64url');
  }
}
