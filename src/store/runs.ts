import type { DataSource, EntityManager } from 'typeorm';
import { queryRows } from '../db/sql.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import type { StoreContext } from './workspaces.ts';

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
export const RECENT_RUNS = 20;

const COLUMNS = 'id, workspace_id, desired_state, status, queued_at, ready_at, ended_at, exit_code, reason, output, sim_endpoint';
const ACTIVE = "status IN ('queued', 'running')";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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

/** The workspace's active run, or undefined. */
export async function getActiveRun(db: DataSource, workspaceId: string): Promise<ActiveRun | undefined> {
  const rows: RunRow[] = await db.query(`SELECT ${COLUMNS} FROM runs WHERE workspace_id = $1 AND ${ACTIVE} ORDER BY queued_at DESC LIMIT 1`, [workspaceId]);
  const row = rows[0];
  return row && { id: row.id, status: row.status as 'queued' | 'running', simEndpoint: row.sim_endpoint };
}

/** A run by id, or undefined (also for ids that are not UUIDs). */
export async function getRun(db: DataSource | EntityManager, id: string): Promise<RunRecord | undefined> {
  if (!UUID.test(id)) return undefined;
  const rows: RunRow[] = await db.query(`SELECT ${COLUMNS} FROM runs WHERE id = $1`, [id]);
  return rows[0] && toRun(rows[0]);
}

/** A run of this workspace; 404 `run_not_found` for an unknown id or another workspace's run. */
export async function getWorkspaceRun(db: DataSource, workspaceId: string, id: string): Promise<RunRecord> {
  const run = await getRun(db, id);
  if (!run || run.workspaceId !== workspaceId) throw NotFoundError(`No run ${JSON.stringify(id)} in this workspace.`, 'run_not_found');
  return run;
}

/** The workspace's most recent runs, newest first. */
export async function listRuns(db: DataSource, workspaceId: string, limit = RECENT_RUNS): Promise<RunRecord[]> {
  const rows: RunRow[] = await db.query(`SELECT ${COLUMNS} FROM runs WHERE workspace_id = $1 ORDER BY queued_at DESC, id DESC LIMIT $2`, [workspaceId, limit]);
  return rows.map(toRun);
}

/** Ids of every run that is not finished (what the run controller resyncs). */
export async function listActiveRunIds(db: DataSource): Promise<string[]> {
  const rows: { id: string }[] = await db.query(`SELECT id FROM runs WHERE ${ACTIVE}`);
  return rows.map((row) => row.id);
}

/** Ids of a workspace's unfinished runs. */
export async function listActiveRunIdsOf(db: DataSource, workspaceId: string): Promise<string[]> {
  const rows: { id: string }[] = await db.query(`SELECT id FROM runs WHERE workspace_id = $1 AND ${ACTIVE}`, [workspaceId]);
  return rows.map((row) => row.id);
}

/** Runs `change` in a transaction that NOTIFYs the run's change, and publishes it after commit. */
async function changeRun(ctx: StoreContext, change: (manager: EntityManager) => Promise<RunRecord>): Promise<RunRecord> {
  const run = await ctx.db.transaction(async (manager) => {
    const value = await change(manager);
    await ctx.changes.notify(manager, { kind: 'runs', id: value.id });
    return value;
  });
  ctx.changes.publish({ kind: 'runs', id: run.id });
  return run;
}

/**
 * Queues a run of a workspace (the student pressed Run). The workspace row is locked, so two
 * concurrent requests make one run; a second while one is active is 409 `run_active` naming it,
 * and a workspace not wanted running is 409 `workspace_not_running`.
 */
export async function createRun(ctx: StoreContext, workspaceId: string): Promise<RunRecord> {
  return changeRun(ctx, async (manager) => {
    const workspaces: { desired_state: string; slug: string }[] = await manager.query('SELECT desired_state, slug FROM workspaces WHERE id = $1 FOR UPDATE', [workspaceId]);
    const workspace = workspaces[0];
    if (!workspace || workspace.desired_state === 'deleted') throw NotFoundError('No such workspace.', 'workspace_not_found');
    if (workspace.desired_state !== 'running') throw ConflictError('workspace_not_running', `Workspace ${workspace.slug} is stopped; open it before running the simulator.`);
    const active: { id: string }[] = await manager.query(`SELECT id FROM runs WHERE workspace_id = $1 AND ${ACTIVE}`, [workspaceId]);
    if (active[0]) throw ConflictError('run_active', `Run ${active[0].id} is still active; stop it first.`);
    const rows: RunRow[] = await manager.query(`INSERT INTO runs (workspace_id) VALUES ($1) RETURNING ${COLUMNS}`, [workspaceId]);
    return toRun(rows[0]!);
  });
}

/**
 * Asks a run to stop. A finished run is returned as it is (stopping is idempotent); otherwise its
 * desired state becomes stopped and the run controller ends it (`stopped` after ready, `canceled` before).
 */
export async function requestRunStop(ctx: StoreContext, workspaceId: string, id: string): Promise<RunRecord> {
  const run = await getWorkspaceRun(ctx.db, workspaceId, id);
  if (isTerminal(run.status) || run.desiredState === 'stopped') return run;
  return changeRun(ctx, async (manager) => {
    const rows = await queryRows<RunRow>(manager, `UPDATE runs SET desired_state = 'stopped' WHERE id = $1 RETURNING ${COLUMNS}`, [id]);
    return toRun(rows[0]!);
  });
}

/** Records where a run's simulator will answer (its container's address and the nt4 port). */
export async function recordSimEndpoint(db: DataSource, id: string, endpoint: string | null): Promise<void> {
  await db.query(`UPDATE runs SET sim_endpoint = $2 WHERE id = $1 AND ${ACTIVE}`, [id, endpoint]);
}

/** Marks a queued run ready (the first sim-ready signal); returns the updated run, or undefined when it was not queued. */
export async function markRunReady(db: DataSource, id: string): Promise<RunRecord | undefined> {
  const rows = await queryRows<RunRow>(db, `UPDATE runs SET status = 'running', ready_at = now() WHERE id = $1 AND status = 'queued' RETURNING ${COLUMNS}`, [id]);
  return rows[0] && toRun(rows[0]);
}

/** Ends an active run with a terminal status; returns it, or undefined when it had already ended. */
export async function finishRun(
  db: DataSource,
  id: string,
  outcome: { status: TerminalStatus; reason: string; exitCode: number | null; output: string },
): Promise<RunRecord | undefined> {
  const rows = await queryRows<RunRow>(
    db,
    `UPDATE runs SET status = $2, reason = $3, exit_code = $4, output = $5, ended_at = now(), sim_endpoint = NULL
     WHERE id = $1 AND ${ACTIVE} RETURNING ${COLUMNS}`,
    [id, outcome.status, outcome.reason, outcome.exitCode, outcome.output],
  );
  return rows[0] && toRun(rows[0]);
}
