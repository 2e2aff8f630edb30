import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Users and their workspaces: a workspace row holds the spec (desired) and status (observed) halves. */
export class CreateUsersAndWorkspaces1795276466000 implements MigrationInterface {
  name = 'CreateUsersAndWorkspaces1795276466000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE users (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        name text NOT NULL DEFAULT '',
        email text NOT NULL UNIQUE CHECK (email = lower(email) AND position('@' in email) > 1),
        role text NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'admin')),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    // The last-admin rule counts admins; a partial index keeps that count cheap.
    await runner.query(`CREATE INDEX users_admins ON users (id) WHERE role = 'admin'`);
    // user_id survives the user (SET NULL): a deleted user's workspace stays until the reconciler
    // has removed its containers and volume (the finalizer), then the row goes.
    await runner.query(`
      CREATE TABLE workspaces (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        user_id uuid UNIQUE REFERENCES users (id) ON DELETE SET NULL,
        slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9-]{1,40}$'),
        desired_state text NOT NULL DEFAULT 'stopped' CHECK (desired_state IN ('running', 'stopped', 'deleted')),
        generation bigint NOT NULL DEFAULT 1,
        restart_generation bigint NOT NULL DEFAULT 0,
        observed_state text NOT NULL DEFAULT 'unknown',
        observed_generation bigint NOT NULL DEFAULT 0,
        status_message text NOT NULL DEFAULT '',
        last_transition_at timestamptz,
        last_activity_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    // Admission counts the workspaces wanted running; the idle sweep scans them by last activity.
    await runner.query(`CREATE INDEX workspaces_running_activity ON workspaces (last_activity_at) WHERE desired_state = 'running'`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE workspaces');
    await runner.query('DROP TABLE users');
  }
}
