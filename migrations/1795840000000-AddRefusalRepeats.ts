import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A student's repeated opens at the cap fold into one refusal: within a minute of a refusal's first
 * time, another of the same workspace grows that row's `count` and `last_at` instead of adding a row
 * (and a panel event, and a log line). Rows written by the release before count once, at their time.
 */
export class AddRefusalRepeats1795840000000 implements MigrationInterface {
  name = 'AddRefusalRepeats1795840000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE capacity_refusals ADD COLUMN count integer NOT NULL DEFAULT 1, ADD COLUMN last_at timestamptz NOT NULL DEFAULT now()');
    await runner.query('UPDATE capacity_refusals SET last_at = at');
    await runner.query('CREATE INDEX capacity_refusals_workspace ON capacity_refusals (workspace_id, at)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP INDEX capacity_refusals_workspace');
    await runner.query('ALTER TABLE capacity_refusals DROP COLUMN last_at, DROP COLUMN count');
  }
}
