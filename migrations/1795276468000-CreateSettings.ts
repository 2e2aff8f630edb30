import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Runtime settings that override the environment (the container cap); the cap row is also the admission lock. */
export class CreateSettings1795276468000 implements MigrationInterface {
  name = 'CreateSettings1795276468000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE settings (
        key text PRIMARY KEY,
        value jsonb,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    // Admission locks this row (SELECT ... FOR UPDATE) even while no override is set, so it always exists.
    await runner.query(`INSERT INTO settings (key, value) VALUES ('max_active_containers', NULL)`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE settings');
  }
}
