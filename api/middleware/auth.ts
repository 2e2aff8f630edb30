import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Middleware, Next } from 'koa';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import { AppError, AuthenticationError, AuthorizationError } from '../../src/errors.ts';
import type { Actor } from '../../src/store/audit.ts';
import { overLimit } from '../../src/store/rate-limits.ts';
import type { UserRecord, UserStore } from '../../src/store/users.ts';
import { stillAllowed } from '../policy.ts';

/** The actor recorded for requests authenticated with the break-glass ADMIN_TOKEN. */
export const ADMIN_TOKEN_ACTOR: Actor = { id: null, email: 'admin-token' };

/** State that the gates leave for handlers. */
export interface AuthState {
  /** Who acts, for the audit log. */
  actor?: Actor;
  /** The signed-in user, read from the database on this request. */
  user?: UserRecord;
  /** The session that signed them in (its id, as the session cookie carries it). */
  sessionId?: string;
  /**
   * The origin a state-changing request must come from: a workspace's own (host mode), when the
   * proxy admitted it there with the workspace's cookie; unset: the control plane's.
   */
  origin?: string;
}

/** The bearer token of the request, or undefined. The scheme is case-insensitive (RFC 7235). */
function bearer(ctx: Context): string | undefined {
  const match = /^bearer +(\S+)\s*$/i.exec(ctx.get('authorization'));
  return match?.[1];
}

/** Compares secrets in constant time, whatever their lengths (both are hashed first). */
export function secretsEqual(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * Per-client-address limits on failures (wrong tokens, failing sign-in callbacks); only failures are
 * counted, so a limit never refuses what is right. The counters are the store's (RateLimitStore):
 * every replica counts against the same limit.
 */
export class Throttle {
  private readonly limiter: RateLimiterAbstract;
  constructor(limiter: RateLimiterAbstract) {
    this.limiter = limiter;
  }

  /** Counts one attempt from this address; throws 429 `too_many_requests` once over the limit (a failure to count is thrown as it is). */
  async consume(ctx: Context): Promise<void> {
    const retryAfter = await overLimit(this.limiter, ctx.ip);
    if (retryAfter !== undefined)
      throw new AppError('too_many_requests', 'Too many attempts from this address; wait a little and try again.', { 'Retry-After': String(retryAfter) });
  }
}

/**
 * Loads the signed-in user from the database on every request that carries a session (so a
 * demotion or deletion takes effect at once), and the session's id (the signed `sessionCookie`). A
 * session whose user is gone, or whose email was taken off the allowlist (admins excepted), is ended.
 * A request the proxy admitted on a workspace's host (`granted`: it checked the workspace's cookie,
 * and the session behind it) is its user's, from that workspace's origin, with no session here.
 */
export function loadUser(
  users: UserStore,
  isAllowed: (email: string) => boolean,
  sessionCookie: string,
  granted: (ctx: Context) => { userId: string; origin: string } | undefined,
): Middleware<AuthState> {
  return async (ctx, next) => {
    const grant = granted(ctx);
    if (grant) {
      const user = await users.get(grant.userId);
      if (user && stillAllowed(user, isAllowed)) Object.assign(ctx.state, { user, origin: grant.origin });
      return next();
    }
    const userId = ctx.session?.userId;
    if (typeof userId === 'string') {
      const user = await users.get(userId);
      if (user && stillAllowed(user, isAllowed)) {
        ctx.state.user = user;
        ctx.state.sessionId = ctx.cookies.get(sessionCookie, { signed: true });
      } else ctx.session = null;
    }
    await next();
  };
}

/**
 * Cross-site request check for cookie-authenticated requests that change state: the browser must
 * say the request is same-origin (`Sec-Fetch-Site: same-origin`) or send an `Origin` equal to ours.
 */
export function assertSameOrigin(ctx: Context, publicOrigin: string): void {
  const site = ctx.get('sec-fetch-site');
  if (site === 'same-origin') return;
  if (site === '' && ctx.get('origin') === publicOrigin) return;
  if (site !== '' && site !== 'same-origin') throw new AppError('csrf_failed', 'This request came from another site and was refused.');
  throw new AppError('csrf_failed', 'This request lacks a same-origin Origin header and was refused.');
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export interface GateOptions {
  adminToken: string | undefined;
  publicOrigin: string;
  /** Counts failed bearer attempts per address. */
  failures: Throttle;
}

/**
 * Checks a bearer token if one is sent: true when valid (never throttled: no count of wrong tokens
 * can lock the operators out), 401 when wrong, counted, and 429 once this address sent too many
 * wrong ones; false when none is sent.
 */
async function checkBearer(ctx: Context, expected: string | undefined, failures: Throttle): Promise<boolean> {
  const given = bearer(ctx);
  if (given === undefined && !ctx.get('authorization')) return false;
  if (given !== undefined && expected !== undefined && secretsEqual(given, expected)) return true;
  await failures.consume(ctx);
  ctx.set('WWW-Authenticate', 'Bearer');
  throw AuthenticationError('The bearer token is not valid.');
}

/**
 * The admin gate: `Authorization: Bearer <ADMIN_TOKEN>` (when configured; works before any admin
 * has signed in), or a signed-in admin whose state-changing requests pass the same-origin check.
 * No credentials → 401; a signed-in non-admin → 403.
 */
export function adminGate(options: GateOptions): Middleware<AuthState> {
  return async (ctx, next: Next) => {
    if (await checkBearer(ctx, options.adminToken, options.failures)) {
      ctx.state.actor = ADMIN_TOKEN_ACTOR;
      return next();
    }
    const user = ctx.state.user;
    if (!user) {
      ctx.set('WWW-Authenticate', 'Bearer');
      throw AuthenticationError('An admin session or a valid admin bearer token is required.');
    }
    if (user.role !== 'admin') throw AuthorizationError('This needs an admin account.');
    if (!SAFE_METHODS.has(ctx.method)) assertSameOrigin(ctx, options.publicOrigin);
    ctx.state.actor = { id: user.id, email: user.email };
    return next();
  };
}

/** The metrics gate: `Authorization: Bearer <METRICS_TOKEN>` when set, else the admin gate. */
export function metricsGate(metricsToken: string | undefined, admin: GateOptions): Middleware<AuthState> {
  if (metricsToken === undefined) return adminGate(admin);
  return async (ctx, next) => {
    if (await checkBearer(ctx, metricsToken, admin.failures)) return next();
    ctx.set('WWW-Authenticate', 'Bearer');
    throw AuthenticationError('A valid metrics bearer token is required.');
  };
}
