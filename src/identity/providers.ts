import type { ProviderConfig } from '../config.ts';
import { checkEmail } from './email.ts';

/** How long a call to an identity provider may take. */
const PROVIDER_TIMEOUT_MS = 10_000;

/** GitHub's REST API; its OAuth endpoints are grant's built-in `github` provider. */
export const GITHUB_API = 'https://api.github.com';
/** Google's OpenID Connect userinfo endpoint (its OAuth endpoints are grant's built-in `google`). */
export const GOOGLE_USERINFO = 'https://openidconnect.googleapis.com/v1/userinfo';

/** Why an identity could not be established; `message` is safe to show on the sign-in page. */
export class IdentityError extends Error {
  readonly reason: 'no_verified_email' | 'invalid_email' | 'provider_error' | 'provider_timeout';
  constructor(reason: IdentityError['reason'], message: string) {
    super(message);
    this.name = 'IdentityError';
    this.reason = reason;
  }
}

/** A person as the provider vouches for them: a verified, valid email (in its stored form, see email.ts) and a display name. */
export interface VerifiedIdentity {
  email: string;
  name: string;
}

/** The endpoints of an OpenID Connect issuer, from its discovery document. */
export interface OidcEndpoints {
  authorizationEndpoint: string;
  tokenEndpoint: string;
  userinfoEndpoint: string;
}

/** GETs JSON from a provider with a timeout, turning every failure into an IdentityError. */
async function getJson(url: string, headers: Record<string, string>, what: string, timeoutMs = PROVIDER_TIMEOUT_MS): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(url, { headers: { accept: 'application/json', ...headers }, signal: AbortSignal.timeout(timeoutMs) });
  } catch (error) {
    const name = (error as Error).name;
    if (name === 'TimeoutError' || name === 'AbortError')
      throw new IdentityError('provider_timeout', `The identity provider did not answer in time (${what}).`);
    throw new IdentityError('provider_error', `The identity provider could not be reached (${what}).`);
  }
  if (!response.ok) throw new IdentityError('provider_error', `The identity provider refused the request (${what}: HTTP ${response.status}).`);
  try {
    return await response.json();
  } catch {
    throw new IdentityError('provider_error', `The identity provider sent an unreadable answer (${what}).`);
  }
}

/**
 * The stored form of the email a provider vouches for (lower-case, its domain in ASCII form).
 * Nothing is trimmed or otherwise repaired: an email that is not valid as it came is refused, so
 * that it can never be read as someone else's.
 */
function verifiedEmail(email: string): string {
  const checked = checkEmail(email);
  if ('problem' in checked) {
    throw new IdentityError('invalid_email', `The identity provider gave an email that is not a valid email address: ${checked.problem}.`);
  }
  return checked.value;
}

/** Reads an issuer's discovery document; throws IdentityError when it is unreachable or incomplete. */
export async function discoverOidc(issuer: string): Promise<OidcEndpoints> {
  const document = (await getJson(`${issuer}/.well-known/openid-configuration`, {}, 'discovery')) as Record<string, unknown>;
  const endpoints = {
    authorizationEndpoint: document.authorization_endpoint,
    tokenEndpoint: document.token_endpoint,
    userinfoEndpoint: document.userinfo_endpoint,
  };
  if (!Object.values(endpoints).every((value) => typeof value === 'string' && URL.canParse(value))) {
    throw new IdentityError('provider_error', 'The OpenID Connect discovery document lacks the authorization, token or userinfo endpoint.');
  }
  return endpoints as OidcEndpoints;
}

/**
 * The verified identity behind an access token. GitHub: the primary address from its emails API,
 * only when verified. OpenID Connect (Google, generic): the userinfo `email` when `email_verified`
 * is true. The email must be valid as it came (see verifiedEmail) and is returned in its stored form.
 * Anything else throws IdentityError. `timeoutMs` bounds each
 * call to the provider.
 */
export async function fetchIdentity(
  provider: ProviderConfig,
  accessToken: string,
  oidc?: OidcEndpoints,
  timeoutMs: number = PROVIDER_TIMEOUT_MS,
): Promise<VerifiedIdentity> {
  const auth = { authorization: `Bearer ${accessToken}` };
  if (provider.name === 'github') {
    const github = { ...auth, accept: 'application/vnd.github+json', 'user-agent': 'workspace-control-plane' };
    const [user, emails] = await Promise.all([
      getJson(`${GITHUB_API}/user`, github, 'profile', timeoutMs) as Promise<{ name?: string | null; login?: string }>,
      getJson(`${GITHUB_API}/user/emails`, github, 'emails', timeoutMs) as Promise<{ email?: string; primary?: boolean; verified?: boolean }[]>,
    ]);
    const primary = Array.isArray(emails) ? emails.find((entry) => entry.primary) : undefined;
    if (typeof primary?.email !== 'string' || primary.email === '' || primary.verified !== true) {
      throw new IdentityError('no_verified_email', 'Your GitHub account has no verified primary email address. Verify it on GitHub, then sign in again.');
    }
    return { email: verifiedEmail(primary.email), name: user.name || user.login || '' };
  }
  const userinfoUrl = provider.name === 'google' ? GOOGLE_USERINFO : oidc?.userinfoEndpoint;
  if (!userinfoUrl) throw new IdentityError('provider_error', 'The identity provider is not ready (no userinfo endpoint).');
  const claims = (await getJson(userinfoUrl, auth, 'userinfo', timeoutMs)) as { email?: unknown; email_verified?: unknown; name?: unknown };
  if (typeof claims.email !== 'string' || claims.email_verified !== true) {
    throw new IdentityError('no_verified_email', 'Your account has no verified email address. Verify it with your identity provider, then sign in again.');
  }
  return { email: verifiedEmail(claims.email), name: typeof claims.name === 'string' ? claims.name : '' };
}
