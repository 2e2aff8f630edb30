import type { Middleware } from 'koa';

/**
 * The headers that keep a page out of every frame: old browsers read X-Frame-Options, current ones
 * CSP's frame-ancestors. Nothing the control plane serves is meant to be framed: framed, a sign-in
 * link or the setup page could be clicked through by someone who cannot see it (a student's page
 * overlaying an admin's sign-in link would sign the admin in as the student).
 */
export const NO_FRAMES: Readonly<Record<string, string>> = { 'X-Frame-Options': 'DENY', 'Content-Security-Policy': "frame-ancestors 'none'" };

/** Sets NO_FRAMES on every answer of the Koa app; a route that sets a CSP of its own (the panel's) must keep frame-ancestors 'none' in it. */
export function noFrames(): Middleware {
  return async (ctx, next) => {
    ctx.set(NO_FRAMES);
    await next();
  };
}
