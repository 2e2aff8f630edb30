import type Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import { DESIRED_STATES, OBSERVED_STATES, WORKSPACE_SORTS, type WorkspaceQuery } from '../../src/store/workspace-list.ts';
import { presentNode, presentRefusal, presentSummary, presentWorkspacePage } from '../../src/wire/presenters.ts';
import type { BulkStop, Overview, RefusalList, WorkspacePage } from '../../src/wire/schemas.ts';
import type { AdminDeps } from '../admin.ts';
import type { AuthState } from '../middleware/auth.ts';
import { jsonBody, validateBody, validateQuery, type BodyState, type QueryState } from '../middleware/validate.ts';

export const workspacesQuerySchema = {
  type: 'object',
  properties: {
    q: { type: 'string', maxLength: 200 },
    observed: { type: 'string', enum: OBSERVED_STATES },
    desired: { type: 'string', enum: DESIRED_STATES },
    sort: { type: 'string', enum: WORKSPACE_SORTS, default: 'slug' },
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

/**
 * What the admin panel reads beyond the spec's endpoints: the overview, the workspaces with search,
 * filters, sorting and paging done by PostgreSQL (store.workspaceList), a bulk stop, the capacity refusals of the last hour, and
 * the live event stream.
 */
export function liveRoutes(router: Router<AuthState>, { store, live, providers, homeDisk }: AdminDeps): void {
  router.get('/overview', async (ctx) => {
    // The orphans are the leader's finds (it alone looks at the engine), whichever replica serves this.
    const [summary, found, refusals, nodes] = await Promise.all([
      store.workspaceList.summary(),
      store.leaderCounters.current(),
      live.recentRefusals(),
      store.nodes.list(),
    ]);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      ...presentSummary(summary),
      refusals: refusals.map(presentRefusal),
      orphansSeen: found.orphan_containers,
      orphanVolumesSeen: found.orphan_volumes,
      signInProviders: [...providers],
      nodes: nodes.map(presentNode),
    } satisfies Overview;
  });

  router.get('/workspaces', validateQuery<WorkspaceQuery>(workspacesQuerySchema), async (ctx) => {
    const query = (ctx.state as QueryState<WorkspaceQuery>).query;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = presentWorkspacePage(await store.workspaceList.page(query), homeDisk) satisfies WorkspacePage;
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

  router.get('/refusals', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { refusals: (await live.recentRefusals()).map(presentRefusal) } satisfies RefusalList;
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
