import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the class view shows of each student right now (src/store/presence.ts): per workspace and
 * per replica, the owner's editor WebSockets and workspace pages open through it, the NetworkTables
 * clients of its run's simulator, and the Driver Station connected through its HALSim relay with the
 * robot's state as the driver set it. Each replica writes only its own rows (api/proxy/presence.ts)
 * and clears them when it stops; the rows go with their workspace and with their replica's row in
 * `servers` (a replica gone for good is cleared by the others' heartbeats), and readers ignore the
 * rows of a replica not seen lately. The index on `server_id` serves that clearing and the cascade.
 */
export class CreateWorkspacePresence1795990000000 implements MigrationInterface {
  name = 'CreateWorkspacePresence1795990000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE workspace_presence (
      workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
      server_id uuid NOT NULL REFERENCES servers (id) ON DELETE CASCADE,
      editors integer NOT NULL DEFAULT 0,
      pages integer NOT NULL DEFAULT 0,
      nt_clients integer NOT NULL DEFAULT 0,
      driver boolean NOT NULL DEFAULT false,
      robot_enabled boolean NOT NULL DEFAULT false,
      robot_mode text,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (workspace_id, server_id)
    )`);
    await runner.query('CREATE INDEX workspace_presence_server ON workspace_presence (server_id)');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE workspace_presence');
  }
}
