import Router from '@koa/router';
import type { Metrics } from '../src/metrics.ts';
import { AuthenticationError, AuthorizationError } from '../src/errors.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import { getActiveRun } from '../src/store/runs.ts';
import { getWorkspaceBySlug, openWorkspace, type StoreContext, type WorkspaceRecord } from '../src/store/workspaces.ts';
import { assertSameOrigin, type AuthState } from './middleware/auth.ts';

/** The nt4 alive probe's timeout (spec: 500 ms). */
export const NT4_PROBE_TIMEOUT_MS = 500;

export interface StudentDeps {
  store: StoreContext;
  metrics: Metrics;
  activity: ActivityRecorder;
  publicOrigin: string;
}

interface StudentState extends AuthState {
  workspace: WorkspaceRecord;
}

/** A workspace as its student sees it; `ready` means the editor answers through the proxy. */
function view(workspace: WorkspaceRecord) {
  return {
    id: workspace.id,
    slug: workspace.slug,
    desiredState: workspace.desiredState,
    observedState: workspace.observedState,
    statusMessage: workspace.statusMessage,
    ready: workspace.observedState === 'running' && workspace.editorEndpoint !== null,
  };
}

/**
 * The student API under `/u/:slug/api`: the workspace's state, opening it (admission under the
 * cap), and the simulator's alive probe. Only the owner and admins pass; every call marks the
 * workspace active.
 */
export function studentRouter(deps: StudentDeps): Router<StudentState> {
  const router = new Router<StudentState>({ prefix: '/u/:slug/api' });
  const { store, metrics } = deps;

  router.use(async (ctx, next) => {
    const user = ctx.state.user;
    if (!user) throw AuthenticationError('Sign in to use this workspace.');
    const workspace = await getWorkspaceBySlug(store.db, ctx.params.slug!);
    // The same answer whether the workspace exists or not, so slugs cannot be probed.
    if (!workspace || workspace.desiredState === 'deleted' || !(user.role === 'admin' || workspace.userId === user.id)) {
      throw AuthorizationError('This workspace is not yours.');
    }
    if (ctx.method !== 'GET') assertSameOrigin(ctx, deps.publicOrigin);
    ctx.state.workspace = workspace;
    deps.activity.touch(workspace.id);
    await next();
  });

  router.get('/workspace', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { workspace: view(ctx.state.workspace) };
  });

  router.post('/workspace/open', async (ctx) => {
    const { workspace, alreadyRunning } = await openWorkspace(store, ctx.state.workspace.id);
    ctx.status = alreadyRunning ? 200 : 202;
    ctx.body = { workspace: view(workspace), alreadyRunning };
  });

  router.get('/sim/status', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const run = await getActiveRun(store.db, ctx.state.workspace.id);
    if (!run) return void (ctx.body = { alive: false, reason: 'no_active_run' });
    if (!run.simEndpoint) return void (ctx.body = { alive: false, runId: run.id, reason: 'not_started' });
    const started = performance.now();
    let outcome: 'ok' | 'timeout' | 'error' = 'ok';
    let status: number | undefined;
    try {
      const answer = await fetch(`http://${run.simEndpoint}/`, { signal: AbortSignal.timeout(NT4_PROBE_TIMEOUT_MS) });
      status = answer.status;
      await answer.body?.cancel();
    } catch (error) {
      outcome = (error as Error).name === 'TimeoutError' ? 'timeout' : 'error';
    }
    const seconds = (performance.now() - started) / 1000;
    metrics.proxyUpstreamDuration.observe({ upstream: 'nt4', outcome }, seconds);
    // Any HTTP answer on the nt4 port means the simulator's server is up.
    ctx.body = {
      alive: outcome === 'ok',
      runId: run.id,
      latencyMs: Math.round(seconds * 1000),
      ...(outcome === 'ok' ? { status } : { reason: outcome === 'timeout' ? 'timeout' : 'unreachable' }),
    };
  });

  return router;
}
