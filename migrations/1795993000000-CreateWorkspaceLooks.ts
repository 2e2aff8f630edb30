import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A coach's read-only looks at a student's workspace (src/store/looks.ts): who, since when, when
 * their page last said it was still open, when it ended, and whether the student let it happen
 * (`asking` until they answer, with LOOK_CONSENT=ask; `accepted` at once with `always`). A look is live while it has not ended
 * and was seen lately; the student's page and editor say so while one is. Rows go with their
 * workspace; a coach who is deleted leaves their email.
 */
export class CreateWorkspaceLooks1795993000000 implements MigrationInterface {
  name = 'CreateWorkspaceLooks1795993000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE workspace_looks (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
      coach_id uuid REFERENCES users (id) ON DELETE SET NULL,
      coach_email text NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now(),
      seen_at timestamptz NOT NULL DEFAULT now(),
      ended_at timestamptz,
      state text NOT NULL DEFAULT 'accepted' CHECK (state IN ('asking', 'accepted', 'declined')),
      answered_at timestamptz
    )`);
    await runner.query('CREATE INDEX workspace_looks_open ON workspace_looks (workspace_id, seen_at) WHERE ended_at IS NULL');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE workspace_looks');
  }
}
