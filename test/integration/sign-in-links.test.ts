/**
 * One-time links over HTTP, on a real PostgreSQL database: the first-run setup link the server
 * prints while no admin exists (whoever completes its form becomes the first admin: allowlisted,
 * signed in, audited), and the sign-in links an admin (or the CLI) makes for allowlisted emails.
 * Each is used once, only before it expires, only by a same-origin form POST (opening it spends
 * nothing), stored hashed; refusals are pages, counted per address.
 */
import { createHash } from 'node:crypto';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent } from '../helpers/workspaces.ts';

const db = useTestDatabase();
let app: TestApp;
/** Who may sign in, for the app under test (a set the tests edit). */
let allowed: Set<string>;

beforeEach(async () => {
  allowed = new Set(['ada@school.test', 'bob@school.test', 'coach@school.test']);
  app = await startApp(db.dataSource, {}, { parts: ['http', 'setup'], allowlist: { isAllowed: (email) => allowed.has(email) } });
});
afterEach(async () => app.close());

const SETUP_LINE = /^no admin yet: open (http:\/\/127\.0\.0\.1:\d+)(\/auth\/setup\/[A-Za-z0-9_-]{43}) within 15 minutes to become the first admin/;

/** The path of the setup link the app printed at start. */
function printedSetupPath(): string {
  const line = app.logs.map((record) => String(record.message)).find((message) => SETUP_LINE.test(message));
  if (!line) throw new Error('no setup link was printed');
  const [, origin, path] = SETUP_LINE.exec(line)!;
  expect(origin).toBe(app.url);
  return path!;
}

/** A form POST as a browser sends it from one of our pages. */
function post(path: string, fields: Record<string, string>, headers: Record<string, string> = { origin: '', 'sec-fetch-site': 'same-origin' }) {
  return fetch(`${app.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...Object.fromEntries(Object.entries(headers).filter(([, value]) => value !== '')) },
    body: new URLSearchParams(fields).toString(),
  });
}

/** The session cookie a response set (name=value pairs, as the browser sends them back). */
const cookieOf = (response: Response) =>
  response.headers
    .getSetCookie()
    .map((cookie) => cookie.split(';')[0])
    .join('; ');

const auditRows = async (): Promise<{ actor_email: string; action: string; target_kind: string; metadata: Record<string, unknown> | null }[]> =>
  db.dataSource.query('SELECT actor_email, action, target_kind, metadata FROM audit_log ORDER BY id');

/** Unused links of this purpose. */
const unused = async (purpose: 'setup' | 'sign-in') =>
  Number((await db.dataSource.query('SELECT count(*) AS n FROM sign_in_links WHERE used_at IS NULL AND purpose = $1', [purpose]))[0].n);

describe('the first-run setup link', () => {
  it('is printed at start while no admin exists, and makes whoever completes it the first admin: allowlisted, signed in, audited', async () => {
    const path = printedSetupPath();
    const token = path.split('/').at(-1)!;
    // Only its hash is kept.
    const stored: { token_hash: string }[] = await db.dataSource.query('SELECT token_hash FROM sign_in_links');
    expect(stored).toEqual([{ token_hash: createHash('sha256').update(token).digest('hex') }]);

    const page = await fetch(`${app.url}${path}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(await page.text()).toContain('Become the first admin');

    const done = await post(path, { name: 'Grace Hopper', email: 'Grace@School.test' });
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toBe('/panel/');
    const me = await fetch(`${app.url}/auth/me`, { headers: { cookie: cookieOf(done) } });
    expect(await me.json()).toMatchObject({ user: { email: 'grace@school.test', role: 'admin', name: 'Grace Hopper' } });
    expect(await app.store.allowlist.entries()).toEqual(['grace@school.test']);
    expect(await auditRows()).toEqual([
      { actor_email: 'grace@school.test', action: 'auth.setup', target_kind: 'sign-in-link', metadata: { name: 'Grace Hopper' } },
      { actor_email: 'grace@school.test', action: 'allowlist.add', target_kind: 'allowlist', metadata: null },
    ]);

    // Once only.
    const again = await post(path, { name: 'Mallory', email: 'mallory@school.test' });
    expect(again.status).toBe(410);
    expect(await again.text()).toContain('This setup link is not valid');
    expect(await app.store.users.getByEmail('mallory@school.test')).toBeUndefined();
  });

  it('is not made when an admin exists', async () => {
    await app.close();
    await newStudent(app.store, 'head', 'x', 'admin');
    app = await startApp(db.dataSource, {}, { parts: ['http', 'setup'] });
    expect(() => printedSetupPath()).toThrow('no setup link was printed');
    expect(await app.store.links.createSetup()).toBeUndefined();
  });

  it('stops working once an admin exists by other means (a sign-in of SERVICE_ADMIN_EMAIL)', async () => {
    const path = printedSetupPath();
    await app.store.users.create({ email: 'head@school.test', role: 'admin' });
    expect((await fetch(`${app.url}${path}`)).status).toBe(410);
    const refused = await post(path, { name: 'Late', email: 'late@school.test' });
    expect(refused.status).toBe(409);
    expect(await refused.text()).toContain('An admin exists already');
    expect(await app.store.users.getByEmail('late@school.test')).toBeUndefined();
  });

  it('expires after 15 minutes, and a new one replaces the one before', async () => {
    const first = printedSetupPath();
    const [{ minutes }] = await db.dataSource.query(
      "SELECT round(extract(epoch FROM expires_at - created_at) / 60) AS minutes FROM sign_in_links WHERE purpose = 'setup'",
    );
    expect(Number(minutes)).toBe(15);
    const second = await app.store.links.createSetup();
    expect((await fetch(`${app.url}${first}`)).status).toBe(410);
    expect((await fetch(`${app.url}/auth/setup/${second!.token}`)).status).toBe(200);
    await db.dataSource.query("UPDATE sign_in_links SET expires_at = now() - interval '1 second'");
    expect((await fetch(`${app.url}/auth/setup/${second!.token}`)).status).toBe(410);
  });

  it.each([
    ['no name', { name: '  ', email: 'grace@school.test' }, 'Enter your name.'],
    ['a name with a control character', { name: 'Grace\u0007', email: 'grace@school.test' }, 'A name cannot hold control or invisible characters.'],
    ['an invalid email', { name: 'Grace', email: 'grace@' }, 'Not a valid email'],
  ])('answers a form with %s with the form again, its message and what was typed, and spends nothing', async (_name, fields, message) => {
    const path = printedSetupPath();
    const response = await post(path, fields);
    expect(response.status).toBe(400);
    const text = await response.text();
    expect(text).toContain(message);
    expect(text).toContain(`value="${fields.email}"`);
    expect(await unused('setup')).toBe(1);
    expect((await post(path, { name: 'Grace', email: 'grace@school.test' })).status).toBe(303);
  });

  it('refuses a POST from another site with a page, and spends nothing', async () => {
    const path = printedSetupPath();
    const response = await post(path, { name: 'Grace', email: 'grace@school.test' }, { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' });
    expect(response.status).toBe(403);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await response.text()).toContain('came from another site');
    expect(await unused('setup')).toBe(1);
  });

  it('refuses a compressed form with a page (415), and spends nothing', async () => {
    const path = printedSetupPath();
    const response = await post(path, { name: 'Grace', email: 'grace@school.test' }, { 'sec-fetch-site': 'same-origin', 'content-encoding': 'gzip' });
    expect(response.status).toBe(415);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await response.text()).toContain('uncompressed only');
    expect(await unused('setup')).toBe(1);
  });
});

describe('sign-in links', () => {
  /** An admin's session and the headers of their same-origin API calls. */
  async function admin() {
    const coach = await newStudent(app.store, 'coach', 'x', 'admin');
    return { coach, headers: { cookie: coach.cookie, 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' } };
  }
  const mint = (headers: Record<string, string>, body: unknown) =>
    fetch(`${app.url}/admin/sign-in-links`, { method: 'POST', headers, body: JSON.stringify(body) });

  it('are made by an admin for an allowlisted email (audited), shown before they are used, and sign in once, making the account', async () => {
    const { coach, headers } = await admin();
    const response = await mint(headers, { email: 'Ada@school.test', expiresInMinutes: 30 });
    expect(response.status).toBe(201);
    const { link } = (await response.json()) as { link: { id: string; email: string; url: string; expiresAt: string } };
    expect(link.email).toBe('ada@school.test');
    expect(link.url).toMatch(new RegExp(`^${app.url}/auth/link/[A-Za-z0-9_-]{43}$`));
    expect(Date.parse(link.expiresAt) - Date.now()).toBeGreaterThan(29 * 60_000);
    expect(Date.parse(link.expiresAt) - Date.now()).toBeLessThanOrEqual(30 * 60_000);
    const path = new URL(link.url).pathname;

    // Opening it (a mail scanner, a chat preview) spends nothing.
    for (let i = 0; i < 2; i++) {
      const page = await fetch(link.url);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('Sign in as ada@school.test');
    }
    expect(await app.store.users.getByEmail('ada@school.test')).toBeUndefined();

    const signedIn = await post(path, {});
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.get('location')).toBe('/');
    const me = await fetch(`${app.url}/auth/me`, { headers: { cookie: cookieOf(signedIn) } });
    expect(await me.json()).toMatchObject({ user: { email: 'ada@school.test', role: 'user' } });
    expect((await post(path, {})).status).toBe(410);
    expect(await auditRows()).toEqual([
      { actor_email: coach.email, action: 'auth.sign-in-link', target_kind: 'sign-in-link', metadata: { email: 'ada@school.test', expiresAt: link.expiresAt } },
      { actor_email: 'ada@school.test', action: 'auth.sign-in-link.use', target_kind: 'sign-in-link', metadata: null },
    ]);
  });

  it('sign in an existing user as themselves', async () => {
    const ada = await newStudent(app.store, 'ada', 'y');
    allowed.add(ada.email);
    const link = await app.store.links.createSignIn(SYSTEM_ACTOR, ada.email, { isAllowed: () => true });
    const signedIn = await post(`/auth/link/${link.token}`, {});
    const me = await fetch(`${app.url}/auth/me`, { headers: { cookie: cookieOf(signedIn) } });
    expect(await me.json()).toMatchObject({ user: { id: ada.userId, email: ada.email } });
  });

  it.each([
    ['an email not on the allowlist', { email: 'eve@elsewhere.test' }, 409, 'not_allowlisted'],
    ['an invalid email', { email: 'ada@@school.test' }, 400, 'invalid_email'],
    ['no expiry in minutes', { email: 'ada@school.test', expiresInMinutes: 0 }, 400, 'validation_error'],
    ['an expiry over a day', { email: 'ada@school.test', expiresInMinutes: 1441 }, 400, 'validation_error'],
    ['an unknown field', { email: 'ada@school.test', role: 'admin' }, 400, 'validation_error'],
  ])('are refused for %s, with nothing made', async (_name, body, status, code) => {
    const { headers } = await admin();
    const response = await mint(headers, body);
    expect(response.status).toBe(status);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code);
    expect(await unused('sign-in')).toBe(0);
  });

  it('are made for admins only (401 without a session, 403 for a student)', async () => {
    const ada = await newStudent(app.store, 'ada', 'z');
    allowed.add(ada.email);
    expect((await mint({ 'content-type': 'application/json' }, { email: 'bob@school.test' })).status).toBe(401);
    expect((await mint({ cookie: ada.cookie, 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' }, { email: 'bob@school.test' })).status).toBe(
      403,
    );
    expect(await unused('sign-in')).toBe(0);
  });

  it('do not sign in once expired', async () => {
    const link = await app.store.links.createSignIn(SYSTEM_ACTOR, 'bob@school.test', { isAllowed: () => true });
    await db.dataSource.query("UPDATE sign_in_links SET expires_at = now() - interval '1 second'");
    expect((await fetch(`${app.url}/auth/link/${link.token}`)).status).toBe(410);
    expect((await post(`/auth/link/${link.token}`, {})).status).toBe(410);
    expect(await app.store.users.getByEmail('bob@school.test')).toBeUndefined();
  });

  it('do not sign in an email taken off the allowlist since, and stay unused', async () => {
    const link = await app.store.links.createSignIn(SYSTEM_ACTOR, 'bob@school.test', { isAllowed: () => true });
    allowed.delete('bob@school.test');
    const response = await post(`/auth/link/${link.token}`, {});
    expect(response.status).toBe(403);
    expect(await response.text()).toContain('bob@school.test is no longer on the allowlist');
    expect(await unused('sign-in')).toBe(1);
  });

  it('answer a mistyped, unknown or setup link with the same page, and an address that keeps trying with 429', async () => {
    const link = await app.store.links.createSignIn(SYSTEM_ACTOR, 'bob@school.test', { isAllowed: () => true });
    for (const token of [link.token.slice(0, 40), 'A'.repeat(43), printedSetupPath().split('/').at(-1)!]) {
      const response = await fetch(`${app.url}/auth/link/${token}`);
      expect(response.status).toBe(410);
      expect(await response.text()).toContain('This sign-in link is not valid');
    }
    let last: Response | undefined;
    for (let i = 0; i < 20 && last?.status !== 429; i++) last = await fetch(`${app.url}/auth/link/${'B'.repeat(43)}`);
    expect(last!.status).toBe(429);
    expect(last!.headers.get('content-type')).toMatch(/^text\/html/);
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
