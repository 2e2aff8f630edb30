import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The control-plane processes that run now: each writes its row at start, refreshes it every few
 * seconds and removes it when it stops, so that the CLI can say whether a server will act on what
 * it records, and which public address the server has.
 */
export class CreateServers1795710000000 implements MigrationInterface {
  name = 'CreateServers1795710000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE servers (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      public_url text NOT NULL,
      hostname text NOT NULL,
      pid integer NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now(),
      seen_at timestamptz NOT NULL DEFAULT now()
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE servers');
  }
}
