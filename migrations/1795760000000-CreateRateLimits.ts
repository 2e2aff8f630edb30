import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The rate limits' counters (failed tokens, sign-in callbacks, sign-in link mints), shared by every
 * replica, in the shape rate-limiter-flexible's RateLimiterPostgres keeps them: a key (limit name
 * and client address), the points used, and when the window ends (epoch ms). Rows an hour past
 * their end are cleared by the limiter itself.
 */
export class CreateRateLimits1795760000000 implements MigrationInterface {
  name = 'CreateRateLimits1795760000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE rate_limits (
      key varchar(255) PRIMARY KEY,
      points integer NOT NULL DEFAULT 0,
      expire bigint
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE rate_limits');
  }
}
