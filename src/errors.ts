/** An error meant for the client: an HTTP status, a stable snake_case code and a message safe to show. */
export class AppError extends Error {
  readonly status: number;
  readonly code: string;
  /** Extra response headers (e.g. Retry-After). */
  readonly headers: Record<string, string>;
  constructor(status: number, code: string, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'AppError';
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

// Every factory that takes a code takes it first, then the message.

/** 400: the request is malformed; the message names the field. */
export const ValidationError = (code: string, message: string) => new AppError(400, code, message);
/** 401: no valid credentials. */
export const AuthenticationError = (message = 'Authentication required.') => new AppError(401, 'authentication_required', message);
/** 403: valid credentials without the right role. */
export const AuthorizationError = (message = 'You are not allowed to do this.') => new AppError(403, 'forbidden', message);
/** 404: the named resource does not exist. */
export const NotFoundError = (code: string, message: string) => new AppError(404, code, message);
/** 409: the request conflicts with the current state. */
export const ConflictError = (code: string, message: string) => new AppError(409, code, message);
/** 503: the server cannot take this now; Retry-After says when to try again. */
export const UnavailableError = (code: string, message: string, retryAfterSeconds: number) =>
  new AppError(503, code, message, { 'Retry-After': String(retryAfterSeconds) });

/** 429: the caller holds as much of something as one may (connections, streams); Retry-After says when to try again. */
export const TooManyError = (code: string, message: string, retryAfterSeconds: number) =>
  new AppError(429, code, message, { 'Retry-After': String(retryAfterSeconds) });

/** 405: the method is not served here; Allow names those that are. */
export const MethodNotAllowedError = (allow: string) => new AppError(405, 'method_not_allowed', `Only ${allow} is allowed here.`, { Allow: allow });
/** 502 or 504: the editor behind the proxy failed to answer, or in time. */
export const UpstreamError = (status: 502 | 504, code: string, message: string) => new AppError(status, code, message);
/** 500: something unexpected, logged on the server side; the client learns nothing more. */
export const InternalError = () => new AppError(500, 'internal_error', 'Something went wrong on our side; it has been logged.');

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
    super(503, 'at_capacity', AT_CAPACITY_MESSAGE, { 'Retry-After': String(AT_CAPACITY_RETRY_AFTER_SECONDS) });
    this.name = 'AtCapacityError';
    this.workspaceId = refusal.workspaceId;
    this.slug = refusal.slug;
    this.cap = refusal.cap;
    this.running = refusal.running;
  }
}
