import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One word for who stopped: a coach's stop of a run is `coach`, as on a workspace (it was `admin`).
 * Expand only: the check admits both words, so that a replica of the previous release, which still
 * writes `admin` during a rolling upgrade, goes on working, and the store reads its `admin` as
 * `coach`; the runs recorded before become `coach`. Narrowing the check to the new words alone is a
 * `…Contract` migration, a release after no replica writes `admin`.
 */
export class WidenRunStoppedBy1795965600000 implements MigrationInterface {
  name = 'WidenRunStoppedBy1795965600000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(
      `ALTER TABLE runs DROP CONSTRAINT runs_stopped_by_check, ADD CONSTRAINT runs_stopped_by_check CHECK (stopped_by IN ('student', 'coach', 'admin'))`,
    );
    await runner.query(`UPDATE runs SET stopped_by = 'coach' WHERE stopped_by = 'admin'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`UPDATE runs SET stopped_by = 'admin' WHERE stopped_by = 'coach'`);
    await runner.query(
      `ALTER TABLE runs DROP CONSTRAINT runs_stopped_by_check, ADD CONSTRAINT runs_stopped_by_check CHECK (stopped_by IN ('student', 'admin'))`,
    );
  }
}
