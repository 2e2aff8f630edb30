import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The whole output of each run (its build and boot, then the simulator), kept as it was written:
 * chunks in order, each at the character offset where it starts, so that a student's live view can
 * resume where it was. Bounded per run (the collector stops at its limit and says so), and kept
 * for a workspace's newest runs only. `output_length` and `output_truncated` on the run say how
 * much there is; `output_source_bytes` how much of the container's own log was read, so that a
 * collector that starts again (a restarted control plane) skips what was already kept.
 */
export class CreateRunOutput1795570522000 implements MigrationInterface {
  name = 'CreateRunOutput1795570522000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE run_output (
        run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        start_offset integer NOT NULL CHECK (start_offset >= 0),
        text text NOT NULL,
        PRIMARY KEY (run_id, start_offset)
      )`);
    await runner.query(`
      ALTER TABLE runs
        ADD COLUMN output_length integer NOT NULL DEFAULT 0,
        ADD COLUMN output_truncated boolean NOT NULL DEFAULT false,
        ADD COLUMN output_source_bytes bigint NOT NULL DEFAULT 0`);
    // The panel's and the CLI's class-wide list of runs (failed in the last hour, say).
    await runner.query('CREATE INDEX runs_by_time ON runs (queued_at DESC)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP INDEX runs_by_time');
    await runner.query('ALTER TABLE runs DROP COLUMN output_source_bytes, DROP COLUMN output_truncated, DROP COLUMN output_length');
    await runner.query('DROP TABLE run_output');
  }
}
