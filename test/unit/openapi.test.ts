/**
 * The OpenAPI document: valid OpenAPI 3.1 by a maintained validator, free of errors by Redocly's
 * linter with its recommended rules, kept in the repository as it is built (docs/openapi.json;
 * `npm run openapi` writes it) with the panel's types that openapi-typescript makes of it
 * (api/panel/client/openapi.d.ts, by which the panel's every call is type-checked). Its routes are
 * the routers' by construction (both come from api/operations.ts). That the answers agree with it
 * is checked on every integration test's answers (test/helpers/contract.ts), and by the cases below.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { OPERATIONS, errorCodes, openApiDocument, openApiText } from '../../api/openapi.ts';
import { PROJECT_ROOT } from '../../src/config.ts';
import { ERROR_CODES, type ErrorCode } from '../../src/error-codes.ts';
import { AppError, NotFoundError } from '../../src/errors.ts';
import { checkAnswer } from '../helpers/contract.ts';
import { PANEL_TYPES, panelTypes } from '../../scripts/panel-types.ts';

const DOCUMENT = path.join(PROJECT_ROOT, 'docs/openapi.json');

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
  // A nullable request field is a string or null, in JSON Schema 2020-12 (POST /u/{slug}/api/workspace/import's branch).
  const body = JSON.stringify(document.paths['/u/{slug}/api/workspace/import']!.post);
  expect(body).toContain('"branch":{"anyOf":[{"type":"string","maxLength":200},{"type":"null"}]');
});

describe('errors in the contract (issue 42)', () => {
  type Responses = Record<string, { description: string; content?: Record<string, { schema: { allOf?: unknown[] } }> }>;
  const operations = () =>
    Object.entries((openApiDocument() as { paths: Record<string, Record<string, { responses: Responses }>> }).paths).flatMap(([template, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({ where: `${method.toUpperCase()} ${template}`, responses: operation.responses })),
    );
  /** The codes an error answer's schema allows. */
  const codesOf = (answer: Responses[string]) =>
    (answer.content?.['application/json']?.schema.allOf?.[1] as { properties: { error: { properties: { code: { enum: string[] } } } } } | undefined)?.properties
      .error.properties.code.enum;

  it('gives every code of the catalogue in some operation, or says where it is given instead (and only then)', () => {
    const given = new Set(OPERATIONS.flatMap(errorCodes));
    const catalogue = Object.entries(ERROR_CODES) as [ErrorCode, { outside?: string }][];
    expect(catalogue.filter(([code, entry]) => !given.has(code) && entry.outside === undefined).map(([code]) => code)).toEqual([]);
    expect(catalogue.filter(([code, entry]) => given.has(code) && entry.outside !== undefined).map(([code]) => code)).toEqual([]);
  });

  it('answers every error status of an operation with ErrorBody, its code one of those given there with that status, each described', () => {
    for (const { where, responses } of operations()) {
      expect([where, responses.default]).toEqual([where, undefined]);
      for (const [status, answer] of Object.entries(responses)) {
        const codes = codesOf(answer);
        if (codes === undefined) continue;
        expect([where, status, codes.map((code) => ERROR_CODES[code as ErrorCode].status)]).toEqual([where, status, codes.map(() => Number(status))]);
        for (const code of codes) expect(answer.description).toContain(`\`${code}\`: ${ERROR_CODES[code as ErrorCode].description}`);
      }
      // Every operation documents at least its own failure.
      expect([where, '500' in responses]).toEqual([where, true]);
    }
    const demote = operations().find(({ where }) => where === 'POST /admin/users/{userId}/demote')!.responses;
    expect(codesOf(demote['409']!)).toEqual(['last_admin']);
    expect(codesOf(demote['404']!)).toEqual(['user_not_found']);
    expect(codesOf(demote['403']!)).toEqual(['csrf_failed', 'forbidden']);
  });

  it('gives a code the status of the catalogue, whatever the throw site, and takes no code the catalogue lacks', () => {
    expect(NotFoundError('run_not_found', 'No run.')).toMatchObject({ status: 404, code: 'run_not_found', message: 'No run.' });
    expect(new AppError('at_capacity', 'Full.', { 'Retry-After': '60' })).toMatchObject({ status: 503, headers: { 'Retry-After': '60' } });
    // The CLI's form names the status too: it must be the catalogue's.
    expect(new AppError(409, 'not_draining', 'No.')).toMatchObject({ status: 409, code: 'not_draining' });
    // @ts-expect-error: a code the catalogue lacks does not compile.
    expect(() => new AppError('no_such_code', 'x')).toThrow(TypeError);
    // @ts-expect-error: nor does a status that is not the code's own.
    void new AppError(503, 'not_draining', 'No.');
    // @ts-expect-error: nor a code of another status than the factory's (run_active is 409).
    void NotFoundError('run_active', 'No.');
  });
});

it('is kept in docs/openapi.json as built (npm run openapi writes it)', () => {
  expect(readFileSync(DOCUMENT, 'utf8')).toBe(openApiText());
});

it("gives the panel the types openapi-typescript makes of it (npm run openapi writes them), which the panel's calls type-check against", () => {
  expect(readFileSync(PANEL_TYPES, 'utf8')).toBe(panelTypes(DOCUMENT));
});

it("has no error by Redocly's linter with its recommended rules", () => {
  const cli = path.join(PROJECT_ROOT, 'node_modules/@redocly/cli/bin/cli.js');
  const lint = spawnSync(process.execPath, [cli, 'lint', '--extends', 'recommended', '--format', 'json', DOCUMENT], {
    encoding: 'utf8',
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  });
  const report = JSON.parse(lint.stdout) as { totals: { errors: number }; problems: { ruleId: string; severity: string; message: string }[] };
  expect(report.problems.filter((problem) => problem.severity === 'error')).toEqual([]);
  expect(report.totals.errors).toBe(0);
  expect(lint.status).toBe(0);
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
    await expect(checkAnswer('GET', url('/admin/users'), json({ message: 'no' }, 403))).rejects.toThrow('the error body disagrees');
  });

  it('passes an error whose code the document lists for that operation and status, and fails any other', async () => {
    const error = (code: string, status: number) => json({ error: { code, message: 'No.' } }, status);
    await expect(checkAnswer('POST', url('/admin/users/x/demote'), error('last_admin', 409))).resolves.toBeUndefined();
    await expect(checkAnswer('POST', url('/admin/users/x/demote'), error('run_active', 409))).rejects.toThrow(
      'POST /admin/users/{userId}/demote answered 409 with code run_active, which the OpenAPI document does not list for it there (last_admin)',
    );
    await expect(checkAnswer('GET', url('/admin/users'), error('user_not_found', 404))).rejects.toThrow(
      'GET /admin/users answered 404, an error status the OpenAPI document does not list for it',
    );
  });

  it("passes a page for a browser's page load only where the document lists one", async () => {
    const page = (status: number) => new Response('<h1>No</h1>', { status, headers: { 'content-type': 'text/html; charset=utf-8' } });
    await expect(checkAnswer('GET', url('/.cp/api/workspace'), page(404))).resolves.toBeUndefined();
    await expect(checkAnswer('GET', url('/admin/users'), page(403))).rejects.toThrow('not the JSON error the document says');
  });

  it('checks the student API under the editor’s own address as the student API', async () => {
    const wrong = json({ run: { id: 'not a run' } });
    await expect(checkAnswer('GET', url('/u/ada/.cp/api/runs/x'), wrong)).rejects.toThrow('GET /u/{slug}/api/runs/{runId} answered 200');
  });

  it('lets pass what the document does not describe (an editor behind the proxy)', async () => {
    await expect(checkAnswer('GET', url('/u/ada/files'), json({ anything: true }))).resolves.toBeUndefined();
  });
});
