import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Middleware } from 'koa';
import { AuthenticationError } from '../../src/errors.ts';
import type { Actor } from '../../src/store/audit.ts';

/** The actor recorded for requests authenticated with the break-glass ADMIN_TOKEN. */
export const ADMIN_TOKEN_ACTOR: Actor = { id: null, email: 'admin-token' };

/** State that the gates leave for handlers. */
export interface AuthState {
  actor?: Actor;
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
 * The admin gate: `Authorization: Bearer <ADMIN_TOKEN>` when the token is configured. Signed-in
 * admin sessions join it with the identity issue; until then, without a token, every request is 401.
 */
export function adminGate(adminToken: string | undefined): Middleware<AuthState> {
  return async (ctx, next) => {
    const given = bearer(ctx);
    if (adminToken === undefined || given === undefined || !secretsEqual(given, adminToken)) {
      ctx.set('WWW-Authenticate', 'Bearer');
      throw AuthenticationError('An admin session or a valid admin bearer token is required.');
    }
    ctx.state.actor = ADMIN_TOKEN_ACTOR;
    await next();
  };
}

/** The metrics gate: `Authorization: Bearer <METRICS_TOKEN>` when set, else the admin gate. */
export function metricsGate(metricsToken: string | undefined, adminToken: string | undefined): Middleware<AuthState> {
  if (metricsToken === undefined) return adminGate(adminToken);
  return async (ctx, next) => {
    const given = bearer(ctx);
    if (given === undefined || !secretsEqual(given, metricsToken)) {
      ctx.set('WWW-Authenticate', 'Bearer');
      throw AuthenticationError('A valid metrics bearer token is required.');
    }
    await next();
  };
}
