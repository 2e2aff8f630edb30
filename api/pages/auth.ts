import Router from '@koa/router';
import grantModule from 'grant';
import type { Context, Middleware } from 'koa';
import type { ProviderConfig } from '../../src/config.ts';
import { discoverOidc, fetchIdentity, IdentityError, type OidcEndpoints } from '../../src/identity/providers.ts';
import { safeReturnTo } from '../../src/identity/return-to.ts';
import type { Logger } from '../../src/log.ts';
import type { UserStore } from '../../src/store/users.ts';
import { assertSameOrigin, type AuthState, type Throttle } from '../middleware/auth.ts';
import { escapeHtml, page, type Routed } from './page.ts';

// grant's typings declare an ES default export, but the package is `module.exports = grant`.
const grant = grantModule as unknown as (typeof grantModule)['default'];

/** Where grant's own routes live: `/connect/<provider>` and `/connect/<provider>/callback` (the redirect URI). */
export const GRANT_PREFIX = '/connect';
/** Where a sign-in with a provider starts (`/auth/start/google`). */
const START = '/auth/start/:provider';
/** Where grant sends the browser back with the provider's answer (grant's `callback`, grantConfig). */
const CALLBACK = '/auth/callback/:provider';

export interface AuthDeps {
  users: UserStore;
  providers: ProviderConfig[];
  publicOrigin: string;
  /** Whether an email may sign in (the allowlist, plus SERVICE_ADMIN_EMAIL). */
  isAllowed: (email: string) => boolean;
  /** SERVICE_ADMIN_EMAIL, lower-case: admins at first sign-in. */
  adminEmails: readonly string[];
  /** Counts failing sign-in callbacks per client address (see the callback). */
  callbacks: Throttle;
  /** Logger of `control.auth`. */
  log: Logger;
}

/** The grant response our callback reads from the session (session transport; never in a URL). */
interface GrantResponse {
  access_token?: string;
  error?: unknown;
}

const SCOPES: Record<ProviderConfig['name'], string[]> = {
  github: ['read:user', 'user:email'],
  google: ['openid', 'email', 'profile'],
  oidc: ['openid', 'email', 'profile'],
};

/** grant's configuration: session transport, state and PKCE on, dynamic overrides off, tokens only. */
function grantConfig(deps: AuthDeps, oidc: OidcEndpoints | undefined): Record<string, unknown> {
  const config: Record<string, unknown> = {
    defaults: { origin: deps.publicOrigin, prefix: GRANT_PREFIX, transport: 'session', state: true, pkce: true, response: ['tokens'] },
  };
  for (const provider of deps.providers) {
    if (provider.name === 'oidc' && !oidc) continue;
    config[provider.name] = {
      key: provider.clientId,
      secret: provider.clientSecret,
      scope: SCOPES[provider.name],
      callback: `/auth/callback/${provider.name}`,
      ...(provider.name !== 'github' && { nonce: true }),
      ...(provider.name === 'oidc' && oidc && { oauth: 2, authorize_url: oidc.authorizationEndpoint, access_url: oidc.tokenEndpoint, scope_delimiter: ' ' }),
    };
  }
  return config;
}

/** An HTML answer with a status. */
function html(ctx: Context, status: number, title: string, body: string): void {
  ctx.status = status;
  ctx.type = 'html';
  ctx.set('Cache-Control', 'no-store');
  ctx.body = page(title, body);
}

function failure(ctx: Context, status: number, message: string): void {
  html(ctx, status, 'Sign-in failed', `<h1>Sign-in failed</h1><p class="error">${escapeHtml(message)}</p><a class="button" href="/auth/sign-in">Try again</a>`);
}

/**
 * What the sign-in page says when no identity provider is configured: students here sign in by a
 * link from their coach (the operator's hint is logged at start and shown in the panel).
 */
const NO_PROVIDER =
  '<p class="error">Sign-in here is by a link from your coach. If your link was already used or has expired, ask your coach for a new one.</p>';

/**
 * Sign-in with grant (GitHub, Google, generic OpenID Connect): the sign-in page, the start of a
 * sign-in (remembers a same-origin `return_to`), grant's redirects under /connect, the callback
 * (verified email → allowlist → user, session regenerated), sign-out (`GET /auth/me` is an operation: api/resources/service.ts). Every
 * failure is a page that says what happened, never a 500. Returns grant's middleware (mount it
 * first) and the router.
 */
export function authRoutes(deps: AuthDeps): { grant: Middleware<AuthState>; router: Router<AuthState> } {
  const router = new Router<AuthState>();
  const enabled = new Map(deps.providers.map((provider) => [provider.name as string, provider]));
  let oidc: OidcEndpoints | undefined;
  let grantMiddleware = grant.koa()(grantConfig(deps, undefined)) as Middleware;
  const oidcProvider = deps.providers.find((provider) => provider.name === 'oidc');

  /** Loads the OpenID Connect endpoints once (retried on the next sign-in when the issuer was down). */
  const ensureOidc = async (): Promise<OidcEndpoints> => {
    if (oidc) return oidc;
    oidc = await discoverOidc(oidcProvider!.issuer!);
    grantMiddleware = grant.koa()(grantConfig(deps, oidc)) as Middleware;
    return oidc;
  };

  router.get('/auth/sign-in', async (ctx) => {
    const returnTo = safeReturnTo(ctx.query.return_to, deps.publicOrigin);
    const suffix = returnTo ? `?return_to=${encodeURIComponent(returnTo)}` : '';
    const buttons = deps.providers
      .map((provider) => `<a class="button" href="/auth/start/${provider.name}${escapeHtml(suffix)}">Sign in with ${escapeHtml(provider.label)}</a>`)
      .join('\n');
    const signedIn = ctx.state.user ? `<p class="note">Signed in as ${escapeHtml(ctx.state.user.email)}.</p>` : '';
    html(ctx, 200, 'Sign in', `<h1>Sign in</h1>${signedIn}${buttons || NO_PROVIDER}`);
  });

  router.get<unknown, Routed<typeof START>>(START, async (ctx) => {
    const provider = enabled.get(ctx.params.provider);
    if (!provider) return failure(ctx, 404, 'This sign-in provider is not configured here.');
    if (provider.name === 'oidc') {
      try {
        await ensureOidc();
      } catch (error) {
        deps.log.error({ provider: provider.name, error: (error as Error).message }, 'OpenID Connect discovery failed');
        return failure(ctx, 502, (error as Error).message);
      }
    }
    ctx.session!.returnTo = safeReturnTo(ctx.query.return_to, deps.publicOrigin) ?? null;
    ctx.redirect(`${GRANT_PREFIX}/${provider.name}`);
  });

  /**
   * The callback: grant's answer in the session → the provider's verified email → the allowlist →
   * the user. Only callbacks that fail before the provider vouched for anyone (an unknown provider,
   * no sign-in under way in this session, a state mismatch, an error from the provider) count
   * against the address's limit: a school's class behind one address signs in at once, and a
   * callback completing a sign-in the browser started is never refused.
   */
  router.get<unknown, Routed<typeof CALLBACK>>(CALLBACK, async (ctx) => {
    const provider = enabled.get(ctx.params.provider);
    const session = ctx.session!;
    const response = (session.grant as { response?: GrantResponse } | undefined)?.response;
    const returnTo = typeof session.returnTo === 'string' ? session.returnTo : undefined;
    delete session.grant;
    delete session.returnTo;
    /** A failing callback: counted (429 once over the limit), then its page. */
    const failed = async (status: number, message: string) => {
      await deps.callbacks.consume(ctx);
      failure(ctx, status, message);
    };
    if (!provider) return failed(404, 'This sign-in provider is not configured here.');
    if (!response) return failed(400, 'The sign-in took too long or was started elsewhere. Please start again.');
    if (response.error !== undefined || !response.access_token) {
      const detail = JSON.stringify(response.error ?? 'no access token');
      deps.log.info({ provider: provider.name, detail }, 'sign-in refused by the provider');
      if (detail.includes('access_denied')) return failed(403, 'You did not allow the sign-in at the identity provider.');
      if (detail.includes('state')) return failed(400, 'The sign-in could not be verified (state mismatch). Please start again.');
      return failed(502, 'The identity provider reported an error. Please try again.');
    }
    let identity;
    try {
      identity = await fetchIdentity(provider, response.access_token, provider.name === 'oidc' ? await ensureOidc() : undefined);
    } catch (error) {
      if (!(error instanceof IdentityError)) throw error;
      if (error.reason === 'invalid_email') {
        // Never trimmed or repaired into an address, which could be someone else's.
        deps.log.info({ provider: provider.name, reason: error.reason, problem: error.message }, 'sign-in refused: the email is not valid');
        return failure(ctx, 403, error.message);
      }
      deps.log.info({ provider: provider.name, reason: error.reason }, 'sign-in failed: no verified identity');
      return failure(ctx, error.reason === 'no_verified_email' ? 403 : 502, error.message);
    }
    if (!deps.isAllowed(identity.email)) {
      deps.log.info({ provider: provider.name, email: identity.email }, 'sign-in refused: email not on the allowlist');
      return html(
        ctx,
        403,
        'Not allowed',
        `<h1>Not allowed</h1><p class="error">The email ${escapeHtml(identity.email)} is not allowed to sign in here. Ask your coach to add it to the allowlist.</p><a class="button" href="/auth/sign-in">Back</a>`,
      );
    }
    const { user, created } = await deps.users.signIn({ email: identity.email, name: identity.name, admin: deps.adminEmails.includes(identity.email) });
    await session.regenerate();
    ctx.session!.userId = user.id;
    deps.log.info({ provider: provider.name, userId: user.id, email: user.email, created, role: user.role }, 'signed in');
    ctx.redirect(returnTo ?? (user.workspaceSlug ? `/u/${user.workspaceSlug}/` : '/auth/sign-in'));
  });

  // A browser that asks for the sign-out address gets the button that signs out (a GET never does: a link elsewhere could).
  router.get('/auth/sign-out', async (ctx) => {
    const user = ctx.state.user;
    if (!user) return ctx.redirect('/auth/sign-in');
    html(
      ctx,
      200,
      'Sign out',
      `<h1>Sign out</h1><p>Signed in as ${escapeHtml(user.email)}.</p><form method="post" action="/auth/sign-out"><button type="submit">Sign out</button></form>`,
    );
  });

  router.post('/auth/sign-out', async (ctx) => {
    assertSameOrigin(ctx, deps.publicOrigin);
    ctx.session = null;
    ctx.status = 303;
    ctx.redirect('/auth/sign-in');
  });

  const grantRoutes: Middleware<AuthState> = async (ctx, next) => {
    if (ctx.path !== GRANT_PREFIX && !ctx.path.startsWith(`${GRANT_PREFIX}/`)) return next();
    // The route label for metrics; grant answers its own routes, an unknown provider falls through to 404.
    (ctx as { _matchedRoute?: string })._matchedRoute = `${GRANT_PREFIX}/:provider`;
    return grantMiddleware(ctx, next);
  };
  return { grant: grantRoutes, router };
}
