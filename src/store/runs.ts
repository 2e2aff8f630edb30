import type { DataSource } from 'typeorm';
import { signalChannel, type Change, type ChangeFeed } from '../db/changes.ts';
import type { Queryable } from '../db/sql.ts';
import { storableText } from '../db/text.ts';
import { parseProblems } from '../../images/workspace/extension/src/problems.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { isUuid } from './ids.ts';
import type { Actor } from './audit.ts';
import type { Mutate } from './mutation.ts';
import { fencedStatement, fencedWrite, type Fence } from './leases.ts';
import { WORKSPACES } from './workspaces.ts';
import { col, rowCodec, type RowOf } from './row-codec.ts';
import {
  ACTIVE_RUN_STATUSES,
  RUN_DESIRED_STATES,
  RUN_STATUSES,
  RUN_STOPPED_BY,
  TERMINAL_RUN_STATUSES,
  type ActiveRunStatus,
  type RunDesiredState,
  type RunStatus,
  type RunStoppedBy,
  type TerminalRunStatus,
} from '../wire/vocabulary.ts';

/**
 * A run row, in two halves split by who writes each field (as WorkspaceRecord is): `spec`, what is
 * wanted, is set by a request (its student's or a coach's stop); `status`, what happened, is only
 * ever a report: the run controller's (its phase, when it became ready and ended, how, its output
 * and its simulator's address), and the store's insert, which gives a new run its first phase and
 * the time it was queued.
 */
export interface RunRecord {
  id: string;
  workspaceId: string;
  spec: RunSpec;
  status: RunRecordStatus;
}

/** The desired half of a run (see RunRecord). */
export interface RunSpec {
  desiredState: RunDesiredState;
  /** Who asked it to stop, if anyone did: its student or a coach. */
  stoppedBy: RunStoppedBy | null;
}

/** The observed half of a run (see RunRecord). */
export interface RunRecordStatus {
  /** Where the run is (queued, running, or how it ended): the runs table's `status`. */
  phase: RunStatus;
  queuedAt: Date;
  readyAt: Date | null;
  endedAt: Date | null;
  exitCode: number | null;
  reason: string | null;
  /** The last lines of the simulator's output, kept when the run ends. */
  output: string | null;
  simEndpoint: string | null;
  /** How much of the run's whole output is kept (characters; see RunStore.appendOutput). */
  outputLength: number;
  /** Whether the output passed OUTPUT_LIMIT, after which no more was kept. */
  outputTruncated: boolean;
  /** How many bytes of the container's own output the kept output was read from (where a collector that starts again goes on). */
  outputSourceBytes: number;
}

/** The compile errors a run's output holds: how many, and the first as `Robot.java:12: ';' expected` (null: none). */
export interface CompileErrors {
  count: number;
  first: string | null;
}

/** How long the first compile error may be as kept (a message is a line; a pathological one is cut). */
const FIRST_PROBLEM_MAX = 300;

/**
 * The compile errors in a run's output, as the editor's Problems finds them (parseProblems: javac's
 * and Gradle's `<path>:<line>: error: <message>`; warnings are not counted). The first is named by
 * its file's name and line, which a coach recognises whether the compiler printed the path relative
 * to the project or absolute.
 */
export function compileErrors(output: string): CompileErrors {
  const errors = parseProblems(output).filter((problem) => problem.severity === 'error');
  const first = errors[0];
  if (!first) return { count: 0, first: null };
  return { count: errors.length, first: `${first.file.split('/').at(-1)}:${first.line}: ${first.message}`.slice(0, FIRST_PROBLEM_MAX) };
}

/** The most of a run's output that is kept: 1 MiB of text; a run that prints more is cut there, with a mark saying so. */
export const OUTPUT_LIMIT = 1024 * 1024;

/** Whose runs keep their whole output: a workspace's newest this many (older runs keep their last lines only). */
export const RUNS_WITH_OUTPUT = 20;

/** A piece of a run's output: its text and the offset (in characters) it starts at. */
export interface OutputChunk {
  offset: number;
  text: string;
}

/** A piece of a run's output to keep (RunStore.appendOutput). */
export interface OutputPiece {
  runId: string;
  /** Where the run's kept output ends now: the piece goes there. */
  offset: number;
  text: string;
  /** How many bytes of the container's output the run's kept output, this piece included, was read from. */
  sourceBytes: number;
  /** Whether the output is cut off after this piece. */
  truncated: boolean;
}

/** The run a workspace has in progress (queued or running): its id, status and simulator endpoint. */
export interface ActiveRun {
  id: string;
  status: ActiveRunStatus;
  simEndpoint: string | null;
}

/** How many runs GET /runs lists, newest first. */
const RECENT_RUNS = 20;

const ACTIVE = "status IN ('queued', 'running')";

/** The runs table: its rows as the store reads them. */
const RUN_SCHEMA = {
  id: col.text,
  workspace_id: col.text,
  desired_state: col.oneOf(RUN_DESIRED_STATES),
  status: col.oneOf(RUN_STATUSES),
  queued_at: col.timestamp,
  ready_at: col.nullable(col.timestamp),
  ended_at: col.nullable(col.timestamp),
  exit_code: col.nullable(col.integer),
  reason: col.nullable(col.text),
  output: col.nullable(col.text),
  sim_endpoint: col.nullable(col.text),
  output_length: col.integer,
  output_truncated: col.boolean,
  output_source_bytes: col.bigint,
  /** `admin` is the word of the release before WidenRunStoppedBy for a coach's stop, which it may still write during a rolling upgrade. */
  stopped_by: col.nullable(col.oneOf([...RUN_STOPPED_BY, 'admin'] as const)),
};

const toRun = (row: RowOf<typeof RUN_SCHEMA>): RunRecord => ({
  id: row.id,
  workspaceId: row.workspace_id,
  spec: {
    desiredState: row.desired_state,
    stoppedBy: row.stopped_by === 'admin' ? 'coach' : row.stopped_by,
  },
  status: {
    phase: row.status,
    queuedAt: row.queued_at,
    readyAt: row.ready_at,
    endedAt: row.ended_at,
    exitCode: row.exit_code,
    reason: row.reason,
    output: row.output,
    simEndpoint: row.sim_endpoint,
    outputLength: row.output_length,
    outputTruncated: row.output_truncated,
    outputSourceBytes: row.output_source_bytes,
  },
});

const RUNS = rowCodec('runs', RUN_SCHEMA, toRun);
const COLUMNS = RUNS.columns;
const IDS = RUNS.pick('id');
const COUNT = rowCodec('runs', { n: col.bigint });

/** A workspace's active run (queued or running: the query's condition, which its codec holds it to). */
const ACTIVE_RUNS = rowCodec('runs', { id: col.text, status: col.oneOf(ACTIVE_RUN_STATUSES), sim_endpoint: col.nullable(col.text) }, (row): ActiveRun => ({
  id: row.id,
  status: row.status,
  simEndpoint: row.sim_endpoint,
}));

/** The class's runs: a run's columns, its workspace's slug and its owner's email. */
const CLASS_RUNS = rowCodec('runs', { ...RUN_SCHEMA, slug: col.text, owner_email: col.nullable(col.text) }, (row): ClassRun => ({
  ...toRun(row),
  slug: row.slug,
  ownerEmail: row.owner_email,
}));

/** The workspace a run is asked of (the workspaces table's columns it reads). */
const RUN_WORKSPACES = WORKSPACES.pick('desired_state', 'slug');

/** A run's kept output, in pieces (the run_output table). */
const OUTPUT = rowCodec('run_output', { start_offset: col.integer, text: col.text });
const OUTPUT_TEXT = OUTPUT.pick('text');

/** A run with whose it is, for the admin's lists: the workspace's slug and its owner's email. */
export interface ClassRun extends RunRecord {
  slug: string;
  ownerEmail: string | null;
}

/** Which runs of the class an admin lists: by status, since a time, of one workspace; newest first, at most `limit`. */
export interface RunFilter {
  status?: RunStatus;
  since?: Date;
  workspaceId?: string;
  limit: number;
}

/** Whether a status is terminal (one of TERMINAL_RUN_STATUSES). */
export const isTerminal = (status: RunStatus): status is TerminalRunStatus => (TERMINAL_RUN_STATUSES as readonly RunStatus[]).includes(status);

const runChange = (id: string): Change => ({ kind: 'runs', id });

async function getRun(db: Queryable, id: string): Promise<RunRecord | undefined> {
  if (!isUuid(id)) return undefined;
  return RUNS.first(db, `SELECT ${COLUMNS} FROM runs WHERE id = $1`, [id]);
}

/** Simulator runs of workspaces: asked for by students, driven to an end by the run controller. */
export class RunStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;
  private readonly changes: ChangeFeed;
  /** A leader's writes check its lease (see leases.ts); none when a controller is driven directly. */
  private readonly fence: Fence | undefined;

  constructor(db: DataSource, mutate: Mutate, changes: ChangeFeed, fence?: Fence) {
    this.db = db;
    this.mutate = mutate;
    this.changes = changes;
    this.fence = fence;
  }

  /** Publishes, in this process, that a run of the workspace changed status (kind `status`, keyed by the workspace; its NOTIFY went with the write). */
  private statusChanged(run: RunRecord | undefined): RunRecord | undefined {
    if (run) this.changes.publish({ kind: 'status', id: run.workspaceId });
    return run;
  }

  /** A run by id, or undefined (also for ids that are not UUIDs). */
  get(id: string): Promise<RunRecord | undefined> {
    return getRun(this.db, id);
  }

  /** A run of this workspace; 404 `run_not_found` for an unknown id or another workspace's run. */
  async getOf(workspaceId: string, id: string): Promise<RunRecord> {
    const run = await this.get(id);
    if (!run || run.workspaceId !== workspaceId) throw NotFoundError('run_not_found', `No run ${JSON.stringify(id)} in this workspace.`);
    return run;
  }

  /** The workspace's active run, or undefined. */
  active(workspaceId: string): Promise<ActiveRun | undefined> {
    return ACTIVE_RUNS.first(this.db, `SELECT ${ACTIVE_RUNS.columns} FROM runs WHERE workspace_id = $1 AND ${ACTIVE} ORDER BY queued_at DESC LIMIT 1`, [
      workspaceId,
    ]);
  }

  /** The workspace's most recent runs, newest first. */
  recent(workspaceId: string, limit = RECENT_RUNS): Promise<RunRecord[]> {
    return RUNS.all(this.db, `SELECT ${COLUMNS} FROM runs WHERE workspace_id = $1 ORDER BY queued_at DESC, id DESC LIMIT $2`, [workspaceId, limit]);
  }

  /** Ids of every unfinished run, or only of one workspace's (what the run controller resyncs). */
  async activeIds(workspaceId?: string): Promise<string[]> {
    const rows =
      workspaceId === undefined
        ? await IDS.all(this.db, `SELECT id FROM runs WHERE ${ACTIVE}`)
        : await IDS.all(this.db, `SELECT id FROM runs WHERE workspace_id = $1 AND ${ACTIVE}`, [workspaceId]);
    return rows.map((row) => row.id);
  }

  /** How many runs are compiling and booting (queued: not ready yet), every workspace's. */
  async startingCount(): Promise<number> {
    return (await COUNT.one(this.db, "SELECT count(*) AS n FROM runs WHERE status = 'queued'")).n;
  }

  /**
   * Queues a run of a workspace (the student pressed Run). The workspace row is locked, so two
   * concurrent requests make one run; a second while one is active is 409 `run_active` naming it,
   * and a workspace not wanted running is 409 `workspace_not_running`.
   */
  create(workspaceId: string): Promise<RunRecord> {
    return this.mutate(async (tx) => {
      const workspace = await RUN_WORKSPACES.first(tx, 'SELECT desired_state, slug FROM workspaces WHERE id = $1 FOR UPDATE', [workspaceId]);
      if (!workspace || workspace.desired_state === 'deleted') throw NotFoundError('workspace_not_found', 'No such workspace.');
      if (workspace.desired_state !== 'running')
        throw ConflictError('workspace_not_running', `Workspace ${workspace.slug} is stopped; open it before running the simulator.`);
      const active = await IDS.first(tx, `SELECT id FROM runs WHERE workspace_id = $1 AND ${ACTIVE}`, [workspaceId]);
      if (active) throw ConflictError('run_active', `Run ${active.id} is still active; stop it first.`);
      const run = await RUNS.one(tx, `INSERT INTO runs (workspace_id) VALUES ($1) RETURNING ${COLUMNS}`, [workspaceId]);
      // Only the newest runs keep their whole output.
      await tx.query('DELETE FROM run_output WHERE run_id IN (SELECT id FROM runs WHERE workspace_id = $1 ORDER BY queued_at DESC, id DESC OFFSET $2)', [
        workspaceId,
        RUNS_WITH_OUTPUT,
      ]);
      return { value: run, changed: [runChange(run.id)], audit: null };
    });
  }

  /**
   * Asks a run to stop. A finished run is returned as it is (stopping is idempotent); otherwise its
   * desired state becomes stopped and the run controller ends it (`stopped` after ready, `canceled` before).
   */
  async requestStop(workspaceId: string, id: string): Promise<RunRecord> {
    const run = await this.getOf(workspaceId, id);
    if (isTerminal(run.status.phase) || run.spec.desiredState === 'stopped') return run;
    return this.mutate(async (tx) => {
      const stopped = await RUNS.one(tx, `UPDATE runs SET desired_state = 'stopped', stopped_by = 'student' WHERE id = $1 RETURNING ${COLUMNS}`, [id]);
      return { value: stopped, changed: [runChange(id)], audit: null };
    });
  }

  /**
   * An admin stops someone's run (audited `run.stop`). A finished run is returned as it is; 404
   * `run_not_found` for an unknown one.
   */
  async stopByAdmin(actor: Actor, id: string): Promise<ClassRun> {
    const run = await this.getWithOwner(id);
    if (!run) throw NotFoundError('run_not_found', `No run ${JSON.stringify(id)}.`);
    if (isTerminal(run.status.phase) || run.spec.desiredState === 'stopped') return run;
    await this.mutate(async (tx) => {
      await tx.query(`UPDATE runs SET desired_state = 'stopped', stopped_by = 'coach' WHERE id = $1`, [id]);
      return {
        value: undefined,
        changed: [runChange(id)],
        audit: { actor, action: 'run.stop', target: { kind: 'run', id }, metadata: { slug: run.slug, workspaceId: run.workspaceId, owner: run.ownerEmail } },
      };
    });
    return { ...run, spec: { desiredState: 'stopped', stoppedBy: 'coach' } };
  }

  /** A run with its workspace's slug and owner's email, or undefined. */
  async getWithOwner(id: string): Promise<ClassRun | undefined> {
    if (!isUuid(id)) return undefined;
    return (await this.list({ limit: 1 }, id))[0];
  }

  /** The class's runs that match `filter`, newest first, with their workspace's slug and owner's email. */
  list(filter: RunFilter, id?: string): Promise<ClassRun[]> {
    const where: string[] = [];
    const values: unknown[] = [];
    const add = (sql: string, value: unknown) => {
      values.push(value);
      where.push(sql.replace('?', `$${values.length}`));
    };
    if (id !== undefined) add('r.id = ?', id);
    if (filter.status !== undefined) add('r.status = ?', filter.status);
    if (filter.since !== undefined) add('r.queued_at >= ?', filter.since);
    if (filter.workspaceId !== undefined) add('r.workspace_id = ?', filter.workspaceId);
    values.push(filter.limit);
    return CLASS_RUNS.all(
      this.db,
      `SELECT ${RUNS.columnsOf('r')}, w.slug, u.email AS owner_email
       FROM runs r JOIN workspaces w ON w.id = r.workspace_id LEFT JOIN users u ON u.id = w.user_id
       ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY r.queued_at DESC, r.id DESC LIMIT $${values.length}`,
      values,
    );
  }

  /** Records where a run's simulator will answer (its container's address and the nt4 port). */
  async recordSimEndpoint(id: string, endpoint: string | null): Promise<void> {
    await fencedWrite(this.db, this.fence, (db) => db.query(`UPDATE runs SET sim_endpoint = $2 WHERE id = $1 AND ${ACTIVE}`, [id, endpoint]));
  }

  /** Marks a queued run ready (the first sim-ready signal); returns the updated run, or undefined when it was not queued. */
  async markReady(id: string): Promise<RunRecord | undefined> {
    const rows = await fencedWrite(this.db, this.fence, async (db) => {
      const ready = await RUNS.all(db, `UPDATE runs SET status = 'running', ready_at = now() WHERE id = $1 AND status = 'queued' RETURNING ${COLUMNS}`, [id]);
      if (ready[0]) await this.changes.notify(db, { kind: 'status', id: ready[0].workspaceId });
      return ready;
    });
    return this.statusChanged(rows[0]);
  }

  /**
   * Ends an active run with a terminal status; returns it, or undefined when it had already ended.
   * The end counts as activity of the workspace (the idle sweep spares workspaces with an active
   * run, and gives them their whole idle time again after it). Its reason and output are kept as
   * storableText makes them, so that an end is recordable whatever the run printed; so are the
   * compile errors found in that output (compileErrors), which the class view shows.
   */
  async finish(id: string, outcome: { status: TerminalRunStatus; reason: string; exitCode: number | null; output: string }): Promise<RunRecord | undefined> {
    const problems = compileErrors(outcome.output);
    const rows = await fencedWrite(this.db, this.fence, async (db) => {
      const ended = await RUNS.all(
        db,
        `WITH ended AS (
         UPDATE runs SET status = $2, reason = $3, exit_code = $4, output = $5, ended_at = now(), sim_endpoint = NULL,
           problem_count = $6, first_problem = $7
         WHERE id = $1 AND ${ACTIVE} RETURNING ${COLUMNS}
       ), touched AS (
         UPDATE workspaces SET last_activity_at = greatest(last_activity_at, now()) WHERE id = (SELECT workspace_id FROM ended)
       )
       SELECT ${COLUMNS} FROM ended`,
        [
          id,
          outcome.status,
          storableText(outcome.reason),
          outcome.exitCode,
          storableText(outcome.output),
          problems.count,
          problems.first === null ? null : storableText(problems.first),
        ],
      );
      if (ended[0]) await this.changes.notify(db, { kind: 'status', id: ended[0].workspaceId });
      return ended;
    });
    return this.statusChanged(rows[0]);
  }

  /**
   * Appends pieces of output to runs' kept output in one statement: each `text` at `offset`, which
   * must be where that run's output ends now (a second writer, or a retry of a write that landed,
   * changes nothing for it), recording how many bytes of the container's output it came from and
   * whether the output is now cut off. Each text is kept as storableText makes it (its length
   * unchanged), so that no run's output can fail the statement for the others. A leader's fence is
   * checked in the same statement (fencedStatement): the collector writes every 50 ms while runs
   * print. Returns the ids of the runs appended to.
   */
  async appendOutput(pieces: OutputPiece[]): Promise<Set<string>> {
    if (pieces.length === 0) return new Set();
    // Lengths as JavaScript counts them (UTF-16 code units: an emoji is 2), which every offset is in;
    // PostgreSQL's length() counts code points. Each piece kept is signalled (`output`) to every replica.
    const ids = await fencedStatement(
      this.db,
      this.fence,
      ({ fence, held }) =>
        `WITH ${fence} piece AS (
         SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::bigint[], $5::boolean[], $6::int[]) AS p (id, start_offset, text, source_bytes, truncated, units)
       ), grown AS (
         UPDATE runs SET output_length = piece.start_offset + piece.units, output_source_bytes = piece.source_bytes, output_truncated = piece.truncated
         FROM piece WHERE runs.id = piece.id AND runs.output_length = piece.start_offset AND ${held}
         RETURNING runs.id, piece.start_offset, piece.text,
           CASE WHEN piece.units > 0 THEN pg_notify($7, runs.id::text || ' ' || (piece.start_offset + piece.units)::text) END
       ), kept AS (
         INSERT INTO run_output (run_id, start_offset, text) SELECT id, start_offset, text FROM grown WHERE text <> ''
       )
       SELECT ${held} AS held, ARRAY(SELECT id::text FROM grown) AS ids`,
      [
        pieces.map((piece) => piece.runId),
        pieces.map((piece) => piece.offset),
        pieces.map((piece) => storableText(piece.text)),
        pieces.map((piece) => piece.sourceBytes),
        pieces.map((piece) => piece.truncated),
        pieces.map((piece) => piece.text.length),
        signalChannel('output'),
      ],
    );
    return new Set(ids);
  }

  /** A run's whole kept output (at most OUTPUT_LIMIT and the mark). */
  async outputText(id: string): Promise<string> {
    const rows = await OUTPUT_TEXT.all(this.db, 'SELECT text FROM run_output WHERE run_id = $1 ORDER BY start_offset', [id]);
    return rows.map((row) => row.text).join('');
  }

  /**
   * A run's kept output from character `offset` on, in order, at most about `maxChars` in at most
   * 2,000 chunks (whole chunks, the first cut to start at `offset`): empty when there is nothing past it.
   */
  async outputFrom(id: string, offset: number, maxChars = 256 * 1024): Promise<OutputChunk[]> {
    const rows = await OUTPUT.all(
      this.db,
      // From the last chunk that starts at or before `offset` (the chunks' ends are not in the table,
      // and PostgreSQL's length() is not the offsets' unit).
      `SELECT start_offset, text FROM run_output
        WHERE run_id = $1 AND start_offset >= coalesce((SELECT max(start_offset) FROM run_output WHERE run_id = $1 AND start_offset <= $2), 0)
        ORDER BY start_offset LIMIT $3`,
      [id, offset, 2000],
    );
    const chunks: OutputChunk[] = [];
    let total = 0;
    for (const row of rows) {
      const skip = Math.max(0, offset - row.start_offset);
      const text = row.text.slice(skip);
      if (text === '') continue;
      chunks.push({ offset: row.start_offset + skip, text });
      total += text.length;
      if (total >= maxChars) break;
    }
    return chunks;
  }
}
