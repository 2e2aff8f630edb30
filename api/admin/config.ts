import type Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import { MAX_CAP } from '../../src/store/settings.ts';
import type { AuthState } from '../middleware/auth.ts';
import { jsonBody, validateBody, type BodyState } from '../middleware/validate.ts';
import type { AdminDeps } from '../admin.ts';
import type { Cap, CapChange } from '../../src/wire/schemas.ts';

interface CapBody {
  value: number;
}

export const capSchema: JSONSchemaType<CapBody> = {
  type: 'object',
  properties: { value: { type: 'integer', minimum: 0, maximum: MAX_CAP } },
  required: ['value'],
  additionalProperties: false,
};

/** The cap on running containers: read it, and set the runtime override. */
export function configRoutes(router: Router<AuthState>, { store }: AdminDeps): void {
  router.get('/config/max-active-containers', async (ctx) => {
    ctx.body = (await store.settings.cap()) satisfies Cap;
  });

  router.post('/config/max-active-containers', jsonBody(), validateBody(capSchema), async (ctx) => {
    const { value } = (ctx.state as BodyState<CapBody>).body;
    const change = await store.settings.setCap(ctx.state.actor!, value);
    ctx.body = { value, source: 'override', previous: change.from } satisfies CapChange;
  });
}
