import Router from '@koa/router';
import type { Metrics } from '../src/metrics.ts';
import { AuthenticationError, AuthorizationError } from '../src/errors.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import { probeHttp } from '../src/probe.ts';
import { createRun, getActiveRun, getWorkspaceRun, isTerminal, listRuns, requestRunStop, type RunRecord } from '../src/store/runs.ts';
import { getWorkspaceBySlug, openWorkspace, type StoreContext, type WorkspaceRecord } from '../src/store/workspaces.ts';
import { assertSameOrigin, type AuthState } from './middleware/auth.ts';

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

/** A run as its student sees it. */
function runView(run: RunRecord) {
  return {
    id: run.id,
    status: run.status,
    desiredState: run.desiredState,
    queuedAt: run.queuedAt.toISOString(),
    readyAt: run.readyAt?.toISOString() ?? null,
    endedAt: run.endedAt?.toISOString() ?? null,
    exitCode: run.exitCode,
    reason: run.reason,
    output: run.output,
  };
}

/**
 * The student API under `/u/:slug/api`: the workspace's state, opening it (admission under the
 * cap), runs (start, list, one, stop), and the simulator's alive probe. Only the owner and admins pass; every call marks the
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

  router.post('/runs', async (ctx) => {
    const run = await createRun(store, ctx.state.workspace.id);
    ctx.status = 202;
    ctx.body = { run: runView(run) };
  });

  router.get('/runs', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { runs: (await listRuns(store.db, ctx.state.workspace.id)).map(runView) };
  });

  router.get('/runs/:runId', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { run: runView(await getWorkspaceRun(store.db, ctx.state.workspace.id, ctx.params.runId!)) };
  });

  router.post('/runs/:runId/stop', async (ctx) => {
    const run = await requestRunStop(store, ctx.state.workspace.id, ctx.params.runId!);
    ctx.status = isTerminal(run.status) ? 200 : 202;
    ctx.body = { run: runView(run) };
  });

  router.get('/sim/status', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const run = await getActiveRun(store.db, ctx.state.workspace.id);
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
