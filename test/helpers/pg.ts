import pg from 'pg';

/** The PostgreSQL server the tests use (started by scripts/provision.sh), as an admin URL. */
export const TEST_SERVER_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:54329/postgres';

/** The URL of one database on the test server. */
export function databaseUrl(name: string): string {
  const url = new URL(TEST_SERVER_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs SQL on the test server's admin database with a short-lived client. */
export async function adminQuery(sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: TEST_SERVER_URL });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The prefix of every database this test run creates; global teardown drops them. */
export function runPrefix(): string {
  const run = process.env.CP_TEST_RUN;
  if (!run) throw new Error('CP_TEST_RUN is not set: run the tests through jest (global setup sets it)');
  return `cp_test_${run}`;
}
