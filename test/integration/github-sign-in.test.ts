/**
 * Sign-in with a hosted provider (GitHub) when the provider misbehaves. GitHub's endpoints are
 * answered by nock, which intercepts both node:http (grant's token request) and fetch (the
 * identity calls); every other host but 127.0.0.1 is refused.
 *
 * Part A calls fetchIdentity directly; part B drives the real app and grant with a Browser, up to
 * GitHub's authorize URL (never fetched), then back through the callback.
 */
import { createHash } from 'node:crypto';
import nock from 'nock';
import type { ProviderConfig } from '../../src/config.ts';
import { fetchIdentity, GITHUB_API, IdentityError, type OidcEndpoints } from '../../src/identity/providers.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { Browser } from '../helpers/oidc.ts';

const GITHUB: ProviderConfig = { name: 'github', label: 'GitHub', clientId: 'x', clientSecret: 'y' };
const TOKEN = 'gho_x';

beforeAll(() => {
  nock.disableNetConnect();
  nock.enableNetConnect('127.0.0.1');
});

afterEach(() => {
  nock.cleanAll();
});

afterAll(() => {
  nock.enableNetConnect();
  // Takes nock's interceptors off Node's http and fetch, which every later test file shares (Jest runs
  // the files in this one process): left on, they broke the raw uploads and Docker exec streams of
  // the files after this one.
  nock.restore();
});

/** The IdentityError `promise` rejects with (fails the test when it resolves or throws something else). */
async function identityErrorOf(promise: Promise<unknown>): Promise<IdentityError> {
  const error = await promise.then(
    (value) => {
      throw new Error(`expected an IdentityError, got ${JSON.stringify(value)}`);
    },
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(IdentityError);
  return error as IdentityError;
}

/** GitHub's API answering /user with `profile`; /user/emails is up to the caller. */
function githubApi(profile: { login: string; name: string | null } = { login: 'ada-l', name: 'Ada Lovelace' }) {
  return nock(GITHUB_API).matchHeader('authorization', `Bearer ${TOKEN}`).get('/user').reply(200, profile);
}

function githubEmails() {
  return nock(GITHUB_API).matchHeader('authorization', `Bearer ${TOKEN}`).get('/user/emails');
}

describe('fetchIdentity (GitHub)', () => {
  it('returns the verified primary email, lower-cased, with the display name', async () => {
    const profile = githubApi();
    const emails = githubEmails().reply(200, [
      { email: 'other@school.test', primary: false, verified: true },
      { email: 'Ada@School.TEST', primary: true, verified: true },
    ]);
    await expect(fetchIdentity(GITHUB, TOKEN)).resolves.toEqual({ email: 'ada@school.test', name: 'Ada Lovelace' });
    expect(profile.isDone() && emails.isDone()).toBe(true);
  });

  it('falls back to the login when the profile has no name', async () => {
    githubApi({ login: 'ada-l', name: null });
    githubEmails().reply(200, [{ email: 'ada@school.test', primary: true, verified: true }]);
    await expect(fetchIdentity(GITHUB, TOKEN)).resolves.toEqual({ email: 'ada@school.test', name: 'ada-l' });
  });

  it.each([
    [
      'the primary address is unverified',
      [
        { email: 'ada@school.test', primary: true, verified: false },
        { email: 'b@school.test', primary: false, verified: true },
      ],
    ],
    ['the primary address has no verified flag', [{ email: 'ada@school.test', primary: true }]],
    ['no address is primary', [{ email: 'ada@school.test', primary: false, verified: true }]],
    ['there are no addresses', []],
  ])('refuses with no_verified_email when %s', async (_what, addresses) => {
    githubApi();
    githubEmails().reply(200, addresses);
    const error = await identityErrorOf(fetchIdentity(GITHUB, TOKEN));
    expect(error.reason).toBe('no_verified_email');
    expect(error.message).toMatch(/verified/);
  });

  it.each([
    ['surrounding spaces', ' Ada@School.test '],
    ['a NUL byte', 'ada\u0000@school.test'],
    ['two @', 'ada@evil.test@school.test'],
    ['a domain that is an IP address', 'ada@10.0.0.1'],
  ])('refuses with invalid_email a verified primary address with %s, never repaired into another', async (_what, email) => {
    githubApi();
    githubEmails().reply(200, [{ email, primary: true, verified: true }]);
    const error = await identityErrorOf(fetchIdentity(GITHUB, TOKEN));
    expect(error.reason).toBe('invalid_email');
    expect(error.message).toMatch(/not a valid email address/);
  });

  it('returns an internationalised domain in its ASCII form', async () => {
    githubApi();
    githubEmails().reply(200, [{ email: 'ada@Bücher.example', primary: true, verified: true }]);
    await expect(fetchIdentity(GITHUB, TOKEN)).resolves.toEqual({ email: 'ada@xn--bcher-kva.example', name: 'Ada Lovelace' });
  });

  it('reports provider_error when the emails API answers 500', async () => {
    githubApi();
    githubEmails().reply(500, { message: 'Server Error' });
    const error = await identityErrorOf(fetchIdentity(GITHUB, TOKEN));
    expect(error.reason).toBe('provider_error');
    expect(error.message).toMatch(/HTTP 500/);
  });

  it('reports provider_error when the emails API answers something that is not JSON', async () => {
    githubApi();
    githubEmails().reply(200, '<html>rate limited</html>', { 'content-type': 'text/html' });
    expect((await identityErrorOf(fetchIdentity(GITHUB, TOKEN))).reason).toBe('provider_error');
  });

  it('reports provider_timeout when the emails API does not answer in time', async () => {
    githubApi();
    // An answer that never comes (nock's .delay() does not mix with an aborted native fetch: undici
    // asserts when the delayed response arrives after the abort).
    githubEmails().reply(() => new Promise<never>(() => undefined));
    const started = Date.now();
    const error = await identityErrorOf(fetchIdentity(GITHUB, TOKEN, undefined, 200));
    expect(error.reason).toBe('provider_timeout');
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('reports provider_error when the network fails', async () => {
    githubApi();
    githubEmails().replyWithError('connect ECONNRESET');
    expect((await identityErrorOf(fetchIdentity(GITHUB, TOKEN))).reason).toBe('provider_error');
  });
});

describe('fetchIdentity (OpenID Connect userinfo)', () => {
  const OIDC: ProviderConfig = { name: 'oidc', label: 'School', clientId: 'x', clientSecret: 'y', issuer: 'https://id.school.test' };
  const endpoints: OidcEndpoints = {
    authorizationEndpoint: 'https://id.school.test/authorize',
    tokenEndpoint: 'https://id.school.test/token',
    userinfoEndpoint: 'https://id.school.test/userinfo',
  };
  const userinfo = (claims: Record<string, unknown>) =>
    nock('https://id.school.test').matchHeader('authorization', `Bearer ${TOKEN}`).get('/userinfo').reply(200, claims);

  it('accepts email_verified true', async () => {
    userinfo({ sub: '1', email: 'Ada@School.test', email_verified: true, name: 'Ada' });
    await expect(fetchIdentity(OIDC, TOKEN, endpoints)).resolves.toEqual({ email: 'ada@school.test', name: 'Ada' });
  });

  it.each([
    ['false', false],
    ['the string "true" (only the boolean counts)', 'true'],
    ['missing', undefined],
  ])('refuses with no_verified_email when email_verified is %s', async (_what, verified) => {
    userinfo({ sub: '1', email: 'ada@school.test', email_verified: verified, name: 'Ada' });
    expect((await identityErrorOf(fetchIdentity(OIDC, TOKEN, endpoints))).reason).toBe('no_verified_email');
  });
});

describe('GitHub sign-in through the app', () => {
  const db = useTestDatabase();
  let app: TestApp;
  let browser: Browser;

  beforeEach(async () => {
    app = await startApp(
      db.dataSource,
      { GITHUB_CLIENT_ID: 'gh-client', GITHUB_CLIENT_SECRET: 'gh-secret', ADMIN_TOKEN: 'admin-token-0123456789abcdef0123456789' },
      { allowlist: { isAllowed: (email) => email === 'ada@school.test' } },
    );
    browser = new Browser();
  });

  afterEach(async () => {
    await app.close();
  });

  interface Hop {
    url: string;
    status: number;
    location: string | null;
    contentType: string | null;
    body: string;
  }

  /** Everything the Browser saw, for the leak check. */
  let seen: Hop[];
  beforeEach(() => {
    seen = [];
  });

  /**
   * Requests `url` and follows redirects on 127.0.0.1; stops at the first non-redirect or at a
   * redirect that leaves 127.0.0.1 (not followed). Returns every hop.
   */
  async function walk(url: string): Promise<Hop[]> {
    const hops: Hop[] = [];
    let current = url;
    for (let n = 0; n < 10; n++) {
      const response = await browser.fetch(current);
      const hop = {
        url: current,
        status: response.status,
        location: response.headers.get('location'),
        contentType: response.headers.get('content-type'),
        body: await response.text(),
      };
      hops.push(hop);
      seen.push(hop);
      if (![301, 302, 303, 307, 308].includes(hop.status) || hop.location === null) return hops;
      const next = new URL(hop.location, current);
      if (next.hostname !== '127.0.0.1') return hops;
      current = next.href;
    }
    throw new Error(`too many redirects: ${hops.map((hop) => hop.url).join(' -> ')}`);
  }

  const last = (hops: Hop[]): Hop => hops[hops.length - 1]!;

  /** Starts a sign-in and returns the query of GitHub's authorize URL that the app redirects to. */
  async function startSignIn(): Promise<URLSearchParams> {
    const hops = await walk(`${app.url}/auth/start/github`);
    expect(hops.map((hop) => [new URL(hop.url).pathname, hop.status])).toEqual([
      ['/auth/start/github', 302],
      ['/connect/github', 302],
    ]);
    const authorize = new URL(last(hops).location!);
    expect(`${authorize.origin}${authorize.pathname}`).toBe('https://github.com/login/oauth/authorize');
    const query = authorize.searchParams;
    expect(query.get('client_id')).toBe('gh-client');
    expect(query.get('redirect_uri')).toBe(`${app.url}/connect/github/callback`);
    expect(query.get('response_type')).toBe('code');
    expect(query.get('state')).toMatch(/^\w{16,}$/);
    expect(query.get('code_challenge_method')).toBe('S256');
    expect(query.get('code_challenge')).toMatch(/^[\w-]{43}$/);
    return query;
  }

  /** GitHub's token endpoint; `form` receives the (form-encoded) request body. */
  function tokenEndpoint(form: Record<string, string>[]) {
    return nock('https://github.com').post('/login/oauth/access_token', (body: Record<string, string>) => {
      form.push(body);
      return true;
    });
  }

  const issueToken = (form: Record<string, string>[]) =>
    tokenEndpoint(form).reply(200, { access_token: TOKEN, token_type: 'bearer', scope: 'read:user,user:email' });

  const userCount = async () => Number(((await db.dataSource.query('SELECT count(*) AS n FROM users')) as { n: string }[])[0]!.n);

  const callback = (state: string) => walk(`${app.url}/connect/github/callback?code=abc&state=${encodeURIComponent(state)}`);

  /** A failure page: HTML, the status given, never a 500. */
  function expectPage(hop: Hop, status: number, text: RegExp): void {
    expect(hop.status).toBe(status);
    expect(hop.contentType).toMatch(/^text\/html/);
    expect(hop.body).toMatch(text);
  }

  afterEach(async () => {
    // The access token never reaches the browser (bodies, Locations), the logs or a stored session.
    for (const hop of seen) {
      expect(hop.body).not.toContain(TOKEN);
      expect(hop.location ?? '').not.toContain(TOKEN);
    }
    expect(JSON.stringify(app.logs)).not.toContain(TOKEN);
    const stored: { data: unknown }[] = await db.dataSource.query('SELECT data FROM sessions');
    expect(JSON.stringify(stored)).not.toContain(TOKEN);
  });

  it('signs in a verified, allowlisted user (PKCE and state checked) and lands on their workspace', async () => {
    const authorize = await startSignIn();
    const form: Record<string, string>[] = [];
    const token = issueToken(form);
    githubApi();
    githubEmails().reply(200, [{ email: 'Ada@school.test', primary: true, verified: true }]);

    const hops = await callback(authorize.get('state')!);
    expect(hops.map((hop) => [new URL(hop.url).pathname, hop.status])).toEqual([
      ['/connect/github/callback', 302],
      ['/auth/callback/github', 302],
      ['/u/ada/', expect.any(Number)],
    ]);
    expect(hops[1]!.location).toBe('/u/ada/');
    expect(token.isDone()).toBe(true);
    expect(form).toHaveLength(1);
    const sent = form[0]!;
    expect(sent).toMatchObject({ grant_type: 'authorization_code', code: 'abc', client_id: 'gh-client', redirect_uri: `${app.url}/connect/github/callback` });
    expect(sent.code_verifier).toMatch(/^[\w-]{43,128}$/);
    expect(createHash('sha256').update(sent.code_verifier!).digest('base64url')).toBe(authorize.get('code_challenge'));

    const me = await browser.fetch(`${app.url}/auth/me`);
    expect(me.status).toBe(200);
    const body = (await me.json()) as { user: { email: string; role: string; workspaceSlug: string } };
    seen.push({ url: `${app.url}/auth/me`, status: me.status, location: null, contentType: null, body: JSON.stringify(body) });
    expect(body.user).toMatchObject({ email: 'ada@school.test', name: 'Ada Lovelace', role: 'user', workspaceSlug: 'ada' });
    expect(await userCount()).toBe(1);
  });

  it('shows a 502 page when the emails API fails, and creates no user', async () => {
    const authorize = await startSignIn();
    issueToken([]);
    githubApi();
    githubEmails().reply(500, { message: 'Server Error' });
    const page = last(await callback(authorize.get('state')!));
    expectPage(page, 502, /refused/);
    expect(await userCount()).toBe(0);
    expect((await browser.fetch(`${app.url}/auth/me`)).status).toBe(401);
  });

  it('shows a 403 page when the primary email is unverified, and creates no user', async () => {
    const authorize = await startSignIn();
    issueToken([]);
    githubApi();
    githubEmails().reply(200, [{ email: 'ada@school.test', primary: true, verified: false }]);
    expectPage(last(await callback(authorize.get('state')!)), 403, /verified/);
    expect(await userCount()).toBe(0);
  });

  it.each([
    ['answers 500', (scope: nock.Interceptor) => scope.reply(500, 'Internal Server Error', { 'content-type': 'text/plain' })],
    [
      'refuses the code',
      (scope: nock.Interceptor) => scope.reply(200, { error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' }),
    ],
  ])('shows a clear page when the token endpoint %s, and creates no user', async (_what, answer) => {
    const authorize = await startSignIn();
    const token = answer(tokenEndpoint([]));
    const page = last(await callback(authorize.get('state')!));
    expect(token.isDone()).toBe(true);
    expect(page.status).toBeGreaterThanOrEqual(400);
    expect(page.status).not.toBe(500);
    expectPage(page, page.status, /identity provider/);
    expect(await userCount()).toBe(0);
  });

  it('shows a 400 page when the callback state differs, without exchanging the code', async () => {
    await startSignIn();
    const token = issueToken([]);
    expectPage(last(await callback('not-the-state-we-sent')), 400, /state/);
    expect(token.isDone()).toBe(false);
    expect(await userCount()).toBe(0);
  });

  it('shows a 403 page when the email is not on the allowlist, and creates no user', async () => {
    const authorize = await startSignIn();
    issueToken([]);
    githubApi();
    githubEmails().reply(200, [{ email: 'mallory@school.test', primary: true, verified: true }]);
    expectPage(last(await callback(authorize.get('state')!)), 403, /mallory@school\.test is not allowed/);
    expect(await userCount()).toBe(0);
  });
});
