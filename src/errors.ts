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

/** 400: the request is malformed; the message names the field. */
export const ValidationError = (message: string, code = 'validation_error') => new AppError(400, code, message);
/** 401: no valid credentials. */
export const AuthenticationError = (message = 'Authentication required.') => new AppError(401, 'authentication_required', message);
/** 403: valid credentials without the right role. */
export const AuthorizationError = (message = 'You are not allowed to do this.') => new AppError(403, 'forbidden', message);
/** 404: the named resource does not exist. */
export const NotFoundError = (message = 'Not found.', code = 'not_found') => new AppError(404, code, message);
/** 409: the request conflicts with the current state. */
export const ConflictError = (code: string, message: string) => new AppError(409, code, message);
/** 503: the server cannot take this now; Retry-After says when to try again. */
export const UnavailableError = (code: string, message: string, retryAfterSeconds: number) =>
  new AppError(503, code, message, { 'Retry-After': String(retryAfterSeconds) });
