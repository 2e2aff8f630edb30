/**
 * The allowlist: its entries (and the implicit SERVICE_ADMIN_EMAIL ones), add, remove. An edit is
 * answered once this server uses the new list (a sign-in link for an email just added is made at
 * once); other replicas apply it on its announcement.
 */
import Type from 'typebox';
import { AllowlistFormatError } from '../../src/allowlist/allowlist.ts';
import { ConflictError } from '../../src/errors.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

/** Runs an allowlist edit, turning a malformed file (someone is editing it by hand) into a 409. */
async function editAllowlist<T>(edit: () => Promise<T>): Promise<T> {
  try {
    return await edit();
  } catch (error) {
    if (error instanceof AllowlistFormatError) throw ConflictError('allowlist_file_invalid', `The allowlist file is not valid; fix it first. ${error.message}`);
    throw error;
  }
}

export const list = operation({
  method: 'get',
  path: '/admin/allowlist',
  summary: "The allowlist's entries and the SERVICE_ADMIN_EMAIL ones.",
  auth: 'admin',
  tag: 'admin',
  errors: ['allowlist_file_invalid'],
  responses: { 200: json(Wire.Allowlist, 'The allowlist.') },
  handle: async (_input, { store, implicitAllowlist }) => ({
    status: 200,
    body: { entries: await editAllowlist(() => store.allowlist.entries()), implicit: [...implicitAllowlist] },
  }),
});

export const add = operation({
  method: 'post',
  path: '/admin/allowlist',
  summary: 'Adds an email or a domain (audit `allowlist.add`).',
  auth: 'admin',
  tag: 'admin',
  body: Type.Object({ entry: Type.String({ minLength: 1, maxLength: 254 }) }, { additionalProperties: false }),
  errors: ['invalid_allowlist_entry', 'allowlist_file_invalid', 'allowlist_locked'],
  responses: { 200: json(Wire.AllowlistAdded, 'It was there already.'), 201: json(Wire.AllowlistAdded, 'Added.') },
  handle: async ({ actor, body }, { store, allowlistReload }) => {
    const result = await editAllowlist(() => store.allowlist.add(actor, body.entry));
    await allowlistReload();
    return { status: result.added ? 201 : 200, body: result };
  },
});

export const remove = operation({
  method: 'delete',
  path: '/admin/allowlist/{entry}',
  summary: 'Removes an entry (URL-encoded; audit `allowlist.remove`).',
  auth: 'admin',
  tag: 'admin',
  errors: ['invalid_allowlist_entry', 'allowlist_file_invalid', 'allowlist_locked'],
  responses: { 200: json(Wire.AllowlistRemoved, 'Removed.') },
  handle: async ({ actor, params }, { store, allowlistReload }) => {
    const result = await editAllowlist(() => store.allowlist.remove(actor, params.entry));
    await allowlistReload();
    return { status: 200, body: result };
  },
});
