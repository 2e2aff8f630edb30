import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The nodes workspaces run on, as the leader last saw them (observed: written by its workspace
 * controller every few seconds): what `cli nodes list` and the panel's Overview show, whether a
 * server runs or not, without asking an engine.
 */
export class CreateSwarmNodes1795820000000 implements MigrationInterface {
  name = 'CreateSwarmNodes1795820000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE nodes (
      name text PRIMARY KEY,
      state text NOT NULL,
      availability text NOT NULL,
      address text NOT NULL DEFAULT '',
      memory_bytes bigint NOT NULL DEFAULT 0,
      reserved_memory_bytes bigint NOT NULL DEFAULT 0,
      nano_cpus bigint NOT NULL DEFAULT 0,
      reachable boolean NOT NULL DEFAULT true,
      seen_at timestamptz NOT NULL DEFAULT now()
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE nodes');
  }
}
