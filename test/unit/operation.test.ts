/**
 * Operations as values (api/operation.ts): the routes made from a list of operations validate what
 * each declares, give its handler the typed input (path parameters, coerced query, body, the caller
 * its gate found), write the answer it returns, and answer 405 on a known path with another method.
 * A real Koa application on 127.0.0.1, with the error middleware the app uses.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import Type from 'typebox';
import { errorMiddleware } from '../../api/middleware/errors.ts';
import { apiRouters, json, operation, type AnyOperation, type ApiDeps } from '../../api/operation.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { captureLogger } from '../helpers/controllers.ts';

const Echo = Type.Object({ slug: Type.String(), page: Type.Integer(), size: Type.Integer(), name: Type.String() });

const search = operation({
  method: 'get',
  path: '/things/{thingId}',
  summary: 'A thing.',
  auth: 'none',
  tag: 'service',
  noStore: true,
  query: Type.Object({ page: Type.Integer({ minimum: 1 }), size: Type.Integer({ default: 10 }) }, { additionalProperties: false }),
  responses: { 200: json(Echo, 'The thing.') },
  handle: ({ params, query }) => ({ status: 200, body: { slug: params.thingId, page: query.page, size: query.size, name: '' } }),
});

const create = operation({
  method: 'post',
  path: '/things',
  summary: 'Makes a thing.',
  auth: 'none',
  tag: 'service',
  body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 5 }) }, { additionalProperties: false }),
  responses: { 201: json(Echo, 'Made.') },
  handle: ({ body }) => ({ status: 201, body: { slug: 'new', page: 0, size: 0, name: body.name } }),
});

const text = operation({
  method: 'get',
  path: '/things.txt',
  summary: 'Text the handler writes itself.',
  auth: 'none',
  tag: 'service',
  responses: { 200: { text: 'text/plain', description: 'Text.' } },
  handle: ({ ctx }) => {
    ctx.type = 'text/plain';
    ctx.body = 'written';
    return undefined;
  },
});

const mine = operation({
  method: 'post',
  path: '/u/{slug}/api/thing',
  summary: "A workspace's own thing.",
  auth: 'student',
  tag: 'student',
  responses: { 200: json(Echo, 'Its workspace.') },
  handle: ({ workspace, params }) => ({ status: 200, body: { slug: params.slug, page: 0, size: 0, name: workspace.slug } }),
});

let server: http.Server;
let base: string;
const gated: string[] = [];

beforeAll(async () => {
  const app = new Koa();
  app.use(errorMiddleware(captureLogger().root));
  const operations: AnyOperation[] = [search, create, text, mine];
  // The student gate stands in for the real one (api/resources/student.ts): it finds "the workspace" from the slug.
  const routers = apiRouters(operations, {} as ApiDeps, async (ctx, next) => {
    gated.push(ctx.path);
    ctx.state.workspace = { slug: `ws-${(ctx.params as { slug: string }).slug}` } as WorkspaceRecord;
    await next();
  });
  app.use(routers.public);
  app.use(routers.session);
  const handle = app.callback();
  server = http.createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

it('gives the handler its path parameters and the coerced query with defaults, and writes its answer', async () => {
  const response = await fetch(`${base}/things/abc?page=3`);
  expect(response.status).toBe(200);
  expect(response.headers.get('cache-control')).toBe('no-store');
  expect(await response.json()).toEqual({ slug: 'abc', page: 3, size: 10, name: '' });
});

it('refuses a query its schema refuses, naming the parameter', async () => {
  const response = await fetch(`${base}/things/abc?page=0`);
  expect(response.status).toBe(400);
  expect(await response.json()).toEqual({ error: { code: 'validation_error', message: 'The parameter "page" must be >= 1.' } });
  const unknown = await fetch(`${base}/things/abc?page=1&colour=red`);
  expect(await unknown.json()).toEqual({ error: { code: 'validation_error', message: 'The parameter "colour" is not allowed.' } });
});

it('gives the handler the validated body, and answers with the status it returns', async () => {
  const made = await fetch(`${base}/things`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'bolt' }) });
  expect(made.status).toBe(201);
  expect(await made.json()).toEqual({ slug: 'new', page: 0, size: 0, name: 'bolt' });
  const long = await fetch(`${base}/things`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'too long' }) });
  expect(long.status).toBe(400);
  expect(await long.json()).toEqual({ error: { code: 'validation_error', message: 'The field "name" must NOT have more than 5 characters.' } });
});

it('leaves what a handler wrote itself as it is', async () => {
  const response = await fetch(`${base}/things.txt`);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
  expect(await response.text()).toBe('written');
});

it('runs a student operation behind the student gate, whose workspace the handler receives', async () => {
  const response = await fetch(`${base}/u/ada/api/thing`, { method: 'POST' });
  expect(await response.json()).toEqual({ slug: 'ada', page: 0, size: 0, name: 'ws-ada' });
  expect(gated).toEqual(['/u/ada/api/thing']);
});

it('answers 405 for a method no operation of that path takes, and 404 for a path none has', async () => {
  const wrong = await fetch(`${base}/things`, { method: 'DELETE' });
  expect(wrong.status).toBe(405);
  expect(await wrong.json()).toEqual({ error: { code: 'method_not_allowed', message: 'This method is not allowed here.' } });
  const none = await fetch(`${base}/nothing`);
  expect(none.status).toBe(404);
});
