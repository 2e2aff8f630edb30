/**
 * Workspaces, as a coach sees them: the spec's status and its two actions (stop-containers,
 * restart-code), and what the panel reads: the overview, a page of workspaces (searched, filtered,
 * sorted and paged by PostgreSQL: store.workspaceList), a bulk stop and the recent capacity refusals.
 */
import Type from 'typebox';
import { NotFoundError } from '../../src/errors.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import { DESIRED_STATES, OBSERVED_STATES } from '../../src/wire/vocabulary.ts';
import { WORKSPACE_SORTS } from '../../src/store/workspace-list.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import {
  converged,
  presentNode,
  presentOverview,
  presentRefusal,
  presentSummary,
  presentWorkspaceChange,
  presentWorkspacePage,
} from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

/** The workspace of that id, unless there is none or it is being deleted (404 `workspace_not_found`). */
export async function workspaceOf(store: SurfaceStore, id: string): Promise<WorkspaceRecord> {
  const workspace = await store.workspaces.get(id);
  if (!workspace || workspace.spec.desiredState === 'deleted') throw NotFoundError('workspace_not_found', `No workspace with id ${JSON.stringify(id)}.`);
  return workspace;
}

/** A desired-state change's answer: the new spec and the last observed status; 202 while it is still converging, 200 when it already is. */
const change = (workspace: WorkspaceRecord) => ({
  status: converged(workspace) ? (200 as const) : (202 as const),
  body: { workspace: presentWorkspaceChange(workspace) },
});

export const status = operation({
  method: 'get',
  path: '/admin/status',
  summary: 'Every workspace with its containers (wanted and observed), the active build count and the capacity.',
  auth: 'admin',
  tag: 'admin',
  responses: { 200: json(Wire.Status, 'The status.') },
  handle: async (_input, { store }) => ({ status: 200, body: presentOverview(await store.workspaces.overview()) }),
});

export const stopContainers = operation({
  method: 'post',
  path: '/admin/workspaces/{workspaceId}/stop-containers',
  summary: 'Wants the workspace stopped (audit `container.stop`).',
  auth: 'admin',
  tag: 'admin',
  responses: { 200: json(Wire.WorkspaceChangeAnswer, 'Already stopped.'), 202: json(Wire.WorkspaceChangeAnswer, 'Stopping.') },
  handle: async ({ actor, params }, { store }) => change(await store.workspaces.stop(actor, params.workspaceId, 'coach')),
});

export const restartCode = operation({
  method: 'post',
  path: '/admin/workspaces/{workspaceId}/restart-code',
  summary: 'Asks for a fresh code container (audit `container.restart-code`).',
  auth: 'admin',
  tag: 'admin',
  errors: ['workspace_not_running'],
  responses: { 200: json(Wire.WorkspaceChangeAnswer, 'Observed as asked already.'), 202: json(Wire.WorkspaceChangeAnswer, 'Restarting.') },
  handle: async ({ actor, params }, { store }) => change(await store.workspaces.restartCode(actor, params.workspaceId)),
});

export const overview = operation({
  method: 'get',
  path: '/admin/overview',
  summary: "What the panel's Overview shows.",
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.Overview, 'The overview.') },
  handle: async (_input, { store, live, providers }) => {
    // The orphans are the leader's finds (it alone looks at the engine), whichever replica serves this.
    const [summary, found, refusals, nodes] = await Promise.all([
      store.workspaceList.summary(),
      store.leaderCounters.current(),
      live.recentRefusals(),
      store.nodes.list(),
    ]);
    return {
      status: 200,
      body: {
        ...presentSummary(summary),
        refusals: refusals.map(presentRefusal),
        orphansSeen: found.orphan_containers,
        orphanVolumesSeen: found.orphan_volumes,
        signInProviders: [...providers],
        nodes: nodes.map(presentNode),
      },
    };
  },
});

export const list = operation({
  method: 'get',
  path: '/admin/workspaces',
  summary: 'A page of workspaces: searched, filtered, sorted and paged by the server, with counts by state.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  query: Type.Object(
    {
      q: Type.Optional(Type.String({ maxLength: 200 })),
      observed: Type.Optional(Type.Enum(OBSERVED_STATES)),
      desired: Type.Optional(Type.Enum(DESIRED_STATES)),
      sort: Type.Enum(WORKSPACE_SORTS, { default: 'slug' }),
      order: Type.Enum(['asc', 'desc'], { default: 'asc' }),
      offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
      limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
    },
    { additionalProperties: false },
  ),
  responses: { 200: json(Wire.WorkspacePage, 'The page.') },
  handle: async ({ query }, { store, homeDisk }) => ({ status: 200, body: presentWorkspacePage(await store.workspaceList.page(query), homeDisk) }),
});

export const bulkStop = operation({
  method: 'post',
  path: '/admin/workspaces/stop',
  summary: 'Stops each workspace that is wanted running (audit `container.stop` each).',
  auth: 'admin',
  tag: 'admin',
  body: Type.Object({ ids: Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: 1000 }) }, { additionalProperties: false }),
  // A workspace deleted between its read and its stop.
  errors: ['workspace_not_found'],
  responses: { 200: json(Wire.BulkStop, 'Which were stopped and which skipped.') },
  handle: async ({ actor, body }, { store }) => {
    const stopped: Wire.BulkStop['stopped'] = [];
    const skipped: Wire.BulkStop['skipped'] = [];
    for (const id of new Set(body.ids)) {
      const workspace = await store.workspaces.get(id);
      if (!workspace || workspace.spec.desiredState === 'deleted') skipped.push({ id, slug: workspace?.slug ?? null, reason: 'not found' });
      else if (workspace.spec.desiredState === 'stopped') skipped.push({ id, slug: workspace.slug, reason: 'already stopped' });
      else stopped.push({ id, slug: (await store.workspaces.stop(actor, id, 'coach')).slug });
    }
    return { status: 200, body: { stopped, skipped } };
  },
});

export const refusals = operation({
  method: 'get',
  path: '/admin/refusals',
  summary: 'Capacity refusals of the last hour.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.RefusalList, 'The refusals.') },
  handle: async (_input, { live }) => ({ status: 200, body: { refusals: (await live.recentRefusals()).map(presentRefusal) } }),
});
