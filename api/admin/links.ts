import type Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import { MAX_SIGN_IN_LINK_TTL_MS } from '../../src/store/sign-in-links.ts';
import type { AdminDeps } from '../admin.ts';
import type { AuthState } from '../middleware/auth.ts';
import { jsonBody, validateBody, type BodyState } from '../middleware/validate.ts';
import { presentLink } from '../../src/wire/presenters.ts';
import type { SignInLinkAnswer } from '../../src/wire/schemas.ts';

interface LinkBody {
  email: string;
  expiresInMinutes?: number;
}

export const linkSchema: JSONSchemaType<LinkBody> = {
  type: 'object',
  properties: {
    email: { type: 'string', minLength: 1, maxLength: 254 },
    expiresInMinutes: { type: 'integer', minimum: 1, maximum: MAX_SIGN_IN_LINK_TTL_MS / 60_000, nullable: true },
  },
  required: ['email'],
  additionalProperties: false,
};

/** One-time sign-in links for allowlisted emails (for a demo, a class without an identity provider, or when the provider is down). */
export function linkRoutes(router: Router<AuthState>, { store, isAllowed, gate, linkMints }: AdminDeps): void {
  router.post('/sign-in-links', jsonBody(), validateBody(linkSchema), async (ctx) => {
    await linkMints.consume(ctx);
    const { email, expiresInMinutes } = (ctx.state as BodyState<LinkBody>).body;
    const link = await store.links.createSignIn(ctx.state.actor!, email, {
      isAllowed,
      ...(expiresInMinutes === undefined ? {} : { ttlMs: expiresInMinutes * 60_000 }),
    });
    ctx.status = 201;
    ctx.body = { link: presentLink(link, gate.publicOrigin) } satisfies SignInLinkAnswer;
  });
}
