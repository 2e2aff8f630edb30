/**
 * One-time links in the browser: the first-run setup link (`/auth/setup/<token>`: whoever opens it
 * while no admin exists names themselves and becomes the first admin) and an operator's sign-in link
 * (`/auth/link/<token>`: signs in the allowlisted email it was made for, with or without an identity
 * provider). Opening a link shows a page; only its form's POST uses it, so a mail scanner or a chat
 * preview that fetches the link does not spend it.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { AppError } from '../../src/errors.ts';
import type { Logger } from '../../src/log.ts';
import type { Actor } from '../../src/store/audit.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import { assertSameOrigin, type AuthState, type Throttle } from '../middleware/auth.ts';
import { formBody } from '../middleware/validate.ts';
import { escapeHtml, page, type Routed } from './page.ts';
import { PANEL_PATH } from '../panel/index.ts';

export interface LinkRoutesDeps {
  store: SurfaceStore;
  publicOrigin: string;
  isAllowed: (email: string) => boolean;
  /** SERVICE_ADMIN_EMAIL, in stored form: admins when they first sign in. */
  adminEmails: readonly string[];
  /** Counts refused uses of links per client address. */
  failures: Throttle;
  log: Logger;
}

/** The setup link's page and form. */
const SETUP_LINK = '/auth/setup/:token';
/** An operator's sign-in link's page and form. */
const SIGN_IN_LINK = '/auth/link/:token';

/** The longest name the setup form takes. */
const MAX_NAME_LENGTH = 100;
/** Control and invisible format characters, which no name shown to others may hold. */
const HIDDEN = /[\p{Cc}\p{Cf}]/u;

/** An HTML answer no cache keeps and whose address (it holds the token) no other site is told. */
function html(ctx: Context, status: number, title: string, body: string): void {
  ctx.status = status;
  ctx.type = 'html';
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.body = page(title, body);
}

/** The page of a link that cannot be used, with a way on. */
function notValid(ctx: Context, status: number, message: string): void {
  html(
    ctx,
    status,
    'Link not valid',
    `<h1>This link cannot be used</h1><p class="error">${escapeHtml(message)}</p><a class="button" href="/auth/sign-in">Go to sign-in</a>`,
  );
}

const NOT_VALID = 'It was already used, it expired, or it was copied incompletely. Ask your coach (or the operator) for a new one.';

function setupForm(values: { name: string; email: string }, problem?: string): string {
  return `<h1>Set up the control plane</h1>
<p>No one is an admin yet. Whoever completes this form becomes the first admin: they can then let students in (the allowlist), manage workspaces and make other admins.</p>
${problem ? `<p class="error" role="alert">${escapeHtml(problem)}</p>` : ''}
<form method="post">
<p><label>Your name<br><input name="name" required maxlength="${MAX_NAME_LENGTH}" autocomplete="name" value="${escapeHtml(values.name)}"></label></p>
<p><label>Your email<br><input name="email" type="email" required autocomplete="email" value="${escapeHtml(values.email)}"></label></p>
<p class="note">Use the email you will sign in with later (through your school's identity provider, if one is configured): it is added to the allowlist.</p>
<button type="submit">Become the first admin</button>
</form>`;
}

/** The routes of the one-time links; see the module comment. */
export function linkRouter(deps: LinkRoutesDeps): Router<AuthState> {
  const router = new Router<AuthState>();
  const form = formBody();
  const { store, log } = deps;
  // These are pages: a refusal (another site's form, too many attempts, a body too large) is one too.
  router.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      if (error instanceof AppError) {
        ctx.set(error.headers);
        return notValid(ctx, error.status, error.message);
      }
      const status = (error as { status?: unknown }).status;
      if (typeof status !== 'number' || status < 400 || status >= 500) throw error;
      notValid(ctx, status, 'The form could not be read. Go back and try again.');
    }
  });

  /** Signs this browser in as `userId` in a new session (never the one it came with). */
  const signIn = async (ctx: Context, userId: string) => {
    await ctx.session!.regenerate();
    ctx.session!.userId = userId;
  };

  /** A refused use: counted against the address (429 once over the limit), then shown. */
  const refused = async (ctx: Context, status: number, message: string) => {
    await deps.failures.consume(ctx);
    notValid(ctx, status, message);
  };

  router.get<unknown, Routed<typeof SETUP_LINK>>(SETUP_LINK, async (ctx) => {
    if (!(await store.links.peek(ctx.params.token, 'setup'))) return refused(ctx, 410, `This setup link is not valid. ${NOT_VALID}`);
    html(ctx, 200, 'Set up', setupForm({ name: '', email: '' }));
  });

  router.post<unknown, Routed<typeof SETUP_LINK>>(SETUP_LINK, form, async (ctx) => {
    assertSameOrigin(ctx, deps.publicOrigin);
    const body = (ctx.request as { body?: Record<string, unknown> }).body ?? {};
    const values = { name: typeof body.name === 'string' ? body.name.trim() : '', email: typeof body.email === 'string' ? body.email.trim() : '' };
    const nameProblem =
      values.name === ''
        ? 'Enter your name.'
        : values.name.length > MAX_NAME_LENGTH
          ? `A name has at most ${MAX_NAME_LENGTH} characters.`
          : HIDDEN.test(values.name) || !values.name.isWellFormed()
            ? 'A name cannot hold control or invisible characters.'
            : undefined;
    if (nameProblem) return html(ctx, 400, 'Set up', setupForm(values, nameProblem));
    let email: string;
    try {
      email = await store.links.useSetup(ctx.params.token, values);
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      if (error.status === 400) return html(ctx, 400, 'Set up', setupForm(values, error.message));
      return refused(ctx, error.status, error.status === 410 ? `This setup link is not valid. ${NOT_VALID}` : error.message);
    }
    const actor: Actor = { id: null, email };
    // On the allowlist, so that the identity provider's sign-in admits them later too.
    try {
      await store.allowlist.add(actor, email);
    } catch (error) {
      log.warning({ error, email }, 'the first admin could not be added to the allowlist; add them by hand');
    }
    let { user } = await store.users.signIn({ email, name: values.name, admin: true });
    if (user.role !== 'admin') user = (await store.users.promote(actor, user.id)).user;
    await signIn(ctx, user.id);
    log.info({ userId: user.id, email }, 'first admin set up through the setup link');
    ctx.status = 303;
    ctx.redirect(`${PANEL_PATH}/`);
  });

  router.get<unknown, Routed<typeof SIGN_IN_LINK>>(SIGN_IN_LINK, async (ctx) => {
    const link = await store.links.peek(ctx.params.token, 'sign-in');
    if (!link) return refused(ctx, 410, `This sign-in link is not valid. ${NOT_VALID}`);
    html(
      ctx,
      200,
      'Sign in',
      `<h1>Sign in</h1><p>This one-time link signs you in as <strong>${escapeHtml(link.email!)}</strong>.</p>
<form method="post"><button type="submit">Sign in as ${escapeHtml(link.email!)}</button></form>
<p class="note">It works once, until ${escapeHtml(link.expiresAt.toISOString().replace('T', ' ').slice(0, 16))} UTC. Not you? Close this page.</p>`,
    );
  });

  router.post<unknown, Routed<typeof SIGN_IN_LINK>>(SIGN_IN_LINK, async (ctx) => {
    assertSameOrigin(ctx, deps.publicOrigin);
    const { token } = ctx.params;
    const link = await store.links.peek(token, 'sign-in');
    if (!link) return refused(ctx, 410, `This sign-in link is not valid. ${NOT_VALID}`);
    // Checked before the link is spent: taken off the allowlist since it was made, it stays unused.
    if (!deps.isAllowed(link.email!)) {
      log.info({ email: link.email }, 'sign-in link refused: email not on the allowlist');
      return notValid(ctx, 403, `${link.email!} is no longer on the allowlist. Ask your coach to add it again.`);
    }
    let email: string;
    try {
      email = await store.links.useSignIn(token);
    } catch (error) {
      if (error instanceof AppError && error.status === 410) return refused(ctx, 410, `This sign-in link is not valid. ${NOT_VALID}`);
      throw error;
    }
    const { user, created } = await store.users.signIn({ email, name: '', admin: deps.adminEmails.includes(email) });
    await signIn(ctx, user.id);
    log.info({ userId: user.id, email, created, role: user.role }, 'signed in with a sign-in link');
    ctx.status = 303;
    ctx.redirect('/');
  });

  return router;
}
