/**
 * What a database failure means, and how a database's address is shown: kept apart from the data
 * source (database.ts, which loads TypeORM and PGlite) so that a CLI command that never opens the
 * database does not load them to describe a failure.
 */

/**
 * Error codes that mean "the server is not there (yet)", worth retrying; anything else is fatal: a
 * connection refused, reset, unanswered or lost (08...: connection exceptions), a server starting up,
 * shutting down or full (57P01–57P03, 53300).
 */
const TRANSIENT = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EPIPE',
  '08000',
  '08001',
  '08003',
  '08006',
  '57P01',
  '57P02',
  '57P03',
  '53300',
]);

/** pg-pool's error for a connection not made within `connectionTimeoutMillis`; it carries no code of its own. */
const POOL_CONNECT_TIMEOUT = 'Connection terminated due to connection timeout';
/** pg's errors for a connection lost while in use (a query under way, or the next one); no code either. */
const CONNECTION_LOST = new Set([
  'Connection terminated unexpectedly',
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
]);

/** Whether an error means the database server is not there (yet): a refused, lost or unanswered connection, a server starting up or full. */
export function isUnreachable(error: unknown): boolean {
  return TRANSIENT.has(errorCode(error));
}

/**
 * The error's code (pg SQLSTATE or Node system code), looking through TypeORM's and AggregateError
 * wrappers; ETIMEDOUT for a connection the pool gave up on (the server took its connection, never
 * answered), ECONNRESET for one pg says was lost.
 */
export function errorCode(error: unknown): string {
  const candidate = error as { code?: unknown; errors?: unknown[]; driverError?: unknown; cause?: unknown; message?: unknown };
  if (typeof candidate?.code === 'string') return candidate.code;
  if (candidate?.message === POOL_CONNECT_TIMEOUT) return 'ETIMEDOUT';
  if (typeof candidate?.message === 'string' && CONNECTION_LOST.has(candidate.message)) return 'ECONNRESET';
  for (const inner of [candidate?.driverError, candidate?.cause, ...(candidate?.errors ?? [])]) {
    if (inner) {
      const code = errorCode(inner);
      if (code !== 'unknown') return code;
    }
  }
  return 'unknown';
}

/** The URL without its password, for logs. */
export function redactUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}
