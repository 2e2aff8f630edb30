/**
 * Issue 23, two versions side by side during a rolling upgrade: migrations expand, never contract
 * in the same release. The rule (docs/architecture.md, "Migrations across a rolling upgrade"): a
 * migration's `up` only adds (tables, nullable columns or columns with a default, indexes,
 * relaxed constraints), so that the release before it keeps working on the migrated schema; what
 * the old version needs is removed by a migration whose class name ends in `Contract`, landed a
 * release after the code stopped using it. This test holds every migration to it, and shows that
 * each kind of breaking statement is caught.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.ts';

/** Statements an older version of the server cannot run beside: each with why. */
const CONTRACTING: [RegExp, string][] = [
  [/\bDROP\s+TABLE\b/i, 'drops a table the previous release reads'],
  [/\bDROP\s+COLUMN\b/i, 'drops a column the previous release reads'],
  [/\bRENAME\b/i, 'renames what the previous release names'],
  [/\bALTER\s+COLUMN\s+\w+\s+(SET\s+DATA\s+)?TYPE\b/i, "changes a column's type under the previous release"],
  [/\bSET\s+NOT\s+NULL\b/i, 'makes a column required that the previous release may leave empty'],
  [
    /\bADD\s+COLUMN\s+(?:IF\s+NOT\s+EXISTS\s+)?\w+\s+[^,]*\bNOT\s+NULL\b(?![^,]*\bDEFAULT\b)/i,
    'adds a required column without a default, which the previous release does not write',
  ],
];

/** The SQL a migration's `up` runs (it only ever calls `query`). */
async function upSql(migration: MigrationInterface): Promise<string[]> {
  const statements: string[] = [];
  const runner = { query: async (sql: string) => void statements.push(sql) } as unknown as QueryRunner;
  await migration.up(runner);
  return statements;
}

/** Why a statement breaks the previous release, or undefined. */
const breaking = (sql: string) => CONTRACTING.find(([pattern]) => pattern.test(sql))?.[1];

it.each(MIGRATIONS.map((Migration) => [Migration.name, Migration] as const))(
  '%s only expands the schema (or is a Contract migration)',
  async (name, Migration) => {
    const problems = (await upSql(new Migration())).flatMap((sql) => {
      const why = breaking(sql);
      return why ? [`${why}: ${sql.replace(/\s+/g, ' ').trim()}`] : [];
    });
    expect(name.replace(/\d+$/, '').endsWith('Contract') ? [] : problems).toEqual([]);
  },
);

it.each([
  'DROP TABLE servers',
  'ALTER TABLE runs DROP COLUMN sim_endpoint',
  'ALTER TABLE workspaces RENAME COLUMN slug TO name',
  'ALTER TABLE runs ALTER COLUMN exit_code TYPE bigint',
  'ALTER TABLE workspaces ALTER COLUMN home_volume SET NOT NULL',
  'ALTER TABLE workspaces ADD COLUMN owner_id uuid NOT NULL',
])('catches %s', (sql) => {
  expect(breaking(sql)).toEqual(expect.any(String));
});

it.each([
  'CREATE TABLE leader_lease (name text PRIMARY KEY, holder text NOT NULL)',
  'ALTER TABLE workspaces ADD COLUMN editor_endpoint text',
  "ALTER TABLE workspaces ADD COLUMN retired_volumes text[] NOT NULL DEFAULT '{}'",
  'CREATE INDEX handoff_codes_expires_at ON handoff_codes (expires_at)',
  'ALTER TABLE audit_log DROP CONSTRAINT audit_log_actor_email_lower',
])('lets %s through', (sql) => {
  expect(breaking(sql)).toBeUndefined();
});
