import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The home volumes a workspace no longer uses (a restore replaced them), for the workspace
 * controller to remove once no container mounts them, whatever happens between restores.
 */
export class AddRetiredVolumes1795700000000 implements MigrationInterface {
  name = 'AddRetiredVolumes1795700000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE workspaces ADD COLUMN retired_volumes text[] NOT NULL DEFAULT '{}'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE workspaces DROP COLUMN retired_volumes');
  }
}
