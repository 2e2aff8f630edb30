import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Host mode's one-time hand-over codes, by the SHA-256 of the code (the code itself is never
 * stored), so that a code issued by one replica is redeemed by another. A code goes with its user
 * and its workspace; expired ones are cleared as new ones are issued.
 */
export class CreateHandoffCodes1795750000000 implements MigrationInterface {
  name = 'CreateHandoffCodes1795750000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE handoff_codes (
      code_hash text PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      session_id text NOT NULL,
      workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
      state_hash text NOT NULL,
      path text NOT NULL,
      expires_at timestamptz NOT NULL
    )`);
    await runner.query('CREATE INDEX handoff_codes_expires_at ON handoff_codes (expires_at)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE handoff_codes');
  }
}
