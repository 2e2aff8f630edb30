import type Router from '@koa/router';
import type { AuthState } from '../middleware/auth.ts';
import { validateQuery, type QueryState } from '../middleware/validate.ts';
import { presentAuditPage } from '../../src/wire/presenters.ts';
import type { AdminDeps } from '../admin.ts';
import type { AuditPage } from '../../src/wire/schemas.ts';

interface AuditLogQuery {
  action?: string;
  actor?: string;
  before?: number;
  limit: number;
  since?: string;
  until?: string;
}

export const auditLogQuerySchema = {
  type: 'object',
  properties: {
    action: { type: 'string', maxLength: 200 },
    actor: { type: 'string', maxLength: 200 },
    // bigserial ids; the maximum keeps the cursor exact as a JSON number.
    before: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 },
    since: { type: 'string', format: 'date-time' },
    until: { type: 'string', format: 'date-time' },
  },
  required: ['limit'],
  additionalProperties: false,
};

/** `GET /admin/audit-log` with the spec's filters and the panel's time range. */
export function auditRoutes(router: Router<AuthState>, { store }: AdminDeps): void {
  router.get('/audit-log', validateQuery<AuditLogQuery>(auditLogQuerySchema), async (ctx) => {
    const { since, until, ...filter } = (ctx.state as QueryState<AuditLogQuery>).query;
    const page = await store.audit.list({
      ...filter,
      since: since === undefined ? undefined : new Date(since),
      until: until === undefined ? undefined : new Date(until),
    });
    ctx.body = presentAuditPage(page) satisfies AuditPage;
  });
}
