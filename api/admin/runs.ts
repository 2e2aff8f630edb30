import type Router from '@koa/router';
import { NotFoundError } from '../../src/errors.ts';
import type { RunStatus } from '../../src/store/runs.ts';
import type { AuthState } from '../middleware/auth.ts';
import { validateQuery, type QueryState } from '../middleware/validate.ts';
import { presentClassRun, presentRunEnd } from '../../src/wire/presenters.ts';
import { answerOutputFile, answerOutputStream, outputQuerySchema, type OutputQuery } from '../run-output.ts';
import type { AdminDeps } from '../admin.ts';
import type { ClassRunAnswer, ClassRunList } from '../../src/wire/schemas.ts';

interface RunsQuery {
  status?: RunStatus;
  since?: string;
  workspace?: string;
  limit: number;
}

export const runsQuerySchema = {
  type: 'object',
  properties: {
    status: { type: 'string', enum: ['queued', 'running', 'stopped', 'failed', 'canceled'] },
    since: { type: 'string', format: 'date-time' },
    workspace: { type: 'string', pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' },
    limit: { type: 'integer', minimum: 1, maximum: 500, default: 100 },
  },
  required: ['limit'],
  additionalProperties: false,
};

/**
 * The class's runs for a coach, read only but for stopping one: `GET /admin/runs` (newest first,
 * filtered by status, a start time, a workspace: "failed in the last hour"), one run
 * (`GET /admin/runs/<id>`), its output as it
 * is written (`GET /admin/runs/<id>/output`, server-sent events as the student's) or whole
 * (`.../output.txt`), and `POST /admin/runs/<id>/stop` (audited `run.stop`).
 */
export function runRoutes(router: Router<AuthState>, { store, outputHub }: AdminDeps): void {
  router.get('/runs', validateQuery<RunsQuery>(runsQuerySchema), async (ctx) => {
    const { status, since, workspace, limit } = (ctx.state as QueryState<RunsQuery>).query;
    const runs = await store.runs.list({ status, since: since === undefined ? undefined : new Date(since), workspaceId: workspace, limit });
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { runs: runs.map(presentClassRun) } satisfies ClassRunList;
  });

  const runOf = async (id: string) => {
    const run = await store.runs.getWithOwner(id);
    if (!run) throw NotFoundError('run_not_found', `No run ${JSON.stringify(id)}.`);
    return run;
  };

  router.get('/runs/:runId', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { run: presentClassRun(await runOf(ctx.params.runId!)) } satisfies ClassRunAnswer;
  });

  router.get('/runs/:runId/output', validateQuery<OutputQuery>(outputQuerySchema), async (ctx) => {
    const run = await runOf(ctx.params.runId!);
    answerOutputStream(
      ctx,
      { runs: store.runs, changes: store.changes, hub: outputHub, presentEnd: presentRunEnd },
      run,
      (ctx.state as QueryState<OutputQuery>).query.from,
    );
  });

  router.get('/runs/:runId/output.txt', async (ctx) => {
    const run = await runOf(ctx.params.runId!);
    await answerOutputFile(ctx, store.runs, run, run.slug);
  });

  router.post('/runs/:runId/stop', async (ctx) => {
    const run = await store.runs.stopByAdmin(ctx.state.actor!, ctx.params.runId!);
    ctx.status = run.status === 'queued' || run.status === 'running' ? 202 : 200;
    ctx.body = { run: presentClassRun(run) } satisfies ClassRunAnswer;
  });
}
