/**
 * Lessons: a coach makes one from an uploaded archive (audit `lesson.create`), hands it out to every
 * student or to some (`lesson.handout`: the lesson controller writes it into each home under
 * `lessons/<name>/`, whether the workspace runs or not, never over a student's files), resets one
 * student's folder to the handed-out files after a backup (`lesson.reset`), and collects everyone's
 * folders at once or at a deadline (`lesson.collect`), downloaded as one archive with a folder per
 * student. See src/store/lessons.ts and controllers/lessons.ts.
 */
import Type from 'typebox';
import { IMPORT_FETCH_ERRORS, IMPORT_REQUEST_ERRORS } from '../../src/import/imports.ts';
import { presentCollection, presentDelivery, presentLesson, presentLessonDetail } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';
import { importRequest } from './student.ts';
import { workspaceOf } from './workspaces.ts';

/** What an upload of a lesson's files may be refused for. */
const UPLOAD_ERRORS = ['lesson_archive_invalid', 'lesson_archive_unsafe', 'lesson_archive_empty', 'lesson_too_large'] as const;

/** How a lesson's files are sent. */
const UPLOAD = {
  types: ['application/gzip', 'application/x-tar', 'application/zip', 'application/octet-stream'],
  description:
    "The lesson's files as a .zip, .tar or .tar.gz archive (told by its first bytes, whatever the media type says). An archive whose entries are all in one folder is that folder's contents.",
};

export const list = operation({
  method: 'get',
  path: '/admin/lessons',
  summary: 'Every lesson, by name, with its latest version and how its handouts stand.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.LessonList, 'The lessons.') },
  handle: async (_input, { store }) => ({ status: 200, body: { lessons: (await store.lessons.list()).map(presentLesson) } }),
});

export const create = operation({
  method: 'post',
  path: '/admin/lessons',
  summary: 'Makes a lesson of an uploaded archive (audit `lesson.create`): its name is the folder it lands in, under `lessons/` of each home.',
  auth: 'admin',
  tag: 'admin',
  long: true,
  query: Type.Object(
    { name: Type.String({ minLength: 1, maxLength: 60, description: "The lesson's name, which is its folder." }) },
    { additionalProperties: false },
  ),
  upload: UPLOAD,
  errors: [...UPLOAD_ERRORS, 'invalid_lesson_name', 'lesson_exists'],
  responses: { 201: json(Wire.LessonAnswer, 'The lesson, at version 1.') },
  handle: async ({ actor, query, ctx }, { lessons }) => ({
    status: 201,
    body: { lesson: presentLesson(await lessons.upload(actor, { name: query.name }, ctx.req)) },
  }),
});

export const addVersion = operation({
  method: 'post',
  path: '/admin/lessons/{lessonId}/versions',
  summary:
    'Gives a lesson a new version of its files (audit `lesson.create`); handed out, it lands beside the earlier one in a home that has it (`lessons/<name> (v2)/`), and the student is told.',
  auth: 'admin',
  tag: 'admin',
  long: true,
  upload: UPLOAD,
  errors: [...UPLOAD_ERRORS],
  responses: { 201: json(Wire.LessonAnswer, 'The lesson, at its new version.') },
  handle: async ({ actor, params, ctx }, { lessons }) => ({
    status: 201,
    body: { lesson: presentLesson(await lessons.upload(actor, { lessonId: params.lessonId }, ctx.req)) },
  }),
});

/** The body of a lesson from git: what a student's import takes (student.ts), and, for a new lesson, its name. */
const gitRequest = Type.Object({ ...importRequest.properties }, { additionalProperties: false });

/** What a lesson from git may be refused for: an import's refusals and failures, and the upload's own. */
const GIT_ERRORS = [...IMPORT_REQUEST_ERRORS, ...IMPORT_FETCH_ERRORS, 'lesson_archive_unsafe', 'lesson_archive_empty', 'lesson_too_large'] as const;

export const createFromGit = operation({
  method: 'post',
  path: '/admin/lessons/git',
  summary:
    "Makes a lesson of a git repository's project (audit `lesson.create`): checked and cloned as a student's import is (https, the allowed hosts and addresses, IMPORT_MAX_SIZE, IMPORT_TIMEOUT_SECONDS), its `.git` left out.",
  auth: 'admin',
  tag: 'admin',
  long: true,
  body: Type.Object(
    { name: Type.String({ minLength: 1, maxLength: 60, description: "The lesson's name, which is its folder." }), ...importRequest.properties },
    { additionalProperties: false },
  ),
  errors: [...GIT_ERRORS, 'invalid_lesson_name', 'lesson_exists'],
  responses: { 201: json(Wire.LessonAnswer, 'The lesson, at version 1.') },
  handle: async ({ actor, body }, { lessons }) => ({
    status: 201,
    body: { lesson: presentLesson(await lessons.fromGit(actor, { name: body.name }, gitSource(body))) },
  }),
});

export const addVersionFromGit = operation({
  method: 'post',
  path: '/admin/lessons/{lessonId}/versions/git',
  summary: "Gives a lesson a new version of its files from a git repository's project, as POST /admin/lessons/git makes one (audit `lesson.create`).",
  auth: 'admin',
  tag: 'admin',
  long: true,
  body: gitRequest,
  errors: [...GIT_ERRORS],
  responses: { 201: json(Wire.LessonAnswer, 'The lesson, at its new version.') },
  handle: async ({ actor, params, body }, { lessons }) => ({
    status: 201,
    body: { lesson: presentLesson(await lessons.fromGit(actor, { lessonId: params.lessonId }, gitSource(body))) },
  }),
});

/** The repository, branch and subfolder asked. */
const gitSource = (body: { url: string; branch?: string | null; subfolder?: string | null }) => ({
  url: body.url,
  branch: body.branch ?? undefined,
  subfolder: body.subfolder ?? undefined,
});

export const one = operation({
  method: 'get',
  path: '/admin/lessons/{lessonId}',
  summary: "A lesson with its versions, every student's deliveries (where each landed, or why it failed) and its collections.",
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.LessonDetail, 'The lesson.') },
  handle: async ({ params }, { store }) => ({ status: 200, body: presentLessonDetail(await store.lessons.detail(params.lessonId)) }),
});

export const handout = operation({
  method: 'post',
  path: '/admin/lessons/{lessonId}/handout',
  summary:
    "Hands the lesson's latest version out (audit `lesson.handout`) to every student (`all`) or to the named workspaces: it lands in each home under `lessons/`, whether the workspace runs or not. Those who have it already are left as they are.",
  auth: 'admin',
  tag: 'admin',
  body: Type.Union([
    Type.Object({ all: Type.Literal(true) }, { additionalProperties: false }),
    Type.Object(
      { workspaceIds: Type.Array(Type.String({ format: 'uuid' }), { minItems: 1, maxItems: 1000, uniqueItems: true }) },
      { additionalProperties: false },
    ),
  ]),
  errors: ['workspace_not_found'],
  responses: { 202: json(Wire.HandoutAnswer, 'On its way: GET the lesson to follow each delivery.') },
  handle: async ({ actor, params, body }, { store }) => ({
    status: 202,
    body: await store.lessons.handout(actor, params.lessonId, 'all' in body ? { all: true } : { workspaceIds: body.workspaceIds }),
  }),
});

export const reset = operation({
  method: 'post',
  path: '/admin/lessons/{lessonId}/reset',
  summary:
    "Makes one student's folder of the lesson the handed-out files again (audit `lesson.reset`), after a backup of their home: their changes to it are in that backup.",
  auth: 'admin',
  tag: 'admin',
  body: Type.Object({ workspaceId: Type.String({ format: 'uuid' }) }, { additionalProperties: false }),
  errors: ['workspace_not_found', 'lesson_not_delivered'],
  responses: { 202: json(Wire.LessonResetAnswer, 'On its way: the delivery says when it is done, and the backup made.') },
  handle: async ({ actor, params, body }, { store }) => {
    const workspace = await workspaceOf(store, body.workspaceId);
    return { status: 202, body: { delivery: presentDelivery(await store.lessons.requestReset(actor, params.lessonId, workspace)) } };
  },
});

export const collect = operation({
  method: 'post',
  path: '/admin/lessons/{lessonId}/collections',
  summary:
    "Collects the lesson (audit `lesson.collect`): a snapshot of each student's folders of it, taken now or at `dueAt`, downloadable as one archive once done.",
  auth: 'admin',
  tag: 'admin',
  body: Type.Object(
    { dueAt: Type.Optional(Type.String({ format: 'date-time', description: 'When to take it (a deadline); absent: now.' })) },
    { additionalProperties: false },
  ),
  responses: { 202: json(Wire.CollectionAnswer, 'Asked: GET it to follow each snapshot.') },
  handle: async ({ actor, params, body }, { store }) => ({
    status: 202,
    body: { collection: presentCollection(await store.lessons.collect(actor, params.lessonId, body.dueAt === undefined ? undefined : new Date(body.dueAt))) },
  }),
});

export const collection = operation({
  method: 'get',
  path: '/admin/lessons/{lessonId}/collections/{collectionId}',
  summary: "A collection of the lesson: each student's snapshot (taken, missing, failed) and whether it is done.",
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.CollectionAnswer, 'The collection.') },
  handle: async ({ params }, { store }) => ({
    status: 200,
    body: { collection: presentCollection(await store.lessons.collection(params.lessonId, params.collectionId)) },
  }),
});

export const archive = operation({
  method: 'get',
  path: '/admin/lessons/{lessonId}/collections/{collectionId}/archive',
  summary:
    'A collection as one .tar.gz: a folder per student with their lesson folders (and a NOT-COLLECTED.txt saying why for those whose files could not be taken).',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  errors: ['collection_not_done'],
  responses: { 200: { file: 'application/gzip', description: 'The archive (tar.gz).' } },
  handle: async ({ params, ctx }, { lessons }) => {
    const made = await lessons.archive(params.lessonId, params.collectionId);
    ctx.set('Content-Disposition', `attachment; filename="${made.fileName.replace(/[^\w.()-]/g, '_')}"`);
    ctx.type = 'application/gzip';
    ctx.body = made.stream;
  },
});
