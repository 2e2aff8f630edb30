import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Lessons (src/store/lessons.ts): a lesson is a folder a coach hands out to students' homes under
 * `lessons/<name>/`; each upload of its files is a version, kept as a file under `DATA_DIR/lessons/`
 * (these rows hold what it is). A delivery is one version wanted in one workspace's home, until the
 * leader's lesson controller puts it there (`pending` → `delivered`, or `failed` with why), with the
 * folder it landed in and the home volume it was written to; a reset asked of it makes the folder the
 * handed-out files again, after a backup. A collection is a snapshot of every student's lesson
 * folders, taken at `due_at` (at once, or at a deadline); a snapshot row per student says how it went.
 * Deliveries go with their workspace; a collection keeps its snapshots of students deleted since
 * (their slug is kept).
 */
export class CreateLessons1795994000000 implements MigrationInterface {
  name = 'CreateLessons1795994000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE lessons (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      name text NOT NULL UNIQUE,
      created_by text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    await runner.query(`CREATE TABLE lesson_versions (
      lesson_id uuid NOT NULL REFERENCES lessons (id) ON DELETE CASCADE,
      version integer NOT NULL,
      files integer NOT NULL,
      size_bytes bigint NOT NULL,
      sha256 text NOT NULL,
      created_by text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (lesson_id, version)
    )`);
    await runner.query(`CREATE TABLE lesson_deliveries (
      lesson_id uuid NOT NULL REFERENCES lessons (id) ON DELETE CASCADE,
      workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
      version integer NOT NULL,
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
      folder text,
      volume text,
      message text NOT NULL DEFAULT '',
      attempts integer NOT NULL DEFAULT 0,
      requested_by text NOT NULL,
      requested_at timestamptz NOT NULL DEFAULT now(),
      delivered_at timestamptz,
      reset_requested_by text,
      reset_requested_at timestamptz,
      reset_backup text,
      reset_at timestamptz,
      PRIMARY KEY (lesson_id, workspace_id, version),
      FOREIGN KEY (lesson_id, version) REFERENCES lesson_versions (lesson_id, version) ON DELETE CASCADE
    )`);
    await runner.query("CREATE INDEX lesson_deliveries_due ON lesson_deliveries (requested_at) WHERE state = 'pending' OR reset_requested_at IS NOT NULL");
    await runner.query('CREATE INDEX lesson_deliveries_workspace ON lesson_deliveries (workspace_id)');
    await runner.query(`CREATE TABLE lesson_collections (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      lesson_id uuid NOT NULL REFERENCES lessons (id) ON DELETE CASCADE,
      requested_by text NOT NULL,
      requested_at timestamptz NOT NULL DEFAULT now(),
      due_at timestamptz NOT NULL,
      done_at timestamptz
    )`);
    await runner.query('CREATE INDEX lesson_collections_due ON lesson_collections (due_at) WHERE done_at IS NULL');
    await runner.query(`CREATE TABLE lesson_snapshots (
      collection_id uuid NOT NULL REFERENCES lesson_collections (id) ON DELETE CASCADE,
      workspace_id uuid NOT NULL,
      slug text NOT NULL,
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'taken', 'missing', 'failed')),
      folders text[] NOT NULL DEFAULT '{}',
      files integer NOT NULL DEFAULT 0,
      size_bytes bigint NOT NULL DEFAULT 0,
      message text NOT NULL DEFAULT '',
      taken_at timestamptz,
      PRIMARY KEY (collection_id, workspace_id)
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE lesson_snapshots');
    await runner.query('DROP TABLE lesson_collections');
    await runner.query('DROP TABLE lesson_deliveries');
    await runner.query('DROP TABLE lesson_versions');
    await runner.query('DROP TABLE lessons');
  }
}
