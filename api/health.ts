import Router from '@koa/router';
import { SERVICE } from '../src/package-info.ts';
import type { Health, Readiness } from '../src/wire/schemas.ts';

/** How long the database check may take before /healthz calls it failed. */
const CHECK_TIMEOUT_MS = 2000;

/**
 * `GET /healthz`, unauthenticated: 200 `{ok: true, service, version, checks}` when the database
 * answers (the server only serves after its migrations ran); otherwise 503 `{ok: false, ...,
 * failed: [names]}`. Check results are short words, never error details.
 */
export function healthRouter(ping: () => Promise<void>, draining: () => Promise<boolean>): Router {
  const router = new Router();
  router.get('/healthz', async (ctx) => {
    const database = await checkDatabase(ping);
    const checks = { database };
    const failed = Object.entries(checks)
      .filter(([, result]) => result !== 'ok')
      .map(([name]) => name);
    ctx.status = failed.length === 0 ? 200 : 503;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { ok: failed.length === 0, service: SERVICE.name, version: SERVICE.version, checks, ...(failed.length > 0 && { failed }) } satisfies Health;
  });
  /**
   * `GET /readyz`, unauthenticated, for a load balancer: 200 when it may send this replica new
   * connections; 404 while it should not (ServerStore.draining: another replica stops and a newer
   * one runs), its open connections kept; 503 when the database does not answer.
   */
  router.get('/readyz', async (ctx) => {
    const database = await checkDatabase(ping);
    const drains = database === 'ok' && (await draining().catch(() => false));
    ctx.status = database !== 'ok' ? 503 : drains ? 404 : 200;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { ready: ctx.status === 200, draining: drains, checks: { database } } satisfies Readiness;
  });
  return router;
}

async function checkDatabase(ping: () => Promise<void>): Promise<'ok' | 'unreachable' | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(resolve, CHECK_TIMEOUT_MS, 'timeout')));
  const query = ping().then(
    () => 'ok' as const,
    () => 'unreachable' as const,
  );
  try {
    return await Promise.race([query, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
