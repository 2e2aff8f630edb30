import Router from '@koa/router';
import type { Metrics } from '../src/metrics.ts';
import { metricsGate, type GateOptions } from './middleware/auth.ts';

/** `GET /metrics` in the Prometheus text format, behind the metrics gate. */
export function metricsRouter(metrics: Metrics, metricsToken: string | undefined, gate: GateOptions): Router {
  const router = new Router();
  router.get('/metrics', metricsGate(metricsToken, gate), async (ctx) => {
    ctx.set('Content-Type', metrics.registry.contentType);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await metrics.registry.metrics();
  });
  return router;
}
