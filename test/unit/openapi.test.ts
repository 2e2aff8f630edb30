// @lane local
/**
 * The OpenAPI document: valid OpenAPI 3.1 by a maintained validator, kept in the repository as it
 * is built (docs/openapi.json; `npm run openapi` writes it), and covering every route of the admin
 * and student APIs that the routers define, no more and no fewer. That the answers agree with it is
 * checked on every integration test's answers (test/helpers/contract.ts), and by the cases below.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import type Router from '@koa/router';
import { OPERATIONS, openApiDocument, openApiText } from '../../api/openapi.ts';
import { PROJECT_ROOT } from '../../src/config.ts';
import { checkAnswer } from '../helpers/contract.ts';

it('is a valid OpenAPI 3.1 document', async () => {
  const validator = new Validator();
  const result = await validator.validate(openApiDocument());
  expect(result.errors ?? []).toEqual([]);
  expect(result.valid).toBe(true);
  expect(validator.version).toBe('3.1');
});

it("speaks OpenAPI 3.1 only (issue 42): no 3.0 `nullable`, a server to send requests to, this document's own answer an object", () => {
  const document = openApiDocument() as {
    servers?: unknown[];
    paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: { type?: unknown } }> }> }>>;
  };
  expect(JSON.stringify(document)).not.toContain('"nullable"');
  expect(document.servers).toEqual([{ url: '/', description: expect.any(String) }]);
  expect(document.paths['/openapi.json']!.get!.responses['200']!.content!['application/json']!.schema.type).toBe('object');
  // A nullable request field is null among its types (POST /u/{slug}/api/workspace/import's branch).
  const body = JSON.stringify(document.paths['/u/{slug}/api/workspace/import']!.post);
  expect(body).toContain('"type":["string","null"]');
});

it('is kept in docs/openapi.json as built (npm run openapi writes it)', () => {
  expect(readFileSync(path.join(PROJECT_ROOT, 'docs/openapi.json'), 'utf8')).toBe(openApiText());
});

it("describes exactly the admin and student APIs' routes", async () => {
  // The routers as the app mounts them, read back from @koa/router's own table.
  const { adminRouter } = await import('../../api/admin.ts');
  const { studentRouter } = await import('../../api/student.ts');
  // Dependencies that are never called: building the routers reads a few of them.
  const none: object = new Proxy(() => undefined, { get: (_target, key) => (key === Symbol.toPrimitive ? undefined : none), apply: () => none });
  const routes = (router: Router) =>
    router.stack.flatMap((layer) =>
      layer.methods.filter((method) => method !== 'HEAD').map((method) => `${method} ${String(layer.path).replace(/:(\w+)/g, '{$1}')}`),
    );
  const mounted = [...routes(adminRouter(none as never) as unknown as Router), ...routes(studentRouter(none as never) as unknown as Router)];
  const documented = OPERATIONS.filter((operation) => operation.tag !== 'service').map((operation) => `${operation.method.toUpperCase()} ${operation.path}`);
  expect(documented.toSorted()).toEqual(mounted.toSorted());
});

describe('the contract check (test/helpers/contract.ts)', () => {
  const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  const url = (rest: string) => new URL(`http://127.0.0.1:1${rest}`);
  const user = { id: '00000000-0000-4000-8000-000000000001', name: '', email: 'ada@school.test', role: 'user', workspaceId: null, workspaceSlug: null };

  it('passes an answer that agrees with the document', async () => {
    await expect(checkAnswer('GET', url('/admin/users'), json({ users: [user] }))).resolves.toBeUndefined();
  });

  it('fails an answer with a field the document does not name, or without one it requires', async () => {
    await expect(checkAnswer('GET', url('/admin/users'), json({ users: [{ ...user, nickname: 'A' }] }))).rejects.toThrow(
      'GET /admin/users answered 200: the body disagrees with the OpenAPI document',
    );
    const { role: _role, ...roleless } = user;
    await expect(checkAnswer('GET', url('/admin/users'), json({ users: [roleless] }))).rejects.toThrow('the body disagrees');
  });

  it('fails a status the document does not list, and an error that is not the error body', async () => {
    await expect(checkAnswer('GET', url('/admin/users'), json({ users: [] }, 202))).rejects.toThrow('a status the OpenAPI document does not list');
    await expect(checkAnswer('GET', url('/admin/users'), json({ message: 'no' }, 404))).rejects.toThrow('the error body disagrees');
  });

  it('checks the student API under the editor’s own address as the student API', async () => {
    const wrong = json({ run: { id: 'not a run' } });
    await expect(checkAnswer('GET', url('/u/ada/.cp/api/runs/x'), wrong)).rejects.toThrow('GET /u/{slug}/api/runs/{runId} answered 200');
  });

  it('lets pass what the document does not describe (an editor behind the proxy)', async () => {
    await expect(checkAnswer('GET', url('/u/ada/files'), json({ anything: true }))).resolves.toBeUndefined();
  });
});
