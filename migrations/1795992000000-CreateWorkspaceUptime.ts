import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When each workspace ran: one row per stretch of its editor observed running (opened when the
 * controller first sees it running, closed when it sees it leave), for the usage report's hours
 * (src/store/usage.ts). At most one open stretch per workspace, which a unique partial index keeps;
 * rows go with their workspace.
 */
export class CreateWorkspaceUptime1795992000000 implements MigrationInterface {
  name = 'CreateWorkspaceUptime1795992000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE workspace_uptime (
      id bigserial PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
      started_at timestamptz NOT NULL DEFAULT now(),
      ended_at timestamptz,
      CHECK (ended_at IS NULL OR ended_at >= started_at)
    )`);
    await runner.query('CREATE UNIQUE INDEX workspace_uptime_open ON workspace_uptime (workspace_id) WHERE ended_at IS NULL');
    await runner.query('CREATE INDEX workspace_uptime_by_workspace ON workspace_uptime (workspace_id, started_at)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE workspace_uptime');
  }
}
