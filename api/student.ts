import Router from '@koa/router';
import { AtCapacityError, AuthenticationError, AuthorizationError } from '../src/errors.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { probeHttp } from '../src/probe.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import type { Store } from '../src/store/index.ts';
import { isTerminal } from '../src/store/runs.ts';
import type { WorkspaceRecord } from '../src/store/workspaces.ts';
import type { LiveEvents } from './live.ts';
import { assertSameOrigin, type AuthState } from './middleware/auth.ts';
import { mayUseWorkspace } from './policy.ts';
import { presentRun, presentStudentWorkspace } from './presenters.ts';

export interface StudentDeps {
  store: Store;
  metrics: Metrics;
  activity: ActivityRecorder;
  publicOrigin: string;
  /** Logger of `control.containers`, where capacity refusals are reported. */
  containersLog: Logger;
  /** Tells the admin panel of capacity refusals. */
  live: LiveEvents;
  /** Host mode: where a workspace's editor is (its own origin); undefined in path mode, where it is `/u/<slug>/` itself. */
  editorUrl?: (slug: string) => string;
}

interface StudentState extends AuthState {
  workspace: WorkspaceRecord;
}

/**
 * The student API under `/u/:slug/api`: the workspace's state, opening it (admission under the
 * cap), runs (start, list, one, stop), and the simulator's alive probe. Only the owner and admins
 * pass; every call marks the workspace active. In host mode a workspace's answer also says where
 * its editor is (`editorUrl`, its own origin).
 */
export function studentRouter(deps: StudentDeps): Router<StudentState> {
  const router = new Router<StudentState>({ prefix: '/u/:slug/api' });
  const { store, metrics } = deps;
  const present = (workspace: WorkspaceRecord) =>
    deps.editorUrl ? { ...presentStudentWorkspace(workspace), editorUrl: deps.editorUrl(workspace.slug) } : presentStudentWorkspace(workspace);

  router.use(async (ctx, next) => {
    const user = ctx.state.user;
    if (!user) throw AuthenticationError('Sign in to use this workspace.');
    const workspace = await store.workspaces.getBySlug(ctx.params.slug!);
    if (!mayUseWorkspace(user, workspace)) throw AuthorizationError('This workspace is not yours.');
    if (ctx.method !== 'GET') assertSameOrigin(ctx, deps.publicOrigin);
    ctx.state.workspace = workspace;
    deps.activity.touch(workspace.id);
    await next();
  });

  router.get('/workspace', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { workspace: present(ctx.state.workspace) };
  });

  router.post('/workspace/open', async (ctx) => {
    try {
      const { workspace, alreadyRunning } = await store.workspaces.open(ctx.state.workspace.id);
      ctx.status = alreadyRunning ? 200 : 202;
      ctx.body = { workspace: present(workspace), alreadyRunning };
    } catch (error) {
      if (error instanceof AtCapacityError) {
        // The coach's notification: a warning line and the counter behind the panel's refusals.
        metrics.capacityRejections.inc();
        deps.live.refused({ workspaceId: error.workspaceId, slug: error.slug, email: ctx.state.user?.email ?? null, cap: error.cap, running: error.running });
        deps.containersLog.warning(
          { workspaceId: error.workspaceId, slug: error.slug, cap: error.cap, running: error.running },
          'workspace open refused: server at capacity',
        );
      }
      throw error;
    }
  });

  router.post('/runs', async (ctx) => {
    const run = await store.runs.create(ctx.state.workspace.id);
    ctx.status = 202;
    ctx.body = { run: presentRun(run) };
  });

  router.get('/runs', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { runs: (await store.runs.recent(ctx.state.workspace.id)).map(presentRun) };
  });

  router.get('/runs/:runId', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { run: presentRun(await store.runs.getOf(ctx.state.workspace.id, ctx.params.runId!)) };
  });

  router.post('/runs/:runId/stop', async (ctx) => {
    const run = await store.runs.requestStop(ctx.state.workspace.id, ctx.params.runId!);
    ctx.status = isTerminal(run.status) ? 200 : 202;
    ctx.body = { run: presentRun(run) };
  });

  router.get('/sim/status', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const run = await store.runs.active(ctx.state.workspace.id);
    if (!run) return void (ctx.body = { alive: false, reason: 'no_active_run' });
    if (!run.simEndpoint) return void (ctx.body = { alive: false, runId: run.id, reason: 'not_started' });
    const probe = await probeHttp(run.simEndpoint);
    metrics.proxyUpstreamDuration.observe({ upstream: 'nt4', outcome: probe.outcome }, probe.seconds);
    ctx.body = {
      alive: probe.outcome === 'ok',
      runId: run.id,
      latencyMs: Math.round(probe.seconds * 1000),
      ...(probe.outcome === 'ok' ? { status: probe.status } : { reason: probe.outcome === 'timeout' ? 'timeout' : 'unreachable' }),
    };
  });

  return router;
}
