import type { Middleware } from 'koa';
import type { Metrics } from '../../src/metrics.ts';
import { statusClass } from '../../src/request-histogram.ts';

/** The route label for requests that match no route, so raw paths never become label values. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Counts requests in flight and observes `http_request_duration_seconds` with the templated route
 * (`/u/:slug/api/sim/status`), read from the router after dispatch. Runs outermost, so it sees the
 * final status the error middleware set.
 */
export function requestMetrics(metrics: Metrics): Middleware {
  return async (ctx, next) => {
    metrics.httpRequestsInFlight.inc();
    const end = metrics.httpRequestDuration.startTimer();
    try {
      await next();
    } finally {
      metrics.httpRequestsInFlight.dec();
      const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      end({
        method: ctx.method,
        route: typeof route === 'string' ? route : UNMATCHED_ROUTE,
        status_class: statusClass(ctx.status),
      });
    }
  };
}
