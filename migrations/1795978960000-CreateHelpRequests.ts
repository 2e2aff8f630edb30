import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The help queue (src/store/help.ts): a student's raised hand, with an optional message, waiting,
 * then taken by a coach (who, when), then resolved; or withdrawn by the student. At most one
 * request of a workspace is open (waiting or taken), which a unique partial index keeps however
 * two raises interleave; the queue is read oldest first through its own partial index. Rows go
 * with their workspace; a coach who is deleted leaves their email on what they took.
 */
export class CreateHelpRequests1795978960000 implements MigrationInterface {
  name = 'CreateHelpRequests1795978960000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE help_requests (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
      raised_by uuid REFERENCES users (id) ON DELETE SET NULL,
      message text,
      state text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'taken', 'resolved', 'withdrawn')),
      created_at timestamptz NOT NULL DEFAULT now(),
      taken_by uuid REFERENCES users (id) ON DELETE SET NULL,
      taken_by_email text,
      taken_at timestamptz,
      ended_by_email text,
      ended_at timestamptz
    )`);
    await runner.query(`CREATE UNIQUE INDEX help_requests_one_open ON help_requests (workspace_id) WHERE state IN ('waiting', 'taken')`);
    await runner.query(`CREATE INDEX help_requests_queue ON help_requests (created_at, id) WHERE state IN ('waiting', 'taken')`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE help_requests');
  }
}
