/**
 * The contract test of every integration test: each JSON answer a test receives through `fetch`
 * from a control plane it runs (started through test/helpers/app.ts or server.ts) is checked against the OpenAPI document (api/openapi.ts), by its
 * operation (method and path template) and status: a documented 2xx by its schema, an error by
 * ErrorBody with a code among those the document lists for that operation and status (so the whole
 * suite checks that the lists are complete). A body that disagrees throws from that `fetch`, so the test that met it fails and says
 * which operation, which field and why. Installed for every test file by jest.config.js
 * (setupFilesAfterEnv); answers of paths the document does not describe (an editor through the
 * proxy, the panel, the sign-in pages) pass unchecked.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';

/** A documented error answer: the codes it may carry, and whether a page may stand for it (a browser's page load). */
interface ErrorAnswer {
  codes: readonly string[];
  page: boolean;
}

interface Compiled {
  method: string;
  template: string;
  pattern: RegExp;
  /** Validators of the documented JSON answers (2xx, 3xx and the health checks' own), by status: each compiled when first asked for. */
  statuses: Map<number, (() => ValidateFunction) | 'not json'>;
  /** The documented error answers, by status. */
  errors: Map<number, ErrorAnswer>;
}

let compiled: { operations: Compiled[]; error: ValidateFunction } | undefined;

/** The codes an error answer's schema allows (ErrorBody, its `code` narrowed to an enum: api/openapi.ts). */
function errorAnswer(content: Record<string, { schema: unknown }>): ErrorAnswer | undefined {
  const schema = content['application/json']?.schema as
    { allOf?: [{ $ref?: string }, { properties: { error: { properties: { code: { enum: string[] } } } } }] } | undefined;
  if (schema?.allOf?.[0].$ref !== '#/components/schemas/ErrorBody') return undefined;
  return { codes: schema.allOf[1].properties.error.properties.code.enum, page: 'text/html' in content };
}

/**
 * The document's operations with a validator for each JSON answer (loaded once per test file that
 * needs it; each validator compiled when an answer first needs it: compiling them all took about
 * 0.6 CPU-seconds in every file, where a file meets a few).
 */
async function contract(): Promise<NonNullable<typeof compiled>> {
  if (compiled) return compiled;
  const { OPERATIONS, openApiDocument } = await import('../../api/openapi.ts');
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  formats.default(ajv);
  const document = openApiDocument() as {
    components: { schemas: Record<string, unknown> };
    paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>;
  };
  ajv.addSchema({ $id: 'openapi', components: document.components });
  const refs = (schema: unknown): unknown =>
    JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"openapi#/components/schemas/')) as unknown;
  const { paths } = document;
  const operations = OPERATIONS.map((operation): Compiled => {
    const statuses: Compiled['statuses'] = new Map();
    const errors = new Map<number, ErrorAnswer>();
    for (const [status, answer] of Object.entries(paths[operation.path]![operation.method]!.responses)) {
      const error = answer.content && errorAnswer(answer.content);
      if (error) {
        errors.set(Number(status), error);
        continue;
      }
      const json = answer.content?.['application/json'];
      statuses.set(Number(status), json && operation.path !== '/openapi.json' ? once(() => ajv.compile(refs(json.schema) as object)) : 'not json');
    }
    const pattern = new RegExp(`^${operation.path.replace(/\{\w+\}/g, '[^/]+').replace(/\./g, '\\.')}$`);
    return { method: operation.method.toUpperCase(), template: operation.path, pattern, statuses, errors };
  });
  compiled = { operations, error: ajv.compile(refs({ $ref: '#/components/schemas/ErrorBody' }) as object) };
  return compiled;
}

/** `make`, called the first time only. */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

/**
 * The path as the document names it: the student API under the editor's own address
 * (`/u/<slug>/.cp/api/...` in path mode, `/.cp/api/...` on a workspace's host) is the same API.
 */
function documentedPath(url: URL): string {
  const path = url.pathname;
  const aliased = /^\/u\/([^/]+)\/\.cp\/api(\/.*)$/.exec(path);
  if (aliased) return `/u/${aliased[1]}/api${aliased[2]}`;
  if (path.startsWith('/.cp/api/')) return `/u/{host}/api${path.slice('/.cp/api'.length)}`;
  return path;
}

/** Checks one answer against the contract; throws naming what disagrees. */
export async function checkAnswer(method: string, url: URL, response: Response): Promise<void> {
  const { operations, error } = await contract();
  const path = documentedPath(url);
  const operation = operations.find((candidate) => candidate.method === method && candidate.pattern.test(path));
  if (!operation) return;
  const type = response.headers.get('content-type') ?? '';
  const where = `${method} ${operation.template} answered ${response.status}`;
  const documented = operation.statuses.get(response.status);
  if (response.status >= 400 && !documented) {
    const answer = operation.errors.get(response.status);
    if (!answer) throw new Error(`${where}, an error status the OpenAPI document does not list for it`);
    // A browser's page load may get a page that says what went wrong, where the document lists one.
    if (answer.page && type.startsWith('text/html')) return;
    if (!type.startsWith('application/json')) throw new Error(`${where} with ${type || 'no content type'}, not the JSON error the document says`);
    const body: unknown = await response.clone().json();
    if (!error(body))
      throw new Error(
        `${where}: the error body disagrees with ErrorBody: ${JSON.stringify(error.errors?.slice(0, 3))} in ${JSON.stringify(body).slice(0, 500)}`,
      );
    const { code } = (body as { error: { code: string } }).error;
    if (!answer.codes.includes(code)) {
      throw new Error(
        `${where} with code ${code}, which the OpenAPI document does not list for it there (${answer.codes.join(', ')}): add it to the operation's errors (api/openapi.ts)`,
      );
    }
    return;
  }
  if (response.status >= 300) return;
  if (!documented) throw new Error(`${where}, a status the OpenAPI document does not list for it`);
  if (documented === 'not json') return;
  const validate = documented();
  if (!type.startsWith('application/json')) throw new Error(`${where} with ${type || 'no content type'}, not JSON`);
  const body: unknown = await response.clone().json();
  if (!validate(body))
    throw new Error(
      `${where}: the body disagrees with the OpenAPI document: ${JSON.stringify(validate.errors?.slice(0, 3))} in ${JSON.stringify(body).slice(0, 2000)}`,
    );
}

/** The ports of the control planes the tests run now (an editor stand-in or an OIDC provider on loopback is not one). */
const controlPlanes = new Set<string>();

/** Checks the answers of the control plane at `url` from now on (test/helpers/app.ts and server.ts call it); returns how to stop. */
export function watchControlPlane(url: string): () => void {
  const { port } = new URL(url);
  controlPlanes.add(port);
  return () => controlPlanes.delete(port);
}

/** Whether a request goes to a control plane a test runs: its port, on loopback or a `*.localhost` name (a workspace's host). */
function local(url: URL): boolean {
  const loopback = url.hostname === '127.0.0.1' || url.hostname === 'localhost' || url.hostname.endsWith('.localhost');
  return loopback && controlPlanes.has(url.port);
}

/** Wraps the global fetch so that every answer from a local control plane is checked (see the file comment). */
export function checkEveryAnswer(): void {
  const plain = globalThis.fetch;
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await plain(input, init);
    const url = new URL(input instanceof Request ? input.url : input.toString());
    if (!local(url)) return response;
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    await checkAnswer(method, url, response);
    return response;
  };
}
