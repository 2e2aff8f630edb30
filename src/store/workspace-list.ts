/**
 * The admin's views of the class, computed by PostgreSQL: a page of workspaces (searched, filtered,
 * sorted and counted in one query, with each one's owner, active run and last stats sample), the
 * overview's counts, and the stats sampler's writes behind the CPU and memory columns. Nothing here
 * loads the class into memory, so the panel's pages cost the same at 5,000 workspaces as at 50.
 */
import type { DataSource } from 'typeorm';
import type { HomeDiskUsage } from '../home-disk.ts';
import { readCap, type EffectiveCap } from './settings.ts';
import { fencedWrite, type Fence } from './leases.ts';
import { col, rowCodec } from './row-codec.ts';
import { ACTIVE_RUN_STATUSES, DESIRED_STATES, OBSERVED_STATES, type ActiveRunStatus, type DesiredState, type ObservedState } from '../wire/vocabulary.ts';

/** What a page of workspaces can be sorted by. */
export const WORKSPACE_SORTS = ['slug', 'owner', 'desired', 'observed', 'lastActivity', 'cpu', 'memory', 'disk'] as const;
export type WorkspaceSort = (typeof WORKSPACE_SORTS)[number];

/** Which workspaces a page holds: a search of slug and owner email, filters, the order, and the slice. */
export interface WorkspaceQuery {
  q?: string;
  observed?: ObservedState;
  desired?: DesiredState;
  sort: WorkspaceSort;
  order: 'asc' | 'desc';
  offset: number;
  limit: number;
}

/** One workspace as the admin lists it: its state, owner, activity, last stats sample (while it runs) and active run. */
export interface WorkspaceListRow {
  id: string;
  slug: string;
  owner: string | null;
  desiredState: DesiredState;
  observedState: ObservedState;
  statusMessage: string;
  lastActivityAt: Date | null;
  lastTransitionAt: Date | null;
  cpuPercent: number | null;
  memoryPercent: number | null;
  /** Its home's last measure (kept while it is stopped); null until one. */
  disk: HomeDiskUsage | null;
  activeRun: { id: string; status: ActiveRunStatus } | null;
}

/** A page of workspaces, how many match, and the whole class counted by state. */
export interface WorkspaceListPage {
  rows: WorkspaceListRow[];
  total: number;
  counts: { all: number; observed: Record<ObservedState, number>; desired: Record<DesiredState, number> };
}

/** The overview's figures: the cap, how many run, are wanted running or wait, builds in progress, and the failed workspaces. */
export interface ClassSummary {
  cap: EffectiveCap;
  running: number;
  wantedRunning: number;
  waiting: number;
  activeBuilds: number;
  failed: { id: string; slug: string; statusMessage: string; since: Date | null }[];
}

/** A stats sample of a running workspace (no CPU figure until two samples are known). */
export interface StatsRecord {
  workspaceId: string;
  cpuPercent: number | null;
  memoryPercent: number;
}

/** A home's measure by the stats sampler: the space it takes, and why part of it could not be measured (null: all was). */
export interface HomeDiskRecord {
  workspaceId: string;
  usedBytes: number;
  problem: string | null;
}

/** The column each sort key orders by (an expression of the page's select). */
const SORT_COLUMNS: Record<WorkspaceSort, string> = {
  slug: 'slug',
  owner: 'owner',
  desired: 'desired_state',
  observed: 'observed_state',
  lastActivity: 'last_activity_at',
  cpu: 'cpu_percent',
  memory: 'memory_percent',
  disk: 'disk_used_bytes',
};

/** A workspace as a page lists it (ROWS): the workspaces table's columns joined with its owner's email, its sample, its home's measure and its active run. */
const LISTED = rowCodec(
  'workspaces',
  {
    id: col.text,
    slug: col.text,
    owner: col.nullable(col.text),
    desired_state: col.oneOf(DESIRED_STATES),
    observed_state: col.oneOf(OBSERVED_STATES),
    status_message: col.text,
    last_activity_at: col.nullable(col.timestamp),
    last_transition_at: col.nullable(col.timestamp),
    cpu_percent: col.nullable(col.double),
    memory_percent: col.nullable(col.double),
    disk_used_bytes: col.nullable(col.bigint),
    disk_problem: col.nullable(col.text),
    disk_measured_at: col.nullable(col.timestamp),
    run_id: col.nullable(col.text),
    run_status: col.nullable(col.oneOf(ACTIVE_RUN_STATUSES)),
  },
  (row): WorkspaceListRow => ({
    id: row.id,
    slug: row.slug,
    owner: row.owner,
    desiredState: row.desired_state,
    observedState: row.observed_state,
    statusMessage: row.status_message,
    lastActivityAt: row.last_activity_at,
    lastTransitionAt: row.last_transition_at,
    cpuPercent: row.cpu_percent,
    memoryPercent: row.memory_percent,
    disk:
      row.disk_used_bytes === null || row.disk_measured_at === null
        ? null
        : { usedBytes: row.disk_used_bytes, problem: row.disk_problem, measuredAt: row.disk_measured_at },
    activeRun: row.run_id && row.run_status ? { id: row.run_id, status: row.run_status } : null,
  }),
);

/** How many workspaces match a page's filter. */
const MATCHING = rowCodec('workspaces', { count: col.bigint });
/** The class counted by state. */
const BY_STATE = rowCodec('workspaces', { observed_state: col.oneOf(OBSERVED_STATES), desired_state: col.oneOf(DESIRED_STATES), count: col.bigint });
/** The overview's counts. */
const SUMMARY = rowCodec('workspaces', { running: col.bigint, wanted_running: col.bigint, waiting: col.bigint, active_builds: col.bigint });
/** The failed workspaces the overview names. */
const FAILED = rowCodec(
  'workspaces',
  { id: col.text, slug: col.text, status_message: col.text, last_transition_at: col.nullable(col.timestamp) },
  (row): ClassSummary['failed'][number] => ({ id: row.id, slug: row.slug, statusMessage: row.status_message, since: row.last_transition_at }),
);
/** The home_disk_usage table: a home's last measure. */
const HOME_DISK = rowCodec(
  'home_disk_usage',
  { used_bytes: col.bigint, problem: col.nullable(col.text), measured_at: col.timestamp },
  (row): HomeDiskUsage => ({
    usedBytes: row.used_bytes,
    problem: row.problem,
    measuredAt: row.measured_at,
  }),
);

/** Every workspace with its owner, active run and (while it runs) last sample: the rows a page is cut from. */
const ROWS = `SELECT w.id, w.slug, u.email AS owner, w.desired_state, w.observed_state, w.status_message,
    w.last_activity_at, w.last_transition_at,
    CASE WHEN w.observed_state = 'running' THEN s.cpu_percent END AS cpu_percent,
    CASE WHEN w.observed_state = 'running' THEN s.memory_percent END AS memory_percent,
    d.used_bytes AS disk_used_bytes, d.problem AS disk_problem, d.measured_at AS disk_measured_at,
    r.id AS run_id, r.status AS run_status
  FROM workspaces w
  LEFT JOIN users u ON u.id = w.user_id
  LEFT JOIN workspace_stats s ON s.workspace_id = w.id
  LEFT JOIN home_disk_usage d ON d.workspace_id = w.id
  LEFT JOIN runs r ON r.workspace_id = w.id AND r.status IN ('queued', 'running')`;

/** The admin's views (see the file comment). */
export class WorkspaceListStore {
  private readonly db: DataSource;
  private readonly environmentCap: number;
  /** A leader's writes check its lease (see leases.ts); none when the sampler is driven directly. */
  private readonly fence: Fence | undefined;

  constructor(db: DataSource, environmentCap: number, fence?: Fence) {
    this.db = db;
    this.environmentCap = environmentCap;
    this.fence = fence;
  }

  /**
   * A page of workspaces: those whose slug or owner email holds `q` (case-insensitive) and that
   * match the filters, in the order asked (absent values last whatever the order; then by slug),
   * `limit` from `offset`; with how many match and the whole class counted by state.
   */
  async page(query: WorkspaceQuery): Promise<WorkspaceListPage> {
    const where: string[] = [];
    const values: unknown[] = [];
    const q = query.q?.trim().toLowerCase();
    if (q) {
      values.push(q);
      where.push(`(strpos(slug, $${values.length}) > 0 OR strpos(coalesce(owner, ''), $${values.length}) > 0)`);
    }
    if (query.observed) {
      values.push(query.observed);
      where.push(`observed_state = $${values.length}`);
    }
    if (query.desired) {
      values.push(query.desired);
      where.push(`desired_state = $${values.length}`);
    }
    const direction = query.order === 'asc' ? 'ASC' : 'DESC';
    const filter = where.length > 0 ? `WHERE ${where.join(' AND ')}` : '';
    const limits = [...values, query.limit, query.offset];
    // The page joins only the rows it returns (a sort by slug walks its index); the total counts the
    // matching rows without the joins it does not need.
    const [rows, matching, counts] = await Promise.all([
      LISTED.all(
        this.db,
        `SELECT ${LISTED.columns} FROM (${ROWS}) listed ${filter}
         ORDER BY ${SORT_COLUMNS[query.sort]} ${direction} NULLS LAST, slug ASC
         LIMIT $${limits.length - 1} OFFSET $${limits.length}`,
        limits,
      ),
      MATCHING.one(
        this.db,
        `SELECT count(*) AS count FROM (SELECT w.slug, u.email AS owner, w.observed_state, w.desired_state
           FROM workspaces w LEFT JOIN users u ON u.id = w.user_id) listed ${filter}`,
        values,
      ),
      BY_STATE.all(this.db, 'SELECT observed_state, desired_state, count(*) AS count FROM workspaces GROUP BY observed_state, desired_state'),
    ]);
    const observed = Object.fromEntries(OBSERVED_STATES.map((state) => [state, 0])) as Record<ObservedState, number>;
    const desired = Object.fromEntries(DESIRED_STATES.map((state) => [state, 0])) as Record<DesiredState, number>;
    let all = 0;
    for (const group of counts) {
      observed[group.observed_state] += group.count;
      desired[group.desired_state] += group.count;
      all += group.count;
    }
    return { rows, total: matching.count, counts: { all, observed, desired } };
  }

  /** The overview's figures (see ClassSummary), counted by PostgreSQL. */
  async summary(): Promise<ClassSummary> {
    const [counts, failed, cap] = await Promise.all([
      SUMMARY.one(
        this.db,
        `SELECT count(*) FILTER (WHERE observed_state = 'running') AS running,
                count(*) FILTER (WHERE desired_state = 'running') AS wanted_running,
                count(*) FILTER (WHERE observed_state = 'waiting') AS waiting,
                (SELECT count(*) FROM runs WHERE status = 'queued') AS active_builds
           FROM workspaces`,
      ),
      FAILED.all(this.db, `SELECT ${FAILED.columns} FROM workspaces WHERE observed_state = 'failed' ORDER BY slug`),
      readCap(this.db, this.environmentCap),
    ]);
    return {
      cap,
      running: counts.running,
      wantedRunning: counts.wanted_running,
      waiting: counts.waiting,
      activeBuilds: counts.active_builds,
      failed,
    };
  }

  /**
   * Records the stats sampler's pass (its write, as a controller's): each sampled workspace's
   * figures replace its last ones, and the figures of every workspace not sampled (stopped) go.
   * One statement; samples of workspaces deleted meanwhile are dropped.
   */
  async recordStats(samples: readonly StatsRecord[]): Promise<void> {
    await fencedWrite(this.db, this.fence, (db) =>
      db.query(
        `WITH sampled AS (
         SELECT * FROM unnest($1::uuid[], $2::double precision[], $3::double precision[]) AS s (workspace_id, cpu_percent, memory_percent)
       ), gone AS (
         DELETE FROM workspace_stats WHERE workspace_id NOT IN (SELECT workspace_id FROM sampled)
       )
       INSERT INTO workspace_stats (workspace_id, cpu_percent, memory_percent, sampled_at)
       SELECT workspace_id, cpu_percent, memory_percent, now() FROM sampled WHERE workspace_id IN (SELECT id FROM workspaces)
       ON CONFLICT (workspace_id) DO UPDATE SET cpu_percent = EXCLUDED.cpu_percent, memory_percent = EXCLUDED.memory_percent, sampled_at = now()`,
        [samples.map((sample) => sample.workspaceId), samples.map((sample) => sample.cpuPercent), samples.map((sample) => sample.memoryPercent)],
      ),
    );
  }

  /**
   * Records the homes measured in one pass (the stats sampler's write, as a controller's): each
   * measure replaces its home's last one; homes not measured (stopped) keep theirs. One statement;
   * measures of workspaces deleted meanwhile are dropped.
   */
  async recordHomeDisk(measures: readonly HomeDiskRecord[]): Promise<void> {
    if (measures.length === 0) return;
    await fencedWrite(this.db, this.fence, (db) =>
      db.query(
        `INSERT INTO home_disk_usage (workspace_id, used_bytes, problem, measured_at)
         SELECT m.workspace_id, m.used_bytes, m.problem, now()
           FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS m (workspace_id, used_bytes, problem)
          WHERE m.workspace_id IN (SELECT id FROM workspaces)
         ON CONFLICT (workspace_id) DO UPDATE SET used_bytes = EXCLUDED.used_bytes, problem = EXCLUDED.problem, measured_at = now()`,
        [measures.map((measure) => measure.workspaceId), measures.map((measure) => measure.usedBytes), measures.map((measure) => measure.problem)],
      ),
    );
  }

  /** A workspace's home's last measure; undefined until one. */
  homeDisk(workspaceId: string): Promise<HomeDiskUsage | undefined> {
    return HOME_DISK.first(this.db, `SELECT ${HOME_DISK.columns} FROM home_disk_usage WHERE workspace_id = $1`, [workspaceId]);
  }
}
