import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One-time links: the first-run setup link (whoever opens it becomes the first admin) and the sign-in
 * links an operator mints for an allowlisted email. Only the SHA-256 of a link's token is kept, so
 * the table lets no one sign in; a link is used at most once (`used_at`) and only before `expires_at`.
 */
export class CreateSignInLinks1795440000000 implements MigrationInterface {
  name = 'CreateSignInLinks1795440000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE sign_in_links (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        token_hash text NOT NULL UNIQUE,
        purpose text NOT NULL CHECK (purpose IN ('setup', 'sign-in')),
        email text CHECK ((purpose = 'setup') = (email IS NULL)),
        created_by text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        used_at timestamptz
      )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE sign_in_links');
  }
}
