/**
 * One vocabulary in the database (issue 42): the CHECK constraints the migrations made hold the
 * words of src/wire/vocabulary.ts, and who stopped a run is said with a workspace's words, `coach`
 * for a coach (it was `admin`). WidenRunStoppedBy only expands: a replica of the previous release
 * that still writes `admin` during a rolling upgrade is not refused, and what it writes reads as
 * `coach`, in the store and on the wire.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import type { DataSource } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.ts';
import { WidenRunStoppedBy1795965600000 } from '../../migrations/1795965600000-WidenRunStoppedBy.ts';
import { createDataSource, migrate } from '../../src/db/database.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { presentClassRun, presentRun } from '../../src/wire/presenters.ts';
import { ClassRun } from '../../src/wire/schemas.ts';
import { DESIRED_STATES, HELP_STATES, ROLES, RUN_DESIRED_STATES, RUN_STATUSES, RUN_STOPPED_BY, STOPPED_BY } from '../../src/wire/vocabulary.ts';
import { createEmptyDatabase, useTestDatabase } from '../helpers/db.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();

/** The words each `column IN (...)` CHECK of these tables admits, by `table.column`, sorted. */
async function checkedWords(dataSource: DataSource): Promise<Record<string, string[]>> {
  const rows: { table: string; definition: string }[] = await dataSource.query(
    `SELECT conrelid::regclass::text AS table, pg_get_constraintdef(oid) AS definition
       FROM pg_constraint WHERE contype = 'c' AND conrelid IN ('users'::regclass, 'workspaces'::regclass, 'runs'::regclass, 'help_requests'::regclass)`,
  );
  // PostgreSQL shows `column IN ('a', 'b')` as `(column = ANY (ARRAY['a'::text, 'b'::text]))`.
  return Object.fromEntries(
    rows.flatMap(({ table, definition }) => {
      const column = /^CHECK \(\((\w+) = ANY \(ARRAY\[/.exec(definition)?.[1];
      return column ? [[`${table}.${column}`, [...definition.matchAll(/'([^']*)'::text/g)].map((match) => match[1]!).toSorted()]] : [];
    }),
  );
}

const sorted = (words: readonly string[]) => [...words].toSorted();

it("admits in the database's CHECK constraints the vocabulary's words (and a run's `admin` of the previous release)", async () => {
  expect(await checkedWords(db.dataSource)).toEqual({
    'users.role': sorted(ROLES),
    'workspaces.desired_state': sorted(DESIRED_STATES),
    'workspaces.stopped_by': sorted(STOPPED_BY),
    'runs.desired_state': sorted(RUN_DESIRED_STATES),
    'runs.status': sorted(RUN_STATUSES),
    // `admin` stays admitted until a Contract migration, a release after no replica writes it.
    'runs.stopped_by': sorted([...RUN_STOPPED_BY, 'admin']),
    'help_requests.state': sorted(HELP_STATES),
  });
});

it("says `coach` for a coach's stop of a run: in its row, in the store and on the wire; `student` for its student's", async () => {
  const store = testStore(db.dataSource);
  const started = async (email: string) => {
    const { workspace } = await store.users.create({ email });
    await store.workspaces.open(workspace.id);
    return store.runs.create(workspace.id);
  };
  const byCoach = await started('ada@school.test');
  const byStudent = await started('grace@school.test');
  const unstopped = await started('alan@school.test');

  const answer = presentClassRun(await store.runs.stopByAdmin(SYSTEM_ACTOR, byCoach.id));
  await store.runs.requestStop(byStudent.workspaceId, byStudent.id);

  expect(answer.stoppedBy).toBe('coach');
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  formats.default(ajv);
  const onTheWire = ajv.compile(ClassRun);
  expect([onTheWire(answer), onTheWire.errors ?? []]).toEqual([true, []]);
  const rows: { id: string; stopped_by: string | null }[] = await db.dataSource.query('SELECT id, stopped_by FROM runs');
  expect(Object.fromEntries(rows.map((row) => [row.id, row.stopped_by]))).toEqual({ [byCoach.id]: 'coach', [byStudent.id]: 'student', [unstopped.id]: null });
  const seen = await Promise.all([byCoach, byStudent, unstopped].map(async (run) => presentRun((await store.runs.get(run.id))!).stoppedBy));
  expect(seen).toEqual(['coach', 'student', null]);
});

describe('WidenRunStoppedBy', () => {
  const index = MIGRATIONS.indexOf(WidenRunStoppedBy1795965600000);
  let url: string;
  let dataSource: DataSource;

  beforeAll(async () => {
    url = await createEmptyDatabase();
    dataSource = createDataSource(url, 2);
    await dataSource.initialize();
  });
  afterAll(async () => dataSource?.destroy());

  /** Migrates, then undoes every migration from WidenRunStoppedBy on: the schema of the previous release. */
  async function previousRelease(): Promise<void> {
    await migrate(dataSource);
    for (let undo = MIGRATIONS.length - index; undo > 0; undo--) await dataSource.undoLastMigration({ transaction: 'each' });
  }

  it("makes a coach's stops recorded as `admin` `coach`, and still takes `admin` from a replica of the previous release", async () => {
    await previousRelease();
    const [user] = await dataSource.query("INSERT INTO users (email) VALUES ('ada@school.test') RETURNING id");
    const [workspace] = await dataSource.query("INSERT INTO workspaces (user_id, slug, desired_state) VALUES ($1, 'ada', 'running') RETURNING id", [user.id]);
    // A coach stopped this run under the previous release; the controller has not ended it yet.
    const [run] = await dataSource.query(
      "INSERT INTO runs (workspace_id, status, desired_state, stopped_by) VALUES ($1, 'running', 'stopped', 'admin') RETURNING id",
      [workspace.id],
    );
    const stoppedBy = async () => ((await dataSource.query('SELECT stopped_by FROM runs WHERE id = $1', [run.id])) as { stopped_by: string }[])[0]!.stopped_by;
    await expect(dataSource.query("UPDATE runs SET stopped_by = 'coach' WHERE id = $1", [run.id])).rejects.toThrow(/check constraint/);

    expect(await migrate(dataSource)).toEqual(MIGRATIONS.slice(index).map((migration) => migration.name));
    expect(await stoppedBy()).toBe('coach');
    const store = testStore(dataSource);
    expect((await store.runs.get(run.id))!.spec.stoppedBy).toBe('coach');

    // A replica of the previous release, still serving during the rolling upgrade, stops it as it always did.
    await dataSource.query("UPDATE runs SET stopped_by = 'admin' WHERE id = $1", [run.id]);
    expect(await stoppedBy()).toBe('admin');
    expect(presentRun((await store.runs.get(run.id))!).stoppedBy).toBe('coach');

    // Its `down` gives the previous release its word back.
    await dataSource.query("UPDATE runs SET stopped_by = 'coach' WHERE id = $1", [run.id]);
    await previousRelease();
    expect(await stoppedBy()).toBe('admin');
  });
});
