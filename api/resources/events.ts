/** The panel's live events: what changed (so it reads again) and capacity refusals, as server-sent events. */
import { operation } from '../operation.ts';

export const stream = operation({
  method: 'get',
  path: '/admin/events',
  summary: 'Live events for the panel: `change` ({kind, id}) and `refusal` (a Refusal).',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: { events: 'Server-sent events.', description: 'The stream, until the admin may no longer read it.' } },
  handle: ({ ctx, user, sessionId }, { live }) => {
    // A stream that lives as long as the panel is open: no socket timeout, no buffering by a proxy in front.
    ctx.req.socket.setTimeout(0);
    ctx.set('X-Accel-Buffering', 'no');
    ctx.type = 'text/event-stream';
    // Signed in: it ends with the admin's role or session. The bearer token's ends with the server.
    ctx.body = live.open(user && sessionId ? { userId: user.id, sessionId } : undefined);
    return undefined;
  },
});
