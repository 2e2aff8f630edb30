/**
 * The help queue. A student raises a hand from their workspace (`/u/{slug}/api/help`, with an
 * optional message), sees their place in the queue and the coach coming (GET, which their page and
 * editor poll: a place moves whenever anyone's request does, so there is nothing to push to one
 * student alone), and takes it back (`.../help/withdraw`). A coach lists the queue (`/admin/help`),
 * takes a request ("coming": the first coach wins, a second is told who) and resolves it. Each
 * change is audited (`help.request`, `help.take`, `help.resolve`; a withdrawal is the student's
 * own) and heard live by every open panel (a `help` change on `/admin/events`). Raises are limited
 * per workspace (HELP_RAISES_PER_WINDOW in HELP_RAISE_WINDOW_SECONDS); the store keeps the rules
 * (src/store/help.ts).
 */
import Type from 'typebox';
import { HELP_MESSAGE_MAX } from '../../src/store/help.ts';
import { presentHelpRequest, presentStudentHelp } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

/** The body of a raise: an optional message, plain text. */
const raiseRequest = Type.Object(
  {
    message: Type.Optional(
      Type.Union([Type.String({ maxLength: HELP_MESSAGE_MAX }), Type.Null()], {
        description: `What the student is stuck on, as plain text (at most ${HELP_MESSAGE_MAX} characters; trimmed; empty or absent: none).`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const raise = operation({
  method: 'post',
  path: '/u/{slug}/api/help',
  summary:
    'Raises a hand: a help request in the queue, with an optional message (audit `help.request`). 409 `help_request_open` while one is open; 429 `too_many_help_requests` past 5 raises in 10 minutes.',
  auth: 'student',
  tag: 'student',
  body: raiseRequest,
  errors: ['help_request_open', 'too_many_help_requests'],
  responses: { 201: json(Wire.StudentHelpAnswer, 'Raised: waiting, with its place in the queue.') },
  handle: async ({ workspace, user, body }, { store }) => {
    const raised = await store.help.raise({ id: user.id, email: user.email }, workspace, body.message);
    return { status: 201, body: { help: presentStudentHelp(raised) } };
  },
});

export const mine = operation({
  method: 'get',
  path: '/u/{slug}/api/help',
  summary: "The workspace's open help request (its place in the queue, the coach coming), or null.",
  auth: 'student',
  tag: 'student',
  noStore: true,
  responses: { 200: json(Wire.StudentHelpStatus, 'The open request, or null.') },
  handle: async ({ workspace }, { store }) => {
    const open = await store.help.openOf(workspace.id);
    return { status: 200, body: { help: open ? presentStudentHelp(open) : null } };
  },
});

export const withdraw = operation({
  method: 'post',
  path: '/u/{slug}/api/help/withdraw',
  summary: 'Takes the open help request back (waiting or taken); 404 `help_request_not_found` when none is open.',
  auth: 'student',
  tag: 'student',
  errors: ['help_request_not_found'],
  responses: { 200: json(Wire.StudentHelpAnswer, 'Withdrawn.') },
  handle: async ({ workspace, user }, { store }) => {
    const withdrawn = await store.help.withdraw({ id: user.id, email: user.email }, workspace.id);
    return { status: 200, body: { help: presentStudentHelp(withdrawn) } };
  },
});

export const queue = operation({
  method: 'get',
  path: '/admin/help',
  summary: 'The help queue: every request waiting or taken, oldest first, with its student, workspace, age, place and the coach who took it.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.HelpQueue, 'The queue.') },
  handle: async (_input, { store }) => ({ status: 200, body: { requests: (await store.help.queue()).map(presentHelpRequest) } }),
});

export const take = operation({
  method: 'post',
  path: '/admin/help/{requestId}/take',
  summary:
    'Takes a help request ("coming", audit `help.take`): the first coach wins; taking it again changes nothing. 409 `help_request_taken` (naming the coach) when another took it, `help_request_closed` when resolved or withdrawn.',
  auth: 'admin',
  tag: 'admin',
  errors: ['help_request_taken', 'help_request_closed'],
  responses: { 200: json(Wire.HelpRequestAnswer, 'Taken (by this coach).') },
  handle: async ({ actor, params }, { store }) => ({ status: 200, body: { request: presentHelpRequest(await store.help.take(actor, params.requestId)) } }),
});

export const resolve = operation({
  method: 'post',
  path: '/admin/help/{requestId}/resolve',
  summary: 'Resolves a help request, waiting or taken (audit `help.resolve`). 409 `help_request_closed` when it was resolved or withdrawn already.',
  auth: 'admin',
  tag: 'admin',
  errors: ['help_request_closed'],
  responses: { 200: json(Wire.HelpRequestAnswer, 'Resolved.') },
  handle: async ({ actor, params }, { store }) => ({ status: 200, body: { request: presentHelpRequest(await store.help.resolve(actor, params.requestId)) } }),
});
