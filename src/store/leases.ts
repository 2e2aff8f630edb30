import type { DataSource } from 'typeorm';
import type { Queryable } from '../db/sql.ts';
import { col, rowCodec } from './row-codec.ts';

/** The one lease there is: the reconciler's (controllers, idle sweep, stats sampler, orphan sweep). */
export const RECONCILER_LEASE = 'reconciler';

/** A lease as stored: who holds it, under which term, until when (the database's clock). */
export interface LeaseRecord {
  name: string;
  holder: string;
  term: number;
  acquiredAt: Date;
  renewedAt: Date;
  expiresAt: Date;
}

/** The leader_lease table: its rows as the store reads them. */
const LEASES = rowCodec(
  'leader_lease',
  { name: col.text, holder: col.text, term: col.bigint, acquired_at: col.timestamp, renewed_at: col.timestamp, expires_at: col.timestamp },
  (row): LeaseRecord => ({
    name: row.name,
    holder: row.holder,
    term: row.term,
    acquiredAt: row.acquired_at,
    renewedAt: row.renewed_at,
    expiresAt: row.expires_at,
  }),
);
const TERMS = LEASES.pick('term');
/** The fence's check that also bounds its transaction's idle time (the setting's new value beside the term). */
const TERMS_BOUNDED = rowCodec('leader_lease', { term: col.bigint, set_config: col.text });

/**
 * What a leader writes under: its lease's holder and term (the fencing token). A store made with a
 * fence (createStore's `fence`) checks it in the transaction of every write it makes.
 */
export interface Fence {
  readonly holder: string;
  readonly term: number;
  /**
   * How long a write's transaction may sit idle in the database before the database ends it
   * (`idle_in_transaction_session_timeout`): a leader paused in the middle of a write (SIGSTOP, a
   * frozen VM) would otherwise hold the lease row, and with it every takeover, for as long as its
   * connection lives. A leader's renew deadline: past it, it may not write anyway. Undefined: no
   * bound (the embedded database, one process, whose own backend the timeout would end).
   */
  readonly holdMs: number | undefined;
  /**
   * Throws FencedOutError when this process's own clock says the lease may have passed to another
   * (no renewal for the renew deadline: a process paused, or cut off from the database). Checked
   * before every write and every reconcile, with no database round trip.
   */
  assertCurrent(): void;
  /**
   * Told when a write under this fence was refused: by the database (another took the lease: step
   * down) or by this process's own clock (assertCurrent, before the database was asked).
   */
  refused(by: 'database' | 'self'): void;
}

/** A write refused because its writer no longer leads (stable id `fenced_out`). */
export class FencedOutError extends Error {
  readonly code = 'fenced_out';
  readonly term: number;
  constructor(term: number, why: string) {
    super(`not the leader any more (term ${term}): ${why}; the write was not made`);
    this.name = 'FencedOutError';
    this.term = term;
  }
}

/**
 * Throws FencedOutError, counted as refused by this process, when its own clock says it may no
 * longer lead (Fence.assertCurrent): asked before every fenced write and every engine call of a
 * leader that may change something.
 */
export function assertLeads(fence: Fence): void {
  try {
    fence.assertCurrent();
  } catch (error) {
    fence.refused('self');
    throw error;
  }
}

/** The lease row's condition of being `fence`'s (fenceValues, its parameters from `$at` on). */
const leaseHeld = (at: number) => `name = $${at} AND holder = $${at + 1} AND term = $${at + 2}`;
const fenceValues = (fence: Fence) => [RECONCILER_LEASE, fence.holder, fence.term];

/**
 * Checks the fence inside a write's transaction: the lease row must still name this holder and
 * term. `FOR SHARE` keeps the row as it is until the transaction ends, so another process cannot
 * take the lease between this check and the write's commit (its UPDATE waits); a lease taken
 * before finds no row here, and the write is refused. The same statement bounds how long the
 * transaction may then sit idle (the fence's holdMs), so a paused writer cannot hold a takeover.
 */
export async function checkFence(tx: Queryable, fence: Fence): Promise<void> {
  assertLeads(fence);
  const bound = fence.holdMs === undefined ? [] : [String(Math.max(1, Math.ceil(fence.holdMs)))];
  const rows = await (bound.length ? TERMS_BOUNDED : TERMS).all(
    tx,
    `SELECT term${bound.length ? ", set_config('idle_in_transaction_session_timeout', $4, true)" : ''}
       FROM leader_lease WHERE ${leaseHeld(1)} FOR SHARE`,
    [...fenceValues(fence), ...bound],
  );
  if (rows.length === 0) refusedByDatabase(fence);
}

/** Counts a write the database refused under `fence` (another leads under a later term) and throws FencedOutError. */
function refusedByDatabase(fence: Fence): never {
  fence.refused('database');
  throw new FencedOutError(fence.term, 'the lease is held under a later term');
}

/**
 * Runs a leader's write: as it is without a fence (a controller driven directly, as the tests do),
 * else in a transaction that checks the fence first (see checkFence).
 */
export function fencedWrite<T>(db: DataSource, fence: Fence | undefined, work: (query: Queryable) => Promise<T>): Promise<T> {
  if (!fence) return work(db);
  return db.transaction(async (tx) => {
    await checkFence(tx, fence);
    return work(tx);
  });
}

/** What a one-statement fenced write gives: whether the fence held, and the ids it wrote. */
const FENCED_IDS = rowCodec('fenced write', { held: col.boolean, ids: col.textArray });

/** The two parts a one-statement fenced write is built from (fencedStatement). */
export interface FenceParts {
  /** A common table expression to put first in the statement's WITH list (its comma included; empty without a fence). */
  fence: string;
  /** A condition each of the statement's writes ANDs into its WHERE: the lease is still this leader's (`true` without a fence). */
  held: string;
}

/**
 * Runs a leader's write as one statement with its fence checked inside it: one round trip instead
 * of a transaction's four (BEGIN, checkFence, the write, COMMIT), for the writes a leader makes
 * many times a second (a run's output, a workspace's status). `write` builds the statement from
 * FenceParts: `fence` takes the lease row FOR SHARE, as checkFence does, so a takeover waits until
 * the statement commits, and a takeover committed before finds no row (one committed while the
 * statement waited for the row is seen: PostgreSQL checks the row's newest version); every write
 * in the statement is conditioned on `held`. Its last SELECT gives one row, `${held} AS held` and
 * `ids` (text[]: what it wrote), the ids returned. Refused (FencedOutError) when the lease is held
 * under a later term, with nothing written. No transaction is left open, so no idle bound is needed.
 */
export async function fencedStatement(db: Queryable, fence: Fence | undefined, write: (parts: FenceParts) => string, values: unknown[]): Promise<string[]> {
  if (!fence) return (await FENCED_IDS.one(db, write({ fence: '', held: 'true' }), values)).ids;
  assertLeads(fence);
  const parts = {
    fence: `fence AS MATERIALIZED (SELECT term FROM leader_lease WHERE ${leaseHeld(values.length + 1)} FOR SHARE),`,
    held: 'EXISTS (SELECT 1 FROM fence)',
  };
  const row = await FENCED_IDS.one(db, write(parts), [...values, ...fenceValues(fence)]);
  if (!row.held) refusedByDatabase(fence);
  return row.ids;
}

/**
 * The leases (one today, RECONCILER_LEASE). Every time is the database's, so that the replicas'
 * clocks never have to agree; a lease is taken, renewed and released each in one statement.
 * Not audited: leadership is observed state (the server's log and metrics say who leads).
 */
export class LeaseStore {
  private readonly db: DataSource;

  constructor(db: DataSource) {
    this.db = db;
  }

  /**
   * Takes the lease for `holder` when no one holds it, its holder's lease has expired, or its
   * holder is `gone` (a process known to have died: see Leadership's `holderGone`), under the next
   * term (1 for the first ever). Returns the lease taken, or undefined when another holds it. Never
   * takes it from a live holder, not even from `holder` itself (a holder renews, see `renew`).
   */
  acquire(name: string, holder: string, durationMs: number, gone?: string): Promise<LeaseRecord | undefined> {
    return LEASES.first(
      this.db,
      `INSERT INTO leader_lease AS lease (name, holder, term, expires_at) VALUES ($1, $2, 1, now() + make_interval(secs => $3))
       ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, term = lease.term + 1, acquired_at = now(), renewed_at = now(), expires_at = EXCLUDED.expires_at
       WHERE lease.expires_at <= now() OR (lease.holder = $4 AND lease.holder <> EXCLUDED.holder)
       RETURNING ${LEASES.columns}`,
      [name, holder, durationMs / 1000, gone ?? null],
    );
  }

  /**
   * Extends the lease of `holder` under `term` by `durationMs` from now. Returns false when the
   * lease is no longer theirs under that term (another took it after it expired).
   */
  async renew(name: string, holder: string, term: number, durationMs: number): Promise<boolean> {
    const rows = await TERMS.all(
      this.db,
      `UPDATE leader_lease SET renewed_at = now(), expires_at = now() + make_interval(secs => $4)
       WHERE name = $1 AND holder = $2 AND term = $3 RETURNING term`,
      [name, holder, term, durationMs / 1000],
    );
    return rows.length > 0;
  }

  /** Gives the lease up at once (a leader stopping): another may take it without waiting for it to expire. */
  async release(name: string, holder: string, term: number): Promise<void> {
    await this.db.query('UPDATE leader_lease SET expires_at = now() WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at > now()', [
      name,
      holder,
      term,
    ]);
  }

  /** The lease while it is held: undefined when no one ever took it, or it expired or was released. */
  held(name: string): Promise<LeaseRecord | undefined> {
    return LEASES.first(this.db, `SELECT ${LEASES.columns} FROM leader_lease WHERE name = $1 AND expires_at > now()`, [name]);
  }

  /** The lease as stored now (undefined before anyone ever took it). */
  get(name: string): Promise<LeaseRecord | undefined> {
    return LEASES.first(this.db, `SELECT ${LEASES.columns} FROM leader_lease WHERE name = $1`, [name]);
  }
}
