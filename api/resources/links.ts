/** One-time sign-in links for allowlisted emails (for a demo, a class without an identity provider, or when the provider is down). */
import Type from 'typebox';
import { MAX_SIGN_IN_LINK_TTL_MS } from '../../src/store/sign-in-links.ts';
import { presentLink } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

export const create = operation({
  method: 'post',
  path: '/admin/sign-in-links',
  summary: 'A one-time sign-in link for an allowlisted email (audit `auth.sign-in-link`).',
  auth: 'admin',
  tag: 'admin',
  body: Type.Object(
    {
      email: Type.String({ minLength: 1, maxLength: 254 }),
      expiresInMinutes: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: MAX_SIGN_IN_LINK_TTL_MS / 60_000 }), Type.Null()])),
    },
    { additionalProperties: false },
  ),
  errors: ['invalid_email', 'not_allowlisted'],
  responses: { 201: json(Wire.SignInLinkAnswer, 'The link: the one time its URL is shown.') },
  handle: async ({ actor, body, ctx }, { store, isAllowed, linkMints, gate }) => {
    await linkMints.consume(ctx);
    const { email, expiresInMinutes } = body;
    const link = await store.links.createSignIn(actor, email, { isAllowed, ...(expiresInMinutes == null ? {} : { ttlMs: expiresInMinutes * 60_000 }) });
    return { status: 201, body: { link: presentLink(link, gate.publicOrigin) } };
  },
});
