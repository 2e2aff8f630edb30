/**
 * The HTTP API as an OpenAPI 3.1 document, made from the list of operations (api/operations.ts):
 * their paths, callers, TypeBox schemas of queries and bodies, answers (the wire contract,
 * src/wire/schemas.ts) and error codes: every route of the admin API and of the student API,
 * `/healthz`, `/metrics` (text), `/auth/me` and this document itself. Served at `GET /openapi.json`
 * to anyone (api/resources/service.ts; it describes shapes, never data, and the source is public anyway), kept in the
 * repository as `docs/openapi.json` (`npm run openapi` writes it; a test fails when it is stale),
 * validated by a maintained OpenAPI validator in the tests, and every JSON answer the integration
 * tests receive is checked against it (test/helpers/contract.ts).
 */
import type { TSchema } from 'typebox';
import { ERROR_CODES, type ErrorCode } from '../src/error-codes.ts';
import { SERVICE } from '../src/package-info.ts';
import * as Wire from '../src/wire/schemas.ts';
import type { AnyOperation as Operation, Auth } from './operation.ts';
import { OPERATIONS } from './operations.ts';

export { OPERATIONS };

const SECURITY: Record<Auth, Record<string, string[]>[]> = {
  none: [],
  admin: [{ adminToken: [] }, { session: [] }],
  student: [{ session: [] }, { workspaceCookie: [] }],
  metrics: [{ metricsToken: [] }, { session: [] }],
  'signed-in': [{ session: [] }],
};

/** What every operation of a kind may give beside its own errors (see errorCodes). */
const KIND_ERRORS = {
  /** Any operation: a failure of ours; the database unreachable (from the session on: all but the health checks, which answer it themselves). */
  any: ['internal_error', 'database_unavailable'],
  /** One that changes state: it is rolled back past its deadline. */
  change: ['deadline_passed'],
  /** One with a query string. */
  query: ['validation_error'],
  /** One with a JSON body. */
  body: [
    'validation_error',
    'invalid_json',
    'bad_request',
    'payload_too_large',
    'unsupported_content_type',
    'unsupported_content_encoding',
    'unsupported_media_type',
  ],
  /** The admin gate (and the metrics gate, which is the admin gate without METRICS_TOKEN): wrong or no credentials, not an admin, too many wrong tokens. */
  admin: ['authentication_required', 'forbidden', 'too_many_requests'],
  /** An admin's state change with a session: the same-origin check. */
  adminChange: ['csrf_failed'],
  /**
   * The student API: not signed in, not this workspace; the path itself (path mode), and in host
   * mode a request from another site, a host that names no workspace, and who may pass not looked
   * up (a page for a browser's page load, 404 and 503).
   */
  student: ['authentication_required', 'forbidden', 'csrf_failed', 'invalid_path', 'not_found', 'unavailable'],
  signedIn: ['authentication_required'],
} satisfies Record<string, ErrorCode[]>;

/** What a path parameter that names a thing gives when there is no such thing (a user named wrongly: 400). */
const PARAMETER_ERRORS: Record<string, ErrorCode[]> = {
  workspaceId: ['workspace_not_found'],
  userId: ['user_not_found', 'validation_error'],
  runId: ['run_not_found'],
  requestId: ['help_request_not_found'],
  lessonId: ['lesson_not_found'],
  collectionId: ['collection_not_found'],
  name: ['backup_not_found'],
  entry: ['allowlist_entry_not_found'],
  // A student API's slug that is no workspace is refused as not theirs (403), whoever asks.
  slug: [],
};

/**
 * Every error code an operation may give: its own, and those of its kinds (KIND_ERRORS) and path
 * parameters (PARAMETER_ERRORS); not those of a status it answers itself (the health checks' 503).
 */
export function errorCodes(operation: Operation): ErrorCode[] {
  const kinds: ErrorCode[][] = [KIND_ERRORS.any];
  if (operation.method !== 'get') kinds.push(KIND_ERRORS.change);
  if (operation.query) kinds.push(KIND_ERRORS.query);
  if (operation.body) kinds.push(KIND_ERRORS.body);
  if (operation.auth === 'admin' || operation.auth === 'metrics') kinds.push(KIND_ERRORS.admin);
  if (operation.auth === 'admin' && operation.method !== 'get') kinds.push(KIND_ERRORS.adminChange);
  if (operation.auth === 'student') kinds.push(KIND_ERRORS.student);
  if (operation.auth === 'signed-in') kinds.push(KIND_ERRORS.signedIn);
  for (const [, name] of operation.path.matchAll(/\{(\w+)\}/g)) kinds.push(PARAMETER_ERRORS[name!] ?? []);
  kinds.push(operation.errors ?? []);
  return [...new Set(kinds.flat())].filter((code) => !(ERROR_CODES[code].status in operation.responses));
}

/** The error answers of an operation, by status: ErrorBody with `code` one of those it gives there, each described. */
function errorResponses(operation: Operation): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodes(operation).toSorted()) {
    const status = ERROR_CODES[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, unknown> = {};
  for (const [status, codes] of [...byStatus].toSorted(([a], [b]) => a - b)) {
    const page = operation.auth === 'student' && (status === 404 || status === 503);
    responses[status] = {
      description: codes.map((code) => `\`${code}\`: ${ERROR_CODES[code].description}`).join('\n\n'),
      ...((status === 429 || status === 503) && {
        headers: { 'Retry-After': { description: 'Seconds to wait before trying again.', schema: { type: 'integer', minimum: 0 } } },
      }),
      content: {
        'application/json': {
          schema: {
            allOf: [{ $ref: '#/components/schemas/ErrorBody' }, { properties: { error: { properties: { code: { type: 'string', enum: codes } } } } }],
          },
        },
        ...(page && {
          'text/html': { schema: { type: 'string', description: "On a workspace's host, for a browser's page load: a page that says what went wrong." } },
        }),
      },
    };
  }
  return responses;
}

/** The contract's schemas by name (each export of schemas.ts that is an object schema). */
function namedSchemas(): Map<TSchema, string> {
  const names = new Map<TSchema, string>();
  for (const [name, value] of Object.entries(Wire)) {
    if (typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'object') names.set(value, name);
  }
  return names;
}

/** The query schema's properties as OpenAPI parameters. */
function queryParameters(schema: object | undefined): object[] {
  if (!schema) return [];
  const { properties = {}, required = [] } = schema as { properties?: Record<string, object>; required?: string[] };
  return Object.entries(properties).map(([name, property]) => {
    // A default fills in a missing parameter: such a one is not required of the caller.
    const { default: fallback, ...rest } = property as { default?: unknown };
    return { name, in: 'query', required: required.includes(name) && fallback === undefined, schema: fallback === undefined ? rest : property };
  });
}

/** The OpenAPI 3.1 document of the API (see the file comment). */
export function openApiDocument(): Record<string, unknown> {
  const names = namedSchemas();
  const used = new Set<string>(['ErrorBody']);
  /** A schema with every named schema in it (itself included) as a reference to its component, marked used. */
  const ref = (schema: unknown, top = true): unknown => {
    const name = names.get(schema as TSchema);
    if (name && !top) {
      used.add(name);
      return { $ref: `#/components/schemas/${name}` };
    }
    if (Array.isArray(schema)) return schema.map((item) => ref(item, false));
    if (typeof schema !== 'object' || schema === null) return schema;
    return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, ref(value, false)]));
  };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of OPERATIONS) {
    const pathParameters = [...operation.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
    const responses: Record<string, unknown> = {};
    for (const [status, answer] of Object.entries(operation.responses)) {
      let content: Record<string, unknown> | undefined;
      if ('json' in answer) content = { 'application/json': { schema: ref(answer.json, false) } };
      else if ('text' in answer) content = { [answer.text]: { schema: { type: 'string' } } };
      else if ('events' in answer) content = { 'text/event-stream': { schema: { type: 'string', description: answer.events } } };
      else if ('file' in answer) content = { [answer.file]: { schema: { type: 'string', contentMediaType: answer.file } } };
      responses[status] = { description: answer.description, ...(content && { content }) };
    }
    Object.assign(responses, errorResponses(operation));
    (paths[operation.path] ??= {})[operation.method] = {
      operationId: `${operation.method}${operation.path.replace(/\{(\w+)\}/g, 'By-$1').replace(/[^a-zA-Z0-9]+(.)?/g, (_all, next: string | undefined) => (next ?? '').toUpperCase())}`,
      summary: operation.summary,
      tags: [operation.tag],
      security: SECURITY[operation.auth],
      parameters: [...pathParameters, ...queryParameters(operation.query)],
      ...(operation.body && { requestBody: { required: true, content: { 'application/json': { schema: operation.body } } } }),
      ...(operation.upload && {
        requestBody: {
          required: true,
          description: operation.upload.description,
          content: Object.fromEntries(operation.upload.types.map((type) => [type, { schema: { type: 'string', contentMediaType: type } }])),
        },
      }),
      responses,
    };
  }
  // Each component with the named schemas inside it as references (which may name more components).
  const schemas: Record<string, unknown> = {};
  for (let grew = true; grew;) {
    grew = false;
    for (const [schema, name] of names) {
      if (!used.has(name) || name in schemas) continue;
      schemas[name] = ref(schema);
      grew = true;
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Classroom workspaces control plane',
      version: SERVICE.version,
      description:
        'Errors are `{"error": {"code", "message"}}` with a stable snake_case code: each operation lists, by status, the codes it may give (the catalogue of every code, with its one status, is src/error-codes.ts). A request the server cannot read has no operation: 400 `bad_request`, 408 `request_timeout`, 431 `headers_too_large`. The student API is also served under the editor\'s own address: `/u/{slug}/.cp/api/...` in path mode, and `/.cp/api/...` on a workspace\'s host in host mode.',
    },
    // Relative: wherever this control plane is served (PUBLIC_URL).
    servers: [{ url: '/', description: 'This control plane, at its PUBLIC_URL.' }],
    tags: [
      { name: 'service', description: 'Health, metrics, this document, the signed-in user.' },
      { name: 'admin', description: 'The admin API: the bearer ADMIN_TOKEN, or a signed-in admin session (state changes need a same-origin request).' },
      { name: 'student', description: "A workspace's own API: its student (or an admin), signed in." },
    ],
    paths,
    components: {
      schemas,
      securitySchemes: {
        adminToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN (break-glass; optional).' },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN, when set.' },
        session: { type: 'apiKey', in: 'cookie', name: 'cp_session', description: 'The signed session cookie of a sign-in.' },
        workspaceCookie: { type: 'apiKey', in: 'cookie', name: '__Host-cp_ws', description: "Host mode: the workspace's own cookie on its host." },
      },
    },
  };
}

/** The document as served and as kept in docs/openapi.json: two-space JSON and a final newline. */
export const openApiText = (): string => `${JSON.stringify(openApiDocument(), null, 2)}\n`;
