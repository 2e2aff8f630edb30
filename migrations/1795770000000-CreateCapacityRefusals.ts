import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Students refused at the cap, for the coach's panel (the last hour), whichever replica refused
 * them and whichever serves the panel. Rows older than an hour are cleared as new ones come.
 */
export class CreateCapacityRefusals1795770000000 implements MigrationInterface {
  name = 'CreateCapacityRefusals1795770000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE capacity_refusals (
      id bigserial PRIMARY KEY,
      at timestamptz NOT NULL DEFAULT now(),
      workspace_id uuid NOT NULL,
      slug text NOT NULL,
      email text,
      cap integer NOT NULL,
      running integer NOT NULL
    )`);
    await runner.query('CREATE INDEX capacity_refusals_at ON capacity_refusals (at)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE capacity_refusals');
  }
}
