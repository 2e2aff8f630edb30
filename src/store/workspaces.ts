import type { DataSource, EntityManager } from 'typeorm';
import type { ChangeFeed } from '../db/changes.ts';
import { queryRows } from '../db/sql.ts';
import { ConflictError, NotFoundError, UnavailableError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { recordAudit, type Actor } from './audit.ts';
import { CAP_KEY } from './settings.ts';

/** What every store mutation needs: the database, the change feed, the env cap, and where to report. */
export interface StoreContext {
  db: DataSource;
  changes: ChangeFeed;
  /** MAX_ACTIVE_CONTAINERS, used while no runtime override is stored. */
  environmentCap: number;
  metrics: Metrics;
  /** Logger of the `control.containers` category. */
  log: Logger;
}

export type DesiredState = 'running' | 'stopped' | 'deleted';

/** A workspace row: spec (desired) and status (observed). */
export interface WorkspaceRecord {
  id: string;
  userId: string | null;
  slug: string;
  desiredState: DesiredState;
  generation: number;
  restartGeneration: number;
  observedState: string;
  observedGeneration: number;
  statusMessage: string;
  lastTransitionAt: Date | null;
  lastActivityAt: Date | null;
  /** `host:port` of the editor while the code container runs (observed by the controller). */
  editorEndpoint: string | null;
}

/** The exact message of the spec shown to a student at the cap. */
export const AT_CAPACITY_MESSAGE = 'Server at capacity. Your coach has been notified. Please try again in a few minutes.';

/** Seconds a refused student is told to wait before trying again. */
export const AT_CAPACITY_RETRY_AFTER_SECONDS = 60;

const COLUMNS = `id, user_id, slug, desired_state, generation, restart_generation, observed_state, observed_generation,
  status_message, last_transition_at, last_activity_at, editor_endpoint`;

interface WorkspaceRow {
  id: string;
  user_id: string | null;
  slug: string;
  desired_state: DesiredState;
  generation: string;
  restart_generation: string;
  observed_state: string;
  observed_generation: string;
  status_message: string;
  last_transition_at: Date | null;
  last_activity_at: Date | null;
  editor_endpoint: string | null;
}

function toRecord(row: WorkspaceRow): WorkspaceRecord {
  return {
    id: row.id,
    userId: row.user_id,
    slug: row.slug,
    desiredState: row.desired_state,
    generation: Number(row.generation),
    restartGeneration: Number(row.restart_generation),
    observedState: row.observed_state,
    observedGeneration: Number(row.observed_generation),
    statusMessage: row.status_message,
    lastTransitionAt: row.last_transition_at,
    lastActivityAt: row.last_activity_at,
    editorEndpoint: row.editor_endpoint,
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The workspace with this id, or undefined (also for ids that are not UUIDs). */
export async function getWorkspace(db: DataSource | EntityManager, id: string): Promise<WorkspaceRecord | undefined> {
  if (!UUID.test(id)) return undefined;
  const rows: WorkspaceRow[] = await db.query(`SELECT ${COLUMNS} FROM workspaces WHERE id = $1`, [id]);
  return rows[0] && toRecord(rows[0]);
}

/** The workspace with this slug, or undefined. */
export async function getWorkspaceBySlug(db: DataSource, slug: string): Promise<WorkspaceRecord | undefined> {
  const rows: WorkspaceRow[] = await db.query(`SELECT ${COLUMNS} FROM workspaces WHERE slug = $1`, [slug]);
  return rows[0] && toRecord(rows[0]);
}

/** Every workspace, by slug. */
export async function listWorkspaces(db: DataSource): Promise<WorkspaceRecord[]> {
  const rows: WorkspaceRow[] = await db.query(`SELECT ${COLUMNS} FROM workspaces ORDER BY slug`);
  return rows.map(toRecord);
}

/** Locks and returns a workspace that is not deleted, or throws 404. */
async function lockWorkspace(manager: EntityManager, id: string): Promise<WorkspaceRecord> {
  if (!UUID.test(id)) throw NotFoundError(`No workspace with id ${JSON.stringify(id)}.`, 'workspace_not_found');
  const rows: WorkspaceRow[] = await manager.query(`SELECT ${COLUMNS} FROM workspaces WHERE id = $1 FOR UPDATE`, [id]);
  const row = rows[0];
  if (!row || row.desired_state === 'deleted') throw NotFoundError(`No workspace with id ${JSON.stringify(id)}.`, 'workspace_not_found');
  return toRecord(row);
}

/**
 * Runs `change` in a transaction that also NOTIFYs the workspace's change, then publishes it in
 * process after commit. Returns what `change` returns.
 */
async function changeWorkspace<T extends { id: string }>(ctx: StoreContext, change: (manager: EntityManager) => Promise<T>): Promise<T> {
  const result = await ctx.db.transaction(async (manager) => {
    const value = await change(manager);
    await ctx.changes.notify(manager, { kind: 'workspaces', id: value.id });
    return value;
  });
  ctx.changes.publish({ kind: 'workspaces', id: result.id });
  return result;
}

/** Derives a slug from an email's local part: `[a-z0-9-]`, at most 32 characters, never empty. */
export function slugFromEmail(email: string): string {
  const local = email.split('@')[0] ?? '';
  const slug = local
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 32)
    .replace(/-+$/, '');
  return slug || 'user';
}

/**
 * Creates a user and their workspace (stopped) in one transaction. The slug comes from the email's
 * local part, made unique with a numeric suffix (`ada`, `ada-2`, ...). The email is stored lower-case.
 */
export async function createUserWithWorkspace(
  ctx: StoreContext,
  input: { email: string; name?: string; role?: 'user' | 'admin' },
): Promise<{ userId: string; workspace: WorkspaceRecord }> {
  const email = input.email.trim().toLowerCase();
  const base = slugFromEmail(email);
  const created = await ctx.db.transaction(async (manager) => {
    const users: { id: string }[] = await manager.query('INSERT INTO users (email, name, role) VALUES ($1, $2, $3) RETURNING id', [
      email,
      input.name ?? '',
      input.role ?? 'user',
    ]);
    const userId = users[0]!.id;
    // Lowest free suffix among the slugs taken; ON CONFLICT covers a concurrent sign-in taking it first.
    for (let attempt = 0; attempt < 50; attempt++) {
      const taken: { slug: string }[] = await manager.query("SELECT slug FROM workspaces WHERE slug = $1 OR slug LIKE $2", [base, `${base}-%`]);
      const used = new Set(taken.map((row) => row.slug));
      let slug = base;
      for (let n = 2; used.has(slug); n++) slug = `${base}-${n}`;
      const rows: WorkspaceRow[] = await manager.query(
        `INSERT INTO workspaces (user_id, slug) VALUES ($1, $2) ON CONFLICT (slug) DO NOTHING RETURNING ${COLUMNS}`,
        [userId, slug],
      );
      if (rows[0]) return { userId, workspace: toRecord(rows[0]) };
    }
    throw ConflictError('slug_unavailable', `Could not find a free workspace slug for ${email}.`);
  });
  return created;
}

/**
 * Admission of "open this workspace": in one transaction serialised on the cap row, sets the
 * workspace wanted running unless the number of workspaces wanted running has reached the effective
 * cap. A workspace already wanted running is admitted as it is (never refused). At the cap: throws
 * 503 `at_capacity` with Retry-After and the spec's message, logs a warning and counts the refusal.
 */
export async function openWorkspace(ctx: StoreContext, id: string): Promise<{ workspace: WorkspaceRecord; alreadyRunning: boolean }> {
  let refusal: { cap: number; running: number; slug: string } | undefined;
  const result = await ctx.db
    .transaction(async (manager) => {
      const caps: { value: number | null }[] = await manager.query('SELECT value FROM settings WHERE key = $1 FOR UPDATE', [CAP_KEY]);
      const workspace = await lockWorkspace(manager, id);
      if (workspace.desiredState === 'running') {
        await manager.query('UPDATE workspaces SET last_activity_at = now() WHERE id = $1', [id]);
        return { workspace, alreadyRunning: true };
      }
      const cap = typeof caps[0]?.value === 'number' ? caps[0].value : ctx.environmentCap;
      const counts: { running: string }[] = await manager.query("SELECT count(*) AS running FROM workspaces WHERE desired_state = 'running'");
      const running = Number(counts[0]!.running);
      if (running >= cap) {
        refusal = { cap, running, slug: workspace.slug };
        return undefined;
      }
      const rows = await queryRows<WorkspaceRow>(manager, 
        `UPDATE workspaces SET desired_state = 'running', generation = generation + 1, last_activity_at = now(), updated_at = now()
         WHERE id = $1 RETURNING ${COLUMNS}`,
        [id],
      );
      await ctx.changes.notify(manager, { kind: 'workspaces', id });
      return { workspace: toRecord(rows[0]!), alreadyRunning: false };
    });
  if (!result) {
    ctx.metrics.capacityRejections.inc();
    ctx.log.warning({ workspaceId: id, slug: refusal!.slug, cap: refusal!.cap, running: refusal!.running }, 'workspace open refused: server at capacity');
    throw UnavailableError('at_capacity', AT_CAPACITY_MESSAGE, AT_CAPACITY_RETRY_AFTER_SECONDS);
  }
  if (!result.alreadyRunning) ctx.changes.publish({ kind: 'workspaces', id });
  return result;
}

/** Sets a workspace wanted stopped (admin stop-containers) and audits `container.stop`. Stopping a stopped workspace is a no-op that is still audited. */
export async function stopWorkspace(ctx: StoreContext, actor: Actor, id: string): Promise<WorkspaceRecord> {
  return changeWorkspace(ctx, async (manager) => {
    const before = await lockWorkspace(manager, id);
    const rows = await queryRows<WorkspaceRow>(manager, 
      `UPDATE workspaces SET desired_state = 'stopped', generation = generation + CASE WHEN desired_state = 'stopped' THEN 0 ELSE 1 END, updated_at = now()
       WHERE id = $1 RETURNING ${COLUMNS}`,
      [id],
    );
    await recordAudit(manager, { actor, action: 'container.stop', target: { kind: 'workspace', id }, metadata: { slug: before.slug, from: before.desiredState } });
    return toRecord(rows[0]!);
  });
}

/**
 * Asks for a fresh code container (admin restart-code): bumps `restart_generation`, and audits
 * `container.restart-code`. Refused (409) when the workspace is not wanted running.
 */
export async function restartCode(ctx: StoreContext, actor: Actor, id: string): Promise<WorkspaceRecord> {
  return changeWorkspace(ctx, async (manager) => {
    const before = await lockWorkspace(manager, id);
    if (before.desiredState !== 'running') {
      throw ConflictError('workspace_not_running', `Workspace ${before.slug} is stopped; there is no code container to restart.`);
    }
    const rows = await queryRows<WorkspaceRow>(manager, 
      `UPDATE workspaces SET restart_generation = restart_generation + 1, generation = generation + 1, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
      [id],
    );
    await recordAudit(manager, { actor, action: 'container.restart-code', target: { kind: 'workspace', id }, metadata: { slug: before.slug } });
    return toRecord(rows[0]!);
  });
}

/** Marks a workspace deleted: the workspace controller removes its containers and volume, then the row (the finalizer). */
export async function markWorkspaceDeleted(ctx: StoreContext, id: string): Promise<WorkspaceRecord> {
  return changeWorkspace(ctx, async (manager) => {
    await lockWorkspace(manager, id);
    return markDeletedIn(manager, id);
  });
}

/** Marks a workspace deleted inside the caller's transaction (the caller announces the change). */
export async function markDeletedIn(manager: EntityManager, id: string): Promise<WorkspaceRecord> {
  const rows = await queryRows<WorkspaceRow>(
    manager,
    `UPDATE workspaces SET desired_state = 'deleted', generation = generation + 1, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
    [id],
  );
  return toRecord(rows[0]!);
}

/** The observed half of a workspace, written by the workspace controller. */
export interface WorkspaceStatus {
  observedState: string;
  observedGeneration: number;
  statusMessage: string;
  /** Where the editor answers while running; null otherwise. */
  editorEndpoint?: string | null;
}

/**
 * Writes a workspace's observed status when it differs from what is stored (so a resync of an
 * unchanged fleet writes nothing); `last_transition_at` moves only when the state changes.
 */
export async function writeWorkspaceStatus(db: DataSource, id: string, status: WorkspaceStatus): Promise<void> {
  await db.query(
    `UPDATE workspaces SET
       last_transition_at = CASE WHEN observed_state IS DISTINCT FROM $2 THEN now() ELSE last_transition_at END,
       observed_state = $2, observed_generation = $3, status_message = $4, editor_endpoint = $5
     WHERE id = $1 AND (observed_state, observed_generation, status_message, editor_endpoint) IS DISTINCT FROM ($2, $3::bigint, $4, $5)`,
    [id, status.observedState, status.observedGeneration, status.statusMessage, status.editorEndpoint ?? null],
  );
}

/** Deletes a workspace row that is marked deleted (the finalizer's last step). */
export async function finalizeDeletedWorkspace(db: DataSource, id: string): Promise<void> {
  await db.query("DELETE FROM workspaces WHERE id = $1 AND desired_state = 'deleted'", [id]);
}

/** Ids of every workspace row. */
export async function listWorkspaceIds(db: DataSource): Promise<string[]> {
  const rows: { id: string }[] = await db.query('SELECT id FROM workspaces');
  return rows.map((row) => row.id);
}

/** How many workspaces are wanted running (what admission counts against the cap). */
export async function countWantedRunning(db: DataSource): Promise<number> {
  const rows: { running: string }[] = await db.query("SELECT count(*) AS running FROM workspaces WHERE desired_state = 'running'");
  return Number(rows[0]!.running);
}

/**
 * The idle sweep's step: sets every workspace wanted running whose last activity is older than
 * `idleMinutes` to stopped, in one statement, and announces each. Returns the stopped workspaces.
 */
export async function stopIdleWorkspaces(ctx: StoreContext, idleMinutes: number): Promise<{ id: string; slug: string; lastActivityAt: Date | null }[]> {
  const stopped = await ctx.db.transaction(async (manager) => {
    const rows = await queryRows<{ id: string; slug: string; last_activity_at: Date | null }>(manager, 
      `UPDATE workspaces SET desired_state = 'stopped', generation = generation + 1, updated_at = now()
       WHERE desired_state = 'running' AND coalesce(last_activity_at, updated_at) < now() - make_interval(secs => $1::double precision * 60)
       RETURNING id, slug, last_activity_at`,
      [idleMinutes],
    );
    for (const row of rows) await ctx.changes.notify(manager, { kind: 'workspaces', id: row.id });
    return rows;
  });
  for (const row of stopped) ctx.changes.publish({ kind: 'workspaces', id: row.id });
  return stopped.map((row) => ({ id: row.id, slug: row.slug, lastActivityAt: row.last_activity_at }));
}

/**
 * Records activity gathered in memory: one statement for the whole batch, never moving a
 * workspace's last activity backwards.
 */
export async function recordActivity(db: DataSource, batch: Map<string, Date>): Promise<void> {
  if (batch.size === 0) return;
  const ids = [...batch.keys()];
  const times = ids.map((id) => batch.get(id)!.toISOString());
  await db.query(
    `UPDATE workspaces w SET last_activity_at = a.at
     FROM unnest($1::uuid[], $2::timestamptz[]) AS a(id, at)
     WHERE w.id = a.id AND (w.last_activity_at IS NULL OR w.last_activity_at < a.at)`,
    [ids, times],
  );
}

/** A container of a workspace as /admin/status shows it: what is wanted and what was observed. */
export interface ContainerStatus {
  role: 'code' | 'sim';
  runId?: string;
  desiredState: string;
  observedState: string;
}

/** The admin overview: every workspace with its containers, the active build count, and the capacity. */
export interface StatusOverview {
  workspaces: (Omit<WorkspaceRecord, 'lastTransitionAt' | 'lastActivityAt'> & {
    lastTransitionAt: string | null;
    lastActivityAt: string | null;
    containers: ContainerStatus[];
  })[];
  /** Runs still compiling or booting (queued). */
  activeBuilds: number;
  capacity: { cap: number; source: 'override' | 'environment'; wantedRunning: number; running: number };
}

/** Reads the overview from recorded desired and observed state (never from Docker). */
export async function statusOverview(db: DataSource, cap: { value: number; source: 'override' | 'environment' }): Promise<StatusOverview> {
  const [workspaces, runs] = await Promise.all([
    listWorkspaces(db),
    db.query("SELECT id, workspace_id, desired_state, status FROM runs WHERE status IN ('queued', 'running')") as Promise<
      { id: string; workspace_id: string; desired_state: string; status: string }[]
    >,
  ]);
  const runsByWorkspace = Map.groupBy(runs, (run) => run.workspace_id);
  const codeDesired: Record<DesiredState, string> = { running: 'running', stopped: 'stopped', deleted: 'removed' };
  return {
    workspaces: workspaces.map((workspace) => ({
      ...workspace,
      lastTransitionAt: workspace.lastTransitionAt?.toISOString() ?? null,
      lastActivityAt: workspace.lastActivityAt?.toISOString() ?? null,
      containers: [
        { role: 'code', desiredState: codeDesired[workspace.desiredState], observedState: workspace.observedState },
        ...(runsByWorkspace.get(workspace.id) ?? []).map((run) => ({ role: 'sim' as const, runId: run.id, desiredState: run.desired_state, observedState: run.status })),
      ],
    })),
    activeBuilds: runs.filter((run) => run.status === 'queued').length,
    capacity: {
      cap: cap.value,
      source: cap.source,
      wantedRunning: workspaces.filter((workspace) => workspace.desiredState === 'running').length,
      running: workspaces.filter((workspace) => workspace.observedState === 'running').length,
    },
  };
}
