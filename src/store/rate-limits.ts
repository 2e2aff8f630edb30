import { createRequire } from 'node:module';
import type { RateLimiterAbstract, RateLimiterPostgres as Postgres, RateLimiterRes as Res } from 'rate-limiter-flexible';
import type { DataSource } from 'typeorm';
import { queryRows } from '../db/sql.ts';

// The one limiter used, not the package's index (36 modules; about 35 ms less, loaded alone); the package has no exports map.
const RateLimiterPostgres = createRequire(import.meta.url)('rate-limiter-flexible/lib/RateLimiterPostgres.js') as typeof Postgres;
const RateLimiterRes = createRequire(import.meta.url)('rate-limiter-flexible/lib/RateLimiterRes.js') as typeof Res;

/**
 * Counts one use of `key` against `limiter`: undefined when it is within the limit, else the whole
 * seconds (at least 1) until the next use would be (a Retry-After). A failure to count is thrown as it is.
 */
export async function overLimit(limiter: RateLimiterAbstract, key: string): Promise<number | undefined> {
  try {
    await limiter.consume(key);
    return undefined;
  } catch (rejection) {
    if (!(rejection instanceof RateLimiterRes)) throw rejection;
    return Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
  }
}

/**
 * The rate limits' counters in the database (table `rate_limits`), so that every replica counts
 * against the same limit: rate-limiter-flexible's RateLimiterPostgres, through this data source
 * (PostgreSQL or the embedded database alike). The table is made by a migration, never by the
 * limiter; each limit's keys are `<name>:<key>`.
 */
export class RateLimitStore {
  private readonly client: { query(query: { text: string; values?: unknown[] }): Promise<{ rows: unknown[]; rowCount: number }> };

  constructor(db: DataSource) {
    // The shape of a pg Pool that the limiter uses: text and values (its statement names are not needed); `get` reads rowCount.
    this.client = {
      query: async ({ text, values }) => {
        const rows = await queryRows(db, text, values ?? []);
        return { rows, rowCount: rows.length };
      },
    };
  }

  /** A limit of `points` per `durationSeconds` per key, named `name` (distinct for each limit). */
  limiter(name: string, points: number, durationSeconds: number): RateLimiterAbstract {
    return new RateLimiterPostgres({
      storeClient: this.client,
      storeType: 'pool',
      tableName: 'rate_limits',
      tableCreated: true,
      keyPrefix: name,
      points,
      duration: durationSeconds,
    });
  }
}
