import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The reconciler's lease: one row per lease name ('reconciler'), held by one control-plane process
 * at a time. `term` rises by one each time a different holder (or the same one after losing it)
 * takes the lease; it is the fencing token every leader-only write checks. Times are the
 * database's (now()), so replicas' clocks never have to agree.
 */
export class CreateLeaderLease1795740000000 implements MigrationInterface {
  name = 'CreateLeaderLease1795740000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE leader_lease (
      name text PRIMARY KEY,
      holder text NOT NULL,
      term bigint NOT NULL,
      acquired_at timestamptz NOT NULL DEFAULT now(),
      renewed_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE leader_lease');
  }
}
