import Koa from 'koa';
import createSession from 'koa-session';
import type { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import type { Config } from '../src/config.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { sessionStore } from '../src/store/sessions.ts';
import type { StoreContext } from '../src/store/workspaces.ts';
import { adminRouter } from './admin.ts';
import { authRoutes } from './auth.ts';
import { healthRouter } from './health.ts';
import { metricsRouter } from './metrics.ts';
import { loadUser, Throttle, type GateOptions } from './middleware/auth.ts';
import { errorMiddleware } from './middleware/errors.ts';
import { requestMetrics } from './middleware/request-metrics.ts';

/** The session cookie's name. */
export const SESSION_COOKIE = 'cp_session';

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
}

/**
 * Builds the Koa application: request metrics outermost (they see the final status), then the
 * error middleware, the session (PostgreSQL store) and the signed-in user, then one router per surface.
 */
export function createApp(deps: AppDeps): Koa {
  const { config, store } = deps;
  const app = new Koa();
  app.silent = true;
  app.proxy = config.trustProxy;
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
  app.use(loadUser(store.db));
  const gate: GateOptions = { adminToken: config.adminToken, publicOrigin: deps.publicOrigin, failures: new Throttle(20, 300) };
  const adminEmails = config.serviceAdminEmails;
  const auth = authRoutes({
      store,
      providers: config.providers,
      publicOrigin: deps.publicOrigin,
      isAllowed: (email) => adminEmails.includes(email) || deps.allowlist.isAllowed(email),
      adminEmails,
      callbacks: new Throttle(30, 60),
      log: deps.authLog,
  });
  app.use(auth.grant);
  const routers = [auth.router, healthRouter(store.db), metricsRouter(deps.metrics, config.metricsToken, gate), adminRouter({ store, gate, allowlistFile: deps.allowlistFile, implicitAllowlist: adminEmails })];
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods({ throw: true }));
  }
  return app;
}
