import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The PID namespace a server process runs in (`/proc/self/ns/pid`, e.g. `pid:[4026532301]`; empty
 * where there is none to read). Two processes on one host are only comparable by pid when they
 * share it: replicas in containers share the host's name (host networking) and often their pid.
 */
export class AddServerPidNamespace1795800000000 implements MigrationInterface {
  name = 'AddServerPidNamespace1795800000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query("ALTER TABLE servers ADD COLUMN pid_namespace text NOT NULL DEFAULT ''");
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE servers DROP COLUMN pid_namespace');
  }
}
