import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The last measure of each workspace's home (the stats sampler's, while its editor runs): the
 * space its files take and, when part of it could not be measured, why. Kept while the workspace
 * is stopped (a home does not change then), so that its student and the coach still see it, and
 * a run is refused past HOME_DISK_LIMIT (docs/security.md, "Disk"). A row goes with its workspace.
 */
export class CreateHomeDiskUsage1795860000000 implements MigrationInterface {
  name = 'CreateHomeDiskUsage1795860000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE home_disk_usage (
      workspace_id uuid PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
      used_bytes bigint NOT NULL,
      problem text,
      measured_at timestamptz NOT NULL DEFAULT now()
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE home_disk_usage');
  }
}
