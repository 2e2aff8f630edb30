import type { DataSource, EntityManager } from 'typeorm';

/** What runs a query: the data source (its own connection from the pool) or a transaction's manager. */
export type Queryable = DataSource | EntityManager;

/**
 * Runs one statement and returns its rows whatever its kind. (TypeORM's plain `query` returns
 * `[rows, count]` for UPDATE and DELETE, so `UPDATE ... RETURNING` needs the structured result.)
 */
export async function queryRows<T>(db: Queryable, sql: string, parameters: unknown[] = []): Promise<T[]> {
  const manager = 'manager' in db ? db.manager : db;
  const runner = manager.queryRunner ?? manager.connection.createQueryRunner();
  try {
    return (await runner.query(sql, parameters, true)).records as T[];
  } finally {
    if (!manager.queryRunner) await runner.release();
  }
}
