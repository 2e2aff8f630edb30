/**
 * A workspace's own API under `/u/{slug}/api`: its state (with when the idle sweep would stop it,
 * its newest run, and how full its home is), opening it (admission under the cap), stopping it,
 * keeping it from the idle sweep, runs (start, refused while its home is full or not measurable in
 * full; restart: stop, then start; list, one, stop, and each run's output: live as server-sent
 * events, or as a file), the simulator's alive probe, and the home's project replaced (reset to the
 * starter, or a team's repository imported, whose progress it tells). Only the owner and admins
 * pass (`studentGate`). What a student does (every call but a read) marks the workspace active;
 * reads do not, so that a page or an editor that keeps looking does not keep an abandoned workspace
 * running. In host mode a workspace's answer also says where its editor is (`editorUrl`, its own
 * origin).
 */
import type { Middleware } from 'koa';
import Type from 'typebox';
import { AtCapacityError, AuthenticationError, AuthorizationError, ConflictError } from '../../src/errors.ts';
import { homeDiskRefusal, homeDiskStatus } from '../../src/home-disk.ts';
import { IMPORT_REQUEST_ERRORS } from '../../src/import/imports.ts';
import { probeHttp } from '../../src/probe.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import { isTerminal, type RunRecord } from '../../src/store/runs.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { presentImport, presentRun, presentStudentLessons, presentStudentWorkspace, type IdleForecast } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { assertSameOrigin, type AuthState } from '../middleware/auth.ts';
import { json, operation, type ApiDeps } from '../operation.ts';
import { mayUseWorkspace } from '../policy.ts';
import { answerOutputFile, answerOutputStream, outputStreamDeps } from '../streams/run-output.ts';
import { outputQuery } from './runs.ts';

/** How long a restart waits for the run it stopped to end before it starts the next. */
export const RESTART_WAIT_MS = 30_000;

/**
 * The student API's gate: a signed-in user (401) who may use the workspace the path's slug names
 * (403 otherwise, whether or not it exists); a change also passes the same-origin check and marks
 * the workspace active.
 */
export function studentGate(deps: ApiDeps): Middleware<AuthState & { workspace?: WorkspaceRecord }> {
  return async (ctx, next) => {
    const user = ctx.state.user;
    if (!user) throw AuthenticationError('Sign in to use this workspace.');
    const workspace = await deps.store.workspaces.getBySlug((ctx.params as { slug: string }).slug);
    if (!mayUseWorkspace(user, workspace)) throw AuthorizationError('This workspace is not yours.');
    if (ctx.method !== 'GET') {
      assertSameOrigin(ctx, ctx.state.origin ?? deps.publicOrigin);
      deps.activity.touch(workspace.id);
    }
    ctx.state.workspace = workspace;
    await next();
  };
}

/** How full the workspace's home is, against HOME_DISK_LIMIT. */
const homeDisk = async (deps: ApiDeps, workspaceId: string) => homeDiskStatus(await deps.store.workspaceList.homeDisk(workspaceId), deps.homeDisk);

/** The workspace as its student sees it (with its newest run, its idle forecast, its home's fullness and its pages' addresses). */
async function present(deps: ApiDeps, workspace: WorkspaceRecord): Promise<Wire.StudentWorkspace> {
  const [[run], disk, look, lessons, guestEnds] = await Promise.all([
    deps.store.runs.recent(workspace.id, 1),
    homeDisk(deps, workspace.id),
    deps.store.looks.activeOn(workspace.id),
    deps.store.lessons.delivered(workspace.id),
    workspace.userId ? deps.store.joinCodes.guestEnds(workspace.userId) : undefined,
  ]);
  const body = {
    ...presentStudentWorkspace(workspace, { idle: idleForecast(workspace, run, deps), run: run ?? null, idleStopMinutes: deps.idleStopMinutes, disk }),
    // The workspace page, always reachable (from the editor too): on the control plane.
    pageUrl: `${deps.publicOrigin}/u/${workspace.slug}/.cp/`,
    // A coach looking, which the page and the editor say while it lasts.
    lookedAt: look ? { by: look.coach.name || look.coach.email, since: look.startedAt.toISOString(), lookId: look.id, asking: look.state === 'asking' } : null,
    // The lessons that reached the home: the page and the editor say where a new one landed.
    lessons: presentStudentLessons(lessons.slice(0, 20)),
    // A guest of a join code: when it ends, which the page says.
    guest: guestEnds ? { endsAt: guestEnds.toISOString() } : null,
  };
  return deps.editorUrl ? { ...body, editorUrl: deps.editorUrl(workspace.slug) } : body;
}

export const getWorkspace = operation({
  method: 'get',
  path: '/u/{slug}/api/workspace',
  summary: "The workspace's state, when the idle sweep would stop it, and its newest run.",
  auth: 'student',
  tag: 'student',
  noStore: true,
  responses: { 200: json(Wire.StudentWorkspaceAnswer, 'The workspace.') },
  handle: async ({ workspace }, deps) => ({ status: 200, body: { workspace: await present(deps, workspace) } }),
});

export const openWorkspace = operation({
  method: 'post',
  path: '/u/{slug}/api/workspace/open',
  summary: 'Opens the workspace: admission under the cap (503 `at_capacity` with Retry-After at the cap).',
  auth: 'student',
  tag: 'student',
  errors: ['at_capacity', 'workspace_not_found'],
  responses: { 200: json(Wire.OpenAnswer, 'It runs already.'), 202: json(Wire.OpenAnswer, 'Starting.') },
  handle: async ({ workspace: asked, user }, deps) => {
    try {
      const { workspace, alreadyRunning } = await deps.store.workspaces.open(asked.id);
      return { status: alreadyRunning ? 200 : 202, body: { workspace: await present(deps, workspace), alreadyRunning } };
    } catch (error) {
      if (error instanceof AtCapacityError) {
        // The coach's notification: the counter (every refused open), the panel's refusal and a
        // warning line (once a minute per student: repeats fold into the refusal, RefusalStore.record).
        deps.metrics.capacityRejections.inc();
        const refusal = { workspaceId: error.workspaceId, slug: error.slug, cap: error.cap, running: error.running };
        const first = await deps.live.refused({ ...refusal, email: user.email }).catch((failure: unknown) => {
          deps.containersLog.error({ error: failure }, 'recording a capacity refusal for the panel failed');
          return true;
        });
        if (first) deps.containersLog.warning(refusal, 'workspace open refused: server at capacity');
      }
      throw error;
    }
  },
});

export const keepWorkspace = operation({
  method: 'post',
  path: '/u/{slug}/api/workspace/keep',
  summary: '"Keep working": the student is here; the idle count starts again.',
  auth: 'student',
  tag: 'student',
  responses: { 200: json(Wire.StudentWorkspaceAnswer, 'The workspace.') },
  handle: async ({ workspace }, deps) => {
    await deps.activity.flush();
    return { status: 200, body: { workspace: await present(deps, (await deps.store.workspaces.get(workspace.id)) ?? workspace) } };
  },
});

export const stopWorkspace = operation({
  method: 'post',
  path: '/u/{slug}/api/workspace/stop',
  summary: 'The student stops their workspace (audit `container.stop`); the files stay.',
  auth: 'student',
  tag: 'student',
  errors: ['workspace_not_found'],
  responses: { 200: json(Wire.StudentWorkspaceAnswer, 'The workspace.') },
  // The student is done: the editor stops (audited as theirs), the files stay.
  handle: async ({ workspace, user }, deps) => {
    const stopped = await deps.store.workspaces.stop({ id: user.id, email: user.email }, workspace.id, 'student');
    return { status: 200, body: { workspace: await present(deps, stopped) } };
  },
});

export const startRun = operation({
  method: 'post',
  path: '/u/{slug}/api/runs',
  summary:
    'Starts a run (409 `run_active`, 409 `workspace_not_running`, 409 `home_disk_full` while the home is at HOME_DISK_LIMIT or cannot be measured in full).',
  auth: 'student',
  tag: 'student',
  errors: ['home_disk_full', 'workspace_not_running', 'run_active', 'workspace_not_found'],
  responses: { 202: json(Wire.RunAnswer, 'Queued.') },
  handle: async ({ workspace }, deps) => {
    // A home full or not measurable in full: no run (its build would write more), with how much is used and how to free it.
    const refusal = homeDiskRefusal(await homeDisk(deps, workspace.id));
    if (refusal) throw refusal;
    return { status: 202, body: { run: presentRun(await deps.store.runs.create(workspace.id)) } };
  },
});

export const listRuns = operation({
  method: 'get',
  path: '/u/{slug}/api/runs',
  summary: "The workspace's recent runs, newest first.",
  auth: 'student',
  tag: 'student',
  noStore: true,
  responses: { 200: json(Wire.RunList, 'The runs.') },
  handle: async ({ workspace }, { store }) => ({ status: 200, body: { runs: (await store.runs.recent(workspace.id)).map(presentRun) } }),
});

export const getRun = operation({
  method: 'get',
  path: '/u/{slug}/api/runs/{runId}',
  summary: 'One run.',
  auth: 'student',
  tag: 'student',
  noStore: true,
  responses: { 200: json(Wire.RunAnswer, 'The run.') },
  handle: async ({ workspace, params }, { store }) => ({ status: 200, body: { run: presentRun(await store.runs.getOf(workspace.id, params.runId)) } }),
});

export const runOutput = operation({
  method: 'get',
  path: '/u/{slug}/api/runs/{runId}/output',
  summary: "A run's output as server-sent events (as the admin's, bounds included).",
  auth: 'student',
  tag: 'student',
  query: outputQuery,
  errors: ['too_many_output_streams', 'run_output_streams_full'],
  responses: { 200: { events: 'Server-sent events.', description: 'The output, live until the run ends.' } },
  handle: async ({ workspace, user, params, query, ctx }, deps) => {
    const found = await deps.store.runs.getOf(workspace.id, params.runId);
    answerOutputStream(ctx, outputStreamDeps(deps), found, query.from, user.id);
  },
});

export const runOutputFile = operation({
  method: 'get',
  path: '/u/{slug}/api/runs/{runId}/output.txt',
  summary: "A run's whole kept output, as a file.",
  auth: 'student',
  tag: 'student',
  responses: { 200: { file: 'text/plain', description: 'The output.' } },
  handle: async ({ workspace, params, ctx }, { store }) => {
    await answerOutputFile(ctx, store.runs, await store.runs.getOf(workspace.id, params.runId), workspace.slug);
  },
});

export const stopRun = operation({
  method: 'post',
  path: '/u/{slug}/api/runs/{runId}/stop',
  summary: 'Stops a run.',
  auth: 'student',
  tag: 'student',
  responses: { 200: json(Wire.RunAnswer, 'It had ended.'), 202: json(Wire.RunAnswer, 'Stopping.') },
  handle: async ({ workspace, params }, { store }) => {
    const stopping = await store.runs.requestStop(workspace.id, params.runId);
    return { status: isTerminal(stopping.status.phase) ? 200 : 202, body: { run: presentRun(stopping) } };
  },
});

export const restartRun = operation({
  method: 'post',
  path: '/u/{slug}/api/runs/restart',
  summary:
    'Stops the active run (if any), waits for it to end, and starts a new one (409 `workspace_not_running`, `home_disk_full` before anything is stopped; 409 `run_stopping` when the run does not end within 30 s).',
  auth: 'student',
  tag: 'student',
  errors: ['workspace_not_running', 'home_disk_full', 'run_active', 'run_stopping', 'workspace_not_found'],
  responses: { 202: json(Wire.RestartAnswer, 'The new run, queued, and the run stopped first.') },
  // Stop, then run: the active run (if any) is asked to stop and waited for, then a new one is queued.
  handle: async ({ workspace }, deps) => {
    const { store } = deps;
    // Refused before anything is stopped: what would refuse the new run.
    if (workspace.spec.desiredState !== 'running') {
      throw ConflictError('workspace_not_running', `Workspace ${workspace.slug} is stopped; open it before running the simulator.`);
    }
    const refusal = homeDiskRefusal(await homeDisk(deps, workspace.id));
    if (refusal) throw refusal;
    const active = await store.runs.active(workspace.id);
    if (active) {
      await store.runs.requestStop(workspace.id, active.id);
      await runEnded(store, workspace.id, active.id, RESTART_WAIT_MS);
    }
    return { status: 202, body: { run: presentRun(await store.runs.create(workspace.id)), stopped: active?.id ?? null } };
  },
});

export const resetWorkspace = operation({
  method: 'post',
  path: '/u/{slug}/api/workspace/reset',
  summary:
    "Puts the home back to what a new workspace gets (the image's starter), after a backup of the whole home (audit `workspace.reset` naming it). 409 `run_active`, `workspace_running` (stop it first), `import_in_progress`; 429 `too_many_replacements`.",
  auth: 'student',
  tag: 'student',
  errors: [
    'run_active',
    'workspace_running',
    'import_in_progress',
    'too_many_replacements',
    'backup_unrestorable',
    'backup_unsupported_owner',
    'workspace_not_found',
  ],
  responses: { 200: json(Wire.ResetAnswer, 'The workspace on its new home, and the backup made.') },
  // Reset to the starter: a backup of the whole home first, audited; only while the workspace is stopped.
  handle: async ({ workspace: asked, user }, deps) => {
    const { workspace, backup } = await deps.imports.reset({ id: user.id, email: user.email }, asked);
    return { status: 200, body: { workspace: await present(deps, workspace), backup } };
  },
});

/** The body of POST .../workspace/import (and of a lesson from git): a git repository's https:// address, and optionally a branch and a subfolder. */
export const importRequest = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2000, description: 'The repository, https:// only (https://github.com/<team>/<repository>).' }),
    branch: Type.Optional(
      Type.Union([Type.String({ maxLength: 200 }), Type.Null()], { description: "A branch; empty or absent: the repository's default branch." }),
    ),
    subfolder: Type.Optional(
      Type.Union([Type.String({ maxLength: 1000 }), Type.Null()], {
        description: 'A folder of the repository to import alone; empty or absent: the whole repository.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const startImport = operation({
  method: 'post',
  path: '/u/{slug}/api/workspace/import',
  summary:
    "Starts an import of a team's git repository (https, an allowed host and address) into the home, replacing its project after a backup; follow it with GET. Refused at once: 400 `import_url_invalid`, `import_not_https`, `import_branch_invalid`, `import_subfolder_invalid`, `import_host_unknown`; 403 `import_host_refused`, `import_address_refused`; 409 as a reset; 429 `too_many_replacements`; 503 `imports_busy`.",
  auth: 'student',
  tag: 'student',
  body: importRequest,
  errors: [...IMPORT_REQUEST_ERRORS, 'run_active', 'workspace_running', 'import_in_progress', 'too_many_replacements'],
  responses: { 202: json(Wire.ImportAnswer, 'Started (phase `checking`).') },
  // Checked and started here, followed through GET .../workspace/import.
  handle: async ({ workspace, user, body }, { imports }) => {
    const started = await imports.start({ id: user.id, email: user.email }, workspace, {
      url: body.url,
      branch: body.branch ?? undefined,
      subfolder: body.subfolder ?? undefined,
    });
    return { status: 202, body: { import: presentImport(started) } };
  },
});

export const latestImport = operation({
  method: 'get',
  path: '/u/{slug}/api/workspace/import',
  summary:
    "The workspace's latest import: its phase and bytes, or how it ended (`error`: `import_redirect_invalid`, `import_not_git`, `import_repository_not_found`, `import_branch_not_found`, `import_empty`, `import_too_large`, `import_timeout`, `import_subfolder_not_found`, `import_subfolder_outside`, `import_link_outside`, `import_name_unsupported`, `import_unreachable`, the address errors for a redirect, ...).",
  auth: 'student',
  tag: 'student',
  noStore: true,
  responses: { 200: json(Wire.ImportAnswer, 'The latest import, or null.') },
  handle: async ({ workspace }, { imports }) => {
    const latest = await imports.latest(workspace.id);
    return { status: 200, body: { import: latest ? presentImport(latest) : null } };
  },
});

export const simStatus = operation({
  method: 'get',
  path: '/u/{slug}/api/sim/status',
  summary: "The active run's simulator alive probe (500 ms timeout).",
  auth: 'student',
  tag: 'student',
  noStore: true,
  responses: { 200: json(Wire.SimStatus, 'Alive or not, and why.') },
  handle: async ({ workspace }, { store, upstreams, metrics }) => {
    const active = await store.runs.active(workspace.id);
    if (!active) return { status: 200, body: { alive: false, reason: 'no_active_run' as const } };
    if (!active.simEndpoint) return { status: 200, body: { alive: false, runId: active.id, reason: 'not_started' as const } };
    const simEndpoint = active.simEndpoint;
    // Only to the run's own simulator: the recorded address is checked against its live container.
    const probe = await probeHttp(simEndpoint, undefined, () => upstreams.connect({ workspaceId: workspace.id, runId: active.id }, 'nt4', simEndpoint));
    metrics.proxyUpstreamDuration.observe({ upstream: 'nt4', outcome: probe.outcome }, probe.seconds);
    return {
      status: 200,
      body: {
        alive: probe.outcome === 'ok',
        runId: active.id,
        latencyMs: Math.round(probe.seconds * 1000),
        ...(probe.outcome === 'ok' ? { status: probe.status } : { reason: probe.outcome === 'timeout' ? ('timeout' as const) : ('unreachable' as const) }),
      },
    };
  },
});

/**
 * Resolves once a run has ended (told by the change feed, looked at again every second as well:
 * notifications are hints); 409 `run_stopping` when it has not within `timeoutMs`.
 */
async function runEnded(store: SurfaceStore, workspaceId: string, runId: string, timeoutMs: number): Promise<void> {
  const ended = async () => {
    const found = await store.runs.get(runId);
    return !found || isTerminal(found.status.phase);
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
function idleForecast(workspace: WorkspaceRecord, latest: RunRecord | undefined, deps: ApiDeps): IdleForecast {
  if (workspace.spec.desiredState !== 'running' || (latest && !isTerminal(latest.status.phase))) return { stopsAt: null, warnFrom: null };
  const last = Math.max(deps.activity.pendingSince(workspace.id) ?? 0, workspace.status.lastActivityAt?.getTime() ?? 0, latest?.status.endedAt?.getTime() ?? 0);
  const stopsAt = (last || Date.now()) + deps.idleStopMinutes * 60_000;
  return { stopsAt: new Date(stopsAt), warnFrom: new Date(stopsAt - deps.idleWarningMinutes * 60_000) };
}
