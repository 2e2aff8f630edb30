/**
 * A real OpenID Connect provider (oidc-provider v9) on loopback, for end-to-end sign-in tests, and a
 * tiny cookie-keeping HTTP client (`Browser`) to drive it.
 *
 * The provider runs on http://127.0.0.1:<free port>: authorization code flow only, PKCE (S256)
 * required for every client, scopes `openid email profile`, claims `email`, `email_verified` (scope
 * email) and `name` (scope profile). There is no login form: the test says beforehand who signs in
 * (`provider.nextLogin(account)`) or that the user refuses (`provider.nextLogin('deny')`), and the
 * interaction page completes itself with a redirect back to the provider.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { interactionPolicy } from 'oidc-provider';
import type { Adapter, AdapterPayload, ClientMetadata, Configuration, JWK } from 'oidc-provider';

/** An end-user of the test provider. `id` becomes the `sub` claim. */
export interface TestAccount {
  id: string;
  email: string;
  email_verified: boolean;
  name?: string;
}

/** A client registered at the test provider. */
export interface TestClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
  /** How the client authenticates at the token endpoint; default `client_secret_post` (what grant sends). */
  token_endpoint_auth_method?: 'client_secret_post' | 'client_secret_basic';
}

export interface OidcProvider {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  issuer: string;
  port: number;
  /** `<issuer>/.well-known/openid-configuration`. */
  discoveryUrl: string;
  /**
   * Queues who completes the next interaction (one per authorization request, first in first out):
   * the account signs in and grants `openid email profile`, or 'deny' ends it with `access_denied`.
   * With nothing queued the interaction page answers 200 with an HTML page saying so.
   */
  nextLogin(account: TestAccount | 'deny'): void;
  /** Queued logins not consumed yet. */
  pendingLogins(): number;
  close(): Promise<void>;
  /** number of token endpoint calls */
  tokenRequests(): number;
}

/** Expiry of every stored artefact, in seconds: long enough for any test. */
const TTL = 600;

/** In-memory storage per provider (the built-in one is process-wide and warns at start-up). */
function memoryAdapter(): (model: string) => Adapter {
  const store = new Map<string, { payload: AdapterPayload; expiresAt: number }>();
  const live = (key: string): AdapterPayload | undefined => {
    const entry = store.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      store.delete(key);
      return undefined;
    }
    return entry.payload;
  };
  return (model) => {
    const key = (id: string): string => `${model}:${id}`;
    const findBy = (field: 'uid' | 'userCode', value: string): AdapterPayload | undefined => {
      for (const storedKey of store.keys()) {
        if (!storedKey.startsWith(`${model}:`)) continue;
        const payload = live(storedKey);
        if (payload?.[field] === value) return payload;
      }
      return undefined;
    };
    return {
      async upsert(id, payload, expiresIn) {
        store.set(key(id), { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : Infinity });
      },
      async find(id) {
        return live(key(id));
      },
      async findByUid(uid) {
        return findBy('uid', uid);
      },
      async findByUserCode(userCode) {
        return findBy('userCode', userCode);
      },
      async consume(id) {
        const payload = live(key(id));
        if (payload) payload.consumed = Math.floor(Date.now() / 1000);
      },
      async destroy(id) {
        store.delete(key(id));
      },
      async revokeByGrantId(grantId) {
        for (const storedKey of [...store.keys()]) {
          if (store.get(storedKey)?.payload.grantId === grantId) store.delete(storedKey);
        }
      },
    };
  };
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function sendHtml(res: http.ServerResponse, status: number, title: string, body: string): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.end(`<!DOCTYPE html><html><head><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`);
}

/** Starts the provider on 127.0.0.1 (free port) with the given clients; `close()` it after the test. */
export async function startOidcProvider(options: { clients: TestClient[] }): Promise<OidcProvider> {
  const accounts = new Map<string, TestAccount>();
  const queue: (TestAccount | 'deny')[] = [];
  let tokenRequests = 0;

  let handle: http.RequestListener = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server = http.createServer((req, res) => handle(req, res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const issuer = `http://127.0.0.1:${port}`;

  // Every authorization request needs a fresh login, so that nextLogin decides who signs in even
  // when this browser already has a session at the provider (no silent single sign-on).
  const policy = interactionPolicy.base();
  policy
    .get('login')
    ?.checks.add(
      new interactionPolicy.Check('test_login', 'the test provider asks for a login on every authorization request', (ctx) =>
        ctx.oidc.result?.login ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT,
      ),
    );

  const clients: ClientMetadata[] = options.clients.map((client) => ({
    client_id: client.client_id,
    client_secret: client.client_secret,
    redirect_uris: client.redirect_uris,
    token_endpoint_auth_method: client.token_endpoint_auth_method ?? 'client_secret_post',
    grant_types: ['authorization_code'],
    response_types: ['code'],
    // 'web' accepts http:// redirect URIs for the code flow (only implicit insists on https).
    application_type: 'web',
  }));

  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });

  const configuration: Configuration = {
    adapter: memoryAdapter(),
    clients,
    jwks: { keys: [{ ...(signingKey as JWK), use: 'sig', alg: 'RS256', kid: 'test-rs256' }] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    scopes: ['openid', 'email', 'profile'],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    responseTypes: ['code'],
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false } },
    interactions: { policy, url: (_ctx, pending) => `/interaction/${pending.uid}` },
    async findAccount(_ctx, sub) {
      const account = accounts.get(sub);
      if (!account) return undefined;
      return {
        accountId: account.id,
        async claims() {
          return {
            sub: account.id,
            email: account.email,
            email_verified: account.email_verified,
            ...(account.name === undefined ? {} : { name: account.name }),
          };
        },
      };
    },
    ttl: { AccessToken: TTL, AuthorizationCode: 60, IdToken: TTL, Interaction: TTL, Session: TTL, Grant: TTL },
    clientBasedCORS: () => false,
    renderError(ctx, out) {
      ctx.type = 'html';
      ctx.body = `<!DOCTYPE html><html><body><h1>OIDC error</h1><pre>${escapeHtml(JSON.stringify(out, null, 2))}</pre></body></html>`;
    },
  };

  const provider = new Provider(issuer, configuration);
  // Static clients are validated lazily; fail here rather than in the middle of a test.
  for (const client of options.clients) await provider.Client.find(client.client_id);

  async function interaction(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    const clientId = String(details.params.client_id);

    if (details.prompt.name === 'consent') {
      // Only after our own login result asked for less than the client requested: grant the rest.
      const accountId = details.session?.accountId;
      if (!accountId) throw new Error('consent prompt without a signed-in account');
      const grant = (details.grantId ? await provider.Grant.find(details.grantId) : undefined) ?? new provider.Grant({ accountId, clientId });
      const missing = details.prompt.details;
      if (Array.isArray(missing.missingOIDCScope)) grant.addOIDCScope(missing.missingOIDCScope.map(String));
      if (Array.isArray(missing.missingOIDCClaims)) grant.addOIDCClaims(missing.missingOIDCClaims.map(String));
      const grantId = await grant.save();
      await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
      return;
    }

    const next = queue.shift();
    if (next === undefined) {
      sendHtml(
        res,
        200,
        'Sign in',
        `<p>Interaction ${escapeHtml(details.uid)} (${escapeHtml(details.prompt.name)}) for client ${escapeHtml(clientId)}: no test login queued; call provider.nextLogin(account) first.</p>`,
      );
      return;
    }
    if (next === 'deny') {
      await provider.interactionFinished(
        req,
        res,
        { error: 'access_denied', error_description: 'End-User denied the request' },
        { mergeWithLastSubmission: false },
      );
      return;
    }

    accounts.set(next.id, next);
    if (details.session && details.session.accountId !== next.id) {
      // Another account is signed in at the provider in this browser: sign it out first, as a
      // user switching accounts would (the provider's own path for this is a form-post logout page).
      await (await provider.Session.findByUid(details.session.uid))?.destroy();
      delete details.session;
      await details.save(Math.max(1, details.exp - Math.floor(Date.now() / 1000)));
    }
    const grant = new provider.Grant({ accountId: next.id, clientId });
    grant.addOIDCScope('openid email profile');
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { login: { accountId: next.id }, consent: { grantId } }, { mergeWithLastSubmission: false });
  }

  const callback = provider.callback();
  handle = (req, res) => {
    const { pathname } = new URL(req.url ?? '/', issuer);
    if (pathname === '/token') tokenRequests += 1;
    if (pathname.startsWith('/interaction/')) {
      interaction(req, res).catch((error: unknown) => {
        const status = (error as { statusCode?: unknown }).statusCode;
        if (!res.headersSent) sendHtml(res, typeof status === 'number' ? status : 500, 'Interaction failed', `<pre>${escapeHtml(String(error))}</pre>`);
        else res.destroy();
      });
      return;
    }
    void callback(req, res);
  };

  return {
    issuer,
    port,
    discoveryUrl: `${issuer}/.well-known/openid-configuration`,
    nextLogin(account) {
      queue.push(account === 'deny' ? account : { ...account });
    },
    pendingLogins: () => queue.length,
    tokenRequests: () => tokenRequests,
    async close() {
      const closed = once(server, 'close');
      server.close();
      server.closeAllConnections();
      await closed;
    },
  };
}

interface StoredCookie {
  name: string;
  value: string;
  path: string;
  /** Epoch milliseconds; Infinity for a session cookie. */
  expiresAt: number;
}

/** RFC 6265 §5.1.4 path-match. */
function pathMatches(requestPath: string, cookiePath: string): boolean {
  if (requestPath === cookiePath) return true;
  if (!requestPath.startsWith(cookiePath)) return false;
  return cookiePath.endsWith('/') || requestPath[cookiePath.length] === '/';
}

/** RFC 6265 §5.1.4 default-path: the request path up to, not including, its last '/'. */
function defaultPath(requestPath: string): string {
  const last = requestPath.lastIndexOf('/');
  return last <= 0 ? '/' : requestPath.slice(0, last);
}

function assertLoopback(url: URL, what: string): void {
  if (url.hostname !== '127.0.0.1') throw new Error(`Browser: refusing ${what} ${url.href}: tests only talk to 127.0.0.1`);
}

/**
 * A minimal user agent for tests: keeps cookies per host:port (a real browser shares them across
 * ports of one host), sends them back, never follows redirects by itself, and only talks to
 * 127.0.0.1.
 */
export class Browser {
  /** host:port → "name;path" → cookie */
  readonly #jar = new Map<string, Map<string, StoredCookie>>();

  /** One request, cookies attached and stored; redirects are returned, not followed. */
  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const target = new URL(url);
    assertLoopback(target, 'a request to');
    const headers = new Headers(init.headers);
    const cookies = this.#cookiesFor(target);
    if (cookies) {
      const existing = headers.get('cookie');
      headers.set('cookie', existing ? `${existing}; ${cookies}` : cookies);
    }
    const response = await fetch(target, { ...init, headers, redirect: 'manual' });
    this.#store(target, response.headers.getSetCookie());
    return response;
  }

  /**
   * Requests `url` and follows 30x redirects (relative Locations resolved against the current URL;
   * 301/302/303 continue as a GET without body, 307/308 repeat the method and body) until a
   * non-redirect response, which it returns with every URL requested in order. Throws on a
   * redirect off 127.0.0.1 and after `maxHops` redirects.
   */
  async follow(url: string, init: RequestInit = {}, maxHops = 10): Promise<{ response: Response; chain: string[] }> {
    const chain: string[] = [];
    let current = url;
    let currentInit = init;
    for (let hop = 0; ; hop += 1) {
      chain.push(current);
      const response = await this.fetch(current, currentInit);
      const location = response.headers.get('location');
      if (![301, 302, 303, 307, 308].includes(response.status) || location === null) return { response, chain };
      await response.arrayBuffer();
      if (hop >= maxHops) throw new Error(`Browser: more than ${maxHops} redirects: ${[...chain, location].join(' -> ')}`);
      const next = new URL(location, current);
      if (next.hostname !== '127.0.0.1') {
        throw new Error(`Browser: refusing redirect off 127.0.0.1 to ${next.href} (chain: ${chain.join(' -> ')})`);
      }
      if (response.status !== 307 && response.status !== 308) {
        const headers = new Headers(currentInit.headers);
        headers.delete('content-type');
        headers.delete('content-length');
        const { body: _body, ...rest } = currentInit;
        currentInit = { ...rest, method: 'GET', headers };
      }
      current = next.href;
    }
  }

  /** The value of cookie `name` for `host` ("127.0.0.1:port", or any URL of it); the longest path wins. */
  cookie(host: string, name: string): string | undefined {
    const key = host.includes('://') ? new URL(host).host : host;
    const found = [...(this.#jar.get(key)?.values() ?? [])]
      .filter((cookie) => cookie.name === name && cookie.expiresAt > Date.now())
      .toSorted((a, b) => b.path.length - a.path.length);
    return found[0]?.value;
  }

  #cookiesFor(url: URL): string {
    const cookies = this.#jar.get(url.host);
    if (!cookies) return '';
    const now = Date.now();
    const matching: StoredCookie[] = [];
    for (const [key, cookie] of cookies) {
      if (cookie.expiresAt <= now) cookies.delete(key);
      else if (pathMatches(url.pathname, cookie.path)) matching.push(cookie);
    }
    return matching
      .toSorted((a, b) => b.path.length - a.path.length)
      .map((cookie) => `${cookie.name}=${cookie.value}`)
      .join('; ');
  }

  #store(url: URL, setCookies: string[]): void {
    for (const line of setCookies) {
      const [pair = '', ...attributes] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq <= 0) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      let path = defaultPath(url.pathname);
      let maxAge: number | undefined;
      let expires: number | undefined;
      for (const attribute of attributes) {
        const at = attribute.indexOf('=');
        const key = (at === -1 ? attribute : attribute.slice(0, at)).trim().toLowerCase();
        const attrValue = at === -1 ? '' : attribute.slice(at + 1).trim();
        if (key === 'path' && attrValue.startsWith('/')) path = attrValue;
        else if (key === 'max-age' && /^-?\d+$/.test(attrValue)) maxAge = Number(attrValue);
        else if (key === 'expires') {
          const time = Date.parse(attrValue);
          if (!Number.isNaN(time)) expires = time;
        }
      }
      const expiresAt = maxAge !== undefined ? Date.now() + maxAge * 1000 : (expires ?? Infinity);
      let cookies = this.#jar.get(url.host);
      if (!cookies) {
        cookies = new Map();
        this.#jar.set(url.host, cookies);
      }
      const key = `${name};${path}`;
      if (expiresAt <= Date.now()) cookies.delete(key);
      else cookies.set(key, { name, value, path, expiresAt });
    }
  }
}
