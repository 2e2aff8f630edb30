import type Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import { AllowlistFormatError } from '../../src/allowlist/allowlist.ts';
import { ConflictError } from '../../src/errors.ts';
import type { AuthState } from '../middleware/auth.ts';
import { jsonBody, validateBody, type BodyState } from '../middleware/validate.ts';
import type { AdminDeps } from '../admin.ts';
import type { Allowlist, AllowlistAdded, AllowlistRemoved } from '../../src/wire/schemas.ts';

interface AllowlistBody {
  entry: string;
}

export const allowlistSchema: JSONSchemaType<AllowlistBody> = {
  type: 'object',
  properties: { entry: { type: 'string', minLength: 1, maxLength: 254 } },
  required: ['entry'],
  additionalProperties: false,
};

/** Runs an allowlist edit, turning a malformed file (someone is editing it by hand) into a 409. */
async function editAllowlist<T>(edit: () => Promise<T>): Promise<T> {
  try {
    return await edit();
  } catch (error) {
    if (error instanceof AllowlistFormatError) throw ConflictError('allowlist_file_invalid', `The allowlist file is not valid; fix it first. ${error.message}`);
    throw error;
  }
}

/**
 * The allowlist: its entries (and the implicit SERVICE_ADMIN_EMAIL ones), add, remove. An edit is
 * answered once this server uses the new list (a sign-in link for an email just added is made at
 * once); other replicas apply it on its announcement.
 */
export function allowlistRoutes(router: Router<AuthState>, { store, implicitAllowlist, allowlistReload }: AdminDeps): void {
  router.get('/allowlist', async (ctx) => {
    const entries = await editAllowlist(() => store.allowlist.entries());
    ctx.body = { entries, implicit: [...implicitAllowlist] } satisfies Allowlist;
  });

  router.post('/allowlist', jsonBody(), validateBody(allowlistSchema), async (ctx) => {
    const { entry } = (ctx.state as BodyState<AllowlistBody>).body;
    const result = await editAllowlist(() => store.allowlist.add(ctx.state.actor!, entry));
    await allowlistReload();
    ctx.status = result.added ? 201 : 200;
    ctx.body = result satisfies AllowlistAdded;
  });

  router.delete('/allowlist/:entry', async (ctx) => {
    const result = await editAllowlist(() => store.allowlist.remove(ctx.state.actor!, ctx.params.entry!));
    await allowlistReload();
    ctx.body = result satisfies AllowlistRemoved;
  });
}
