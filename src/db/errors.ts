/**
 * What a database failure means, and how a database's address is shown: kept apart from the data
 * source (database.ts, which loads TypeORM and PGlite) so that a CLI command that never opens the
 * database does not load them to describe a failure.
 */

/** Error codes that mean "the server is not there yet", worth retrying; anything else is fatal. */
const TRANSIENT = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', '57P03', '53300']);

/** pg-pool's error for a connection not made within `connectionTimeoutMillis`; it carries no code of its own. */
const POOL_CONNECT_TIMEOUT = 'Connection terminated due to connection timeout';

/** Whether an error means the database server is not there (yet): a refused, lost or unanswered connection, a server starting up or full. */
export function isUnreachable(error: unknown): boolean {
  return TRANSIENT.has(errorCode(error));
}

/**
 * The error's code (pg SQLSTATE or Node system code), looking through TypeORM's and AggregateError
 * wrappers; ETIMEDOUT for a connection the pool gave up on (the server took its connection, never answered).
 */
export function errorCode(error: unknown): string {
  const candidate = error as { code?: unknown; errors?: unknown[]; driverError?: unknown; cause?: unknown; message?: unknown };
  if (typeof candidate?.code === 'string') return candidate.code;
  if (candidate?.message === POOL_CONNECT_TIMEOUT) return 'ETIMEDOUT';
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
