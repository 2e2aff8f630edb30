import Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import type { DataSource } from 'typeorm';
import { getEffectiveCap, setCapOverride } from '../src/store/settings.ts';
import { adminGate, type AuthState } from './middleware/auth.ts';
import { jsonBody, validateBody, type BodyState } from './middleware/validate.ts';

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

  return router;
}
