/** The cap on running containers: read it, and set the runtime override. */
import Type from 'typebox';
import { MAX_CAP } from '../../src/store/settings.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

export const cap = operation({
  method: 'get',
  path: '/admin/config/max-active-containers',
  summary: 'The effective cap on running workspaces and its source.',
  auth: 'admin',
  tag: 'admin',
  responses: { 200: json(Wire.Cap, 'The cap.') },
  handle: async (_input, { store }) => ({ status: 200, body: await store.settings.cap() }),
});

export const setCap = operation({
  method: 'post',
  path: '/admin/config/max-active-containers',
  summary: 'Stores the runtime override of the cap (audit `config.max-active-containers`); stops nothing.',
  auth: 'admin',
  tag: 'admin',
  body: Type.Object({ value: Type.Integer({ minimum: 0, maximum: MAX_CAP }) }, { additionalProperties: false }),
  responses: { 200: json(Wire.CapChange, 'The new cap and the one before.') },
  handle: async ({ actor, body }, { store }) => {
    const change = await store.settings.setCap(actor, body.value);
    return { status: 200, body: { value: body.value, source: 'override' as const, previous: change.from } };
  },
});
