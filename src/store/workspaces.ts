import type { DataSource } from 'typeorm';
import { channelOf, type Change, type ChangeFeed } from '../db/changes.ts';
import type { Queryable } from '../db/sql.ts';
import { storableText } from '../db/text.ts';
import { AtCapacityError, ConflictError, NotFoundError } from '../errors.ts';
import { normalEmail } from '../identity/email.ts';
import type { Actor } from './audit.ts';
import { isUuid } from './ids.ts';
import type { Mutate, Tx } from './mutation.ts';
import { readCap, type EffectiveCap } from './settings.ts';
import { fencedStatement, fencedWrite, type Fence } from './leases.ts';
import {
  ACTIVE_RUN_STATUSES,
  DESIRED_STATES,
  OBSERVED_STATES,
  RUN_DESIRED_STATES,
  STOPPED_BY,
  type ActiveRunStatus,
  type DesiredState,
  type ObservedState,
  type RunDesiredState,
  type StoppedBy,
} from '../wire/vocabulary.ts';
import { col, rowCodec } from './row-codec.ts';

/** A workspace's wanted and observed states and who stopped it: the words of src/wire/vocabulary.ts, where each is defined. */
export type { DesiredState, ObservedState, StoppedBy } from '../wire/vocabulary.ts';

/**
 * A workspace row, in two halves split by who writes each field (as Kubernetes splits an object):
 * `spec`, what is wanted, is set by a request (the API, the CLI) or by a loop acting as an
 * operator would (the idle sweep stopping it, the leader moving its home off a node), always
 * through the store's mutations, which bump `generation`; `status`, what was seen, is only ever a
 * report of what happened: the workspace controller's observations (writeStatus), the activity the
 * proxy and the opens saw, a home recovered from a backup. A field a request can set is spec.
 */
export interface WorkspaceRecord {
  id: string;
  userId: string | null;
  slug: string;
  spec: WorkspaceSpec;
  status: WorkspaceRecordStatus;
}

/** The desired half of a workspace (see WorkspaceRecord): what it is wanted to be. */
export interface WorkspaceSpec {
  desiredState: DesiredState;
  /** Moves with every change of the spec; the controller reports which one it converged (`status.observedGeneration`). */
  generation: number;
  /** Moves when an admin asks for a fresh code container. */
  restartGeneration: number;
  /** The volume its home lives on, when a restore replaced the default one (`ws-<slug>-home`); null: the default. */
  homeVolume: string | null;
  /** Home volumes a restore replaced, for the controller to remove once nothing mounts them (it then takes them off, forgetRetired). */
  retiredVolumes: string[];
  /** Who stopped it last, and when (null: never stopped since these were recorded). */
  stoppedBy: StoppedBy | null;
  stoppedAt: Date | null;
}

/** What the workspace controller reports of a workspace (writeStatus): its part of the observed half. */
export interface WorkspaceStatus {
  observedState: ObservedState;
  observedGeneration: number;
  statusMessage: string;
  /** Where the editor answers while running; null otherwise. */
  editorEndpoint?: string | null;
  /** The swarm node its editor is on; undefined: as recorded. */
  node?: string;
}

/** The observed half of a workspace (see WorkspaceRecord): the controller's last report as recorded, and what else was seen. */
export interface WorkspaceRecordStatus extends Required<Omit<WorkspaceStatus, 'node'>> {
  /** The swarm node its editor was last seen on (null on one engine, or before it was). */
  node: string | null;
  /** When `observedState` last changed. */
  lastTransitionAt: Date | null;
  /** The last activity seen: an open, traffic through the proxy, a run's end (the idle sweep's measure). */
  lastActivityAt: Date | null;
  /**
   * When its home was last brought back from a backup because the swarm node it was on was lost:
   * when that happened, the time of the backup it got back (what its student is told), and why.
   */
  homeRestore: { at: Date; from: Date; reason: string } | null;
}

/** A run in progress as the overview counts it. */
export interface OverviewRun {
  id: string;
  workspaceId: string;
  desiredState: RunDesiredState;
  status: ActiveRunStatus;
}

/** Everything the admin overview shows, read from recorded desired and observed state (never from Docker). */
export interface Overview {
  workspaces: WorkspaceRecord[];
  /** Runs queued or running. */
  activeRuns: OverviewRun[];
  cap: EffectiveCap;
}

/** The workspaces table: its rows as the store reads them; its picks serve the other stores' reads of workspaces. */
export const WORKSPACES = rowCodec(
  'workspaces',
  {
    id: col.text,
    user_id: col.nullable(col.text),
    slug: col.text,
    desired_state: col.oneOf(DESIRED_STATES),
    generation: col.bigint,
    restart_generation: col.bigint,
    observed_state: col.oneOf(OBSERVED_STATES),
    observed_generation: col.bigint,
    status_message: col.text,
    last_transition_at: col.nullable(col.timestamp),
    last_activity_at: col.nullable(col.timestamp),
    editor_endpoint: col.nullable(col.text),
    home_volume: col.nullable(col.text),
    retired_volumes: col.textArray,
    stopped_by: col.nullable(col.oneOf(STOPPED_BY)),
    stopped_at: col.nullable(col.timestamp),
    home_restored_at: col.nullable(col.timestamp),
    home_restored_from: col.nullable(col.timestamp),
    home_restore_reason: col.nullable(col.text),
    node: col.nullable(col.text),
  },
  (row): WorkspaceRecord => ({
    id: row.id,
    userId: row.user_id,
    slug: row.slug,
    spec: {
      desiredState: row.desired_state,
      generation: row.generation,
      restartGeneration: row.restart_generation,
      homeVolume: row.home_volume,
      retiredVolumes: row.retired_volumes,
      stoppedBy: row.stopped_by,
      stoppedAt: row.stopped_at,
    },
    status: {
      observedState: row.observed_state,
      observedGeneration: row.observed_generation,
      statusMessage: row.status_message,
      editorEndpoint: row.editor_endpoint,
      node: row.node,
      lastTransitionAt: row.last_transition_at,
      lastActivityAt: row.last_activity_at,
      homeRestore:
        row.home_restored_at && row.home_restored_from
          ? { at: row.home_restored_at, from: row.home_restored_from, reason: row.home_restore_reason ?? '' }
          : null,
    },
  }),
);
const COLUMNS = WORKSPACES.columns;
const IDS = WORKSPACES.pick('id');
const SLUGS = WORKSPACES.pick('slug');
const STOPPED_IDLE = WORKSPACES.pick('id', 'slug', 'last_activity_at');

/** The active runs the overview counts (the runs table's columns it reads). */
const OVERVIEW_RUNS = rowCodec(
  'runs',
  { id: col.text, workspace_id: col.text, desired_state: col.oneOf(RUN_DESIRED_STATES), status: col.oneOf(ACTIVE_RUN_STATUSES) },
  (run): OverviewRun => ({ id: run.id, workspaceId: run.workspace_id, desiredState: run.desired_state, status: run.status }),
);

/** How many workspaces are wanted running (admission's count). */
const RUNNING_COUNT = rowCodec('workspaces', { running: col.bigint });

/** The change announcement of a workspace. */
export const workspaceChange = (id: string): Change => ({ kind: 'workspaces', id });

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
 * Inserts a stopped workspace for a new user in the caller's transaction, with the slug derived
 * from the email made unique by a numeric suffix (`ada`, `ada-2`, ...).
 */
export async function insertWorkspace(tx: Tx, userId: string, email: string): Promise<WorkspaceRecord> {
  const base = slugFromEmail(email);
  // Lowest free suffix among the slugs taken; ON CONFLICT covers a concurrent sign-in taking it first.
  for (let attempt = 0; attempt < 50; attempt++) {
    const taken = await SLUGS.all(tx, 'SELECT slug FROM workspaces WHERE slug = $1 OR slug LIKE $2', [base, `${base}-%`]);
    const used = new Set(taken.map((row) => row.slug));
    let slug = base;
    for (let n = 2; used.has(slug); n++) slug = `${base}-${n}`;
    const inserted = await WORKSPACES.first(tx, `INSERT INTO workspaces (user_id, slug) VALUES ($1, $2) ON CONFLICT (slug) DO NOTHING RETURNING ${COLUMNS}`, [
      userId,
      slug,
    ]);
    if (inserted) return inserted;
  }
  throw ConflictError('slug_unavailable', `Could not find a free workspace slug for ${email}.`);
}

/** Marks a workspace deleted in the caller's transaction (the controller then removes its containers and volume, then the row). */
export async function markDeleted(tx: Tx, id: string): Promise<WorkspaceRecord> {
  return WORKSPACES.one(
    tx,
    `UPDATE workspaces SET desired_state = 'deleted', generation = generation + 1, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
    [id],
  );
}

/** Throws 409 `workspace_running` unless a workspace is wanted stopped and its editor no longer runs. */
export function assertStopped(workspace: WorkspaceRecord): void {
  if (workspace.spec.desiredState === 'running') {
    throw ConflictError('workspace_running', `Workspace ${workspace.slug} is running; stop it first (cli workspaces stop ${workspace.slug}).`);
  }
  if (workspace.status.observedState === 'running' || workspace.status.observedState === 'starting') {
    throw ConflictError('workspace_running', `Workspace ${workspace.slug} is still stopping; try again in a moment.`);
  }
}

const notFound = (id: string) => NotFoundError('workspace_not_found', `No workspace with id ${JSON.stringify(id)}.`);

/** Locks and returns a workspace that is not deleted, or throws 404. */
async function lockWorkspace(tx: Tx, id: string): Promise<WorkspaceRecord> {
  if (!isUuid(id)) throw notFound(id);
  const workspace = await WORKSPACES.first(tx, `SELECT ${COLUMNS} FROM workspaces WHERE id = $1 FOR UPDATE`, [id]);
  if (!workspace || workspace.spec.desiredState === 'deleted') throw notFound(id);
  return workspace;
}

async function getWorkspace(db: Queryable, id: string): Promise<WorkspaceRecord | undefined> {
  if (!isUuid(id)) return undefined;
  return WORKSPACES.first(db, `SELECT ${COLUMNS} FROM workspaces WHERE id = $1`, [id]);
}

/** Workspaces: their spec (edited by students, admins, the CLI and the idle sweep) and their status (written by the controller). */
export class WorkspaceStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;
  private readonly changes: ChangeFeed;
  private readonly environmentCap: number;
  /** A leader's writes check its lease (see leases.ts); none when a controller is driven directly. */
  private readonly fence: Fence | undefined;

  constructor(db: DataSource, mutate: Mutate, changes: ChangeFeed, environmentCap: number, fence?: Fence) {
    this.db = db;
    this.mutate = mutate;
    this.changes = changes;
    this.environmentCap = environmentCap;
    this.fence = fence;
  }

  /** The workspace with this id, or undefined (also for ids that are not UUIDs). */
  get(id: string): Promise<WorkspaceRecord | undefined> {
    return getWorkspace(this.db, id);
  }

  /** The workspace with this slug, or undefined. */
  getBySlug(slug: string): Promise<WorkspaceRecord | undefined> {
    return WORKSPACES.first(this.db, `SELECT ${COLUMNS} FROM workspaces WHERE slug = $1`, [slug]);
  }

  /**
   * The workspace named by its slug or its owner's email (what operators type; the email compared
   * as users are), or undefined.
   */
  async find(slugOrEmail: string): Promise<WorkspaceRecord | undefined> {
    const text = slugOrEmail.trim();
    // No slug or email holds a NUL, and PostgreSQL could not compare one.
    if (text.includes('\u0000')) return undefined;
    return WORKSPACES.first(
      this.db,
      `SELECT ${COLUMNS} FROM workspaces WHERE slug = $1 OR user_id = (SELECT id FROM users WHERE email = $2) ORDER BY slug = $1 DESC LIMIT 1`,
      [text, normalEmail(text)],
    );
  }

  /** The workspace an operator names (slug or owner's email), not deleted; 404 `workspace_not_found` otherwise. */
  async resolve(slugOrEmail: string): Promise<WorkspaceRecord> {
    const found = await this.find(slugOrEmail);
    if (!found || found.spec.desiredState === 'deleted') {
      throw NotFoundError('workspace_not_found', `No workspace ${JSON.stringify(slugOrEmail)} (give a slug or an owner's email).`);
    }
    return found;
  }

  /** Every workspace, by slug. */
  list(): Promise<WorkspaceRecord[]> {
    return WORKSPACES.all(this.db, `SELECT ${COLUMNS} FROM workspaces ORDER BY slug`);
  }

  /** Ids of every workspace row. */
  async ids(): Promise<string[]> {
    return (await IDS.all(this.db, 'SELECT id FROM workspaces')).map((row) => row.id);
  }

  /**
   * Admission of "open this workspace": in one transaction serialised on the cap row, sets the
   * workspace wanted running unless as many workspaces as the effective cap are wanted running
   * (then AtCapacityError, 503 `at_capacity`). A workspace already wanted running is admitted as it
   * is, never refused, and only its activity is marked.
   */
  open(id: string): Promise<{ workspace: WorkspaceRecord; alreadyRunning: boolean }> {
    return this.mutate<{ workspace: WorkspaceRecord; alreadyRunning: boolean }>(async (tx) => {
      const cap = await readCap(tx, this.environmentCap, true);
      const workspace = await lockWorkspace(tx, id);
      if (workspace.spec.desiredState === 'running') {
        await tx.query('UPDATE workspaces SET last_activity_at = now() WHERE id = $1', [id]);
        return { value: { workspace, alreadyRunning: true }, changed: [], audit: null };
      }
      const { running } = await RUNNING_COUNT.one(tx, "SELECT count(*) AS running FROM workspaces WHERE desired_state = 'running'");
      if (running >= cap.value) throw new AtCapacityError({ workspaceId: id, slug: workspace.slug, cap: cap.value, running });
      const opened = await WORKSPACES.one(
        tx,
        `UPDATE workspaces SET desired_state = 'running', generation = generation + 1, last_activity_at = now(), updated_at = now()
         WHERE id = $1 RETURNING ${COLUMNS}`,
        [id],
      );
      return { value: { workspace: opened, alreadyRunning: false }, changed: [workspaceChange(id)], audit: null };
    });
  }

  /**
   * Sets a workspace wanted stopped, recording `by` whom (kept when it was stopped already), and
   * audits `container.stop`. Stopping a stopped workspace changes nothing but is still audited.
   */
  stop(actor: Actor, id: string, by: StoppedBy): Promise<WorkspaceRecord> {
    return this.mutate(async (tx) => {
      const before = await lockWorkspace(tx, id);
      const after = await WORKSPACES.one(
        tx,
        `UPDATE workspaces SET
           stopped_by = CASE WHEN desired_state = 'stopped' THEN stopped_by ELSE $2 END,
           stopped_at = CASE WHEN desired_state = 'stopped' THEN stopped_at ELSE now() END,
           desired_state = 'stopped', generation = generation + CASE WHEN desired_state = 'stopped' THEN 0 ELSE 1 END, updated_at = now()
         WHERE id = $1 RETURNING ${COLUMNS}`,
        [id, by],
      );
      return {
        value: after,
        changed: [workspaceChange(id)],
        audit: { actor, action: 'container.stop', target: { kind: 'workspace', id }, metadata: { slug: before.slug, from: before.spec.desiredState } },
      };
    });
  }

  /**
   * Asks for a fresh code container (admin restart-code): bumps `restart_generation`, and audits
   * `container.restart-code`. Refused (409) when the workspace is not wanted running.
   */
  restartCode(actor: Actor, id: string): Promise<WorkspaceRecord> {
    return this.mutate(async (tx) => {
      const before = await lockWorkspace(tx, id);
      if (before.spec.desiredState !== 'running')
        throw ConflictError('workspace_not_running', `Workspace ${before.slug} is stopped; there is no code container to restart.`);
      const after = await WORKSPACES.one(
        tx,
        `UPDATE workspaces SET restart_generation = restart_generation + 1, generation = generation + 1, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
        [id],
      );
      return {
        value: after,
        changed: [workspaceChange(id)],
        audit: { actor, action: 'container.restart-code', target: { kind: 'workspace', id }, metadata: { slug: before.slug } },
      };
    });
  }

  /** Records that a workspace's home was backed up (audited `workspace.backup` with `metadata`); no desired state changes. */
  recordBackup(actor: Actor, id: string, metadata: Record<string, unknown>): Promise<void> {
    return this.mutate(async (tx) => {
      await lockWorkspace(tx, id);
      return { value: undefined, changed: [], audit: { actor, action: 'workspace.backup', target: { kind: 'workspace', id }, metadata } };
    });
  }

  /**
   * Points a stopped workspace's home at `volume`, which a restore has filled (or, for a reset, a
   * volume not made yet: the controller makes it, empty, as a new home), and audits `action`
   * (`workspace.restore`, `workspace.reset` or `workspace.import`) with `metadata`; `within` runs in
   * the same transaction (an import's record of its end). Refused (409 `workspace_running`) while the
   * workspace is wanted running or its editor still runs: no file is ever changed under a running
   * editor. The volume it replaces (`homeOf` the workspace as it was) is recorded as retired: the
   * controller moves its containers to the new volume and removes the retired one once nothing
   * mounts it (forgetRetired).
   */
  replaceHome(
    actor: Actor,
    id: string,
    volume: string,
    metadata: Record<string, unknown>,
    homeOf: (workspace: WorkspaceRecord) => string,
    action: 'workspace.restore' | 'workspace.reset' | 'workspace.import' = 'workspace.restore',
    within?: (tx: Tx) => Promise<void>,
  ): Promise<WorkspaceRecord> {
    return this.mutate(async (tx) => {
      const before = await lockWorkspace(tx, id);
      assertStopped(before);
      await within?.(tx);
      const after = await WORKSPACES.one(
        tx,
        `UPDATE workspaces SET home_volume = $2, retired_volumes = array_append(array_remove(retired_volumes, $3), $3),
           generation = generation + 1, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
        [id, volume, homeOf(before)],
      );
      return {
        value: after,
        changed: [workspaceChange(id)],
        audit: { actor, action, target: { kind: 'workspace', id }, metadata: { slug: before.slug, ...metadata } },
      };
    });
  }

  /**
   * Moves a workspace's home to `volume` on another swarm node, whatever the workspace is wanted
   * (the leader's move off a drained or lost node, docs/swarm.md). A drained node's home (`retire`)
   * went with a fresh backup and is removed once nothing mounts it; a lost node's home is not
   * retired: should the node come back, it holds files newer than the backup, and the orphan sweep
   * reports it to the operator. `recovered`: the home was filled from the backup of that time, which
   * the student's page then tells. Audited `workspace.restore` (with `node` and `reason`).
   */
  moveHome(
    actor: Actor,
    id: string,
    volume: string,
    move: { retire: boolean; recovered?: { from: Date; reason: string }; metadata: Record<string, unknown> },
    homeOf: (workspace: WorkspaceRecord) => string,
  ): Promise<WorkspaceRecord> {
    return this.mutate(async (tx) => {
      const before = await lockWorkspace(tx, id);
      if (before.spec.desiredState === 'deleted') throw NotFoundError('workspace_not_found', `Workspace ${before.slug} was deleted.`);
      const after = await WORKSPACES.one(
        tx,
        `UPDATE workspaces SET home_volume = $2,
           retired_volumes = CASE WHEN $4 THEN array_append(array_remove(retired_volumes, $3), $3) ELSE retired_volumes END,
           home_restored_at = CASE WHEN $5::timestamptz IS NULL THEN home_restored_at ELSE now() END,
           home_restored_from = coalesce($5::timestamptz, home_restored_from),
           home_restore_reason = CASE WHEN $5::timestamptz IS NULL THEN home_restore_reason ELSE $6 END,
           generation = generation + 1, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
        [id, volume, homeOf(before), move.retire, move.recovered?.from ?? null, move.recovered?.reason ?? null],
      );
      return {
        value: after,
        changed: [workspaceChange(id)],
        audit: { actor, action: 'workspace.restore', target: { kind: 'workspace', id }, metadata: { slug: before.slug, ...move.metadata } },
      };
    });
  }

  /**
   * The idle sweep's step: sets every workspace wanted running whose last activity is older than
   * `idleMinutes` to stopped, in one statement, sparing those with a run in progress (a run is
   * activity; its end counts as activity too). Returns the workspaces it stopped.
   */
  stopIdle(idleMinutes: number): Promise<{ id: string; slug: string; lastActivityAt: Date | null }[]> {
    return this.mutate(async (tx) => {
      const rows = await STOPPED_IDLE.all(
        tx,
        `UPDATE workspaces SET desired_state = 'stopped', stopped_by = 'idle', stopped_at = now(), generation = generation + 1, updated_at = now()
         WHERE desired_state = 'running' AND coalesce(last_activity_at, updated_at) < now() - make_interval(secs => $1::double precision * 60)
           AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.workspace_id = workspaces.id AND runs.status IN ('queued', 'running'))
         RETURNING id, slug, last_activity_at`,
        [idleMinutes],
      );
      return {
        value: rows.map((row) => ({ id: row.id, slug: row.slug, lastActivityAt: row.last_activity_at })),
        changed: rows.map((row) => workspaceChange(row.id)),
        audit: null,
      };
    });
  }

  /**
   * Writes a workspace's observed status when it differs from what is stored (so a resync of an
   * unchanged fleet writes nothing); `last_transition_at` moves only when the state changes. In the
   * same statement its uptime (`workspace_uptime`, the usage report's hours) opens a stretch when it
   * is seen running and none is open, and closes the open one when it is seen in any other state. A
   * status that changed is announced (kind `status`): NOTIFYed to every replica (their proxies'
   * caches and panels) and published in this process. The message (often the engine's own words) is
   * kept as storableText makes it. A leader's fence is checked in the same statement
   * (fencedStatement): one round trip instead of a transaction's four.
   */
  async writeStatus(id: string, status: WorkspaceStatus): Promise<void> {
    const changed = await fencedStatement(
      this.db,
      this.fence,
      ({ fence, held }) =>
        `WITH ${fence} updated AS (
         UPDATE workspaces SET
           last_transition_at = CASE WHEN observed_state IS DISTINCT FROM $2 THEN now() ELSE last_transition_at END,
           observed_state = $2, observed_generation = $3, status_message = $4, editor_endpoint = $5, node = coalesce($6, node)
         WHERE id = $1 AND (observed_state, observed_generation, status_message, editor_endpoint, node) IS DISTINCT FROM ($2, $3::bigint, $4, $5, coalesce($6, node))
           AND ${held}
         RETURNING id, observed_state, pg_notify($7, id::text)
       ), opened AS (
         INSERT INTO workspace_uptime (workspace_id) SELECT id FROM updated WHERE observed_state = 'running'
         ON CONFLICT (workspace_id) WHERE ended_at IS NULL DO NOTHING
       ), closed AS (
         UPDATE workspace_uptime SET ended_at = now() WHERE ended_at IS NULL AND workspace_id IN (SELECT id FROM updated WHERE observed_state <> 'running')
       )
       SELECT ${held} AS held, ARRAY(SELECT id::text FROM updated) AS ids`,
      [
        id,
        status.observedState,
        status.observedGeneration,
        storableText(status.statusMessage),
        status.editorEndpoint ?? null,
        status.node ?? null,
        channelOf('status'),
      ],
    );
    if (changed.length > 0) this.changes.publish({ kind: 'status', id });
  }

  /** Takes volumes the controller removed off a workspace's retired list (the workspace controller's write). */
  async forgetRetired(id: string, volumes: readonly string[]): Promise<void> {
    if (volumes.length === 0) return;
    await fencedWrite(this.db, this.fence, (db) =>
      db.query('UPDATE workspaces SET retired_volumes = ARRAY(SELECT unnest(retired_volumes) EXCEPT SELECT unnest($2::text[])) WHERE id = $1', [id, volumes]),
    );
  }

  /** Deletes a workspace row that is marked deleted (the finalizer's last step). */
  async finalizeDeleted(id: string): Promise<void> {
    await fencedWrite(this.db, this.fence, (db) => db.query("DELETE FROM workspaces WHERE id = $1 AND desired_state = 'deleted'", [id]));
  }

  /**
   * Records activity gathered in memory: one statement for the whole batch (workspace id → epoch
   * ms), never moving a workspace's last activity backwards.
   */
  async recordActivity(batch: ReadonlyMap<string, number>): Promise<void> {
    if (batch.size === 0) return;
    const ids = [...batch.keys()];
    const times = ids.map((id) => new Date(batch.get(id)!).toISOString());
    await this.db.query(
      `UPDATE workspaces w SET last_activity_at = a.at
       FROM unnest($1::uuid[], $2::timestamptz[]) AS a(id, at)
       WHERE w.id = a.id AND (w.last_activity_at IS NULL OR w.last_activity_at < a.at)`,
      [ids, times],
    );
  }

  /** Every workspace, the runs in progress and the effective cap, for the admin overview. */
  async overview(): Promise<Overview> {
    const [workspaces, runs, cap] = await Promise.all([
      this.list(),
      OVERVIEW_RUNS.all(this.db, `SELECT ${OVERVIEW_RUNS.columns} FROM runs WHERE status IN ('queued', 'running')`),
      readCap(this.db, this.environmentCap),
    ]);
    return { workspaces, activeRuns: runs, cap };
  }
}
