import { ERROR_CODES, type CodeWithStatus, type ErrorCode, type ErrorStatus, type StatusOf } from './error-codes.ts';

/** Extra response headers of an error (Retry-After, Allow). */
type Headers = Record<string, string>;

/** The form the CLI's sites still write, status first: the status must be the code's own in the catalogue. */
type StatusFirst = { [C in ErrorCode]: [status: StatusOf<C>, code: C, message: string, headers?: Headers] }[ErrorCode];

/**
 * An error meant for the client: a stable snake_case code of the catalogue (src/error-codes.ts),
 * its status (the catalogue's) and a message safe to show.
 */
export class AppError extends Error {
  readonly status: ErrorStatus;
  readonly code: ErrorCode;
  /** Extra response headers (e.g. Retry-After). */
  readonly headers: Headers;
  constructor(...args: [code: ErrorCode, message: string, headers?: Headers] | StatusFirst) {
    const [code, message, headers = {}] = (typeof args[0] === 'number' ? args.slice(1) : args) as [ErrorCode, string, Headers?];
    super(message);
    this.name = 'AppError';
    this.status = ERROR_CODES[code].status;
    this.code = code;
    this.headers = headers;
  }
}

// Every factory that takes a code takes it first, then the message; a factory takes only the codes of its status.

/** 400: the request is malformed; the message names the field. */
export const ValidationError = (code: CodeWithStatus<400>, message: string) => new AppError(code, message);
/** 401: no valid credentials. */
export const AuthenticationError = (message = 'Authentication required.') => new AppError('authentication_required', message);
/** 403: valid credentials without the right role. */
export const AuthorizationError = (message = 'You are not allowed to do this.') => new AppError('forbidden', message);
/** 404: the named resource does not exist. */
export const NotFoundError = (code: CodeWithStatus<404>, message: string) => new AppError(code, message);
/** 409: the request conflicts with the current state. */
export const ConflictError = (code: CodeWithStatus<409>, message: string) => new AppError(code, message);
/** 503: the server cannot take this now; Retry-After says when to try again. */
export const UnavailableError = (code: CodeWithStatus<503>, message: string, retryAfterSeconds: number) =>
  new AppError(code, message, { 'Retry-After': String(retryAfterSeconds) });

/** 429: the caller holds as much of something as one may (connections, streams); Retry-After says when to try again. */
export const TooManyError = (code: CodeWithStatus<429>, message: string, retryAfterSeconds: number) =>
  new AppError(code, message, { 'Retry-After': String(retryAfterSeconds) });

/** 405: the method is not served here; Allow names those that are. */
export const MethodNotAllowedError = (allow: string) => new AppError('method_not_allowed', `Only ${allow} is allowed here.`, { Allow: allow });
/** 502 or 504: the editor behind the proxy failed to answer, or in time. */
export const UpstreamError = (code: CodeWithStatus<502 | 504>, message: string) => new AppError(code, message);
/** 500: something unexpected, logged on the server side; the client learns nothing more. */
export const InternalError = () => new AppError('internal_error', 'Something went wrong on our side; it has been logged.');

/** The exact message of the spec shown to a student at the cap. */
export const AT_CAPACITY_MESSAGE = 'Server at capacity. Your coach has been notified. Please try again in a few minutes.';

/** Seconds a refused student is told to wait before trying again. */
const AT_CAPACITY_RETRY_AFTER_SECONDS = 60;

/**
 * 503 `at_capacity`: opening a workspace was refused because as many workspaces as the effective
 * cap are wanted running. Carries what the refusal was about, for whoever logs and counts it.
 */
export class AtCapacityError extends AppError {
  readonly workspaceId: string;
  readonly slug: string;
  readonly cap: number;
  readonly running: number;
  constructor(refusal: { workspaceId: string; slug: string; cap: number; running: number }) {
    super('at_capacity', AT_CAPACITY_MESSAGE, { 'Retry-After': String(AT_CAPACITY_RETRY_AFTER_SECONDS) });
    this.name = 'AtCapacityError';
    this.workspaceId = refusal.workspaceId;
    this.slug = refusal.slug;
    this.cap = refusal.cap;
    this.running = refusal.running;
  }
}
