import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the compiler said when a run ended: how many errors it reported and the first of them
 * (`Robot.java:12: ';' expected`), found in the run's last output when it ended, for the class
 * view's "3 compile errors" without reading each run's output again. Null for a run recorded before
 * (or by a release that does not know them: expand only, both nullable).
 */
export class AddRunProblems1795991000000 implements MigrationInterface {
  name = 'AddRunProblems1795991000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE runs ADD COLUMN problem_count integer, ADD COLUMN first_problem text');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE runs DROP COLUMN problem_count, DROP COLUMN first_problem');
  }
}
