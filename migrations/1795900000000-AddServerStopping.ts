import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When a server began to stop (SIGTERM), until its row goes: while one stops, the replicas older
 * than the newest take no new connections (GET /readyz answers 404), so that the editors it lets go
 * land on the newest and a rolling upgrade moves each of them once (docs/operations.md).
 */
export class AddServerStopping1795900000000 implements MigrationInterface {
  name = 'AddServerStopping1795900000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE servers ADD COLUMN stopping_since timestamptz');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE servers DROP COLUMN stopping_since');
  }
}
