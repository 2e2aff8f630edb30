/** Users: list, promote, demote (never the last admin), delete (with their workspace). */
import { presentUser } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

export const list = operation({
  method: 'get',
  path: '/admin/users',
  summary: 'Every user.',
  auth: 'admin',
  tag: 'admin',
  responses: { 200: json(Wire.UserList, 'The users.') },
  handle: async (_input, { store }) => ({ status: 200, body: { users: (await store.users.list()).map(presentUser) } }),
});

export const promote = operation({
  method: 'post',
  path: '/admin/users/{userId}/promote',
  summary: 'Makes the user an admin (audit `user.promote`).',
  auth: 'admin',
  tag: 'admin',
  responses: { 200: json(Wire.UserChange, 'The user, and whether anything changed.') },
  handle: async ({ actor, params }, { store }) => {
    const { user, changed } = await store.users.promote(actor, params.userId);
    return { status: 200, body: { user: presentUser(user), changed } };
  },
});

export const demote = operation({
  method: 'post',
  path: '/admin/users/{userId}/demote',
  summary: 'Takes admin away (audit `user.demote`); never from the last admin (409).',
  auth: 'admin',
  tag: 'admin',
  errors: ['last_admin'],
  responses: { 200: json(Wire.UserChange, 'The user, and whether anything changed.') },
  handle: async ({ actor, params }, { store }) => {
    const { user, changed } = await store.users.demote(actor, params.userId);
    return { status: 200, body: { user: presentUser(user), changed } };
  },
});

export const remove = operation({
  method: 'delete',
  path: '/admin/users/{userId}',
  summary: 'Deletes the user and their workspace (audit `user.delete`).',
  auth: 'admin',
  tag: 'admin',
  errors: ['last_admin'],
  responses: { 200: json(Wire.UserAnswer, 'The deleted user.') },
  handle: async ({ actor, params }, { store }) => ({ status: 200, body: { user: presentUser(await store.users.delete(actor, params.userId)) } }),
});
