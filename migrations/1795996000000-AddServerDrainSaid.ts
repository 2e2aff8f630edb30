import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When a server last answered a balancer's check (GET /readyz), and last answered that it drains:
 * a replica that stops waits until every replica its stop drains, and that a balancer checks, has
 * said so, so that on a busy machine (a check answered late) the editors it lets go still land on
 * the newest (docs/operations.md).
 */
export class AddServerDrainSaid1795996000000 implements MigrationInterface {
  name = 'AddServerDrainSaid1795996000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE servers ADD COLUMN checked_at timestamptz, ADD COLUMN drain_said_at timestamptz');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE servers DROP COLUMN checked_at, DROP COLUMN drain_said_at');
  }
}
