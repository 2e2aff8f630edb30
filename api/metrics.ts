import Router from '@koa/router';
import type { Metrics } from '../src/metrics.ts';
import { metricsGate } from './middleware/auth.ts';

/** `GET /metrics` in the Prometheus text format, behind the metrics gate. */
export function metricsRouter(metrics: Metrics, tokens: { metricsToken?: string; adminToken?: string }): Router {
  const router = new Router();
  router.get('/metrics', metricsGate(tokens.metricsToken, tokens.adminToken), async (ctx) => {
    ctx.set('Content-Type', metrics.registry.contentType);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await metrics.registry.metrics();
  });
  return router;
}
