/**
 * The store's typed rows (src/store/row-codec.ts): a row is read only when it has exactly its
 * codec's columns, each of its type; anything else fails at once, naming the table and the column.
 * Rows here are as node-postgres gives them (bigint as text, timestamps as Dates); the stores' own
 * queries run through the same codecs in the integration tests on the real database.
 */
import { describe, expect, it } from '@jest/globals';
import { col, one, rowCodec, RowCountError, RowShapeError } from '../../src/store/row-codec.ts';

const seen = new Date('2026-11-29T12:00:00Z');
const codec = rowCodec(
  'things',
  { id: col.text, generation: col.bigint, state: col.oneOf(['running', 'stopped'] as const), seen_at: col.nullable(col.timestamp), tags: col.textArray },
  (row) => ({ id: row.id, generation: row.generation, state: row.state, seenAt: row.seen_at, tags: row.tags }),
);
const good = { id: 'a', generation: '7', state: 'running', seen_at: seen, tags: ['x'] };

/** The RowShapeError that decoding `row` throws. */
function shapeError(row: unknown): RowShapeError {
  try {
    codec.decode(row);
  } catch (error) {
    if (error instanceof RowShapeError) return error;
    throw error;
  }
  throw new Error('decoded without an error');
}

describe('row codecs', () => {
  it('should read a row of the right shape into its record, bigint text as a number', () => {
    expect(codec.decode(good)).toEqual({ id: 'a', generation: 7, state: 'running', seenAt: seen, tags: ['x'] });
    expect(codec.decode({ ...good, seen_at: null }).seenAt).toBeNull();
  });

  it('should name the table and the column when a value has another type', () => {
    const error = shapeError({ ...good, generation: 7 });
    expect(error).toMatchObject({ code: 'row_shape', table: 'things', column: 'generation' });
    expect(error.message).toBe('A row of things has "generation" number 7, where bigint (text of digits, below 2^53) was expected');
  });

  it('should refuse a word its vocabulary does not hold, a NULL where none may be, and a bigint past 2^53', () => {
    expect(shapeError({ ...good, state: 'paused' })).toMatchObject({ column: 'state', message: expect.stringContaining('one of running, stopped') });
    expect(shapeError({ ...good, id: null })).toMatchObject({ column: 'id', message: 'A row of things has "id" null, where text was expected' });
    expect(shapeError({ ...good, generation: '9007199254740993' })).toMatchObject({ column: 'generation' });
    expect(shapeError({ ...good, tags: ['x', 1] })).toMatchObject({ column: 'tags' });
  });

  it('should name a column the row lacks (removed or renamed)', () => {
    const { seen_at: _seen, ...lacking } = good;
    expect(shapeError({ ...lacking, last_seen_at: seen })).toMatchObject({ column: 'seen_at', message: 'A row of things lacks its column "seen_at"' });
  });

  it('should name a column the codec does not know (added to the query)', () => {
    expect(shapeError({ ...good, node: 'n1' })).toMatchObject({ column: 'node', message: 'A row of things has a column "node" its codec does not know' });
  });

  it('should list its columns for a select, plain and qualified, and pick some of them', () => {
    expect(codec.columns).toBe('id, generation, state, seen_at, tags');
    expect(codec.columnsOf('t')).toBe('t.id, t.generation, t.state, t.seen_at, t.tags');
    const ids = codec.pick('id', 'generation');
    expect(ids.columns).toBe('id, generation');
    expect(ids.decode({ id: 'a', generation: '2' })).toEqual({ id: 'a', generation: 2 });
    expect(() => ids.decode(good)).toThrow(RowShapeError);
  });

  it('should give the one row, and say what was expected when there is none or several', () => {
    expect(one([1], 'workspace')).toBe(1);
    expect(() => one([], 'workspace')).toThrow(new RowCountError('workspace', 0));
    expect(() => one([1, 2], 'workspace')).toThrow('Expected one workspace, got 2');
  });
});
