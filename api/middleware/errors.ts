import type { Middleware } from 'koa';
import { errorCode, isUnreachable } from '../../src/db/errors.ts';
import type { ErrorCode } from '../../src/error-codes.ts';
import { AppError, InternalError, NotFoundError, UnavailableError } from '../../src/errors.ts';
import type { Logger } from '../../src/log.ts';
import { errorBody } from '../responses.ts';

/** What a request that needed the database answers while it cannot be reached. */
export const DATABASE_UNAVAILABLE = UnavailableError(
  'database_unavailable',
  'The control plane cannot reach its database right now; try again in a moment.',
  5,
);

/** How long without another such failure before an outage is taken to be over (and said to be). */
const OUTAGE_QUIET_MS = 10_000;

/**
 * Says once when requests start failing because the database cannot be reached, and once when
 * none has for OUTAGE_QUIET_MS (with how many were answered 503 meanwhile): an outage is two log
 * lines, not one per request.
 */
class OutageLog {
  private readonly log: Logger;
  private outage: { since: number; refused: number; timer: ReturnType<typeof setTimeout> } | undefined;

  constructor(log: Logger) {
    this.log = log;
  }

  refused(error: unknown): void {
    if (this.outage) {
      this.outage.refused++;
      this.outage.timer.refresh();
      return;
    }
    this.log.error({ code: errorCode(error) }, 'the database cannot be reached: requests that need it are answered 503 until it can');
    const timer = setTimeout(() => this.over(), OUTAGE_QUIET_MS);
    timer.unref();
    this.outage = { since: Date.now(), refused: 1, timer };
  }

  private over(): void {
    const outage = this.outage!;
    this.outage = undefined;
    const seconds = Math.round((Date.now() - outage.since - OUTAGE_QUIET_MS) / 1000);
    this.log.info(
      { refused: outage.refused, seconds },
      `no request has failed on the database for ${OUTAGE_QUIET_MS / 1000} s: ${outage.refused} answered 503 in the ${seconds} s before`,
    );
  }
}

/** Codes for the client errors that Koa and its middleware raise as http-errors, by status; any other is a 400 `bad_request`. */
const HTTP_ERROR_CODES: Record<number, [code: ErrorCode, message: string]> = {
  400: ['bad_request', 'The request could not be read.'],
  405: ['method_not_allowed', 'This method is not allowed here.'],
  413: ['payload_too_large', 'The request body is too large.'],
  415: ['unsupported_media_type', 'This content type is not supported here.'],
};

/**
 * Renders every error as JSON `{"error": {"code", "message"}}`. AppErrors keep their status and
 * code; http-errors from Koa's own stack get a stable code (and that code's status); a database that cannot be reached (its
 * connection refused, lost or unanswered) is a 503 `database_unavailable` with Retry-After, logged
 * once per outage (OutageLog); anything else is logged with its stack and answered as a 500
 * `internal_error` that tells the client nothing more. Unmatched routes end as a 404 `not_found`.
 */
export function errorMiddleware(log: Logger): Middleware {
  const outages = new OutageLog(log);
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw NotFoundError('not_found', `No route for ${ctx.method} ${ctx.path}.`);
      }
    } catch (error) {
      const unreachable = !(error instanceof AppError) && isUnreachable(error);
      if (unreachable) outages.refused(error);
      const rendered = render(unreachable ? DATABASE_UNAVAILABLE : error);
      if (rendered.status >= 500 && !(error instanceof AppError) && !unreachable) {
        log.error({ error, method: ctx.method, path: ctx.path }, 'request failed');
      }
      ctx.status = rendered.status;
      ctx.set(rendered.headers);
      ctx.body = errorBody(rendered.code, rendered.message);
    }
  };
}

function render(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const status = (error as { status?: unknown })?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // co-body reports unparseable JSON as a SyntaxError with status 400.
    if (error instanceof SyntaxError) return new AppError('invalid_json', 'The request body is not valid JSON.');
    return new AppError(...(HTTP_ERROR_CODES[status] ?? HTTP_ERROR_CODES[400]!));
  }
  return InternalError();
}
