/**
 * The class's runs for a coach, read only but for stopping one: `GET /admin/runs` (newest first,
 * filtered by status, a start time, a workspace: "failed in the last hour"), one run, its output as
 * it is written (server-sent events, as the student's) or whole (`.../output.txt`), and a stop
 * (audited `run.stop`).
 */
import Type from 'typebox';
import { NotFoundError } from '../../src/errors.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import { presentClassRun } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { RUN_STATUSES } from '../../src/wire/vocabulary.ts';
import { json, operation } from '../operation.ts';
import { answerOutputFile, answerOutputStream, outputStreamDeps } from '../streams/run-output.ts';

/** The query of an output stream: `from`, the offset to start at (a reconnect's Last-Event-ID wins). */
export const outputQuery = Type.Object({ from: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000_000 })) }, { additionalProperties: false });

/** The run of that id with its workspace's owner, or 404 `run_not_found`. */
async function runOf(store: SurfaceStore, id: string) {
  const run = await store.runs.getWithOwner(id);
  if (!run) throw NotFoundError('run_not_found', `No run ${JSON.stringify(id)}.`);
  return run;
}

export const list = operation({
  method: 'get',
  path: '/admin/runs',
  summary: "The class's runs, newest first: by status, since a time, of one workspace.",
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  query: Type.Object(
    {
      status: Type.Optional(Type.Enum(RUN_STATUSES)),
      since: Type.Optional(Type.String({ format: 'date-time' })),
      workspace: Type.Optional(Type.String({ pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' })),
      limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
    },
    { additionalProperties: false },
  ),
  responses: { 200: json(Wire.ClassRunList, 'The runs.') },
  handle: async ({ query: { status, since, workspace, limit } }, { store }) => {
    const runs = await store.runs.list({ status, since: since === undefined ? undefined : new Date(since), workspaceId: workspace, limit });
    return { status: 200, body: { runs: runs.map(presentClassRun) } };
  },
});

export const one = operation({
  method: 'get',
  path: '/admin/runs/{runId}',
  summary: 'One run.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.ClassRunAnswer, 'The run.') },
  handle: async ({ params }, { store }) => ({ status: 200, body: { run: presentClassRun(await runOf(store, params.runId)) } }),
});

export const output = operation({
  method: 'get',
  path: '/admin/runs/{runId}/output',
  summary:
    "A run's output as server-sent events (`output` {offset, text}, then `end`, a RunEnd), resumable with Last-Event-ID; 429 with Retry-After past the bounds on open streams (per user, per run).",
  auth: 'admin',
  tag: 'admin',
  query: outputQuery,
  errors: ['too_many_output_streams', 'run_output_streams_full'],
  responses: { 200: { events: 'Server-sent events.', description: 'The output, live until the run ends.' } },
  handle: async ({ params, query, ctx, user }, deps) => {
    const run = await runOf(deps.store, params.runId);
    answerOutputStream(ctx, outputStreamDeps(deps), run, query.from, user?.id);
  },
});

export const outputFile = operation({
  method: 'get',
  path: '/admin/runs/{runId}/output.txt',
  summary: "A run's whole kept output, as a file.",
  auth: 'admin',
  tag: 'admin',
  responses: { 200: { file: 'text/plain', description: 'The output.' } },
  handle: async ({ params, ctx }, { store }) => {
    const run = await runOf(store, params.runId);
    await answerOutputFile(ctx, store.runs, run, run.slug);
  },
});

export const stop = operation({
  method: 'post',
  path: '/admin/runs/{runId}/stop',
  summary: 'Stops a run (audit `run.stop`).',
  auth: 'admin',
  tag: 'admin',
  responses: { 200: json(Wire.ClassRunAnswer, 'It had ended.'), 202: json(Wire.ClassRunAnswer, 'Stopping.') },
  handle: async ({ actor, params }, { store }) => {
    const run = await store.runs.stopByAdmin(actor, params.runId);
    return { status: run.status.phase === 'queued' || run.status.phase === 'running' ? 202 : 200, body: { run: presentClassRun(run) } };
  },
});
