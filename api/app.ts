import type http from 'node:http';
import type { Duplex } from 'node:stream';
import Koa from 'koa';
import createSession from 'koa-session';
import type { Backups } from '../src/backup/backups.ts';
import type { Config } from '../src/config.ts';
import { serviceAdmins } from '../src/allowlist/allowlist.ts';
import { categoryLogger, type Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { statusClass } from '../src/request-histogram.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import type { SurfaceStore } from '../src/store/index.ts';
import { ANONYMOUS_SESSION_TTL_MS, sessionDigest } from '../src/store/sessions.ts';
import { authRoutes } from './pages/auth.ts';
import { loadUser, Throttle, type GateOptions } from './middleware/auth.ts';
import { callerDeadline } from './middleware/deadline.ts';
import { errorMiddleware } from './middleware/errors.ts';
import { noFrames } from './middleware/frames.ts';
import { implementedMethodsOnly } from './middleware/methods.ts';
import type { ApiDeps, ApiRouters } from './operation.ts';
import { requestMetrics } from './middleware/request-metrics.ts';
import {
  EDITOR_API_PREFIX,
  GRANTED,
  type GrantedRequest,
  HANDOVER_PREFIX,
  isPagePath,
  isSimulatorSocket,
  parseWorkspacePath,
  PROXY_ROUTE,
  SLUG,
  WorkspaceHosts,
  WorkspaceProxy,
} from './proxy/index.ts';
import { HostModeProxy } from './proxy/host-mode.ts';
import { pagePresence, type PresenceTracker } from './proxy/presence.ts';
import { RobotFields } from './proxy/robot-fields.ts';
import { Upstreams } from './proxy/upstreams.ts';
import type { TunnelLimits } from './proxy/websocket.ts';
import type { RuntimeVolumes, RuntimeWorkloads } from '../src/docker/runtime.ts';
import { RESERVED_PREFIX } from './proxy/host.ts';
import { isDriverStationTarget } from './driver-station.ts';
import { panelRouter } from './panel/index.ts';
import { redirect, refuseUpgrade, sendError } from './responses.ts';
import { answerClientError } from './header-overflow.ts';
import { homeRouter } from './pages/home.ts';
import { joinRouter } from './pages/join.ts';
import { linkRouter } from './pages/links.ts';
import { LiveEvents } from './streams/live.ts';
import { RunOutputHub } from './streams/run-output.ts';
import { HomeFiles } from '../src/home-files.ts';
import { Lessons } from '../src/lessons/lessons.ts';
import { Imports } from '../src/import/imports.ts';
import { NotFoundError, ValidationError, type AppError } from '../src/errors.ts';

/** The session cookie's name. */
export const SESSION_COOKIE = 'cp_session';

/** Sign-in callbacks per client address per minute: a whole class behind one school NAT signs in at the start of a lesson. */
export const SIGN_IN_CALLBACKS_PER_MINUTE = 120;

/** Sign-in links an address may make through the admin API per hour (the CLI is not limited): a large class, one by one. */
const SIGN_IN_LINKS_PER_HOUR = 200;

/** How long a signed-in session lasts (renewed while in use); one without a user lasts ANONYMOUS_SESSION_TTL_MS, renewed by nothing. */
const SESSION_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

/** Who may sign in, as the auth routes need it. */
export interface AllowlistView {
  isAllowed(email: string): boolean;
  /** Calls `listener` after every reload of the list; returns the unsubscribe function (a fixed list has none). */
  onChange?(listener: () => void): () => void;
  /** Reads the list again now; resolves once the list in use is what was read (a fixed list has none). */
  reload?(): Promise<void>;
}

export interface AppDeps {
  config: Config;
  store: SurfaceStore;
  metrics: Metrics;
  /** The root logger; the app logs under `control.http`, `control.auth` and `control.containers`. */
  log: Logger;
  /** The origin browsers use (PUBLIC_URL, or the listening address). */
  publicOrigin: string;
  sessionSecret: string;
  allowlist: AllowlistView;
  /** Gathers workspace activity (proxied traffic, student API calls) for the idle sweep. */
  activity: ActivityRecorder;
  /** Workspace backups, for the admin API. */
  backups: Backups;
  /**
   * The engine, read only: where the live containers of editors and simulators serve (the proxy
   * connects to nothing else), and students' homes as a coach's look reads them (src/home-files.ts).
   */
  runtime: Pick<RuntimeWorkloads, 'serving'> & Pick<RuntimeVolumes, 'inspectHome'>;
  /** How many WebSocket tunnels may be open at once, per workspace and in all (see src/descriptors.ts). */
  tunnelLimits: TunnelLimits;
  /** This server's row in `servers`, for GET /readyz (none: never draining). */
  serverId?: string;
  /** Who is at each workspace as this replica sees it (editors, pages, NetworkTables, a Driver Station), for the class view; none: not counted. */
  presence?: PresenceTracker;
  /** The HALSim relay's watchdog, when a test gives another (api/proxy/halsim.ts: WATCHDOG_MS otherwise). */
  driverWatchdogMs?: number;
}

/** The HTTP server's handlers: requests and WebSocket upgrades. */
export interface AppHandlers {
  /** The HTTP server's 'request' listener (no `this`: it may be passed as it is). */
  request: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  /** The HTTP server's 'upgrade' listener (no `this` either). */
  upgrade: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** The HTTP server's 'clientError' listener: requests Node could not read (headers too large: a cookie bomb). */
  clientError: (error: Error, socket: Duplex) => void;
  /**
   * Ends what a request holds open for long (proxied WebSockets, the panel's and runs' event
   * streams) and refuses new WebSockets, so that the HTTP server can close while the other
   * requests finish: proxied HTTP is still forwarded (a shutdown's first step).
   */
  endStreams: () => void;
  /** Releases the proxy's upstream connections and subscriptions (once the HTTP server has closed). */
  close: () => void;
}

/**
 * Builds the handlers of the HTTP server. Paths under `/u/<slug>/` (but its `api/`) go to the
 * workspace proxy, which streams and authorises on its own; a malformed `/u/` path is refused
 * there, in the canonical form in which it is routed. In host mode (WORKSPACE_HOST), a request whose
 * Host is under the workspace domain goes to the proxy whatever its path (the workspace's own
 * origin: nothing of the control plane is served there), and so does `/auth/workspace/<slug>`, the
 * hand-over to it. Everything else goes to the Koa application: request metrics outermost (they
 * see the final status), then the error middleware, the session (PostgreSQL store) and the
 * signed-in user, then one router per surface.
 */
export function createApp(deps: AppDeps): AppHandlers {
  const { config, store } = deps;
  const httpLog = categoryLogger(deps.log, 'http');
  // Who becomes admin at their first sign-in, in the stored form of emails; who may sign in is the allowlist's rule (maySignIn).
  const adminEmails = serviceAdmins(config.serviceAdminEmails);
  const isAllowed = (email: string) => deps.allowlist.isAllowed(email);
  // The Koa application's handler, made below; the proxy hands it the student API of a workspace's host.
  let koa: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> = async () => undefined;
  const hosts = config.workspaceHost ? new WorkspaceHosts(config.workspaceHost, deps.publicOrigin, [SESSION_COOKIE, `${SESSION_COOKIE}.sig`]) : undefined;
  const upstreams = new Upstreams({
    runtime: deps.runtime,
    ports: { vscode: config.editorPort, nt4: config.nt4Port, halsim: config.halsimPort },
    connectTimeoutMs: Math.min(config.proxyTimeoutMs, 10_000),
    metrics: deps.metrics,
    log: httpLog,
  });
  const proxyDeps = {
    store,
    changes: store.changes,
    metrics: deps.metrics,
    activity: deps.activity,
    log: httpLog,
    publicOrigin: deps.publicOrigin,
    sessionCookie: SESSION_COOKIE,
    sessionSecret: deps.sessionSecret,
    trustProxy: config.trustProxy,
    timeoutMs: config.proxyTimeoutMs,
    upstreams,
    tunnelLimits: deps.tunnelLimits,
    isAllowed,
    presence: deps.presence,
    driverWatchdogMs: deps.driverWatchdogMs,
  };
  // Host mode's proxy serves the workspaces' own hosts too; path mode's only `/u/<slug>/`.
  const hostProxy = hosts ? new HostModeProxy({ ...proxyDeps, hosts, handoffs: store.handoffs }) : undefined;
  const proxy = hostProxy ?? new WorkspaceProxy(proxyDeps);
  const authLog = categoryLogger(deps.log, 'auth');
  const app = new Koa();
  app.silent = true;
  app.proxy = config.trustProxy;
  // Only the nearest proxy's word counts: a client's own X-Forwarded-For entries cannot pick its address.
  app.maxIpsCount = 1;
  app.keys = [deps.sessionSecret];
  app.use(requestMetrics(deps.metrics));
  app.use(noFrames());
  app.use(errorMiddleware(httpLog));
  app.use(implementedMethodsOnly());
  // A change made for a request whose client left, or past its deadline, is not committed.
  app.use(callerDeadline(httpLog));
  // The API's operations (api/operations.ts) are loaded at the first request: TypeBox, which their
  // schemas are written in, takes a fifth of a second to load, which the server's start does not wait for.
  let api: Promise<ApiRouters> | undefined;
  const operations = () =>
    (api ??= Promise.all([import('./operation.ts'), import('./operations.ts'), import('./resources/student.ts')]).then(
      ([{ apiRouters }, { OPERATIONS }, { studentGate }]) => apiRouters(OPERATIONS, apiDeps, studentGate(apiDeps)),
    ));
  // The health checks before the session: a monitor's answer does not depend on a cookie it sends (nor on the database answering for its session).
  app.use(async (ctx, next) => (await operations()).public(ctx, next));
  app.use(
    createSession(
      {
        key: SESSION_COOKIE,
        maxAge: SESSION_MAX_AGE_MS,
        renew: true,
        httpOnly: true,
        sameSite: 'lax',
        secure: deps.publicOrigin.startsWith('https:'),
        signed: true,
        // A session that ends (sign-out) ends what was handed over from it at once: its open editor WebSockets, its workspace cookies.
        store: {
          ...store.sessions.koa,
          destroy: async (key: string) => {
            await store.sessions.koa.destroy(key);
            store.changes.publishSignal('session_ended', sessionDigest(key));
          },
        },
        // A session without a signed-in user (a sign-in under way) is short-lived, its cookie too.
        beforeSave: (ctx: Koa.Context, session: { userId?: unknown }) => {
          ctx.sessionOptions.maxAge = typeof session.userId === 'string' ? SESSION_MAX_AGE_MS : ANONYMOUS_SESSION_TTL_MS;
        },
      },
      app,
    ),
  );
  app.use(loadUser(store.users, isAllowed, SESSION_COOKIE, (ctx) => (ctx.req as GrantedRequest)[GRANTED]));
  const gate: GateOptions = {
    adminToken: config.adminToken,
    publicOrigin: deps.publicOrigin,
    failures: new Throttle(store.rateLimits.limiter('admin_gate', 20, 300)),
  };
  const auth = authRoutes({
    users: store.users,
    providers: config.providers,
    publicOrigin: deps.publicOrigin,
    isAllowed,
    adminEmails,
    callbacks: new Throttle(store.rateLimits.limiter('sign_in_callbacks', SIGN_IN_CALLBACKS_PER_MINUTE, 60)),
    log: authLog,
  });
  app.use(auth.grant);
  // What an open admin panel hears without reloading (changes, capacity refusals).
  const outputHub = new RunOutputHub(store.changes, { limits: config.outputStreams, metrics: deps.metrics, log: categoryLogger(deps.log, 'runs') });
  const live = new LiveEvents(store.changes, store.refusals, async (userId) => (await store.users.get(userId))?.role === 'admin');
  // Resets and imports of students' projects (their clones killed when the server stops).
  const imports = new Imports({
    store,
    backups: deps.backups,
    limits: config.imports,
    dataDir: config.dataDir,
    log: categoryLogger(deps.log, 'imports'),
    metrics: deps.metrics,
  });
  // The robot's field as coaches' looks read it, from the runs' simulators.
  const robotFields = new RobotFields(upstreams, { log: httpLog });
  const apiDeps: ApiDeps = {
    store,
    metrics: deps.metrics,
    publicOrigin: deps.publicOrigin,
    gate,
    metricsToken: config.metricsToken,
    ping: store.ping,
    draining: () => (deps.serverId ? store.servers.draining(deps.serverId) : Promise.resolve(false)),
    implicitAllowlist: adminEmails,
    isAllowed,
    allowlistReload: () => deps.allowlist.reload?.() ?? Promise.resolve(),
    linkMints: new Throttle(store.rateLimits.limiter('link_mints', SIGN_IN_LINKS_PER_HOUR, 3600)),
    backups: deps.backups,
    live,
    outputHub,
    providers: config.providers.map((provider) => provider.label),
    homeDisk: config.homeDisk,
    activity: deps.activity,
    containersLog: categoryLogger(deps.log, 'containers'),
    editorUrl: hostProxy ? (slug) => hostProxy.editorUrl(slug) : undefined,
    upstreams,
    idleStopMinutes: config.idleStopMinutes,
    idleWarningMinutes: config.idleWarningMinutes,
    imports,
    lookConsent: config.lookConsent,
    robotFields,
    lessons: new Lessons({ lessons: store.lessons, dataDir: config.dataDir, maxBytes: config.lessonMaxBytes, imports }),
    joinCodes: config.joinCodes,
    homeFiles: new HomeFiles(deps.runtime, config.workspaceImage, (error) =>
      categoryLogger(deps.log, 'containers').warning({ error: error instanceof Error ? error.message : String(error) }, "a coach's look could not read a home"),
    ),
  };
  // The workspace page's polls of its workspace say that its student has it open (api/proxy/presence.ts).
  if (deps.presence) app.use(pagePresence(deps.presence));
  app.use(async (ctx, next) => (await operations()).session(ctx, next));
  const routers = [
    auth.router,
    panelRouter(),
    linkRouter({
      store,
      publicOrigin: deps.publicOrigin,
      isAllowed,
      adminEmails,
      failures: new Throttle(store.rateLimits.limiter('link_failures', 20, 300)),
      log: authLog,
    }),
    joinRouter({ store, publicOrigin: deps.publicOrigin, enabled: config.joinCodes, log: authLog }),
    homeRouter(),
  ];
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods({ throw: true }));
  }

  // An allowlist reload ends the open WebSockets of those it no longer admits.
  const stopFollowingAllowlist = deps.allowlist.onChange?.(() => proxy.allowlistChanged());
  // A sign-out on any replica (this one publishes its own at once; others' come as NOTIFY) ends what came with that session.
  const stopFollowingSessions = store.changes.subscribeSignal('session_ended', (digest) => {
    proxy.sessionEnded(digest);
    live.sessionEnded(digest);
  });
  koa = app.callback();
  return {
    request(req, res) {
      if (hosts && hostProxy) {
        const slug = hosts.slugOf(req.headers.host);
        if (slug !== undefined && (req.url ?? '').startsWith(EDITOR_API_PREFIX))
          return hostProxy.hostApi(req, res, slug, (granted, answer) => void koa(granted, answer));
        if (slug !== undefined) return hostProxy.hostRequest(req, res, slug);
        const handover = handoverSlug(req.url ?? '/');
        if (handover !== undefined) return hostProxy.handover(req, res, handover);
      }
      const path = parseWorkspacePath(req.url ?? '/');
      if (path === undefined || ('slug' in path && path.api)) return void koa(req, res);
      if ('invalid' in path) return refuse(res, ValidationError('invalid_path', path.invalid), deps.metrics, req.method);
      // The student API under the editor's own address too (the classroom extension finds it there in both modes).
      if (path.rest.startsWith(EDITOR_API_PREFIX)) {
        req.url = `/u/${path.slug}/api/${path.rest.slice(EDITOR_API_PREFIX.length)}`;
        return void koa(req, res);
      }
      if (path.rest.startsWith(RESERVED_PREFIX) && !isPagePath(path.rest) && !isDriverStationTarget(path.rest))
        return refuse(res, NotFoundError('not_found', 'Nothing is served here.'), deps.metrics, req.method);
      const target = req.url ?? '/';
      // `/u/<slug>` without its slash: relative links of the editor need the slash (the target begins `/u/<slug>`).
      if (target[3 + path.slug.length] !== '/') return redirect(res, `/u/${path.slug}/${target.slice(3 + path.slug.length)}`, 301);
      proxy.request(req, res, path);
    },
    upgrade(req, socket, head) {
      if (hosts && hostProxy) {
        const slug = hosts.slugOf(req.headers.host);
        if (slug !== undefined) return void hostProxy.hostUpgrade(req, socket, head, slug);
        return refuseUpgrade(socket, NotFoundError('not_found', "WebSocket connections are served only on a workspace's own host."));
      }
      const path = parseWorkspacePath(req.url ?? '/');
      if (path === undefined || ('slug' in path && path.api) || 'invalid' in path) {
        return refuseUpgrade(socket, NotFoundError('not_found', 'WebSocket connections are served only under a workspace.'));
      }
      if (path.rest.startsWith(RESERVED_PREFIX) && !isSimulatorSocket(path.rest))
        return refuseUpgrade(socket, NotFoundError('not_found', 'There is no WebSocket here.'));
      void proxy.upgrade(req, socket, head, path);
    },
    clientError(error, socket) {
      answerClientError(error, socket, [SESSION_COOKIE, `${SESSION_COOKIE}.sig`], (request) =>
        httpLog.warning(request, 'refused a request whose headers are too large (too many or too large cookies?) with a page that clears them'),
      );
    },
    endStreams: () => {
      proxy.endTunnels();
      live.close();
      outputHub.endStreams();
      imports.stop();
      robotFields.close();
    },
    close: () => {
      stopFollowingAllowlist?.();
      stopFollowingSessions();
      proxy.close();
      live.close();
      outputHub.close();
      robotFields.close();
    },
  };
}

/** The slug of a hand-over path, `/auth/workspace/<slug>` with any query (host mode), or undefined for any other path. */
function handoverSlug(target: string): string | undefined {
  if (!target.startsWith(HANDOVER_PREFIX)) return undefined;
  const path = target.split('?', 1)[0]!.slice(HANDOVER_PREFIX.length);
  return SLUG.test(path) ? path : undefined;
}

/** A JSON error for a request that never reaches a router, counted like the others. */
function refuse(res: http.ServerResponse, error: AppError, metrics: Metrics, method = 'GET'): void {
  sendError(res, error);
  metrics.httpRequestDuration.observe({ method, route: PROXY_ROUTE, status_class: statusClass(error.status) }, 0);
}
