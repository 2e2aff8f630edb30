import type Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import type { Metrics } from '../../src/metrics.ts';
import type { DesiredState, ObservedState, WorkspaceRecord } from '../../src/store/workspaces.ts';
import { presentCapacity, presentRefusal } from '../../src/wire/presenters.ts';
import type { AuthState } from '../middleware/auth.ts';
import { jsonBody, validateBody, validateQuery, type BodyState, type QueryState } from '../middleware/validate.ts';
import type { AdminDeps } from '../admin.ts';
import type { BulkStop, Overview, RefusalList, WorkspacePage, WorkspaceRow } from '../../src/wire/schemas.ts';

const OBSERVED: ObservedState[] = ['unknown', 'starting', 'running', 'stopped', 'waiting', 'failed'];
const DESIRED: DesiredState[] = ['running', 'stopped', 'deleted'];
const SORTS = ['slug', 'owner', 'desired', 'observed', 'lastActivity', 'cpu', 'memory'] as const;

interface WorkspacesQuery {
  q?: string;
  observed?: ObservedState;
  desired?: DesiredState;
  sort: (typeof SORTS)[number];
  order: 'asc' | 'desc';
  offset: number;
  limit: number;
}

export const workspacesQuerySchema = {
  type: 'object',
  properties: {
    q: { type: 'string', maxLength: 200 },
    observed: { type: 'string', enum: OBSERVED },
    desired: { type: 'string', enum: DESIRED },
    sort: { type: 'string', enum: SORTS, default: 'slug' },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'asc' },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000, default: 0 },
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
  },
  required: ['sort', 'order', 'offset', 'limit'],
  additionalProperties: false,
};

interface BulkStopBody {
  ids: string[];
}

export const bulkStopSchema: JSONSchemaType<BulkStopBody> = {
  type: 'object',
  properties: { ids: { type: 'array', items: { type: 'string', maxLength: 64 }, minItems: 1, maxItems: 1000 } },
  required: ['ids'],
  additionalProperties: false,
};

/** The last CPU and memory sample of every running workspace (the stats sampler's gauges), by workspace id. */
async function samples(metrics: Metrics): Promise<Map<string, { cpuPercent: number | null; memoryPercent: number | null }>> {
  const [cpu, memory] = await Promise.all([metrics.containerCpuPercent.get(), metrics.containerMemoryPercent.get()]);
  const byId = new Map<string, { cpuPercent: number | null; memoryPercent: number | null }>();
  const entry = (id: string) => byId.get(id) ?? byId.set(id, { cpuPercent: null, memoryPercent: null }).get(id)!;
  for (const value of cpu.values) entry(String(value.labels.workspace_id)).cpuPercent = value.value;
  for (const value of memory.values) entry(String(value.labels.workspace_id)).memoryPercent = value.value;
  return byId;
}

/** How rows compare for each sort key (absent values last, whatever the order). */
const SORT_KEYS: Record<WorkspacesQuery['sort'], (row: WorkspaceRow) => string | number | null> = {
  slug: (row) => row.slug,
  owner: (row) => row.owner,
  desired: (row) => row.desiredState,
  observed: (row) => row.observedState,
  lastActivity: (row) => row.lastActivityAt,
  cpu: (row) => row.cpuPercent,
  memory: (row) => row.memoryPercent,
};

function compare(sort: WorkspacesQuery['sort'], order: 'asc' | 'desc'): (a: WorkspaceRow, b: WorkspaceRow) => number {
  const key = SORT_KEYS[sort];
  return (a, b) => {
    const [x, y] = [key(a), key(b)];
    if (x === y) return a.slug.localeCompare(b.slug);
    if (x === null) return 1;
    if (y === null) return -1;
    const result = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
    return order === 'asc' ? result : -result;
  };
}

/**
 * What the admin panel reads beyond the spec's endpoints: the overview, the workspaces with search,
 * filters, sorting and paging done here, a bulk stop, the capacity refusals of the last hour, and
 * the live event stream.
 */
export function liveRoutes(router: Router<AuthState>, { store, metrics, live, providers }: AdminDeps): void {
  /** Every workspace with its owner, status, activity, last stats sample and active run. */
  async function rows(): Promise<WorkspaceRow[]> {
    const [overview, users, stats] = await Promise.all([store.workspaces.overview(), store.users.list(), samples(metrics)]);
    const emails = new Map(users.map((user) => [user.id, user.email]));
    const runs = new Map(overview.activeRuns.map((run) => [run.workspaceId, { id: run.id, status: run.status }]));
    return overview.workspaces.map((workspace: WorkspaceRecord) => {
      // A stopped workspace has no figures, whatever the sampler's last sample of it said.
      const sample = workspace.observedState === 'running' ? stats.get(workspace.id) : undefined;
      return {
        id: workspace.id,
        slug: workspace.slug,
        owner: workspace.userId ? (emails.get(workspace.userId) ?? null) : null,
        desiredState: workspace.desiredState,
        observedState: workspace.observedState,
        statusMessage: workspace.statusMessage,
        lastActivityAt: workspace.lastActivityAt?.toISOString() ?? null,
        lastTransitionAt: workspace.lastTransitionAt?.toISOString() ?? null,
        cpuPercent: sample?.cpuPercent ?? null,
        memoryPercent: sample?.memoryPercent ?? null,
        activeRun: runs.get(workspace.id) ?? null,
      };
    });
  }

  router.get('/overview', async (ctx) => {
    const [overview, orphans, orphanVolumes] = await Promise.all([store.workspaces.overview(), metrics.orphanContainers.get(), metrics.orphanVolumes.get()]);
    const { workspaces } = overview;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      capacity: { ...presentCapacity(overview), waiting: workspaces.filter((workspace) => workspace.observedState === 'waiting').length },
      activeBuilds: overview.activeRuns.filter((run) => run.status === 'queued').length,
      refusals: live.recentRefusals().map(presentRefusal),
      failed: workspaces
        .filter((workspace) => workspace.observedState === 'failed')
        .map((workspace) => ({
          id: workspace.id,
          slug: workspace.slug,
          statusMessage: workspace.statusMessage,
          since: workspace.lastTransitionAt?.toISOString() ?? null,
        })),
      orphansSeen: orphans.values[0]?.value ?? 0,
      orphanVolumesSeen: orphanVolumes.values[0]?.value ?? 0,
      signInProviders: [...providers],
    } satisfies Overview;
  });

  router.get('/workspaces', validateQuery<WorkspacesQuery>(workspacesQuerySchema), async (ctx) => {
    const query = (ctx.state as QueryState<WorkspacesQuery>).query;
    const all = await rows();
    const q = query.q?.trim().toLowerCase();
    const matching = all.filter(
      (row) =>
        (!q || row.slug.includes(q) || (row.owner ?? '').includes(q)) &&
        (query.observed === undefined || row.observedState === query.observed) &&
        (query.desired === undefined || row.desiredState === query.desired),
    );
    const count = (values: readonly string[], of: (row: WorkspaceRow) => string) =>
      Object.fromEntries(values.map((value) => [value, all.filter((row) => of(row) === value).length]));
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      workspaces: matching.toSorted(compare(query.sort, query.order)).slice(query.offset, query.offset + query.limit),
      total: matching.length,
      counts: { all: all.length, observed: count(OBSERVED, (row) => row.observedState), desired: count(DESIRED, (row) => row.desiredState) },
    } satisfies WorkspacePage;
  });

  router.post('/workspaces/stop', jsonBody(), validateBody(bulkStopSchema), async (ctx) => {
    const { ids } = (ctx.state as BodyState<BulkStopBody>).body;
    const stopped: { id: string; slug: string }[] = [];
    const skipped: BulkStop['skipped'] = [];
    for (const id of new Set(ids)) {
      const workspace = await store.workspaces.get(id);
      if (!workspace || workspace.desiredState === 'deleted') skipped.push({ id, slug: workspace?.slug ?? null, reason: 'not found' });
      else if (workspace.desiredState === 'stopped') skipped.push({ id, slug: workspace.slug, reason: 'already stopped' });
      else stopped.push({ id, slug: (await store.workspaces.stop(ctx.state.actor!, id, 'coach')).slug });
    }
    ctx.body = { stopped, skipped } satisfies BulkStop;
  });

  router.get('/refusals', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { refusals: live.recentRefusals().map(presentRefusal) } satisfies RefusalList;
  });

  router.get('/events', (ctx) => {
    // A stream that lives as long as the panel is open: no socket timeout, no buffering by a proxy in front.
    ctx.req.socket.setTimeout(0);
    ctx.set('Cache-Control', 'no-store');
    ctx.set('X-Accel-Buffering', 'no');
    ctx.type = 'text/event-stream';
    const { user, sessionId } = ctx.state;
    // Signed in: it ends with the admin's role or session. The bearer token's ends with the server.
    ctx.body = live.open(user && sessionId ? { userId: user.id, sessionId } : undefined);
  });
}
