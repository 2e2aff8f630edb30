import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The last CPU and memory sample of each running workspace, written by the stats sampler, so that
 * the admin's list of workspaces is searched, filtered, sorted (by CPU and memory too) and paged in
 * one query instead of in memory. A row goes with its workspace.
 */
export class CreateWorkspaceStats1795730000000 implements MigrationInterface {
  name = 'CreateWorkspaceStats1795730000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE workspace_stats (
      workspace_id uuid PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
      cpu_percent double precision,
      memory_percent double precision NOT NULL,
      sampled_at timestamptz NOT NULL DEFAULT now()
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE workspace_stats');
  }
}
