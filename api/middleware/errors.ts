import type { Middleware } from 'koa';
import { AppError, NotFoundError } from '../../src/errors.ts';
import type { Logger } from '../../src/log.ts';
import { errorBody } from '../responses.ts';

/** Codes for the client errors that Koa and its middleware raise as http-errors. */
const HTTP_ERROR_CODES: Record<number, [code: string, message: string]> = {
  400: ['bad_request', 'The request could not be read.'],
  405: ['method_not_allowed', 'This method is not allowed here.'],
  413: ['payload_too_large', 'The request body is too large.'],
  415: ['unsupported_media_type', 'This content type is not supported here.'],
};

/**
 * Renders every error as JSON `{"error": {"code", "message"}}`. AppErrors keep their status and
 * code; http-errors from Koa's own stack get a stable code; anything else is logged with its stack
 * and answered as a 500 `internal_error` that tells the client nothing more. Unmatched routes end
 * as a 404 `not_found`.
 */
export function errorMiddleware(log: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw NotFoundError('not_found', `No route for ${ctx.method} ${ctx.path}.`);
      }
    } catch (error) {
      const rendered = render(error);
      if (rendered.status >= 500 && !(error instanceof AppError)) {
        log.error({ error, method: ctx.method, path: ctx.path }, 'request failed');
      }
      ctx.status = rendered.status;
      ctx.set(rendered.headers);
      ctx.body = errorBody(rendered.code, rendered.message);
    }
  };
}

function render(error: unknown): { status: number; code: string; message: string; headers: Record<string, string> } {
  if (error instanceof AppError) return error;
  const status = (error as { status?: unknown })?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // co-body reports unparseable JSON as a SyntaxError with status 400.
    if (error instanceof SyntaxError) return { status: 400, code: 'invalid_json', message: 'The request body is not valid JSON.', headers: {} };
    const [code, message] = HTTP_ERROR_CODES[status] ?? HTTP_ERROR_CODES[400]!;
    return { status, code, message, headers: {} };
  }
  return { status: 500, code: 'internal_error', message: 'Something went wrong on our side; it has been logged.', headers: {} };
}
