/**
 * Join codes (JOIN_CODES=on): a coach opens a code valid for 1 to 12 hours, with an optional label,
 * lists them with their guests, and closes one early (its expiry then follows: each guest's home
 * backed up, the guest removed; controllers/join-code-expiry.ts). Students join with a code on the
 * `/join` page (api/pages/join.ts). With JOIN_CODES=off every operation here but the setting's
 * answers 404 `join_codes_off`. The rules are the store's (src/store/join-codes.ts).
 */
import Type from 'typebox';
import { NotFoundError } from '../../src/errors.ts';
import { JOIN_CODE_MAX_HOURS, JOIN_CODE_MIN_HOURS, JOIN_LABEL_MAX } from '../../src/store/join-codes.ts';
import { presentJoinCode } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation, type ApiDeps } from '../operation.ts';

/** 404 `join_codes_off` unless JOIN_CODES=on. */
function assertOn(deps: ApiDeps): void {
  if (!deps.joinCodes) throw NotFoundError('join_codes_off', 'Join codes are off on this server: the operator sets JOIN_CODES=on to use them.');
}

/** The body of an open: its hours and an optional label. */
const openRequest = Type.Object(
  {
    hours: Type.Integer({
      minimum: JOIN_CODE_MIN_HOURS,
      maximum: JOIN_CODE_MAX_HOURS,
      description: `How long the code lets guests join and work: ${JOIN_CODE_MIN_HOURS} to ${JOIN_CODE_MAX_HOURS} whole hours.`,
    }),
    label: Type.Optional(
      Type.Union([Type.String({ maxLength: JOIN_LABEL_MAX }), Type.Null()], {
        description: `What the code is for (\`Outreach day\`), plain text, at most ${JOIN_LABEL_MAX} characters (trimmed; no control characters).`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const setting = operation({
  method: 'get',
  path: '/admin/config/join-codes',
  summary: 'Whether join codes are on (JOIN_CODES): the panel shows its Join codes page only then.',
  auth: 'admin',
  tag: 'admin',
  responses: { 200: json(Wire.JoinCodesSetting, 'The setting.') },
  handle: (_input, { joinCodes }) => ({ status: 200, body: { enabled: joinCodes } }),
});

export const open = operation({
  method: 'post',
  path: '/admin/join-codes',
  summary:
    'Opens a join code valid for `hours` (1 to 12), with an optional label (audit `join_code.open`): students type it on `/join` with a display name and get a guest workspace until it expires. 404 `join_codes_off` unless JOIN_CODES=on.',
  auth: 'admin',
  tag: 'admin',
  body: openRequest,
  errors: ['join_codes_off'],
  responses: { 201: json(Wire.JoinCodeAnswer, 'The code, open.') },
  handle: async ({ actor, body }, deps) => {
    assertOn(deps);
    return { status: 201, body: { code: presentJoinCode(await deps.store.joinCodes.open(actor, body)) } };
  },
});

export const list = operation({
  method: 'get',
  path: '/admin/join-codes',
  summary:
    'The 50 newest join codes, open and past, newest first, each with its guests now and the backups its expiry made. 404 `join_codes_off` unless JOIN_CODES=on.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  errors: ['join_codes_off'],
  responses: { 200: json(Wire.JoinCodeList, 'The codes.') },
  handle: async (_input, deps) => {
    assertOn(deps);
    return { status: 200, body: { codes: (await deps.store.joinCodes.list()).map(presentJoinCode) } };
  },
});

export const close = operation({
  method: 'post',
  path: '/admin/join-codes/{codeId}/close',
  summary:
    'Closes a join code early (audit `join_code.close`): no one joins with it any more, its guests are signed out, and its expiry follows (each guest backed up, then removed). A code expired or closed already is answered as it is. 404 `join_code_not_found`, `join_codes_off`.',
  auth: 'admin',
  tag: 'admin',
  errors: ['join_codes_off', 'join_code_not_found'],
  responses: { 200: json(Wire.JoinCodeAnswer, 'The code, closed.') },
  handle: async ({ actor, params }, deps) => {
    assertOn(deps);
    return { status: 200, body: { code: presentJoinCode(await deps.store.joinCodes.close(actor, params.codeId)) } };
  },
});
