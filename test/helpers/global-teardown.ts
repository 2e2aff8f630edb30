import { adminQuery, runPrefix } from './pg.ts';

/** Drops every database this run created. */
export default async function globalTeardown(): Promise<void> {
  const { rows } = await adminQuery(`SELECT datname FROM pg_database WHERE datname LIKE '${runPrefix()}\\_%'`);
  for (const { datname } of rows as { datname: string }[]) await adminQuery(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
}
