/**
 * Joining with a join code in the browser (JOIN_CODES=on): `GET /join` shows a form (the code on the
 * board, a display name), `POST /join` makes a guest bound to the code (src/store/join-codes.ts),
 * signs this browser in as them in a new session, as a sign-in link does (api/pages/links.ts), and
 * sends them to their workspace page. A refused try shows the form again with one message, keeping
 * what was typed. With JOIN_CODES=off both answer 404 with a page that says so.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { AppError } from '../../src/errors.ts';
import type { Logger } from '../../src/log.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import { DISPLAY_NAME_MAX } from '../../src/store/join-codes.ts';
import { assertSameOrigin, type AuthState } from '../middleware/auth.ts';
import { formBody } from '../middleware/validate.ts';
import { escapeHtml, page } from './page.ts';

export interface JoinRoutesDeps {
  store: SurfaceStore;
  publicOrigin: string;
  /** JOIN_CODES=on. */
  enabled: boolean;
  /** Logger of `control.auth`. */
  log: Logger;
}

/** The page's path. */
export const JOIN_PATH = '/join';

/** An HTML answer no cache keeps. */
function html(ctx: Context, status: number, title: string, body: string): void {
  ctx.status = status;
  ctx.type = 'html';
  ctx.set('Cache-Control', 'no-store');
  ctx.body = page(title, body);
}

/** The form, with what was typed and the problem with it, if any. */
function joinForm(values: { code: string; name: string }, problem?: string): string {
  return `<h1>Join your class</h1>
<p>Type the join code your coach shows and the name your coach will see. You get a workspace of your own for as long as the code lasts.</p>
${problem ? `<p class="error" role="alert">${escapeHtml(problem)}</p>` : ''}
<form method="post" action="${JOIN_PATH}">
<p><label>Join code<br><input name="code" required autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="20" placeholder="ABCD-EFGH" value="${escapeHtml(values.code)}"></label></p>
<p><label>Your name<br><input name="name" required maxlength="${DISPLAY_NAME_MAX}" autocomplete="off" value="${escapeHtml(values.name)}"></label></p>
<button type="submit">Join</button>
</form>
<p class="note">Your work is kept until the code expires; then it is backed up for your coach and this workspace goes away.</p>`;
}

const OFF = 'Join codes are off on this server. Sign in with your school account, or ask your coach.';

/** The routes of `/join`; see the module comment. */
export function joinRouter(deps: JoinRoutesDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  const form = formBody();
  const { store, log } = deps;
  const off = (ctx: Context) =>
    html(
      ctx,
      404,
      'Join codes are off',
      `<h1>Join codes are off</h1><p class="error">${escapeHtml(OFF)}</p><a class="button" href="/auth/sign-in">Go to sign-in</a>`,
    );

  router.get(JOIN_PATH, (ctx) => {
    if (!deps.enabled) return off(ctx);
    html(ctx, 200, 'Join', joinForm({ code: '', name: '' }));
  });

  router.post(
    JOIN_PATH,
    async (ctx, next) => {
      if (!deps.enabled) return off(ctx);
      try {
        await next();
      } catch (error) {
        // A form from another site, or one that could not be read: a page too, never JSON.
        if (error instanceof AppError) {
          ctx.set(error.headers);
          return html(ctx, error.status, 'Join', joinForm({ code: '', name: '' }, error.message));
        }
        const status = (error as { status?: unknown }).status;
        if (typeof status !== 'number' || status < 400 || status >= 500) throw error;
        html(ctx, status, 'Join', joinForm({ code: '', name: '' }, 'The form could not be read. Try again.'));
      }
    },
    form,
    async (ctx) => {
      assertSameOrigin(ctx, deps.publicOrigin);
      const body = (ctx.request as { body?: Record<string, unknown> }).body ?? {};
      const values = { code: typeof body.code === 'string' ? body.code : '', name: typeof body.name === 'string' ? body.name : '' };
      let guest;
      try {
        guest = await store.joinCodes.join({ code: values.code, name: values.name, address: ctx.ip });
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        log.info({ address: ctx.ip, refused: error.code }, 'join refused');
        ctx.set(error.headers);
        return html(ctx, error.status, 'Join', joinForm({ code: values.code.slice(0, 20), name: values.name.slice(0, DISPLAY_NAME_MAX) }, error.message));
      }
      // A new session, never the one the browser came with (as every sign-in).
      await ctx.session!.regenerate();
      ctx.session!.userId = guest.userId;
      log.info({ userId: guest.userId, email: guest.email, joinCodeId: guest.code.id, slug: guest.workspace.slug }, 'a guest joined with a join code');
      ctx.status = 303;
      ctx.redirect(`/u/${guest.workspace.slug}/`);
    },
  );

  return router;
}
