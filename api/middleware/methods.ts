import type { Middleware } from 'koa';
import { AppError } from '../../src/errors.ts';

/** The methods some route of the control plane's own API answers (the proxy passes its own on to the editor). */
export const IMPLEMENTED_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

const IMPLEMENTED = new Set<string>(IMPLEMENTED_METHODS);

/**
 * Refuses, before anything else looks at the request (no session lookup, no route), a method that
 * no route answers (TRACE, PROPFIND, PURGE, ...) with 405 `method_not_allowed` and an `Allow`
 * header. Left to the routers, such a method would be a 501 that the error middleware takes for an
 * unexpected failure.
 */
export function implementedMethodsOnly(): Middleware {
  return async (ctx, next) => {
    if (!IMPLEMENTED.has(ctx.method)) {
      throw new AppError('method_not_allowed', `The method ${ctx.method} is not supported here.`, { Allow: IMPLEMENTED_METHODS.join(', ') });
    }
    await next();
  };
}
