import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Sign-in sessions, stored so that deleting or demoting a user takes effect at once. */
export class CreateSessions1795276470000 implements MigrationInterface {
  name = 'CreateSessions1795276470000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE sessions (
        id text PRIMARY KEY,
        user_id uuid REFERENCES users (id) ON DELETE CASCADE,
        data jsonb NOT NULL,
        expires_at timestamptz NOT NULL
      )`);
    await runner.query('CREATE INDEX sessions_user ON sessions (user_id)');
    await runner.query('CREATE INDEX sessions_expires ON sessions (expires_at)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE sessions');
  }
}
