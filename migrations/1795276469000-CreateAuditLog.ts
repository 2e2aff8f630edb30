import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The audit log, indexed for its filters (action prefix, actor-email substring, time range) at a million rows. */
export class CreateAuditLog1795276469000 implements MigrationInterface {
  name = 'CreateAuditLog1795276469000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('CREATE EXTENSION IF NOT EXISTS pg_trgm');
    await runner.query(`
      CREATE TABLE audit_log (
        id bigserial PRIMARY KEY,
        timestamp timestamptz NOT NULL DEFAULT now(),
        actor_id text,
        actor_email text NOT NULL,
        action text NOT NULL,
        target_kind text NOT NULL,
        target_id text NOT NULL,
        metadata jsonb
      )`);
    // Prefix match on the action (LIKE 'user.%'), newest first.
    await runner.query('CREATE INDEX audit_log_action ON audit_log (action text_pattern_ops, id DESC)');
    // Substring match on the actor's email (ILIKE '%coach%').
    await runner.query('CREATE INDEX audit_log_actor_email ON audit_log USING gin (actor_email gin_trgm_ops)');
    // Time range of the panel, and audit-prune --before.
    await runner.query('CREATE INDEX audit_log_timestamp ON audit_log (timestamp)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE audit_log');
    await runner.query('DROP EXTENSION IF EXISTS pg_trgm');
  }
}
