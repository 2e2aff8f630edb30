import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Where the proxy finds a workspace's editor and a run's simulator: addresses the controllers
 * observe on the engine and record with the rest of the status (the API never asks Docker).
 */
export class AddObservedEndpoints1795278354000 implements MigrationInterface {
  name = 'AddObservedEndpoints1795278354000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE workspaces ADD COLUMN editor_endpoint text');
    await runner.query('ALTER TABLE runs ADD COLUMN sim_endpoint text');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE runs DROP COLUMN sim_endpoint');
    await runner.query('ALTER TABLE workspaces DROP COLUMN editor_endpoint');
  }
}
