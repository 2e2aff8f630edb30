import type http from 'node:http';
import type { Duplex } from 'node:stream';
import Koa from 'koa';
import createSession from 'koa-session';
import type { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import type { Config } from '../src/config.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import { sessionStore } from '../src/store/sessions.ts';
import type { StoreContext } from '../src/store/workspaces.ts';
import { adminRouter } from './admin.ts';
import { authRoutes } from './auth.ts';
import { healthRouter } from './health.ts';
import { metricsRouter } from './metrics.ts';
import { loadUser, Throttle, type GateOptions } from './middleware/auth.ts';
import { errorMiddleware } from './middleware/errors.ts';
import { requestMetrics } from './middleware/request-metrics.ts';
import { parseWorkspacePath, PROXY_ROUTE, WorkspaceProxy } from './proxy.ts';
import { studentRouter } from './student.ts';

/** The session cookie's name. */
export const SESSION_COOKIE = 'cp_session';

/** Sign-in callbacks per client address per minute: a whole class behind one school NAT signs in at the start of a lesson. */
export const SIGN_IN_CALLBACKS_PER_MINUTE = 120;

/** How long a session lasts (renewed while in use). */
const SESSION_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

/** Who may sign in, as the auth routes need it. */
export interface AllowlistView {
  isAllowed(email: string): boolean;
}

export interface AppDeps {
  config: Config;
  store: StoreContext;
  metrics: Metrics;
  /** Logger of `control.http`. */
  log: Logger;
  /** Logger of `control.auth`. */
  authLog: Logger;
  /** The origin browsers use (PUBLIC_URL, or the listening address). */
  publicOrigin: string;
  sessionSecret: string;
  allowlist: AllowlistView;
  /** The allowlist file the admin API edits. */
  allowlistFile: AllowlistFile;
  /** Gathers workspace activity (proxied traffic, student API calls) for the idle sweep. */
  activity: ActivityRecorder;
}

/** The HTTP server's handlers: requests and WebSocket upgrades. */
export interface AppHandlers {
  /** The Koa application (everything but the proxy). */
  koa: Koa;
  request(req: http.IncomingMessage, res: http.ServerResponse): void;
  upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Releases the proxy's upstream connections and subscriptions. */
  close(): void;
}

/**
 * Builds the handlers of the HTTP server. Paths under `/u/<slug>/` (but its `api/`) go to the
 * workspace proxy, which streams and authorises on its own; a malformed `/u/` path is refused
 * there, in the canonical form in which it is routed. Everything else goes to the Koa application:
 * request metrics outermost (they see the final status), then the error middleware, the session
 * (PostgreSQL store) and the signed-in user, then one router per surface.
 */
export function createApp(deps: AppDeps): AppHandlers {
  const { config, store } = deps;
  const app = new Koa();
  app.silent = true;
  app.proxy = config.trustProxy;
  // Only the nearest proxy's word counts: a client's own X-Forwarded-For entries cannot pick its address.
  app.maxIpsCount = 1;
  app.keys = [deps.sessionSecret];
  app.use(requestMetrics(deps.metrics));
  app.use(errorMiddleware(deps.log));
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
        store: sessionStore(store.db),
      },
      app,
    ),
  );
  const adminEmails = config.serviceAdminEmails;
  const isAllowed = (email: string) => adminEmails.includes(email) || deps.allowlist.isAllowed(email);
  app.use(loadUser(store.db, isAllowed));
  const gate: GateOptions = { adminToken: config.adminToken, publicOrigin: deps.publicOrigin, failures: new Throttle(20, 300) };
  const auth = authRoutes({
      store,
      providers: config.providers,
      publicOrigin: deps.publicOrigin,
      isAllowed,
      adminEmails,
      callbacks: new Throttle(SIGN_IN_CALLBACKS_PER_MINUTE, 60),
      log: deps.authLog,
  });
  app.use(auth.grant);
  const student = studentRouter({ store, metrics: deps.metrics, activity: deps.activity, publicOrigin: deps.publicOrigin });
  app.use(student.routes());
  app.use(student.allowedMethods({ throw: true }));
  const routers = [auth.router, healthRouter(store.db), metricsRouter(deps.metrics, config.metricsToken, gate), adminRouter({ store, gate, allowlistFile: deps.allowlistFile, implicitAllowlist: adminEmails })];
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods({ throw: true }));
  }

  const proxy = new WorkspaceProxy({
    db: store.db,
    changes: store.changes,
    metrics: deps.metrics,
    activity: deps.activity,
    log: deps.log,
    publicOrigin: deps.publicOrigin,
    sessionCookie: SESSION_COOKIE,
    sessionSecret: deps.sessionSecret,
    trustProxy: config.trustProxy,
    timeoutMs: config.proxyTimeoutMs,
    isAllowed,
  });
  const koa = app.callback();
  return {
    koa: app,
    request(req, res) {
      const path = parseWorkspacePath(req.url ?? '/');
      if (path === undefined || ('slug' in path && path.api)) return void koa(req, res);
      if ('invalid' in path) return refuse(res, 400, 'invalid_path', path.invalid, deps.metrics, req.method);
      const target = req.url ?? '/';
      if (!target.startsWith(`/u/${path.slug}/`)) {
        // `/u/<slug>` without its slash: relative links of the editor need the slash.
        res.writeHead(301, { location: `/u/${path.slug}/${target.slice(3 + path.slug.length)}`, 'content-length': 0 });
        return void res.end();
      }
      proxy.request(req, res, path);
    },
    upgrade(req, socket, head) {
      const path = parseWorkspacePath(req.url ?? '/');
      if (path === undefined || ('slug' in path && path.api) || 'invalid' in path) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      void proxy.upgrade(req, socket, head, path);
    },
    close: () => proxy.close(),
  };
}

/** A JSON error for a request that never reaches a router, counted like the others. */
function refuse(res: http.ServerResponse, status: number, code: string, message: string, metrics: Metrics, method = 'GET'): void {
  const body = JSON.stringify({ error: { code, message } });
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
  metrics.httpRequestDuration.observe({ method, route: PROXY_ROUTE, status_class: `${Math.floor(status / 100)}xx` }, 0);
}
