import { randomBytes } from 'node:crypto';
import Keygrip from 'keygrip';
import { SESSION_COOKIE } from '../../api/app.ts';
import type { SessionStore } from '../../src/store/sessions.ts';
import { TEST_SESSION_SECRET } from './app.ts';

/**
 * A signed-in session for `userId`, made as koa-session makes one (a row written through the
 * session store, a cookie signed with the app's key): returns the Cookie header value and the session id.
 */
export async function sessionFor(sessions: SessionStore, userId: string, secret = TEST_SESSION_SECRET): Promise<{ cookie: string; sessionId: string }> {
  const sessionId = randomBytes(16).toString('hex');
  await sessions.koa.set(sessionId, { userId, _expire: Date.now() + 3_600_000, _maxAge: 3_600_000 }, 3_600_000);
  const signature = new Keygrip([secret]).sign(`${SESSION_COOKIE}=${sessionId}`);
  return { cookie: `${SESSION_COOKIE}=${sessionId}; ${SESSION_COOKIE}.sig=${signature}`, sessionId };
}
