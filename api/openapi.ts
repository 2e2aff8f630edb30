/**
 * The HTTP API as an OpenAPI 3.1 document, built from the wire contract (src/wire/schemas.ts) and
 * the request schemas beside the routes: every route of the admin API and of the student API,
 * `/healthz`, `/metrics` (text), `/auth/me` and this document itself. Served at `GET /openapi.json`
 * to anyone (api/openapi-route.ts; it describes shapes, never data, and the source is public anyway), kept in the
 * repository as `docs/openapi.json` (`npm run openapi` writes it; a test fails when it is stale),
 * validated by a maintained OpenAPI validator in the tests, and every JSON answer the integration
 * tests receive is checked against it (test/helpers/contract.ts).
 */
import Type, { type TSchema } from 'typebox';
import { ERROR_CODES, type ErrorCode } from '../src/error-codes.ts';
import { SERVICE } from '../src/package-info.ts';
import * as Wire from '../src/wire/schemas.ts';
import { allowlistSchema } from './admin/allowlist.ts';
import { auditLogQuerySchema } from './admin/audit.ts';
import { restoreSchema } from './admin/backups.ts';
import { capSchema } from './admin/config.ts';
import { linkSchema } from './admin/links.ts';
import { bulkStopSchema, workspacesQuerySchema } from './admin/live.ts';
import { runsQuerySchema } from './admin/runs.ts';
import { outputQuerySchema } from './run-output.ts';
import { importSchema } from './student.ts';

/** Who may call an operation. */
type Auth = 'none' | 'admin' | 'student' | 'metrics' | 'signed-in';

/** What an answer holds: a JSON body of a schema of the contract, text, an event stream, a file, or nothing. */
type Content = { json: TSchema } | { text: string } | { events: string } | { file: string } | { empty: true };

/** One operation of the API. */
export interface Operation {
  method: 'get' | 'post' | 'delete';
  /** The path template, OpenAPI style (`/admin/users/{userId}/promote`). */
  path: string;
  summary: string;
  auth: Auth;
  tag: 'admin' | 'student' | 'service';
  query?: object;
  body?: object;
  /** Answers by status: 2xx (and the 3xx of a redirect, and the health checks' own 404 and 503); errors are `errors`. */
  responses: Record<number, { description: string } & Content>;
  /**
   * The error codes it gives of its own (its handler and the store and services it calls), beside
   * those that every operation of its kind gives, which are derived (`errorCodes`).
   */
  errors?: ErrorCode[];
}

const json = (schema: TSchema, description: string) => ({ json: schema, description });

/** Every operation of the API (the order is the document's). */
export const OPERATIONS: Operation[] = [
  // Service
  {
    method: 'get',
    path: '/healthz',
    summary: 'Whether the control plane serves: the database answers and migrations ran.',
    auth: 'none',
    tag: 'service',
    responses: { 200: json(Wire.Health, 'Healthy.'), 503: json(Wire.Health, 'Not healthy: `failed` names the checks.') },
  },
  {
    method: 'get',
    path: '/readyz',
    summary:
      "Whether a load balancer should send this replica new connections (HAProxy's `http-check disable-on-404`): 404 while another replica stops and a newer one runs, so that the editors it lets go land on the newest.",
    auth: 'none',
    tag: 'service',
    responses: {
      200: json(Wire.Readiness, 'Ready.'),
      404: json(Wire.Readiness, 'Draining: keep its connections, send it no new ones.'),
      503: json(Wire.Readiness, 'Not ready: the database does not answer.'),
    },
  },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics (text exposition format).',
    auth: 'metrics',
    tag: 'service',
    responses: { 200: { text: 'text/plain; version=0.0.4', description: 'The metrics.' } },
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This document.',
    auth: 'none',
    tag: 'service',
    responses: { 200: { json: Type.Object({}, { description: 'An OpenAPI 3.1 document.' }), description: 'The OpenAPI 3.1 document.' } },
  },
  {
    method: 'get',
    path: '/auth/me',
    summary: 'The signed-in user.',
    auth: 'signed-in',
    tag: 'service',
    responses: { 200: json(Wire.UserAnswer, 'The user.') },
  },
  // Admin: the spec's endpoints
  {
    method: 'get',
    path: '/admin/status',
    summary: 'Every workspace with its containers (wanted and observed), the active build count and the capacity.',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.Status, 'The status.') },
  },
  {
    method: 'get',
    path: '/admin/config/max-active-containers',
    summary: 'The effective cap on running workspaces and its source.',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.Cap, 'The cap.') },
  },
  {
    method: 'post',
    path: '/admin/config/max-active-containers',
    summary: 'Stores the runtime override of the cap (audit `config.max-active-containers`); stops nothing.',
    auth: 'admin',
    tag: 'admin',
    body: capSchema,
    responses: { 200: json(Wire.CapChange, 'The new cap and the one before.') },
  },
  {
    method: 'get',
    path: '/admin/audit-log',
    summary: 'A page of audit entries, newest first: `before` is the cursor (the smallest id of the previous page).',
    auth: 'admin',
    tag: 'admin',
    query: auditLogQuerySchema,
    responses: { 200: json(Wire.AuditPage, 'The page.') },
  },
  {
    method: 'post',
    path: '/admin/workspaces/{workspaceId}/stop-containers',
    summary: 'Wants the workspace stopped (audit `container.stop`).',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.WorkspaceChangeAnswer, 'Already stopped.'), 202: json(Wire.WorkspaceChangeAnswer, 'Stopping.') },
  },
  {
    method: 'post',
    path: '/admin/workspaces/{workspaceId}/restart-code',
    summary: 'Asks for a fresh code container (audit `container.restart-code`).',
    auth: 'admin',
    tag: 'admin',
    errors: ['workspace_not_running'],
    responses: { 200: json(Wire.WorkspaceChangeAnswer, 'Observed as asked already.'), 202: json(Wire.WorkspaceChangeAnswer, 'Restarting.') },
  },
  // Admin: the panel's
  {
    method: 'get',
    path: '/admin/overview',
    summary: "What the panel's Overview shows.",
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.Overview, 'The overview.') },
  },
  {
    method: 'get',
    path: '/admin/workspaces',
    summary: 'A page of workspaces: searched, filtered, sorted and paged by the server, with counts by state.',
    auth: 'admin',
    tag: 'admin',
    query: workspacesQuerySchema,
    responses: { 200: json(Wire.WorkspacePage, 'The page.') },
  },
  {
    method: 'post',
    path: '/admin/workspaces/stop',
    summary: 'Stops each workspace that is wanted running (audit `container.stop` each).',
    auth: 'admin',
    tag: 'admin',
    body: bulkStopSchema,
    // A workspace deleted between its read and its stop.
    errors: ['workspace_not_found'],
    responses: { 200: json(Wire.BulkStop, 'Which were stopped and which skipped.') },
  },
  {
    method: 'get',
    path: '/admin/refusals',
    summary: 'Capacity refusals of the last hour.',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.RefusalList, 'The refusals.') },
  },
  {
    method: 'get',
    path: '/admin/events',
    summary: 'Live events for the panel: `change` ({kind, id}) and `refusal` (a Refusal).',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: { events: 'Server-sent events.', description: 'The stream, until the admin may no longer read it.' } },
  },
  {
    method: 'get',
    path: '/admin/users',
    summary: 'Every user.',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.UserList, 'The users.') },
  },
  {
    method: 'post',
    path: '/admin/users/{userId}/promote',
    summary: 'Makes the user an admin (audit `user.promote`).',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.UserChange, 'The user, and whether anything changed.') },
  },
  {
    method: 'post',
    path: '/admin/users/{userId}/demote',
    summary: 'Takes admin away (audit `user.demote`); never from the last admin (409).',
    auth: 'admin',
    tag: 'admin',
    errors: ['last_admin'],
    responses: { 200: json(Wire.UserChange, 'The user, and whether anything changed.') },
  },
  {
    method: 'delete',
    path: '/admin/users/{userId}',
    summary: 'Deletes the user and their workspace (audit `user.delete`).',
    auth: 'admin',
    tag: 'admin',
    errors: ['last_admin'],
    responses: { 200: json(Wire.UserAnswer, 'The deleted user.') },
  },
  {
    method: 'post',
    path: '/admin/sign-in-links',
    summary: 'A one-time sign-in link for an allowlisted email (audit `auth.sign-in-link`).',
    auth: 'admin',
    tag: 'admin',
    body: linkSchema,
    errors: ['invalid_email', 'not_allowlisted'],
    responses: { 201: json(Wire.SignInLinkAnswer, 'The link: the one time its URL is shown.') },
  },
  {
    method: 'get',
    path: '/admin/allowlist',
    summary: "The allowlist's entries and the SERVICE_ADMIN_EMAIL ones.",
    auth: 'admin',
    tag: 'admin',
    errors: ['allowlist_file_invalid'],
    responses: { 200: json(Wire.Allowlist, 'The allowlist.') },
  },
  {
    method: 'post',
    path: '/admin/allowlist',
    summary: 'Adds an email or a domain (audit `allowlist.add`).',
    auth: 'admin',
    tag: 'admin',
    body: allowlistSchema,
    errors: ['invalid_allowlist_entry', 'allowlist_file_invalid', 'allowlist_locked'],
    responses: { 200: json(Wire.AllowlistAdded, 'It was there already.'), 201: json(Wire.AllowlistAdded, 'Added.') },
  },
  {
    method: 'delete',
    path: '/admin/allowlist/{entry}',
    summary: 'Removes an entry (URL-encoded; audit `allowlist.remove`).',
    auth: 'admin',
    tag: 'admin',
    errors: ['invalid_allowlist_entry', 'allowlist_file_invalid', 'allowlist_locked'],
    responses: { 200: json(Wire.AllowlistRemoved, 'Removed.') },
  },
  {
    method: 'get',
    path: '/admin/backups',
    summary: 'The stored backups, newest first.',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.BackupList, 'The backups.') },
  },
  {
    method: 'get',
    path: '/admin/backups/{name}',
    summary: 'A stored backup, as a download.',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: { file: 'application/gzip', description: 'The backup file (tar.gz).' } },
  },
  {
    method: 'post',
    path: '/admin/workspaces/{workspaceId}/backup',
    summary: "Backs up the workspace's files (audit `workspace.backup`).",
    auth: 'admin',
    tag: 'admin',
    errors: ['backup_unrestorable', 'backup_unsupported_owner', 'volume_not_found'],
    responses: { 201: json(Wire.BackupAnswer, 'The stored backup.') },
  },
  {
    method: 'post',
    path: '/admin/workspaces/{workspaceId}/restore',
    summary: 'Restores a stored backup into the stopped workspace, keeping its files as a backup first (audit `workspace.restore`).',
    auth: 'admin',
    tag: 'admin',
    body: restoreSchema,
    errors: [
      'backup_not_found',
      'workspace_running',
      'backup_tampered',
      'backup_truncated',
      'backup_not_ours',
      'restore_not_kept',
      'restore_backup_failed',
      'restore_target_exists',
    ],
    responses: { 200: json(Wire.RestoreAnswer, 'Restored.') },
  },
  {
    method: 'get',
    path: '/admin/runs',
    summary: "The class's runs, newest first: by status, since a time, of one workspace.",
    auth: 'admin',
    tag: 'admin',
    query: runsQuerySchema,
    responses: { 200: json(Wire.ClassRunList, 'The runs.') },
  },
  {
    method: 'get',
    path: '/admin/runs/{runId}',
    summary: 'One run.',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.ClassRunAnswer, 'The run.') },
  },
  {
    method: 'get',
    path: '/admin/runs/{runId}/output',
    summary:
      "A run's output as server-sent events (`output` {offset, text}, then `end`, a RunEnd), resumable with Last-Event-ID; 429 with Retry-After past the bounds on open streams (per user, per run).",
    auth: 'admin',
    tag: 'admin',
    query: outputQuerySchema,
    errors: ['too_many_output_streams', 'run_output_streams_full'],
    responses: { 200: { events: 'Server-sent events.', description: 'The output, live until the run ends.' } },
  },
  {
    method: 'get',
    path: '/admin/runs/{runId}/output.txt',
    summary: "A run's whole kept output, as a file.",
    auth: 'admin',
    tag: 'admin',
    responses: { 200: { file: 'text/plain', description: 'The output.' } },
  },
  {
    method: 'post',
    path: '/admin/runs/{runId}/stop',
    summary: 'Stops a run (audit `run.stop`).',
    auth: 'admin',
    tag: 'admin',
    responses: { 200: json(Wire.ClassRunAnswer, 'It had ended.'), 202: json(Wire.ClassRunAnswer, 'Stopping.') },
  },
  // Student
  {
    method: 'get',
    path: '/u/{slug}/api/workspace',
    summary: "The workspace's state, when the idle sweep would stop it, and its newest run.",
    auth: 'student',
    tag: 'student',
    responses: { 200: json(Wire.StudentWorkspaceAnswer, 'The workspace.') },
  },
  {
    method: 'post',
    path: '/u/{slug}/api/workspace/open',
    summary: 'Opens the workspace: admission under the cap (503 `at_capacity` with Retry-After at the cap).',
    auth: 'student',
    tag: 'student',
    errors: ['at_capacity', 'workspace_not_found'],
    responses: { 200: json(Wire.OpenAnswer, 'It runs already.'), 202: json(Wire.OpenAnswer, 'Starting.') },
  },
  {
    method: 'post',
    path: '/u/{slug}/api/workspace/keep',
    summary: '"Keep working": the student is here; the idle count starts again.',
    auth: 'student',
    tag: 'student',
    responses: { 200: json(Wire.StudentWorkspaceAnswer, 'The workspace.') },
  },
  {
    method: 'post',
    path: '/u/{slug}/api/workspace/stop',
    summary: 'The student stops their workspace (audit `container.stop`); the files stay.',
    auth: 'student',
    tag: 'student',
    errors: ['workspace_not_found'],
    responses: { 200: json(Wire.StudentWorkspaceAnswer, 'The workspace.') },
  },
  {
    method: 'post',
    path: '/u/{slug}/api/runs',
    summary:
      'Starts a run (409 `run_active`, 409 `workspace_not_running`, 409 `home_disk_full` while the home is at HOME_DISK_LIMIT or cannot be measured in full).',
    auth: 'student',
    tag: 'student',
    errors: ['home_disk_full', 'workspace_not_running', 'run_active', 'workspace_not_found'],
    responses: { 202: json(Wire.RunAnswer, 'Queued.') },
  },
  {
    method: 'get',
    path: '/u/{slug}/api/runs',
    summary: "The workspace's recent runs, newest first.",
    auth: 'student',
    tag: 'student',
    responses: { 200: json(Wire.RunList, 'The runs.') },
  },
  {
    method: 'get',
    path: '/u/{slug}/api/runs/{runId}',
    summary: 'One run.',
    auth: 'student',
    tag: 'student',
    responses: { 200: json(Wire.RunAnswer, 'The run.') },
  },
  {
    method: 'get',
    path: '/u/{slug}/api/runs/{runId}/output',
    summary: "A run's output as server-sent events (as the admin's, bounds included).",
    auth: 'student',
    tag: 'student',
    query: outputQuerySchema,
    errors: ['too_many_output_streams', 'run_output_streams_full'],
    responses: { 200: { events: 'Server-sent events.', description: 'The output, live until the run ends.' } },
  },
  {
    method: 'get',
    path: '/u/{slug}/api/runs/{runId}/output.txt',
    summary: "A run's whole kept output, as a file.",
    auth: 'student',
    tag: 'student',
    responses: { 200: { file: 'text/plain', description: 'The output.' } },
  },
  {
    method: 'post',
    path: '/u/{slug}/api/runs/{runId}/stop',
    summary: 'Stops a run.',
    auth: 'student',
    tag: 'student',
    responses: { 200: json(Wire.RunAnswer, 'It had ended.'), 202: json(Wire.RunAnswer, 'Stopping.') },
  },
  {
    method: 'post',
    path: '/u/{slug}/api/runs/restart',
    summary:
      'Stops the active run (if any), waits for it to end, and starts a new one (409 `workspace_not_running`, `home_disk_full` before anything is stopped; 409 `run_stopping` when the run does not end within 30 s).',
    auth: 'student',
    tag: 'student',
    errors: ['workspace_not_running', 'home_disk_full', 'run_active', 'run_stopping', 'workspace_not_found'],
    responses: { 202: json(Wire.RestartAnswer, 'The new run, queued, and the run stopped first.') },
  },
  {
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
  },
  {
    method: 'post',
    path: '/u/{slug}/api/workspace/import',
    summary:
      "Starts an import of a team's git repository (https, an allowed host and address) into the home, replacing its project after a backup; follow it with GET. Refused at once: 400 `import_url_invalid`, `import_not_https`, `import_branch_invalid`, `import_subfolder_invalid`, `import_host_unknown`; 403 `import_host_refused`, `import_address_refused`; 409 as a reset; 429 `too_many_replacements`; 503 `imports_busy`.",
    auth: 'student',
    tag: 'student',
    body: importSchema,
    errors: [
      'import_url_invalid',
      'import_not_https',
      'import_branch_invalid',
      'import_subfolder_invalid',
      'import_host_unknown',
      'import_host_refused',
      'import_address_refused',
      'run_active',
      'workspace_running',
      'import_in_progress',
      'too_many_replacements',
      'imports_busy',
    ],
    responses: { 202: json(Wire.ImportAnswer, 'Started (phase `checking`).') },
  },
  {
    method: 'get',
    path: '/u/{slug}/api/workspace/import',
    summary:
      "The workspace's latest import: its phase and bytes, or how it ended (`error`: `import_redirect_invalid`, `import_not_git`, `import_repository_not_found`, `import_branch_not_found`, `import_empty`, `import_too_large`, `import_timeout`, `import_subfolder_not_found`, `import_subfolder_outside`, `import_link_outside`, `import_name_unsupported`, `import_unreachable`, the address errors for a redirect, ...).",
    auth: 'student',
    tag: 'student',
    responses: { 200: json(Wire.ImportAnswer, 'The latest import, or null.') },
  },
  {
    method: 'get',
    path: '/u/{slug}/api/sim/status',
    summary: "The active run's simulator alive probe (500 ms timeout).",
    auth: 'student',
    tag: 'student',
    responses: { 200: json(Wire.SimStatus, 'Alive or not, and why.') },
  },
];

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

/**
 * A request schema as OpenAPI 3.1 (JSON Schema 2020-12) writes it: ajv's `nullable: true` (an
 * OpenAPI 3.0 keyword that 3.1 dropped) becomes `null` among the types.
 */
function openApi31(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(openApi31);
  if (typeof schema !== 'object' || schema === null) return schema;
  const { nullable, ...rest } = schema as { nullable?: boolean; type?: unknown };
  const converted = Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, openApi31(value)])) as { type?: unknown };
  if (nullable === true && typeof converted.type === 'string') converted.type = [converted.type, 'null'];
  return converted;
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
      parameters: [...pathParameters, ...queryParameters(operation.query)].map((parameter) => openApi31(parameter)),
      ...(operation.body && { requestBody: { required: true, content: { 'application/json': { schema: openApi31(operation.body) } } } }),
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
