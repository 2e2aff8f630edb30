import Koa from 'koa';
import type { Config } from '../src/config.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import type { StoreContext } from '../src/store/workspaces.ts';
import { adminRouter } from './admin.ts';
import { healthRouter } from './health.ts';
import { metricsRouter } from './metrics.ts';
import { errorMiddleware } from './middleware/errors.ts';
import { requestMetrics } from './middleware/request-metrics.ts';

export interface AppDeps {
  config: Config;
  store: StoreContext;
  metrics: Metrics;
  log: Logger;
}

/**
 * Builds the Koa application: request metrics outermost (they see the final status), then the
 * error middleware, then one router per surface.
 */
export function createApp(deps: AppDeps): Koa {
  const app = new Koa();
  app.silent = true;
  app.use(requestMetrics(deps.metrics));
  app.use(errorMiddleware(deps.log));
  const routers = [
    healthRouter(deps.store.db),
    metricsRouter(deps.metrics, { metricsToken: deps.config.metricsToken, adminToken: deps.config.adminToken }),
    adminRouter({ store: deps.store, adminToken: deps.config.adminToken }),
  ];
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods({ throw: true }));
  }
  return app;
}
