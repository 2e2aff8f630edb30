import type { DataSource } from 'typeorm';
import type { Change, ChangeFeed } from '../db/changes.ts';
import { queryRows, type Queryable } from '../db/sql.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { isUuid } from './ids.ts';
import type { Mutate } from './mutation.ts';

export type RunStatus = 'queued' | 'running' | 'stopped' | 'failed' | 'canceled';
export type TerminalStatus = 'stopped' | 'failed' | 'canceled';

/** A run record: desired (running/stopped) and status, with its timestamps and outcome. */
export interface RunRecord {
  id: string;
  workspaceId: string;
  desiredState: 'running' | 'stopped';
  status: RunStatus;
  queuedAt: Date;
  readyAt: Date | null;
  endedAt: Date | null;
  exitCode: number | null;
  reason: string | null;
  /** The last lines of the simulator's output, kept when the run ends. */
  output: string | null;
  simEndpoint: string | null;
}

/** The run a workspace has in progress (queued or running): its id, status and simulator endpoint. */
export interface ActiveRun {
  id: string;
  status: 'queued' | 'running';
  simEndpoint: string | null;
}

/** How many runs GET /runs lists, newest first. */
const RECENT_RUNS = 20;

const COLUMNS = 'id, workspace_id, desired_state, status, queued_at, ready_at, ended_at, exit_code, reason, output, sim_endpoint';
const ACTIVE = "status IN ('queued', 'running')";

interface RunRow {
  id: string;
  workspace_id: string;
  desired_state: 'running' | 'stopped';
  status: RunStatus;
  queued_at: Date;
  ready_at: Date | null;
  ended_at: Date | null;
  exit_code: number | null;
  reason: string | null;
  output: string | null;
  sim_endpoint: string | null;
}

const toRun = (row: RunRow): RunRecord => ({
  id: row.id,
  workspaceId: row.workspace_id,
  desiredState: row.desired_state,
  status: row.status,
  queuedAt: row.queued_at,
  readyAt: row.ready_at,
  endedAt: row.ended_at,
  exitCode: row.exit_code,
  reason: row.reason,
  output: row.output,
  simEndpoint: row.sim_endpoint,
});

/** Whether a status is terminal. */
export const isTerminal = (status: RunStatus): status is TerminalStatus => status === 'stopped' || status === 'failed' || status === 'canceled';

const runChange = (id: string): Change => ({ kind: 'runs', id });

async function getRun(db: Queryable, id: string): Promise<RunRecord | undefined> {
  if (!isUuid(id)) return undefined;
  const rows: RunRow[] = await db.query(`SELECT ${COLUMNS} FROM runs WHERE id = $1`, [id]);
  return rows[0] && toRun(rows[0]);
}

/** Simulator runs of workspaces: asked for by students, driven to an end by the run controller. */
export class RunStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;
  private readonly changes: ChangeFeed;

  constructor(db: DataSource, mutate: Mutate, changes: ChangeFeed) {
    this.db = db;
    this.mutate = mutate;
    this.changes = changes;
  }

  /** Publishes, in this process, that a run of the workspace changed status (kind `status`, keyed by the workspace). */
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
  async active(workspaceId: string): Promise<ActiveRun | undefined> {
    const rows: RunRow[] = await this.db.query(`SELECT ${COLUMNS} FROM runs WHERE workspace_id = $1 AND ${ACTIVE} ORDER BY queued_at DESC LIMIT 1`, [
      workspaceId,
    ]);
    const row = rows[0];
    return row && { id: row.id, status: row.status as 'queued' | 'running', simEndpoint: row.sim_endpoint };
  }

  /** The workspace's most recent runs, newest first. */
  async recent(workspaceId: string, limit = RECENT_RUNS): Promise<RunRecord[]> {
    const rows: RunRow[] = await this.db.query(`SELECT ${COLUMNS} FROM runs WHERE workspace_id = $1 ORDER BY queued_at DESC, id DESC LIMIT $2`, [
      workspaceId,
      limit,
    ]);
    return rows.map(toRun);
  }

  /** Ids of every unfinished run, or only of one workspace's (what the run controller resyncs). */
  async activeIds(workspaceId?: string): Promise<string[]> {
    const rows: { id: string }[] =
      workspaceId === undefined
        ? await this.db.query(`SELECT id FROM runs WHERE ${ACTIVE}`)
        : await this.db.query(`SELECT id FROM runs WHERE workspace_id = $1 AND ${ACTIVE}`, [workspaceId]);
    return rows.map((row) => row.id);
  }

  /**
   * Queues a run of a workspace (the student pressed Run). The workspace row is locked, so two
   * concurrent requests make one run; a second while one is active is 409 `run_active` naming it,
   * and a workspace not wanted running is 409 `workspace_not_running`.
   */
  create(workspaceId: string): Promise<RunRecord> {
    return this.mutate(async (tx) => {
      const workspaces: { desired_state: string; slug: string }[] = await tx.query('SELECT desired_state, slug FROM workspaces WHERE id = $1 FOR UPDATE', [
        workspaceId,
      ]);
      const workspace = workspaces[0];
      if (!workspace || workspace.desired_state === 'deleted') throw NotFoundError('workspace_not_found', 'No such workspace.');
      if (workspace.desired_state !== 'running')
        throw ConflictError('workspace_not_running', `Workspace ${workspace.slug} is stopped; open it before running the simulator.`);
      const active: { id: string }[] = await tx.query(`SELECT id FROM runs WHERE workspace_id = $1 AND ${ACTIVE}`, [workspaceId]);
      if (active[0]) throw ConflictError('run_active', `Run ${active[0].id} is still active; stop it first.`);
      const rows: RunRow[] = await tx.query(`INSERT INTO runs (workspace_id) VALUES ($1) RETURNING ${COLUMNS}`, [workspaceId]);
      const run = toRun(rows[0]!);
      return { value: run, changed: [runChange(run.id)], audit: null };
    });
  }

  /**
   * Asks a run to stop. A finished run is returned as it is (stopping is idempotent); otherwise its
   * desired state becomes stopped and the run controller ends it (`stopped` after ready, `canceled` before).
   */
  async requestStop(workspaceId: string, id: string): Promise<RunRecord> {
    const run = await this.getOf(workspaceId, id);
    if (isTerminal(run.status) || run.desiredState === 'stopped') return run;
    return this.mutate(async (tx) => {
      const rows = await queryRows<RunRow>(tx, `UPDATE runs SET desired_state = 'stopped' WHERE id = $1 RETURNING ${COLUMNS}`, [id]);
      return { value: toRun(rows[0]!), changed: [runChange(id)], audit: null };
    });
  }

  /** Records where a run's simulator will answer (its container's address and the nt4 port). */
  async recordSimEndpoint(id: string, endpoint: string | null): Promise<void> {
    await this.db.query(`UPDATE runs SET sim_endpoint = $2 WHERE id = $1 AND ${ACTIVE}`, [id, endpoint]);
  }

  /** Marks a queued run ready (the first sim-ready signal); returns the updated run, or undefined when it was not queued. */
  async markReady(id: string): Promise<RunRecord | undefined> {
    const rows = await queryRows<RunRow>(
      this.db,
      `UPDATE runs SET status = 'running', ready_at = now() WHERE id = $1 AND status = 'queued' RETURNING ${COLUMNS}`,
      [id],
    );
    return rows[0] && toRun(rows[0]);
  }

  /** Ends an active run with a terminal status; returns it, or undefined when it had already ended. */
  async finish(id: string, outcome: { status: TerminalStatus; reason: string; exitCode: number | null; output: string }): Promise<RunRecord | undefined> {
    const rows = await queryRows<RunRow>(
      this.db,
      `UPDATE runs SET status = $2, reason = $3, exit_code = $4, output = $5, ended_at = now(), sim_endpoint = NULL
       WHERE id = $1 AND ${ACTIVE} RETURNING ${COLUMNS}`,
      [id, outcome.status, outcome.reason, outcome.exitCode, outcome.output],
    );
    return this.statusChanged(rows[0] && toRun(rows[0]));
  }
}
