/**
 * Issue 14 (security review), bad input and lock-outs on the Koa surface: every malformed request
 * gets a 4xx JSON error (never a 500, nothing logged as an error), a right token is never refused
 * by the throttle, the allowlist takes only entries it can remove again, and a sign-in start
 * without a user leaves only a short-lived session. Real app, real PostgreSQL.
 */
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';

const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789';
const METRICS_TOKEN = 'metrics-token-0123456789abcdef0123456789';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

const db = useTestDatabase();
let app: TestApp;

beforeAll(async () => {
  app = await startApp(db.dataSource, { ADMIN_TOKEN, METRICS_TOKEN, GITHUB_CLIENT_ID: 'gh-client', GITHUB_CLIENT_SECRET: 'gh-secret' });
});
afterAll(async () => app.close());

/** The JSON error of a response, checked for the shape every error has (and no stack). */
async function errorOf(response: Response): Promise<{ code: string; message: string }> {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const text = await response.text();
  expect(text).not.toMatch(/\bat .*\.ts:\d+/);
  const body = JSON.parse(text) as { error: { code: string; message: string } };
  expect(Object.keys(body)).toEqual(['error']);
  return body.error;
}

/** What the app logged as an error or worse since `from`. */
const errorsLoggedSince = (from: number) => app.logs.slice(from).filter((record) => record.level === 'error' || record.level === 'fatal');

/** A raw request (fetch refuses TRACE and rewrites some targets): status, headers and body. */
function raw(
  method: string,
  target: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port: new URL(app.url).port, method, path: target, headers }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

describe('NUL bytes and broken text in what a client names', () => {
  it.each(['action', 'actor'])('answers a NUL byte in the audit-log parameter %s with 400 naming it', async (name) => {
    const from = app.logs.length;
    const response = await fetch(`${app.url}/admin/audit-log?${name}=user%00.promote`, { headers: admin });
    expect(response.status).toBe(400);
    const error = await errorOf(response);
    expect(error.code).toBe('validation_error');
    expect(error.message).toContain(`"${name}"`);
    expect(errorsLoggedSince(from)).toEqual([]);
  });

  it.each([
    ['promote', 'POST', '/admin/users/ada%00@school.test/promote'],
    ['demote', 'POST', '/admin/users/ada%00@school.test/demote'],
    ['delete', 'DELETE', '/admin/users/ada%00@school.test'],
  ])('answers a NUL byte in the user of %s with 400 naming it', async (_verb, method, path) => {
    const from = app.logs.length;
    const response = await fetch(`${app.url}${path}`, { method, headers: admin });
    expect(response.status).toBe(400);
    const error = await errorOf(response);
    expect(error.code).toBe('validation_error');
    expect(error.message).toMatch(/user/i);
    expect(errorsLoggedSince(from)).toEqual([]);
  });
});

describe('methods the server does not implement', () => {
  it.each([
    ['TRACE', '/healthz'],
    ['TRACE', '/admin/status'],
    ['PROPFIND', '/admin/users'],
    ['PURGE', '/auth/me'],
    ['PROPFIND', '/u/ada/api/workspace'],
    ['MKCOL', '/nope'],
    ['PURGE', '/'],
  ])('answers %s %s with 405 method_not_allowed, without logging an error', async (method, path) => {
    const from = app.logs.length;
    const answer = await raw(method, path);
    expect(answer.status).toBe(405);
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    expect(answer.headers.allow).toMatch(/GET/);
    expect(JSON.parse(answer.body)).toEqual({ error: { code: 'method_not_allowed', message: expect.stringContaining(method) } });
    expect(errorsLoggedSince(from)).toEqual([]);
  });
});

describe('compressed request bodies', () => {
  it.each(['gzip', 'deflate', 'br', 'x-unknown'])('answers a JSON body sent with Content-Encoding: %s with 415, changing nothing', async (encoding) => {
    const from = app.logs.length;
    const response = await fetch(`${app.url}/admin/config/max-active-containers`, {
      method: 'POST',
      body: '{"value": 3}',
      headers: { ...admin, 'content-type': 'application/json', 'content-encoding': encoding },
    });
    expect(response.status).toBe(415);
    expect(response.headers.get('accept-encoding')).toBe('identity');
    expect((await errorOf(response)).code).toBe('unsupported_content_encoding');
    expect(errorsLoggedSince(from)).toEqual([]);
    expect(await (await fetch(`${app.url}/admin/config/max-active-containers`, { headers: admin })).json()).toEqual({ value: 10, source: 'environment' });
  });

  it('refuses a really gzipped body alike, and takes the same body plain (Content-Encoding: identity)', async () => {
    const post = (body: string | Buffer, encoding: string) =>
      fetch(`${app.url}/admin/allowlist`, { method: 'POST', body, headers: { ...admin, 'content-type': 'application/json', 'content-encoding': encoding } });
    expect((await post(gzipSync('{"entry": "gzip.test"}'), 'gzip')).status).toBe(415);
    expect((await post('{"entry": "gzip.test"}', 'identity')).status).toBe(201);
    await fetch(`${app.url}/admin/allowlist/gzip.test`, { method: 'DELETE', headers: admin });
  });
});

describe('what the allowlist takes through the API', () => {
  const add = (entry: string) =>
    fetch(`${app.url}/admin/allowlist`, { method: 'POST', body: JSON.stringify({ entry }), headers: { ...admin, 'content-type': 'application/json' } });
  const remove = (entry: string) => fetch(`${app.url}/admin/allowlist/${encodeURIComponent(entry)}`, { method: 'DELETE', headers: admin });
  const entries = async () => ((await (await fetch(`${app.url}/admin/allowlist`, { headers: admin })).json()) as { entries: string[] }).entries;

  it.each([
    ['a lone surrogate', '\ud800@x.test', /well-formed/],
    ['an IPv4 address', '1.2.3.4', /IP address/],
    ['an email at an IPv4 address', 'ada@192.168.0.1', /IP address/],
    ['an email at a bracketed IPv6 address', 'ada@[::1]', /IP address/],
  ])('refuses %s with 400 invalid_allowlist_entry and stores nothing', async (_kind, entry, message) => {
    const before = await entries();
    const response = await add(entry);
    expect(response.status).toBe(400);
    const error = await errorOf(response);
    expect(error.code).toBe('invalid_allowlist_entry');
    expect(error.message).toMatch(message);
    expect(await entries()).toEqual(before);
  });

  it('stores an internationalised domain in its xn-- form, and removes it by either form', async () => {
    const before = await entries();
    const added = await add('Bücher.example');
    expect(added.status).toBe(201);
    expect(await added.json()).toEqual({ entry: 'xn--bcher-kva.example', added: true });
    expect(await entries()).toEqual([...before, 'xn--bcher-kva.example'].toSorted());
    expect(await (await remove('bücher.example')).json()).toEqual({ entry: 'xn--bcher-kva.example', removed: true });
    expect((await add('ana@bücher.example')).status).toBe(201);
    expect((await remove('ana@xn--bcher-kva.example')).status).toBe(200);
    expect(await entries()).toEqual(before);
  });
});

describe('the bearer-token throttle', () => {
  it('never refuses the right ADMIN_TOKEN or METRICS_TOKEN, however many wrong ones came from the address', async () => {
    const own = await startApp(db.dataSource, { ADMIN_TOKEN, METRICS_TOKEN });
    try {
      for (let i = 0; i < 25; i++) await fetch(`${own.url}/admin/status`, { headers: { authorization: 'Bearer wrong-token' } });
      const locked = await fetch(`${own.url}/metrics`, { headers: { authorization: 'Bearer wrong-token' } });
      expect(locked.status).toBe(429);
      expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await fetch(`${own.url}/admin/status`, { headers: admin })).status).toBe(200);
      expect((await fetch(`${own.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).status).toBe(200);
      // Wrong ones stay refused.
      expect((await fetch(`${own.url}/admin/status`, { headers: { authorization: 'Bearer wrong-token' } })).status).toBe(429);
    } finally {
      await own.close();
    }
  });
});

describe('sessions without a signed-in user', () => {
  const expiry = async (cookie: string) => {
    const id = /cp_session=([^;]+)/.exec(cookie)![1];
    const rows = (await db.dataSource.query('SELECT user_id, extract(epoch FROM expires_at - now()) AS seconds FROM sessions WHERE id = $1', [id])) as {
      user_id: string | null;
      seconds: string;
    }[];
    return rows[0] && { userId: rows[0].user_id, seconds: Number(rows[0].seconds) };
  };

  it('live ten minutes from the start of a sign-in, and nothing renews them', async () => {
    const start = await fetch(`${app.url}/auth/start/github?return_to=/somewhere`, { redirect: 'manual' });
    expect(start.status).toBe(302);
    const setCookies = start.headers.getSetCookie();
    const cookie = setCookies.map((line) => line.split(';')[0]).join('; ');
    const first = await expiry(cookie);
    expect(first?.userId).toBeNull();
    expect(first!.seconds).toBeGreaterThan(9 * 60);
    expect(first!.seconds).toBeLessThanOrEqual(10 * 60 + 15);
    // The browser's cookie goes with it.
    const session = setCookies.find((line) => line.startsWith('cp_session='))!;
    const expires = Date.parse(/expires=([^;]+)/i.exec(session)![1]!);
    expect(expires - Date.now()).toBeLessThanOrEqual(10 * 60_000 + 15_000);
    // grant writes its state into the session: saved again, but its end does not move.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const connect = await fetch(`${app.url}/connect/github`, { headers: { cookie }, redirect: 'manual' });
    expect(connect.status).toBe(302);
    expect(new URL(connect.headers.get('location')!).hostname).toBe('github.com');
    const second = await expiry(cookie);
    expect(second!.seconds).toBeLessThanOrEqual(first!.seconds - 1);
  });
});

describe('numbers in query strings and bodies', () => {
  it.each([
    '/admin/audit-log?before=Infinity',
    '/admin/audit-log?before=-Infinity',
    '/admin/audit-log?before=NaN',
    '/admin/audit-log?limit=Infinity',
    '/admin/audit-log?limit=1e2',
    '/admin/audit-log?limit=0x10',
    '/admin/audit-log?limit=%205',
    '/admin/audit-log?limit=5.0',
    '/admin/audit-log?before=9007199254740993',
    '/admin/audit-log?before=1&before=2',
    '/admin/workspaces?limit=-Infinity',
    '/admin/workspaces?limit=Infinity',
    '/admin/workspaces?offset=1e400',
  ])('refuses %s with 400 naming the parameter, never a 500', async (target) => {
    const from = app.logs.length;
    const response = await fetch(`${app.url}${target}`, { headers: admin });
    expect(response.status).toBe(400);
    const error = await errorOf(response);
    expect(error.code).toBe('validation_error');
    expect(error.message).toMatch(/^The parameter "(before|limit|offset)" /);
    expect(errorsLoggedSince(from)).toEqual([]);
  });

  it.each([
    ['/admin/audit-log?before=12&limit=500', 200],
    ['/admin/workspaces?offset=0&limit=1000', 200],
  ])('takes %s, finite integers in range', async (target, status) => {
    expect((await fetch(`${app.url}${target}`, { headers: admin })).status).toBe(status);
  });
});
