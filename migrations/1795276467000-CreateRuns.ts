import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Simulator runs: desired (running/stopped) and status (queued → running → stopped/failed/canceled). */
export class CreateRuns1795276467000 implements MigrationInterface {
  name = 'CreateRuns1795276467000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE runs (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
        desired_state text NOT NULL DEFAULT 'running' CHECK (desired_state IN ('running', 'stopped')),
        status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'stopped', 'failed', 'canceled')),
        queued_at timestamptz NOT NULL DEFAULT now(),
        ready_at timestamptz,
        ended_at timestamptz,
        exit_code integer,
        reason text,
        output text
      )`);
    // One active run per workspace, enforced by the database so that two concurrent requests make one run.
    await runner.query(`CREATE UNIQUE INDEX runs_one_active ON runs (workspace_id) WHERE status IN ('queued', 'running')`);
    await runner.query('CREATE INDEX runs_recent ON runs (workspace_id, queued_at DESC)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE runs');
  }
}
