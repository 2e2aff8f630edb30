/**
 * An operation of the HTTP API as one value: its method and path, who may call it, the TypeBox
 * schemas of its query and body, its answers by status, the error codes it gives of its own, and
 * its handler, which receives the validated, typed input and returns its answer. The routes
 * (`apiRouters`), their validation (ajv compiles the schemas, api/middleware/validate.ts) and the
 * OpenAPI document (api/openapi.ts) are all made from the list of operations (api/operations.ts):
 * adding an endpoint is adding one operation to its resource's file (api/resources/).
 */
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { Static, TSchema } from 'typebox';
import type { Backups } from '../src/backup/backups.ts';
import { LONG_REQUEST_MS } from '../src/caller.ts';
import type { ErrorCode } from '../src/error-codes.ts';
import { AuthenticationError } from '../src/errors.ts';
import type { HomeDiskLimit } from '../src/home-disk.ts';
import type { HomeFiles } from '../src/home-files.ts';
import type { Imports } from '../src/import/imports.ts';
import type { Lessons } from '../src/lessons/lessons.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import type { Actor } from '../src/store/audit.ts';
import type { SurfaceStore } from '../src/store/index.ts';
import type { UserRecord } from '../src/store/users.ts';
import type { WorkspaceRecord } from '../src/store/workspaces.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import { adminGate, metricsGate, type AuthState, type GateOptions, type Throttle } from './middleware/auth.ts';
import { longRequest } from './middleware/deadline.ts';
import { jsonBody, validateBody, validateQuery } from './middleware/validate.ts';
import type { Upstreams } from './proxy/upstreams.ts';
import type { RobotFields } from './proxy/robot-fields.ts';
import type { LiveEvents } from './streams/live.ts';
import type { RunOutputHub } from './streams/run-output.ts';

/** Who may call an operation: anyone, an admin (bearer ADMIN_TOKEN or session), a workspace's student (or an admin), the metrics gate, anyone signed in. */
export type Auth = 'none' | 'admin' | 'student' | 'metrics' | 'signed-in';

/** What an answer holds: a JSON body of a schema of the contract, text, an event stream, a file, or nothing. */
export type Content = { json: TSchema } | { text: string } | { events: string } | { file: string } | { empty: true };

/** An operation's answers by status: 2xx (and the health checks' own 404 and 503); its errors are `errors`. */
export type Responses = Record<number, { description: string } & Content>;

/** The path parameters a path template names (`/admin/users/{userId}` → `{ userId: string }`). */
export type PathParams<Path extends string> = Path extends `${string}{${infer Name}}${infer Rest}` ? { [K in Name]: string } & PathParams<Rest> : unknown;

/** A JSON answer of `schema` (an operation's `responses` entry). */
export const json = <T extends TSchema>(schema: T, description: string) => ({ json: schema, description });

/** What the caller is, by the operation's `auth`, as its gate established it. */
interface Callers {
  none: unknown;
  metrics: unknown;
  /** The actor the audit log records; the signed-in admin and their session (none with the bearer token). */
  admin: { actor: Actor; user: UserRecord | undefined; sessionId: string | undefined };
  /** The signed-in user (the workspace's own, or an admin) and the workspace named by the path's slug. */
  student: { user: UserRecord; workspace: WorkspaceRecord };
  'signed-in': { user: UserRecord };
}

/** What a handler receives: the path parameters, the validated query and body, the caller, and the request's context (for what streams or writes its own answer). */
export type Input<Path extends string, A extends Auth, Q, B> = {
  params: PathParams<Path>;
  query: Q extends TSchema ? Static<Q> : undefined;
  body: B extends TSchema ? Static<B> : undefined;
  ctx: Context;
} & Callers[A];

/**
 * What a handler returns: one of its documented answers, `{ status, body }` for JSON (or
 * `{ status, serialized }`, JSON written once and kept), `{ status }` for none; nothing for a
 * stream, a file or text, which it wrote to `ctx` itself.
 */
export type Answer<R extends Responses> =
  | { status: JsonStatus<R>; body: Static<JsonSchema<R>> }
  | { status: JsonStatus<R>; serialized: string }
  | { status: StatusOf<{ [S in keyof R]: R[S] extends { empty: true } ? S : never }[keyof R]> }
  | ({ [S in keyof R]: R[S] extends { json: TSchema } | { empty: true } ? never : S }[keyof R] extends never ? never : undefined | void);

/** The statuses whose answer is JSON. */
type JsonStatus<R extends Responses> = StatusOf<{ [S in keyof R]: R[S] extends { json: TSchema } ? S : never }[keyof R]>;

/** The schemas of the JSON answers. */
type JsonSchema<R extends Responses> = { [S in keyof R]: R[S] extends { json: infer T extends TSchema } ? T : never }[keyof R];

/** A status as a number literal, whether `responses` keyed it as a number or as the string of one. */
type StatusOf<S> = S extends `${infer N extends number}` ? N : S;

/** One operation of the API (see the file comment). */
export interface Operation<Path extends string = string, A extends Auth = Auth, Q = unknown, B = unknown, R extends Responses = Responses> {
  method: 'get' | 'post' | 'delete';
  /** The path template, OpenAPI style (`/admin/users/{userId}/promote`). */
  path: Path;
  summary: string;
  auth: A;
  tag: 'admin' | 'student' | 'service';
  /** The query string's schema: an object of scalar parameters (numbers coerced, defaults applied, others refused). */
  query?: Q;
  /** The JSON body's schema. */
  body?: B;
  /** A file sent as the body instead (the handler reads `ctx.req`): the media types it takes, and what it is. */
  upload?: { types: string[]; description: string };
  responses: R;
  /**
   * The error codes it gives of its own (its handler and the store and services it calls), beside
   * those that every operation of its kind gives, which are derived (api/openapi.ts's `errorCodes`).
   */
  errors?: ErrorCode[];
  /** Its answers are never cached (`Cache-Control: no-store`). */
  noStore?: boolean;
  /** It may take minutes (a backup, a restore): LONG_REQUEST_MS instead of the API's deadline. */
  long?: boolean;
  handle(input: Input<Path, A, Q, B>, deps: ApiDeps): Promise<Answer<R>> | Answer<R>;
}

/** An operation whatever its types, as the list holds it. */
// oxlint-disable-next-line typescript/no-explicit-any -- the list erases each operation's own input type; `operation` checked it.
export type AnyOperation = Operation<string, Auth, any, any>;

/** Declares an operation, checking its handler against its path, caller, schemas and answers. */
export function operation<
  Path extends string,
  A extends Auth,
  R extends Responses,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
>(declared: Operation<Path, A, Q, B, R>): AnyOperation {
  return declared as AnyOperation;
}

/** What the handlers use: the store and the services the composition root built (api/app.ts). */
export interface ApiDeps {
  store: SurfaceStore;
  metrics: Metrics;
  /** The origin browsers use (PUBLIC_URL, or the listening address). */
  publicOrigin: string;
  /** The admin gate's settings (ADMIN_TOKEN, the origin, the wrong-token throttle). */
  gate: GateOptions;
  /** METRICS_TOKEN, when set. */
  metricsToken: string | undefined;
  /** Whether the database answers, and whether this replica drains (for the health checks). */
  ping: () => Promise<void>;
  draining: () => Promise<boolean>;
  /** SERVICE_ADMIN_EMAIL: allowlisted implicitly, listed beside the file's entries. */
  implicitAllowlist: readonly string[];
  /** Who may sign in (the allowlist and SERVICE_ADMIN_EMAIL): sign-in links are made for them only. */
  isAllowed: (email: string) => boolean;
  /** Reads the allowlist again now (after an edit: what an answer says was done is what isAllowed then says). */
  allowlistReload: () => Promise<void>;
  /** Counts sign-in links made per client address. */
  linkMints: Throttle;
  /** Workspace backups (made, listed, restored, downloaded). */
  backups: Backups;
  /** The panel's live events and the recent capacity refusals. */
  live: LiveEvents;
  /** Live output of runs, for their output streams. */
  outputHub: RunOutputHub;
  /** The identity providers' names (none: students sign in by links only, which the Overview says). */
  providers: readonly string[];
  /** The bound on homes (HOME_DISK_LIMIT): how full each home is; a run is refused past it. */
  homeDisk: HomeDiskLimit;
  /** Gathers workspace activity (every student call but a read) for the idle sweep. */
  activity: ActivityRecorder;
  /** Logger of `control.containers`, where capacity refusals are reported. */
  containersLog: Logger;
  /** Host mode: where a workspace's editor is (its own origin); undefined in path mode, where it is `/u/<slug>/` itself. */
  editorUrl?: (slug: string) => string;
  /** Connections to simulators, each verified to reach the run's own (the alive probe). */
  upstreams: Upstreams;
  /** IDLE_STOP_MINUTES and IDLE_WARNING_MINUTES: when an idle workspace stops, and how long before the student is warned. */
  idleStopMinutes: number;
  idleWarningMinutes: number;
  /** Resets to the starter and imports of a team's project. */
  imports: Imports;
  /** Students' homes as a coach's look reads them (a folder, a file's start). */
  homeFiles: HomeFiles;
  /** Lessons made from uploads, and collections downloaded (what reaches homes is the lesson controller's). */
  lessons: Lessons;
  /** The robot's field of a run in progress, read from its simulator for a coach's look. */
  robotFields: RobotFields;
  /** LOOK_CONSENT: whether a coach's look begins at once or asks the student first. */
  lookConsent: 'always' | 'ask';
  /** JOIN_CODES=on: coaches may open join codes, and guests join with them. */
  joinCodes: boolean;
}

/** The request state the gates and validators leave (read only here, in the one adapter below). */
interface OperationState extends AuthState {
  workspace?: WorkspaceRecord;
  query?: unknown;
  body?: unknown;
}

/** The Koa path of a template (`{name}` → `:name`), under `prefix`. */
const koaPath = (path: string, prefix: string): string => path.slice(prefix.length).replace(/\{(\w+)\}/g, ':$1');

/** Requires a signed-in user (401 `authentication_required` otherwise). */
const signedIn: Middleware<AuthState> = async (ctx, next) => {
  if (!ctx.state.user) throw AuthenticationError('Not signed in.');
  await next();
};

/** The middleware that runs one operation: its own gate, long deadline and validation, then its handler, whose answer it writes. */
function stack(declared: AnyOperation, deps: ApiDeps): Middleware<OperationState>[] {
  const chain: Middleware<OperationState>[] = [];
  if (declared.auth === 'metrics') chain.push(metricsGate(deps.metricsToken, deps.gate));
  if (declared.auth === 'signed-in') chain.push(signedIn);
  if (declared.long) chain.push(longRequest(LONG_REQUEST_MS));
  if (declared.body) chain.push(jsonBody(), validateBody(declared.body as TSchema) as Middleware<OperationState>);
  if (declared.query) chain.push(validateQuery(declared.query as TSchema) as Middleware<OperationState>);
  chain.push(async (ctx) => {
    const { state } = ctx;
    if (declared.noStore) ctx.set('Cache-Control', 'no-store');
    const input = {
      params: ctx.params,
      query: state.query,
      body: state.body,
      ctx,
      actor: state.actor,
      user: state.user,
      sessionId: state.sessionId,
      workspace: state.workspace,
    };
    const answer = (await declared.handle(input, deps)) as { status: number; body?: unknown; serialized?: string } | undefined;
    if (answer === undefined) return;
    ctx.status = answer.status;
    if (answer.serialized !== undefined) {
      ctx.type = 'application/json';
      ctx.body = answer.serialized;
    } else if ('body' in answer) ctx.body = answer.body;
  });
  return chain;
}

/** A router of operations under `prefix`, behind `gate` (which runs for any path under it that a route matches). */
function routerOf(operations: AnyOperation[], deps: ApiDeps, prefix: string, gate?: Middleware<OperationState>): Router<OperationState> {
  const router = new Router<OperationState>(prefix === '' ? {} : { prefix: prefix.replace(/\{(\w+)\}/g, ':$1') });
  if (gate) router.use(gate);
  for (const declared of operations) router[declared.method](koaPath(declared.path, prefix), ...stack(declared, deps));
  return router;
}

/** The routes of a group of routers in turn, each answering 405 (with `Allow`) for a method it does not serve on a path it knows. */
function mounted(routers: Router<OperationState>[]): Middleware {
  const middleware = routers.flatMap((router) => [router.routes(), router.allowedMethods({ throw: true })] as Middleware[]);
  return (ctx, next) => {
    const run = async (index: number): Promise<void> => (index === middleware.length ? next() : middleware[index]!(ctx, () => run(index + 1)));
    return run(0);
  };
}

/** Where the routers of the API go in the application: `public` before the session (a monitor's answer does not depend on a cookie), `session` after it. */
export interface ApiRouters {
  public: Middleware;
  session: Middleware;
}

/**
 * The routes of every operation: the public ones (anyone may call: the health checks, this
 * document) before the session; the admin API under `/admin` behind the admin gate; a workspace's
 * student API under `/u/{slug}/api` behind `studentGate`; the others with their own gates.
 */
export function apiRouters(operations: AnyOperation[], deps: ApiDeps, studentGate: Middleware<OperationState>): ApiRouters {
  const by = (auth: Auth[]) => operations.filter((each) => auth.includes(each.auth));
  return {
    public: mounted([routerOf(by(['none']), deps, '')]),
    session: mounted([
      routerOf(by(['student']), deps, '/u/{slug}/api', studentGate),
      routerOf(by(['metrics', 'signed-in']), deps, ''),
      routerOf(by(['admin']), deps, '/admin', adminGate(deps.gate)),
    ]),
  };
}
