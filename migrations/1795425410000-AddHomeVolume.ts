import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The volume a workspace's home lives on, when it is not the default `ws-<slug>-home`: a restore
 * fills a fresh volume and then points the workspace at it in one transaction, so a restore that
 * fails midway never leaves the workspace with half its files. NULL means the default name.
 */
export class AddHomeVolume1795425410000 implements MigrationInterface {
  name = 'AddHomeVolume1795425410000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE workspaces ADD COLUMN home_volume text');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE workspaces DROP COLUMN home_volume');
  }
}
