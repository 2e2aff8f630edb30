import type { DataSource, EntityManager } from 'typeorm';
import { assertCallerWaits } from '../caller.ts';
import type { Change, ChangeFeed } from '../db/changes.ts';
import { writeAudit, type AuditInput } from './audit.ts';
import { checkFence, type Fence } from './leases.ts';

/** A transaction's queries (TypeORM's EntityManager bound to it). */
export type Tx = EntityManager;

/**
 * What a mutation did, stated by the mutation itself, so that neither half can be left out: the
 * value it returns, every record whose desired state it changed, and its audit entry.
 */
export interface Outcome<T> {
  value: T;
  /** NOTIFYed in the transaction and published in process after commit; [] when nothing changed. */
  changed: Change[];
  /** Written in the same transaction; null for a change no one audits (a student's own open or run, a no-op). */
  audit: AuditInput | null;
}

/** Runs one mutation in a transaction and returns its value (see `mutator`). */
export type Mutate = <T>(work: (tx: Tx) => Promise<Outcome<T>>) => Promise<T>;

/**
 * The store's one way to change desired state: `work` runs in a transaction; its audit entry is
 * written and its changes are NOTIFYed on that transaction (PostgreSQL delivers them at commit, to
 * every listening process), then published to this process once committed. A failure anywhere
 * rolls everything back and announces nothing. With a `fence` (a leader's store), the transaction
 * checks it first: a leader that lost its lease changes nothing (FencedOutError). Made for an API
 * request whose client is gone or whose deadline has passed (src/caller.ts), it is rolled back
 * right before its commit.
 */
export function mutator(db: DataSource, changes: ChangeFeed, fence?: Fence): Mutate {
  return async <T>(work: (tx: Tx) => Promise<Outcome<T>>): Promise<T> => {
    let announced: Change[] = [];
    assertCallerWaits();
    const value = await db.transaction(async (tx) => {
      if (fence) await checkFence(tx, fence);
      const outcome = await work(tx);
      if (outcome.audit) await writeAudit(tx, outcome.audit);
      announced = distinct(outcome.changed);
      for (const change of announced) await changes.notify(tx, change);
      // An API request's client gone or its deadline passed: rolled back, not committed (src/caller.ts).
      assertCallerWaits();
      return outcome.value;
    });
    for (const change of announced) changes.publish(change);
    return value;
  };
}

function distinct(changes: Change[]): Change[] {
  const seen = new Map(changes.map((change) => [`${change.kind}:${change.id}`, change]));
  return [...seen.values()];
}
