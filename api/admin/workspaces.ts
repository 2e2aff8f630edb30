import type Router from '@koa/router';
import type { Context } from 'koa';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import type { AuthState } from '../middleware/auth.ts';
import { converged, presentOverview, presentWorkspaceChange } from '../../src/wire/presenters.ts';
import type { AdminDeps } from '../admin.ts';
import type { WorkspaceChangeAnswer } from '../../src/wire/schemas.ts';

/** Answers a desired-state change: the new spec and the last observed status; 202 while it is still converging, 200 when it already is. */
function answerChange(ctx: Context, workspace: WorkspaceRecord): void {
  ctx.status = converged(workspace) ? 200 : 202;
  ctx.body = { workspace: presentWorkspaceChange(workspace) } satisfies WorkspaceChangeAnswer;
}

/** `GET /admin/status` and the spec's two workspace actions: stop-containers and restart-code. */
export function workspaceRoutes(router: Router<AuthState>, { store }: AdminDeps): void {
  router.get('/status', async (ctx) => {
    ctx.body = presentOverview(await store.workspaces.overview());
  });

  router.post('/workspaces/:workspaceId/stop-containers', async (ctx) => {
    answerChange(ctx, await store.workspaces.stop(ctx.state.actor!, ctx.params.workspaceId!, 'coach'));
  });

  router.post('/workspaces/:workspaceId/restart-code', async (ctx) => {
    answerChange(ctx, await store.workspaces.restartCode(ctx.state.actor!, ctx.params.workspaceId!));
  });
}
