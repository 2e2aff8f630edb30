import Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import type { DataSource } from 'typeorm';
import { listAudit } from '../src/store/audit.ts';
import { getEffectiveCap, setCapOverride } from '../src/store/settings.ts';
import { adminGate, type AuthState } from './middleware/auth.ts';
import { jsonBody, validateBody, validateQuery, type BodyState, type QueryState } from './middleware/validate.ts';

/** The largest cap an admin may set; far above what one Docker host runs. */
export const MAX_CAP = 10000;

interface CapBody {
  value: number;
}

const capSchema: JSONSchemaType<CapBody> = {
  type: 'object',
  properties: { value: { type: 'integer', minimum: 0, maximum: MAX_CAP } },
  required: ['value'],
  additionalProperties: false,
};

interface AuditLogQuery {
  action?: string;
  actor?: string;
  before?: number;
  limit: number;
  since?: string;
  until?: string;
}

const auditLogQuerySchema = {
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

export interface AdminDeps {
  db: DataSource;
  adminToken: string | undefined;
  environmentCap: number;
}

/** The admin API under `/admin`, behind the admin gate. Handlers only edit desired state through the store. */
export function adminRouter(deps: AdminDeps): Router<AuthState> {
  const router = new Router<AuthState>({ prefix: '/admin' });
  router.use(adminGate(deps.adminToken));

  router.get('/config/max-active-containers', async (ctx) => {
    ctx.body = await getEffectiveCap(deps.db, deps.environmentCap);
  });

  router.post('/config/max-active-containers', jsonBody(), validateBody(capSchema), async (ctx) => {
    const { value } = (ctx.state as BodyState<CapBody>).body;
    const change = await setCapOverride(deps.db, ctx.state.actor!, value, deps.environmentCap);
    ctx.body = { value, source: 'override', previous: change.from };
  });

  router.get('/audit-log', validateQuery<AuditLogQuery>(auditLogQuerySchema), async (ctx) => {
    const { since, until, ...filter } = (ctx.state as QueryState<AuditLogQuery>).query;
    ctx.body = await listAudit(deps.db, {
      ...filter,
      since: since === undefined ? undefined : new Date(since),
      until: until === undefined ? undefined : new Date(until),
    });
  });

  return router;
}
