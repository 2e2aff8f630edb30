import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Who stopped a workspace, and when: its student, a coach (the panel or the admin API), the
 * operator (the CLI) or the idle sweep, so that the student's page says why it stopped.
 */
export class AddStoppedBy1795720000000 implements MigrationInterface {
  name = 'AddStoppedBy1795720000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      `ALTER TABLE workspaces ADD COLUMN stopped_by text CHECK (stopped_by IN ('student', 'coach', 'operator', 'idle')), ADD COLUMN stopped_at timestamptz`,
    );
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE workspaces DROP COLUMN stopped_by, DROP COLUMN stopped_at');
  }
}
