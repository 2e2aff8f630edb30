import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Who asked a run to stop: its student (`student`) or a coach (`admin`), so that the run's end
 * says which ("stopped by a coach") to the student and in the panel. Null while nobody asked.
 */
export class AddRunStoppedBy1795600000000 implements MigrationInterface {
  name = 'AddRunStoppedBy1795600000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`ALTER TABLE runs ADD COLUMN stopped_by text CHECK (stopped_by IN ('student', 'admin'))`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE runs DROP COLUMN stopped_by');
  }
}
