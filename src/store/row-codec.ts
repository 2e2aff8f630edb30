/**
 * Typed rows: each table's columns as a schema that every query of that table reads through, so
 * that a column added, removed or renamed, or a value of another type than the code expects, fails
 * at once with an error naming the table and the column, instead of travelling on as `undefined`
 * or a string where a number was meant. Hand-written rather than TypeBox: the store is loaded at
 * every start of the server and the CLI, and TypeBox alone takes about a fifth of a second to load.
 *
 * A row must hold exactly its codec's columns: a missing one and an unexpected one are both
 * refused. Queries therefore name their columns (`codec.columns`), never `SELECT *`: a column a
 * later release's migration adds (migrations only expand, so the release before it runs on the
 * wider table during a rolling upgrade) is then never read by a release that does not know it.
 */
import { queryRows, type Queryable } from '../db/sql.ts';

/** The mark of a value a column refuses. */
const REFUSED: unique symbol = Symbol('refused');

/** A column's type: the value node-postgres gives for it, checked, and what the code reads it as. */
export interface Column<T> {
  /** What the column must hold, for the error when it does not (`bigint (text of digits)`). */
  readonly expects: string;
  /** The value as the code reads it, or REFUSED. */
  read(value: unknown): T | typeof REFUSED;
}

const column = <T>(expects: string, read: (value: unknown) => T | typeof REFUSED): Column<T> => ({ expects, read });

/** text, varchar, uuid: a string. */
const text = column('text', (value) => (typeof value === 'string' ? value : REFUSED));

/** integer, smallint (and a JSON integer): a number, whole. */
const integer = column('integer', (value) => (typeof value === 'number' && Number.isInteger(value) ? value : REFUSED));

/** double precision, real: a number. */
const double = column('double precision', (value) => (typeof value === 'number' ? value : REFUSED));

const DIGITS = /^-?\d{1,19}$/;

/** bigint, bigserial, count(*): node-postgres gives their text, read as a number; one past 2^53 (which none here reaches) is refused, not rounded. */
const bigint = column('bigint (text of digits, below 2^53)', (value) =>
  typeof value === 'string' && DIGITS.test(value) && Number.isSafeInteger(Number(value)) ? Number(value) : REFUSED,
);

/** bigint, bigserial kept as its text (an id passed on as it came). */
const bigintText = column('bigint (text of digits)', (value) => (typeof value === 'string' && DIGITS.test(value) ? value : REFUSED));

/** boolean. */
const boolean = column('boolean', (value) => (typeof value === 'boolean' ? value : REFUSED));

/** timestamp with time zone: a valid Date. */
const timestamp = column('timestamp (a Date)', (value) => (value instanceof Date && !Number.isNaN(value.getTime()) ? value : REFUSED));

/** text[]: an array of strings. */
const textArray = column('text[]', (value) => (Array.isArray(value) && value.every((item) => typeof item === 'string') ? value : REFUSED));

/** jsonb holding an object (not an array, not a scalar). */
const jsonObject = column('jsonb object', (value) =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : REFUSED,
);

/** text holding one of `words` (a state, a role): the vocabulary's list, so a word the code does not know is refused. */
function oneOf<const W extends readonly string[]>(words: W): Column<W[number]> {
  return column(`one of ${words.join(', ')}`, (value) => (typeof value === 'string' && words.includes(value) ? (value as W[number]) : REFUSED));
}

/** `inner`, or NULL. */
function nullable<T>(inner: Column<T>): Column<T | null> {
  return column(`${inner.expects} or null`, (value) => (value === null ? null : inner.read(value)));
}

/**
 * The column types, as schemas name them (`col.text`, `col.nullable(col.timestamp)`): in one
 * object, so that their short names (`text`, `boolean`) stay out of the stores' scope.
 */
export const col = { text, integer, double, bigint, bigintText, boolean, timestamp, textArray, jsonObject, oneOf, nullable };

/** Column names and their types. */
export type Schema = Record<string, Column<unknown>>;

/** The row a schema describes, as the code reads it. */
export type RowOf<S extends Schema> = { [K in keyof S]: S[K] extends Column<infer T> ? T : never };

/** A row that does not have its codec's shape (stable id `row_shape`): the schema and the code disagree. */
export class RowShapeError extends Error {
  readonly code = 'row_shape';
  readonly table: string;
  /** The column at fault; undefined when the row itself is not an object. */
  readonly column: string | undefined;
  constructor(table: string, columnName: string | undefined, problem: string) {
    super(`A row of ${table} ${problem}`);
    this.name = 'RowShapeError';
    this.table = table;
    this.column = columnName;
  }
}

/** A query that should have given exactly one row gave none or several (stable id `row_count`). */
export class RowCountError extends Error {
  readonly code = 'row_count';
  constructor(what: string, count: number) {
    super(`Expected one ${what}, got ${count}`);
    this.name = 'RowCountError';
  }
}

/** How a value looks in an error: its type and a short sight of it. */
function sight(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (value instanceof Date) return `Date ${Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString()}`;
  const shown = typeof value === 'string' ? JSON.stringify(value) : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return `${Array.isArray(value) ? 'array' : typeof value} ${shown.length > 40 ? `${shown.slice(0, 40)}…` : shown}`;
}

/**
 * The one row of `rows`; throws RowCountError naming `what` when there are none or several. For a
 * row that must be there (an UPDATE … RETURNING of a row the transaction locked, an aggregate).
 */
export function one<T>(rows: readonly T[], what: string): T {
  const [row] = rows;
  if (rows.length !== 1 || row === undefined) throw new RowCountError(what, rows.length);
  return row;
}

/** The rows of one table (or one query's columns) and what the code reads each as. */
export interface RowCodec<S extends Schema, R> {
  /** The table, named in every error. */
  readonly table: string;
  /** The columns, comma-separated, for a select list or RETURNING. */
  readonly columns: string;
  /** The columns qualified by a table alias (`r.id, r.workspace_id, …`), for a join. */
  columnsOf(alias: string): string;
  /** Checks one row as node-postgres gave it (RowShapeError when it does not fit) and reads it. */
  decode(row: unknown): R;
  /** Runs a statement (a SELECT, or a write with RETURNING) and reads its rows. */
  all(db: Queryable, sql: string, parameters?: unknown[]): Promise<R[]>;
  /** Its first row read, or undefined when it gives none (where absence is an answer). */
  first(db: Queryable, sql: string, parameters?: unknown[]): Promise<R | undefined>;
  /** Its one row read; RowCountError naming the table when it gives none or several (where one must be there). */
  one(db: Queryable, sql: string, parameters?: unknown[]): Promise<R>;
  /** A codec of some of these columns, read as they are (a query that needs only those). */
  pick<K extends keyof S & string>(...names: K[]): RowCodec<Pick<S, K>, RowOf<Pick<S, K>>>;
}

/**
 * A codec of `table`'s rows: exactly the columns of `schema`, each checked and read by its type,
 * then made a record by `toRecord` (the row as read, without it).
 */
export function rowCodec<S extends Schema>(table: string, schema: S): RowCodec<S, RowOf<S>>;
export function rowCodec<S extends Schema, R>(table: string, schema: S, toRecord: (row: RowOf<S>) => R): RowCodec<S, R>;
export function rowCodec<S extends Schema, R>(table: string, schema: S, toRecord?: (row: RowOf<S>) => R): RowCodec<S, R> {
  const names = Object.keys(schema);
  const fields = Object.entries(schema);
  const decode = (row: unknown): R => {
    if (typeof row !== 'object' || row === null) throw new RowShapeError(table, undefined, `should be an object, got ${sight(row)}`);
    const read: Record<string, unknown> = {};
    for (const [name, type] of fields) {
      if (!Object.hasOwn(row, name)) throw new RowShapeError(table, name, `lacks its column "${name}"`);
      const value = type.read((row as Record<string, unknown>)[name]);
      if (value === REFUSED) {
        throw new RowShapeError(table, name, `has "${name}" ${sight((row as Record<string, unknown>)[name])}, where ${type.expects} was expected`);
      }
      read[name] = value;
    }
    const keys = Object.keys(row);
    if (keys.length !== names.length) {
      const extra = keys.find((key) => !Object.hasOwn(schema, key)) ?? '';
      throw new RowShapeError(table, extra, `has a column "${extra}" its codec does not know`);
    }
    return toRecord ? toRecord(read as RowOf<S>) : (read as R);
  };
  const all = async (db: Queryable, sql: string, parameters: unknown[] = []) => (await queryRows<unknown>(db, sql, parameters)).map(decode);
  return {
    table,
    columns: names.join(', '),
    columnsOf: (alias) => names.map((name) => `${alias}.${name}`).join(', '),
    decode,
    all,
    first: async (db, sql, parameters) => (await all(db, sql, parameters))[0],
    one: async (db, sql, parameters) => one(await all(db, sql, parameters), `row of ${table}`),
    pick: (...picked) => rowCodec(table, Object.fromEntries(picked.map((name) => [name, schema[name]])) as Pick<S, (typeof picked)[number]>),
  };
}
