import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Workspaces on a swarm (docs/swarm.md): the node a workspace's editor was last seen on (observed,
 * for /admin/status and the panel), when its home was last brought back from a backup because its
 * node was lost (what the student's page tells: the backup's time and why), and the nodes an
 * operator asked to drain (`cli nodes drain`), which the leader empties.
 */
export class AddHomeRecovery1795810000000 implements MigrationInterface {
  name = 'AddHomeRecovery1795810000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      'ALTER TABLE workspaces ADD COLUMN home_restored_at timestamptz, ADD COLUMN home_restored_from timestamptz, ADD COLUMN home_restore_reason text, ADD COLUMN node text',
    );
    await runner.query(`CREATE TABLE node_drains (
      node text PRIMARY KEY,
      requested_at timestamptz NOT NULL DEFAULT now(),
      requested_by text NOT NULL DEFAULT ''
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE node_drains');
    await runner.query(
      'ALTER TABLE workspaces DROP COLUMN home_restored_at, DROP COLUMN home_restored_from, DROP COLUMN home_restore_reason, DROP COLUMN node',
    );
  }
}
