import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the leader counts for every replica's panel (orphan containers and volumes found): one row
 * per counter, with the lease term it was counted under; a new term starts it again from zero.
 */
export class CreateLeaderCounters1795780000000 implements MigrationInterface {
  name = 'CreateLeaderCounters1795780000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE leader_counters (
      name text PRIMARY KEY,
      term bigint NOT NULL,
      value bigint NOT NULL
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE leader_counters');
  }
}
