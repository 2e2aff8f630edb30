import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Imports of a team's project into a workspace (src/import/imports.ts): what was asked, how far it
 * got (its phase and bytes, shown to the student by whichever replica they ask), and how it ended.
 * At most one import of a workspace is in progress (ended_at null); one whose server stopped is
 * ended when its heartbeat (updated_at) is old. Rows go with their workspace.
 */
export class CreateWorkspaceImports1795880000000 implements MigrationInterface {
  name = 'CreateWorkspaceImports1795880000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE workspace_imports (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
      user_id uuid REFERENCES users (id) ON DELETE SET NULL,
      url text NOT NULL,
      branch text,
      subfolder text,
      phase text NOT NULL DEFAULT 'checking',
      bytes bigint NOT NULL DEFAULT 0,
      commit text,
      backup text,
      error_code text,
      error_message text,
      started_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      ended_at timestamptz
    )`);
    await runner.query('CREATE UNIQUE INDEX workspace_imports_one_active ON workspace_imports (workspace_id) WHERE ended_at IS NULL');
    await runner.query('CREATE INDEX workspace_imports_latest ON workspace_imports (workspace_id, started_at DESC)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE workspace_imports');
  }
}
