import Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import { AtCapacityError, AuthenticationError, AuthorizationError, ConflictError } from '../src/errors.ts';
import type { Imports } from '../src/import/imports.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { probeHttp } from '../src/probe.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import { homeDiskRefusal, homeDiskStatus, type HomeDiskLimit } from '../src/home-disk.ts';
import type { SurfaceStore } from '../src/store/index.ts';
import type { ImportRequest } from '../src/store/imports.ts';
import { isTerminal, type RunRecord } from '../src/store/runs.ts';
import type { WorkspaceRecord } from '../src/store/workspaces.ts';
import type { LiveEvents } from './live.ts';
import type { Upstreams } from './proxy/upstreams.ts';
import { assertSameOrigin, type AuthState } from './middleware/auth.ts';
import { jsonBody, validateBody, validateQuery, type BodyState, type QueryState } from './middleware/validate.ts';
import { mayUseWorkspace } from './policy.ts';
import { presentImport, presentRun, presentRunEnd, presentStudentWorkspace, type IdleForecast } from '../src/wire/presenters.ts';
import { answerOutputFile, answerOutputStream, outputQuerySchema, type OutputQuery, type RunOutputHub } from './run-output.ts';
import type {
  ImportAnswer,
  OpenAnswer,
  ResetAnswer,
  RestartAnswer,
  RunAnswer,
  RunList,
  SimStatus,
  StudentWorkspace,
  StudentWorkspaceAnswer,
} from '../src/wire/schemas.ts';

export interface StudentDeps {
  store: SurfaceStore;
  metrics: Metrics;
  activity: ActivityRecorder;
  publicOrigin: string;
  /** Logger of `control.containers`, where capacity refusals are reported. */
  containersLog: Logger;
  /** Tells the admin panel of capacity refusals. */
  live: LiveEvents;
  /** Host mode: where a workspace's editor is (its own origin); undefined in path mode, where it is `/u/<slug>/` itself. */
  editorUrl?: (slug: string) => string;
  /** Live output of runs, for their output streams. */
  outputHub: RunOutputHub;
  /** Connections to simulators, each verified to reach the run's own (the alive probe). */
  upstreams: Upstreams;
  /** IDLE_STOP_MINUTES and IDLE_WARNING_MINUTES: when an idle workspace stops, and how long before the student is warned. */
  idleStopMinutes: number;
  idleWarningMinutes: number;
  /** The bound on homes (HOME_DISK_LIMIT): how full the home is, told with the workspace; a run is refused past it. */
  homeDisk: HomeDiskLimit;
  /** Resets to the starter and imports of a team's project. */
  imports: Imports;
}

/** How long a restart waits for the run it stopped to end before it starts the next. */
export const RESTART_WAIT_MS = 30_000;

/** The body of POST .../workspace/import: a git repository's https:// address, and optionally a branch and a subfolder. */
export const importSchema: JSONSchemaType<ImportRequest> = {
  type: 'object',
  properties: {
    url: { type: 'string', minLength: 1, maxLength: 2000, description: 'The repository, https:// only (https://github.com/<team>/<repository>).' },
    branch: { type: 'string', maxLength: 200, nullable: true, description: "A branch; empty or absent: the repository's default branch." },
    subfolder: {
      type: 'string',
      maxLength: 1000,
      nullable: true,
      description: 'A folder of the repository to import alone; empty or absent: the whole repository.',
    },
  },
  required: ['url'],
  additionalProperties: false,
};

interface StudentState extends AuthState {
  workspace: WorkspaceRecord;
}

/**
 * The student API under `/u/:slug/api`: the workspace's state (with when the idle sweep would
 * stop it, its newest run, and how full its home is), opening it (admission under the cap), stopping it, keeping it from the idle
 * sweep, runs (start, refused while its home is full or not measurable in full; restart: stop, then
 * start; list, one, stop, and each run's output: live as server-sent events, or as a file), the
 * simulator's alive probe, and the home's project replaced (reset to the starter, or a team's
 * repository imported, whose progress it tells). Only the owner and admins pass. What a student does (every
 * call but a read) marks the workspace active; reads do not, so that a page or an editor that keeps
 * looking does not keep an abandoned workspace running. In host mode a workspace's answer also says
 * where its editor is (`editorUrl`, its own origin).
 */
export function studentRouter(deps: StudentDeps): Router<StudentState> {
  const router = new Router<StudentState>({ prefix: '/u/:slug/api' });
  const { store, metrics } = deps;
  const outputDeps = { runs: store.runs, changes: store.changes, hub: deps.outputHub, presentEnd: presentRunEnd };
  const homeDisk = async (workspaceId: string) => homeDiskStatus(await store.workspaceList.homeDisk(workspaceId), deps.homeDisk);
  const present = async (workspace: WorkspaceRecord): Promise<StudentWorkspace> => {
    const [[run], disk] = await Promise.all([store.runs.recent(workspace.id, 1), homeDisk(workspace.id)]);
    const body = {
      ...presentStudentWorkspace(workspace, { idle: idleForecast(workspace, run, deps), run: run ?? null, idleStopMinutes: deps.idleStopMinutes, disk }),
      // The workspace page, always reachable (from the editor too): on the control plane.
      pageUrl: `${deps.publicOrigin}/u/${workspace.slug}/.cp/`,
    };
    return deps.editorUrl ? { ...body, editorUrl: deps.editorUrl(workspace.slug) } : body;
  };

  router.use(async (ctx, next) => {
    const user = ctx.state.user;
    if (!user) throw AuthenticationError('Sign in to use this workspace.');
    const workspace = await store.workspaces.getBySlug(ctx.params.slug!);
    if (!mayUseWorkspace(user, workspace)) throw AuthorizationError('This workspace is not yours.');
    if (ctx.method !== 'GET') {
      assertSameOrigin(ctx, ctx.state.origin ?? deps.publicOrigin);
      deps.activity.touch(workspace.id);
    }
    ctx.state.workspace = workspace;
    await next();
  });

  router.get('/workspace', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { workspace: await present(ctx.state.workspace) } satisfies StudentWorkspaceAnswer;
  });

  // The student is here: the idle sweep's count starts again (the warning's "Keep working").
  router.post('/workspace/keep', async (ctx) => {
    await deps.activity.flush();
    ctx.body = { workspace: await present((await store.workspaces.get(ctx.state.workspace.id)) ?? ctx.state.workspace) } satisfies StudentWorkspaceAnswer;
  });

  // The student is done: the editor stops (audited as theirs), the files stay.
  router.post('/workspace/stop', async (ctx) => {
    const user = ctx.state.user!;
    const workspace = await store.workspaces.stop({ id: user.id, email: user.email }, ctx.state.workspace.id, 'student');
    ctx.body = { workspace: await present(workspace) } satisfies StudentWorkspaceAnswer;
  });

  router.post('/workspace/open', async (ctx) => {
    try {
      const { workspace, alreadyRunning } = await store.workspaces.open(ctx.state.workspace.id);
      ctx.status = alreadyRunning ? 200 : 202;
      ctx.body = { workspace: await present(workspace), alreadyRunning } satisfies OpenAnswer;
    } catch (error) {
      if (error instanceof AtCapacityError) {
        // The coach's notification: the counter (every refused open), the panel's refusal and a
        // warning line (once a minute per student: repeats fold into the refusal, RefusalStore.record).
        metrics.capacityRejections.inc();
        const refusal = { workspaceId: error.workspaceId, slug: error.slug, cap: error.cap, running: error.running };
        const first = await deps.live.refused({ ...refusal, email: ctx.state.user?.email ?? null }).catch((failure: unknown) => {
          deps.containersLog.error({ error: failure }, 'recording a capacity refusal for the panel failed');
          return true;
        });
        if (first) deps.containersLog.warning(refusal, 'workspace open refused: server at capacity');
      }
      throw error;
    }
  });

  router.post('/runs', async (ctx) => {
    // A home full or not measurable in full: no run (its build would write more), with how much is used and how to free it.
    const refusal = homeDiskRefusal(await homeDisk(ctx.state.workspace.id));
    if (refusal) throw refusal;
    const run = await store.runs.create(ctx.state.workspace.id);
    ctx.status = 202;
    ctx.body = { run: presentRun(run) } satisfies RunAnswer;
  });

  router.get('/runs', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { runs: (await store.runs.recent(ctx.state.workspace.id)).map(presentRun) } satisfies RunList;
  });

  router.get('/runs/:runId', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { run: presentRun(await store.runs.getOf(ctx.state.workspace.id, ctx.params.runId!)) } satisfies RunAnswer;
  });

  // The run's whole output as it is written (server-sent events; see run-output.ts), and as a file.
  router.get('/runs/:runId/output', validateQuery<OutputQuery>(outputQuerySchema), async (ctx) => {
    const run = await store.runs.getOf(ctx.state.workspace.id, ctx.params.runId!);
    answerOutputStream(ctx, outputDeps, run, (ctx.state as unknown as QueryState<OutputQuery>).query.from);
  });

  router.get('/runs/:runId/output.txt', async (ctx) => {
    const run = await store.runs.getOf(ctx.state.workspace.id, ctx.params.runId!);
    await answerOutputFile(ctx, store.runs, run, ctx.state.workspace.slug);
  });

  router.post('/runs/:runId/stop', async (ctx) => {
    const run = await store.runs.requestStop(ctx.state.workspace.id, ctx.params.runId!);
    ctx.status = isTerminal(run.status) ? 200 : 202;
    ctx.body = { run: presentRun(run) } satisfies RunAnswer;
  });

  // Stop, then run: the active run (if any) is asked to stop and waited for, then a new one is queued.
  router.post('/runs/restart', async (ctx) => {
    const { workspace } = ctx.state;
    // Refused before anything is stopped: what would refuse the new run.
    if (workspace.desiredState !== 'running') {
      throw ConflictError('workspace_not_running', `Workspace ${workspace.slug} is stopped; open it before running the simulator.`);
    }
    const refusal = homeDiskRefusal(await homeDisk(workspace.id));
    if (refusal) throw refusal;
    const active = await store.runs.active(workspace.id);
    if (active) {
      await store.runs.requestStop(workspace.id, active.id);
      await runEnded(store, workspace.id, active.id, RESTART_WAIT_MS);
    }
    const run = await store.runs.create(workspace.id);
    ctx.status = 202;
    ctx.body = { run: presentRun(run), stopped: active?.id ?? null } satisfies RestartAnswer;
  });

  // Reset to the starter: a backup of the whole home first, audited; only while the workspace is stopped.
  router.post('/workspace/reset', async (ctx) => {
    const user = ctx.state.user!;
    const { workspace, backup } = await deps.imports.reset({ id: user.id, email: user.email }, ctx.state.workspace);
    ctx.body = { workspace: await present(workspace), backup } satisfies ResetAnswer;
  });

  // Import a team's project: checked and started here, followed through GET .../workspace/import.
  router.post('/workspace/import', jsonBody(), validateBody(importSchema), async (ctx) => {
    const user = ctx.state.user!;
    const body = (ctx.state as unknown as BodyState<ImportRequest>).body;
    const started = await deps.imports.start({ id: user.id, email: user.email }, ctx.state.workspace, body);
    ctx.status = 202;
    ctx.body = { import: presentImport(started) } satisfies ImportAnswer;
  });

  router.get('/workspace/import', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const latest = await deps.imports.latest(ctx.state.workspace.id);
    ctx.body = { import: latest ? presentImport(latest) : null } satisfies ImportAnswer;
  });

  router.get('/sim/status', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const run = await store.runs.active(ctx.state.workspace.id);
    if (!run) return void (ctx.body = { alive: false, reason: 'no_active_run' } satisfies SimStatus);
    if (!run.simEndpoint) return void (ctx.body = { alive: false, runId: run.id, reason: 'not_started' } satisfies SimStatus);
    const simEndpoint = run.simEndpoint;
    // Only to the run's own simulator: the recorded address is checked against its live container.
    const probe = await probeHttp(simEndpoint, undefined, () =>
      deps.upstreams.connect({ workspaceId: ctx.state.workspace.id, runId: run.id }, 'nt4', simEndpoint),
    );
    metrics.proxyUpstreamDuration.observe({ upstream: 'nt4', outcome: probe.outcome }, probe.seconds);
    ctx.body = {
      alive: probe.outcome === 'ok',
      runId: run.id,
      latencyMs: Math.round(probe.seconds * 1000),
      ...(probe.outcome === 'ok' ? { status: probe.status } : { reason: probe.outcome === 'timeout' ? ('timeout' as const) : ('unreachable' as const) }),
    } satisfies SimStatus;
  });

  return router;
}

/**
 * Resolves once a run has ended (told by the change feed, looked at again every second as well:
 * notifications are hints); 409 `run_stopping` when it has not within `timeoutMs`.
 */
async function runEnded(store: SurfaceStore, workspaceId: string, runId: string, timeoutMs: number): Promise<void> {
  const ended = async () => {
    const run = await store.runs.get(runId);
    return !run || isTerminal(run.status);
  };
  let wake: () => void = () => undefined;
  const unsubscribe = store.changes.subscribe((change) => {
    if ((change.kind === 'status' && change.id === workspaceId) || (change.kind === 'runs' && change.id === runId)) wake();
  });
  const deadline = Date.now() + timeoutMs;
  try {
    while (!(await ended())) {
      const left = deadline - Date.now();
      if (left <= 0) throw ConflictError('run_stopping', 'Your run is still stopping; press Restart again in a moment.');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(1000, left));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  } finally {
    unsubscribe();
  }
}

/**
 * When the idle sweep will stop a workspace unless its student does something, and from when to
 * warn them: its last activity (written, or gathered and not yet written) plus IDLE_STOP_MINUTES;
 * never while it is not wanted running or a run is in progress (a run is activity).
 */
function idleForecast(workspace: WorkspaceRecord, run: RunRecord | undefined, deps: StudentDeps): IdleForecast {
  if (workspace.desiredState !== 'running' || (run && !isTerminal(run.status))) return { stopsAt: null, warnFrom: null };
  const last = Math.max(deps.activity.pendingSince(workspace.id) ?? 0, workspace.lastActivityAt?.getTime() ?? 0, run?.endedAt?.getTime() ?? 0);
  const stopsAt = (last || Date.now()) + deps.idleStopMinutes * 60_000;
  return { stopsAt: new Date(stopsAt), warnFrom: new Date(stopsAt - deps.idleWarningMinutes * 60_000) };
}
