import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Join codes (issue 43, item 5; src/store/join-codes.ts): a coach opens a code for 1 to 12 hours, a
 * student types it and a display name and gets a guest account bound to it (`users.join_code_id`),
 * with no provider and not on the allowlist. When the code expires or is closed, the leader backs up
 * each guest's home and deletes the guest (controllers/join-code-expiry.ts); `handled_at` marks a
 * code whose guests are all gone, and `backups` names the backups its expiry made. Codes are kept
 * (the audit log names them); a guest's row goes with their workspace.
 */
export class CreateJoinCodes1795995000000 implements MigrationInterface {
  name = 'CreateJoinCodes1795995000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE join_codes (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      code text NOT NULL UNIQUE,
      label text NOT NULL DEFAULT '',
      opened_by_id uuid REFERENCES users (id) ON DELETE SET NULL,
      opened_by_email text NOT NULL,
      opened_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      closed_at timestamptz,
      closed_by_email text,
      joined integer NOT NULL DEFAULT 0,
      handled_at timestamptz,
      backups text[] NOT NULL DEFAULT '{}'
    )`);
    await runner.query('CREATE INDEX join_codes_unhandled ON join_codes (expires_at) WHERE handled_at IS NULL');
    await runner.query('ALTER TABLE users ADD COLUMN join_code_id uuid REFERENCES join_codes (id)');
    await runner.query('CREATE INDEX users_join_code ON users (join_code_id) WHERE join_code_id IS NOT NULL');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE users DROP COLUMN join_code_id');
    await runner.query('DROP TABLE join_codes');
  }
}
