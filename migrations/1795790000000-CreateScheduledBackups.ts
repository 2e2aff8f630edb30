import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The stored backups the schedule made (DATA_DIR/backups/<name>): which workspace's and when, so
 * that the schedule knows each home's last one and prunes its oldest past BACKUP_KEEP, and never
 * touches a backup an operator made or a restore kept.
 */
export class CreateScheduledBackups1795790000000 implements MigrationInterface {
  name = 'CreateScheduledBackups1795790000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE scheduled_backups (
      name text PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    await runner.query('CREATE INDEX scheduled_backups_workspace ON scheduled_backups (workspace_id, created_at DESC)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE scheduled_backups');
  }
}
