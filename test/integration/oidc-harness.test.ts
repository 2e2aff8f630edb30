/**
 * The loopback OpenID Connect provider used by the sign-in tests (test/helpers/oidc.ts), checked
 * without the app: the test itself is the relying party.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Browser, startOidcProvider, type OidcProvider, type TestAccount } from '../helpers/oidc.ts';

/** A loopback HTTP server that records every request's URL and answers with `respond`. */
async function startRecorder(respond: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) => res.end('ok')) {
  const requests: URL[] = [];
  const server = http.createServer((req, res) => {
    requests.push(new URL(req.url ?? '/', `http://${req.headers.host}`));
    respond(req, res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    async close() {
      server.close();
      server.closeAllConnections();
      await once(server, 'close');
    },
  };
}

type Recorder = Awaited<ReturnType<typeof startRecorder>>;

interface Discovery {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  userinfo_endpoint: string;
  jwks_uri: string;
  scopes_supported: string[];
  claims_supported: string[];
  code_challenge_methods_supported: string[];
  response_types_supported: string[];
  token_endpoint_auth_methods_supported: string[];
}

interface TokenResponse {
  access_token?: string;
  id_token?: string;
  token_type?: string;
  error?: string;
}

const alice: TestAccount = { id: 'alice-1', email: 'alice@example.edu', email_verified: true, name: 'Alice Liddell' };
const bob: TestAccount = { id: 'bob-2', email: 'bob@example.edu', email_verified: false };

let provider: OidcProvider;
let rp: Recorder;
let discovery: Discovery;
const redirectUri = (): string => `${rp.url}/auth/callback`;

beforeAll(async () => {
  rp = await startRecorder();
  provider = await startOidcProvider({
    clients: [
      { client_id: 'app', client_secret: 'app-secret-0123456789', redirect_uris: [`${rp.url}/auth/callback`] },
      {
        client_id: 'basic-app',
        client_secret: 'basic-secret-0123456789',
        redirect_uris: [`${rp.url}/auth/callback`],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
  });
  discovery = (await (await fetch(provider.discoveryUrl)).json()) as Discovery;
});

afterAll(async () => {
  await provider?.close();
  await rp?.close();
});

/** A fresh authorization request of client `clientId`, with PKCE unless told otherwise. */
function authorizationRequest(clientId = 'app', { pkce = true } = {}) {
  const state = randomBytes(12).toString('base64url');
  const nonce = randomBytes(12).toString('base64url');
  const verifier = randomBytes(32).toString('base64url');
  const url = new URL(discovery.authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirectUri(),
    response_type: 'code',
    scope: 'openid email profile',
    state,
    nonce,
    ...(pkce ? { code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256' } : {}),
  }).toString();
  return { url: url.href, state, nonce, verifier };
}

/** Drives an authorization request to the relying party's callback; returns its query. */
async function authorize(browser: Browser, url: string): Promise<{ query: URLSearchParams; chain: string[] }> {
  const before = rp.requests.length;
  const { response, chain } = await browser.follow(url);
  expect(response.status).toBe(200);
  expect(chain.at(-1)).toMatch(new RegExp(`^${rp.url}/auth/callback\\?`));
  expect(rp.requests).toHaveLength(before + 1);
  return { query: rp.requests.at(-1)!.searchParams, chain };
}

async function exchange(code: string, verifier: string, client: 'post' | 'basic' = 'post'): Promise<{ status: number; body: TokenResponse }> {
  const form = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri(), code_verifier: verifier });
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (client === 'post') {
    form.set('client_id', 'app');
    form.set('client_secret', 'app-secret-0123456789');
  } else {
    headers.authorization = `Basic ${Buffer.from('basic-app:basic-secret-0123456789').toString('base64')}`;
  }
  const response = await fetch(discovery.token_endpoint, { method: 'POST', headers, body: form });
  return { status: response.status, body: (await response.json()) as TokenResponse };
}

async function userinfo(accessToken: string): Promise<Record<string, unknown>> {
  const response = await fetch(discovery.userinfo_endpoint, { headers: { authorization: `Bearer ${accessToken}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

function jwtPayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<string, unknown>;
}

describe('loopback OpenID Connect provider', () => {
  it('publishes a discovery document on the 127.0.0.1 issuer', () => {
    expect(provider.issuer).toBe(`http://127.0.0.1:${provider.port}`);
    expect(discovery.issuer).toBe(provider.issuer);
    expect(discovery.authorization_endpoint).toBe(`${provider.issuer}/auth`);
    expect(discovery.token_endpoint).toBe(`${provider.issuer}/token`);
    expect(discovery.userinfo_endpoint).toBe(`${provider.issuer}/me`);
    expect(discovery.jwks_uri).toBe(`${provider.issuer}/jwks`);
    expect(discovery.scopes_supported).toEqual(expect.arrayContaining(['openid', 'email', 'profile']));
    expect(discovery.claims_supported).toEqual(expect.arrayContaining(['sub', 'email', 'email_verified', 'name']));
    expect(discovery.code_challenge_methods_supported).toEqual(['S256']);
    expect(discovery.response_types_supported).toEqual(['code']);
    expect(discovery.token_endpoint_auth_methods_supported).toEqual(expect.arrayContaining(['client_secret_post', 'client_secret_basic']));
  });

  it('signs in the queued account: code and state back, token exchange, userinfo claims', async () => {
    const browser = new Browser();
    const request = authorizationRequest();
    provider.nextLogin(alice);
    const tokensBefore = provider.tokenRequests();

    const { query, chain } = await authorize(browser, request.url);
    expect(chain[0]).toBe(request.url);
    expect(chain.some((url) => url.startsWith(`${provider.issuer}/interaction/`))).toBe(true);
    expect(query.get('state')).toBe(request.state);
    expect(query.get('iss')).toBe(provider.issuer);
    const code = query.get('code');
    expect(code).toEqual(expect.any(String));
    expect(provider.pendingLogins()).toBe(0);
    expect(browser.cookie(provider.issuer, '_session')).toEqual(expect.any(String));

    const { status, body } = await exchange(code!, request.verifier);
    expect(status).toBe(200);
    expect(body.token_type).toBe('Bearer');
    expect(provider.tokenRequests()).toBe(tokensBefore + 1);
    const idToken = jwtPayload(body.id_token!);
    expect(idToken).toMatchObject({ iss: provider.issuer, aud: 'app', sub: alice.id, nonce: request.nonce });

    expect(await userinfo(body.access_token!)).toEqual({
      sub: alice.id,
      email: alice.email,
      email_verified: true,
      name: alice.name,
    });

    // A code is good once.
    const again = await exchange(code!, request.verifier);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
    expect(provider.tokenRequests()).toBe(tokensBefore + 2);
  });

  it('reports email_verified false and no name, with client_secret_basic at the token endpoint', async () => {
    const browser = new Browser();
    const request = authorizationRequest('basic-app');
    provider.nextLogin(bob);
    const { query } = await authorize(browser, request.url);
    expect(query.get('state')).toBe(request.state);

    const { status, body } = await exchange(query.get('code')!, request.verifier, 'basic');
    expect(status).toBe(200);
    expect(await userinfo(body.access_token!)).toEqual({ sub: bob.id, email: bob.email, email_verified: false });
  });

  it("'deny' sends access_denied and the state back to the callback", async () => {
    const browser = new Browser();
    const request = authorizationRequest();
    provider.nextLogin('deny');
    const { query } = await authorize(browser, request.url);
    expect(query.get('error')).toBe('access_denied');
    expect(query.get('state')).toBe(request.state);
    expect(query.has('code')).toBe(false);
  });

  it('lets the next queued account sign in on the same browser, then another one', async () => {
    const browser = new Browser();
    for (const account of [alice, bob, bob]) {
      const request = authorizationRequest();
      provider.nextLogin(account);
      const { query } = await authorize(browser, request.url);
      expect(query.get('state')).toBe(request.state);
      const { body } = await exchange(query.get('code')!, request.verifier);
      expect(await userinfo(body.access_token!)).toMatchObject({ sub: account.id, email: account.email });
    }
  });

  it('requires PKCE (S256) and checks the code_verifier', async () => {
    const browser = new Browser();
    const withoutPkce = authorizationRequest('app', { pkce: false });
    const { query } = await authorize(browser, withoutPkce.url);
    expect(query.get('error')).toBe('invalid_request');
    expect(query.get('state')).toBe(withoutPkce.state);
    expect(provider.pendingLogins()).toBe(0);

    const request = authorizationRequest();
    provider.nextLogin(alice);
    const { query: ok } = await authorize(browser, request.url);
    const wrong = await exchange(ok.get('code')!, randomBytes(32).toString('base64url'));
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('invalid_grant');
  });

  it('stops at an HTML interaction page when no login is queued', async () => {
    const browser = new Browser();
    const { response, chain } = await browser.follow(authorizationRequest().url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await response.text()).toContain('no test login queued');
    expect(chain.at(-1)).toMatch(new RegExp(`^${provider.issuer}/interaction/`));
  });
});

describe('Browser', () => {
  it('keeps cookies per host:port and path, drops expired ones, resolves relative redirects', async () => {
    const site = await startRecorder((req, res) => {
      const { pathname } = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (pathname === '/set') {
        res.setHeader('set-cookie', ['a=1; Path=/; HttpOnly', 'b=2; Path=/deep', 'c=3; Max-Age=60']);
        res.statusCode = 302;
        res.setHeader('location', 'deep/page');
      } else if (pathname === '/clear') {
        res.setHeader('set-cookie', ['a=; Path=/; Max-Age=0', 'b=; Path=/deep; Expires=Thu, 01 Jan 1970 00:00:00 GMT']);
      }
      res.end(req.headers.cookie ?? '');
    });
    const other = await startRecorder((req, res) => res.end(req.headers.cookie ?? ''));
    try {
      const browser = new Browser();
      const { response, chain } = await browser.follow(`${site.url}/set`, {
        method: 'POST',
        body: 'x=1',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(chain).toEqual([`${site.url}/set`, `${site.url}/deep/page`]);
      expect(await response.text()).toBe('b=2; a=1; c=3');
      expect(site.requests.at(-1)?.pathname).toBe('/deep/page');
      expect(browser.cookie(site.url, 'a')).toBe('1');
      expect(browser.cookie(new URL(site.url).host, 'c')).toBe('3');

      expect(await (await browser.fetch(`${site.url}/elsewhere`)).text()).toBe('a=1; c=3');
      expect(await (await browser.fetch(`${other.url}/`)).text()).toBe('');

      await (await browser.fetch(`${site.url}/clear`)).text();
      expect(browser.cookie(site.url, 'a')).toBeUndefined();
      expect(await (await browser.fetch(`${site.url}/deep/x`)).text()).toBe('c=3');
    } finally {
      await site.close();
      await other.close();
    }
  });

  it('refuses to leave 127.0.0.1', async () => {
    const site = await startRecorder((_req, res) => {
      res.statusCode = 302;
      res.setHeader('location', 'http://example.com/steal');
      res.end();
    });
    try {
      const browser = new Browser();
      await expect(browser.follow(`${site.url}/go`)).rejects.toThrow(/refusing redirect off 127\.0\.0\.1 to http:\/\/example\.com\/steal/);
      await expect(browser.fetch('http://localhost:1/')).rejects.toThrow(/only talk to 127\.0\.0\.1/);
    } finally {
      await site.close();
    }
  });
});
