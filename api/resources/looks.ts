/**
 * A coach's read-only look over a student's shoulder: begun from the class view or the help queue
 * (audit `workspace.view`, once per look), kept while the coach's page is open (every
 * LOOK_KEEP_SECONDS; a look not kept for LOOK_TTL_SECONDS has ended), ended when it closes. While a
 * look is live, its coach reads the workspace's files (one folder, one file's start), read by the
 * control plane from the home (src/home-files.ts), and the student's page and editor say who is
 * looking (`lookedAt` on GET /u/{slug}/api/workspace).
 */
import Type from 'typebox';
import { presentLook } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import type { Actor } from '../../src/store/audit.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { json, operation } from '../operation.ts';
import { workspaceOf } from './workspaces.ts';

export const begin = operation({
  method: 'post',
  path: '/admin/workspaces/{workspaceId}/looks',
  summary:
    "Begins a read-only look at a student's workspace (audit `workspace.view`): the student is told while it lasts. Keep it every 20 s; it ends a minute after the last keep.",
  auth: 'admin',
  tag: 'admin',
  errors: ['workspace_not_found'],
  responses: { 201: json(Wire.LookAnswer, 'Looking.') },
  handle: async ({ actor, params }, { store, lookConsent }) => ({
    status: 201,
    body: { look: presentLook(await store.looks.begin(actor, await workspaceOf(store, params.workspaceId), lookConsent)) },
  }),
});

export const keep = operation({
  method: 'post',
  path: '/admin/looks/{lookId}/keep',
  summary: "Says the look is still open: it lasts another minute. 404 `look_not_found` once it ended (or for another coach's).",
  auth: 'admin',
  tag: 'admin',
  errors: ['look_not_found'],
  responses: { 200: json(Wire.LookAnswer, 'Kept.') },
  handle: async ({ actor, params }, { store }) => ({ status: 200, body: { look: presentLook(await store.looks.keep(actor, params.lookId)) } }),
});

export const end = operation({
  method: 'post',
  path: '/admin/looks/{lookId}/end',
  summary: 'Ends the look (the student is no longer told); ending it again changes nothing.',
  auth: 'admin',
  tag: 'admin',
  errors: ['look_not_found'],
  responses: { 200: json(Wire.LookAnswer, 'Ended.') },
  handle: async ({ actor, params }, { store }) => ({ status: 200, body: { look: presentLook(await store.looks.end(actor, params.lookId)) } }),
});

/** The path asked, relative to the home. */
const pathQuery = Type.Object(
  { path: Type.String({ maxLength: 1024, default: '', description: "Relative to the home ('' or absent: the home itself)." }) },
  { additionalProperties: false },
);

/** What reading a student's files may answer: no look, the path's refusals, no home yet, the engine away. */
const FILE_ERRORS = [
  'workspace_not_found',
  'look_not_found',
  'look_not_accepted',
  'too_many_look_reads',
  'invalid_home_path',
  'home_path_wrong_kind',
  'home_path_not_found',
  'home_path_unreadable',
  'volume_not_found',
  'home_unavailable',
] as const;

/** The workspace, once this coach's look at it is live and accepted (what reading its files requires). */
async function lookedAt(store: SurfaceStore, actor: Actor, workspaceId: string): Promise<WorkspaceRecord> {
  const workspace = await workspaceOf(store, workspaceId);
  await store.looks.liveLook(actor, workspace.id);
  return workspace;
}

export const files = operation({
  method: 'get',
  path: '/admin/workspaces/{workspaceId}/files',
  summary:
    "One folder of the student's home, during a live look of this coach (404 `look_not_found` without one): its entries, folders first; links shown, never followed; a path leading out of the home is refused.",
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  query: pathQuery,
  errors: [...FILE_ERRORS],
  responses: { 200: json(Wire.HomeListing, 'The folder.') },
  handle: async ({ actor, params, query }, { store, homeFiles }) => {
    return { status: 200, body: await homeFiles.list(await lookedAt(store, actor, params.workspaceId), query.path) };
  },
});

export const file = operation({
  method: 'get',
  path: '/admin/workspaces/{workspaceId}/files/content',
  summary:
    "One file of the student's home as text (its first 256 KiB; a binary file is named, not shown), during a live look of this coach; a link is not followed.",
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  query: pathQuery,
  errors: [...FILE_ERRORS],
  responses: { 200: json(Wire.HomeFile, 'The file.') },
  handle: async ({ actor, params, query }, { store, homeFiles }) => {
    return { status: 200, body: await homeFiles.read(await lookedAt(store, actor, params.workspaceId), query.path) };
  },
});

export const field = operation({
  method: 'get',
  path: '/admin/workspaces/{workspaceId}/field',
  summary:
    "The robot's field in the run in progress, during a live look of this coach: the control plane reads the run's NetworkTables itself (the Field2d tables: the robot's pose and the field's objects), never through the student's editor. Read it every second; not counted against the look's reads.",
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  errors: ['workspace_not_found', 'look_not_found', 'look_not_accepted'],
  responses: { 200: json(Wire.LookField, 'The field, or why there is none.') },
  handle: async ({ actor, params }, { store, robotFields }) => {
    const workspace = await workspaceOf(store, params.workspaceId);
    await store.looks.liveLook(actor, workspace.id, false);
    const run = await store.runs.active(workspace.id);
    if (!run) return { status: 200, body: { runId: null, state: 'no_run' as const, fields: [] } };
    if (!run.simEndpoint || run.status !== 'running') return { status: 200, body: { runId: run.id, state: 'starting' as const, fields: [] } };
    const reading = await robotFields.read({ workspaceId: workspace.id, runId: run.id, simEndpoint: run.simEndpoint });
    return { status: 200, body: { runId: run.id, ...reading } };
  },
});

/** The student's answer to a look asking them (LOOK_CONSENT=ask). */
const answer = (accept: boolean) =>
  operation({
    method: 'post',
    path: `/u/{slug}/api/looks/{lookId}/${accept ? 'accept' : 'decline'}`,
    summary: accept
      ? "The student lets a coach's look happen (the coach then reads their files, read only)."
      : "The student says no to a coach's look (the coach reads nothing).",
    auth: 'student',
    tag: 'student',
    errors: ['look_not_found', 'look_answered'],
    responses: { 200: json(Wire.LookAnswer, 'Answered.') },
    handle: async ({ workspace, params }, { store }) => ({
      status: 200,
      body: { look: presentLook(await store.looks.answer(workspace.id, params.lookId, accept)) },
    }),
  });

export const accept = answer(true);
export const decline = answer(false);
