import { createDataSource, migrate } from '../../src/db/database.ts';
import { adminQuery, databaseUrl, runPrefix } from './pg.ts';

/** Creates this run's template database with the real migrations applied; workers clone it. */
export default async function globalSetup(): Promise<void> {
  process.env.CP_TEST_RUN = `${Date.now().toString(36)}_${process.pid}`;
  const template = `${runPrefix()}_template`;
  await adminQuery(`CREATE DATABASE ${template}`);
  const dataSource = createDataSource(databaseUrl(template), 2);
  await dataSource.initialize();
  await migrate(dataSource);
  await dataSource.destroy();
}
