/** `GET /admin/audit-log` with the spec's filters and the panel's time range. */
import Type from 'typebox';
import { presentAuditPage } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

export const list = operation({
  method: 'get',
  path: '/admin/audit-log',
  summary: 'A page of audit entries, newest first: `before` is the cursor (the smallest id of the previous page).',
  auth: 'admin',
  tag: 'admin',
  query: Type.Object(
    {
      action: Type.Optional(Type.String({ maxLength: 200 })),
      actor: Type.Optional(Type.String({ maxLength: 200 })),
      // bigserial ids; the maximum keeps the cursor exact as a JSON number.
      before: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })),
      limit: Type.Integer({ minimum: 1, maximum: 500, default: 50 }),
      since: Type.Optional(Type.String({ format: 'date-time' })),
      until: Type.Optional(Type.String({ format: 'date-time' })),
    },
    { additionalProperties: false },
  ),
  responses: { 200: json(Wire.AuditPage, 'The page.') },
  handle: async ({ query: { since, until, ...filter } }, { store }) => {
    const page = await store.audit.list({
      ...filter,
      since: since === undefined ? undefined : new Date(since),
      until: until === undefined ? undefined : new Date(until),
    });
    return { status: 200, body: presentAuditPage(page) };
  },
});
