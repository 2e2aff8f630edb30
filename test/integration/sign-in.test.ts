import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AllowlistWatcher } from '../../controllers/allowlist-watcher.ts';
import { AllowlistFile } from '../../src/allowlist/allowlist-file.ts';
import { categoryLogger } from '../../src/log.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { Browser, startOidcProvider, type OidcProvider, type TestAccount } from '../helpers/oidc.ts';
import { freePort } from '../helpers/server.ts';

const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789';
const db = useTestDatabase();
let provider: OidcProvider;
let app: TestApp;
let dir: string;
let file: AllowlistFile;
let watcher: AllowlistWatcher;
let port: number;
/** A second port registered with the provider, for an app of its own (fresh rate limits) that can still complete sign-ins. */
let otherPort: number;

const account = (email: string, verified = true, name = 'A Student'): TestAccount => ({ id: email, email, email_verified: verified, name });

/** The app under test; on `port`, the one registered with the provider, unless told otherwise. */
async function startTestApp(options: { anyPort?: boolean; port?: number } = {}): Promise<TestApp> {
  return startApp(
    db.dataSource,
    {
      OIDC_ISSUER: provider.issuer,
      OIDC_CLIENT_ID: 'control-plane',
      OIDC_CLIENT_SECRET: 'control-plane-secret',
      SERVICE_ADMIN_EMAIL: 'head@school.test',
      ADMIN_TOKEN,
    },
    { allowlist: watcher, allowlistFile: file, ...(!options.anyPort && { port: options.port ?? port }) },
  );
}

beforeAll(async () => {
  port = await freePort();
  otherPort = await freePort();
  provider = await startOidcProvider({
    clients: [
      {
        client_id: 'control-plane',
        client_secret: 'control-plane-secret',
        redirect_uris: [port, otherPort].map((each) => `http://127.0.0.1:${each}/connect/oidc/callback`),
      },
    ],
  });
  dir = await mkdtemp(path.join(os.tmpdir(), 'cp-sign-in-'));
  file = new AllowlistFile(path.join(dir, 'allowlist.json'));
  const logger = captureLogger();
  watcher = new AllowlistWatcher({ file, log: categoryLogger(logger.root, 'auth'), implicit: ['head@school.test'] });
  await watcher.start();
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
  await watcher.stop();
  await provider.close();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  await writeFile(file.path, JSON.stringify({ entries: ['ada@school.test', 'district.test'] }));
  await eventually('allowlist loaded', async () => watcher.isAllowed('ada@school.test') && !watcher.isAllowed('carol@school.test'));
});

/** Signs in through the app (default: the one under test), grant and the provider; returns the browser (with its cookie) and the last answer. */
async function signIn(who: TestAccount | 'deny', returnTo?: string, through: TestApp = app) {
  const browser = new Browser();
  provider.nextLogin(who);
  const query = returnTo === undefined ? '' : `?return_to=${encodeURIComponent(returnTo)}`;
  const { response, chain } = await browser.follow(`${through.url}/auth/start/oidc${query}`);
  return { browser, response, chain, text: await response.text() };
}

const users = async () => (await db.dataSource.query('SELECT email, role FROM users ORDER BY email')) as { email: string; role: string }[];
const me = async (browser: Browser) => browser.fetch(`${app.url}/auth/me`);

describe('sign-in through a real OpenID Connect provider', () => {
  it('admits an allowlisted email: creates the user with a stopped workspace and lands on the workspace page', async () => {
    const { browser, chain } = await signIn(account('Ada@School.test', true, 'Ada Lovelace'));
    expect(chain.at(-1)).toBe(`${app.url}/u/ada/`);
    const answer = await me(browser);
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { user: unknown }).user).toEqual(
      expect.objectContaining({ email: 'ada@school.test', name: 'Ada Lovelace', role: 'user', workspaceSlug: 'ada' }),
    );
    const [workspace] = (await db.dataSource.query('SELECT desired_state FROM workspaces')) as { desired_state: string }[];
    expect(workspace?.desired_state).toBe('stopped');
    // A student's session does not open the admin API.
    expect((await browser.fetch(`${app.url}/admin/status`)).status).toBe(403);
  });

  it("gives an account made by a sign-in link (which carries no name) the provider's name at its first sign-in with the provider, and keeps a name it has", async () => {
    await app.store.users.create({ email: 'ada@school.test' });
    const name = async () => ((await db.dataSource.query("SELECT name FROM users WHERE email = 'ada@school.test'")) as { name: string }[])[0]?.name;
    expect(await name()).toBe('');
    await signIn(account('ada@school.test', true, 'Ada Lovelace'));
    expect(await name()).toBe('Ada Lovelace');
    await signIn(account('ada@school.test', true, 'Someone Else'));
    expect(await name()).toBe('Ada Lovelace');
  });

  it('refuses an email that is not on the allowlist with a page that says so, creates nothing and audits nothing', async () => {
    const { response, text } = await signIn(account('carol@school.test'));
    expect(response.status).toBe(403);
    expect(response.headers.get('content-type')).toMatch(/text\/html/);
    expect(text).toContain('The email carol@school.test is not allowed to sign in here');
    expect(await users()).toEqual([]);
    expect(await db.dataSource.query('SELECT * FROM audit_log')).toEqual([]);
    expect(app.logs).toContainEqual(
      expect.objectContaining({ category: 'control.auth', email: 'carol@school.test', message: 'sign-in refused: email not on the allowlist' }),
    );
  });

  it('refuses an unverified email even when it is allowlisted', async () => {
    const { response, text } = await signIn(account('ada@school.test', false));
    expect(response.status).toBe(403);
    expect(text).toContain('no verified email');
    expect(await users()).toEqual([]);
  });

  it('admits every email at exactly a domain entry, not its subdomains', async () => {
    expect((await signIn(account('bob@district.test'))).chain.at(-1)).toBe(`${app.url}/u/bob/`);
    expect((await signIn(account('eve@evil.district.test'))).response.status).toBe(403);
  });

  it('makes a SERVICE_ADMIN_EMAIL an admin at first sign-in without an allowlist entry', async () => {
    const { browser } = await signIn(account('head@school.test'));
    expect(await users()).toEqual([{ email: 'head@school.test', role: 'admin' }]);
    expect((await browser.fetch(`${app.url}/admin/status`)).status).toBe(200);
  });

  it('follows an allowlist edit made on disk at once', async () => {
    expect((await signIn(account('carol@school.test'))).response.status).toBe(403);
    await writeFile(file.path, JSON.stringify({ entries: ['ada@school.test', 'carol@school.test'] }));
    // The watcher has applied the edit (a watch event and a 50 ms debounce): the next sign-in is let in.
    await eventually('the edit applied', async () => watcher.isAllowed('carol@school.test'), 5000);
    expect((await signIn(account('carol@school.test'))).chain.at(-1)).toBe(`${app.url}/u/carol/`);
  });

  it.each([
    ['a leading space', ' ada@school.test'],
    ['a trailing space', 'ada@school.test '],
    ['a trailing newline', 'ada@school.test\n'],
    ['a NUL byte', 'ada\u0000@school.test'],
    ['a zero-width space', 'ada\u200b@school.test'],
    ['no @', 'ada.school.test'],
    ['two @', 'ada@evil@school.test'],
    ['an IP address', 'ada@127.0.0.1'],
  ])("refuses a provider's email with %s with the sign-in failure page, logged, and signs no one in", async (_kind, email) => {
    // Ada exists: an email that could be trimmed or read into hers must not reach her account.
    const ada = await signIn(account('ada@school.test'));
    expect(ada.chain.at(-1)).toBe(`${app.url}/u/ada/`);
    const from = app.logs.length;
    const { response, text, browser } = await signIn(account(email));
    expect(response.status).toBe(403);
    expect(response.headers.get('content-type')).toMatch(/text\/html/);
    expect(text).toContain('Sign-in failed');
    expect(text).toContain('not a valid email address');
    expect((await me(browser)).status).toBe(401);
    expect(await users()).toEqual([{ email: 'ada@school.test', role: 'user' }]);
    const logged = app.logs.slice(from);
    expect(logged).toContainEqual(expect.objectContaining({ category: 'control.auth', level: 'info', message: 'sign-in refused: the email is not valid' }));
    expect(logged.filter((record) => record.level === 'error')).toEqual([]);
  });

  it('keeps a sign-in start for ten minutes and the signed-in session for seven days', async () => {
    const browser = new Browser();
    await browser.fetch(`${app.url}/auth/start/oidc`);
    const secondsLeft = async (id: string | undefined) => {
      const rows = (await db.dataSource.query('SELECT user_id, extract(epoch FROM expires_at - now()) AS seconds FROM sessions WHERE id = $1', [id])) as {
        user_id: string | null;
        seconds: string;
      }[];
      return { signedIn: rows[0]?.user_id !== null, seconds: Number(rows[0]?.seconds) };
    };
    const started = await secondsLeft(browser.cookie(app.url, 'cp_session'));
    expect(started.signedIn).toBe(false);
    expect(started.seconds).toBeLessThanOrEqual(10 * 60 + 15);
    provider.nextLogin(account('ada@school.test'));
    await browser.follow(`${app.url}/auth/start/oidc`);
    const signedIn = await secondsLeft(browser.cookie(app.url, 'cp_session'));
    expect(signedIn.signedIn).toBe(true);
    expect(signedIn.seconds).toBeGreaterThan(7 * 24 * 3600 - 60);
  });

  it('shows a clear page when the user denies consent', async () => {
    const { response, text } = await signIn('deny');
    expect(response.status).toBe(403);
    expect(text).toContain('You did not allow the sign-in');
  });

  it('refuses a callback whose state does not match, with a page', async () => {
    const browser = new Browser();
    provider.nextLogin(account('ada@school.test'));
    let url = `${app.url}/auth/start/oidc`;
    // Step through the redirects until the provider sends the browser back to grant's callback.
    for (let hop = 0; hop < 10 && !url.startsWith(`${app.url}/connect/oidc/callback`); hop++) {
      const response = await browser.fetch(url);
      url = new URL(response.headers.get('location')!, url).toString();
    }
    const tampered = new URL(url);
    tampered.searchParams.set('state', 'forged-state');
    const { response } = await browser.follow(tampered.toString());
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('state mismatch');
    expect(await users()).toEqual([]);
  });

  it('regenerates the session at sign-in, and sign-out ends it', async () => {
    const browser = new Browser();
    provider.nextLogin(account('ada@school.test'));
    await browser.fetch(`${app.url}/auth/start/oidc`);
    const before = browser.cookie(app.url, 'cp_session');
    expect(before).toBeDefined();
    const { chain } = await browser.follow(`${app.url}/auth/start/oidc`);
    expect(chain.at(-1)).toBe(`${app.url}/u/ada/`);
    const after = browser.cookie(app.url, 'cp_session');
    expect(after).toBeDefined();
    expect(after).not.toBe(before);
    const out = await browser.fetch(`${app.url}/auth/sign-out`, { method: 'POST', headers: { origin: app.url } });
    expect(out.status).toBe(303);
    expect((await me(browser)).status).toBe(401);
    expect(await db.dataSource.query('SELECT id FROM sessions WHERE user_id IS NOT NULL')).toEqual([]);
  });

  it('refuses a cross-site sign-out', async () => {
    const { browser } = await signIn(account('ada@school.test'));
    const out = await browser.fetch(`${app.url}/auth/sign-out`, { method: 'POST', headers: { origin: 'http://evil.example' } });
    expect(out.status).toBe(403);
    expect((await me(browser)).status).toBe(200);
  });

  it('returns to a same-origin return_to, and ignores an off-site one', async () => {
    expect((await signIn(account('ada@school.test'), '/auth/me?x=1')).chain.at(-1)).toBe(`${app.url}/auth/me?x=1`);
    expect((await signIn(account('ada@school.test'), '//evil.example/x')).chain.at(-1)).toBe(`${app.url}/u/ada/`);
    expect((await signIn(account('ada@school.test'), 'https://evil.example/')).chain.at(-1)).toBe(`${app.url}/u/ada/`);
  });

  it('reads the role on every request: a demotion and a deletion take effect at once', async () => {
    const head = (await signIn(account('head@school.test'))).browser;
    const ada = await signIn(account('ada@school.test'));
    const [adaRow] = (await db.dataSource.query("SELECT id FROM users WHERE email = 'ada@school.test'")) as { id: string }[];
    const promote = await head.fetch(`${app.url}/admin/users/${adaRow!.id}/promote`, { method: 'POST', headers: { origin: app.url } });
    expect(promote.status).toBe(200);
    expect((await ada.browser.fetch(`${app.url}/admin/status`)).status).toBe(200);
    const demote = await head.fetch(`${app.url}/admin/users/${adaRow!.id}/demote`, { method: 'POST', headers: { origin: app.url } });
    expect(demote.status).toBe(200);
    // Demotion takes the admin API at once and keeps them signed in, as a student.
    expect((await ada.browser.fetch(`${app.url}/admin/status`)).status).toBe(403);
    expect((await me(ada.browser)).status).toBe(200);
    const again = await signIn(account('ada@school.test'));
    const remove = await head.fetch(`${app.url}/admin/users/${adaRow!.id}`, { method: 'DELETE', headers: { origin: app.url } });
    expect(remove.status).toBe(200);
    expect((await me(again.browser)).status).toBe(401);
  });

  it('ends the access of a student taken off the allowlist, at once', async () => {
    const { browser } = await signIn(account('ada@school.test'));
    expect((await me(browser)).status).toBe(200);
    await writeFile(file.path, JSON.stringify({ entries: ['district.test'] }));
    await eventually('allowlist reloaded', async () => !watcher.isAllowed('ada@school.test'));
    expect((await me(browser)).status).toBe(401);
    expect((await browser.fetch(`${app.url}/u/ada/x`)).status).toBe(401);
  });

  it('requires a same-origin check on cookie-authenticated admin changes', async () => {
    const { browser } = await signIn(account('head@school.test'));
    const post = (headers: Record<string, string>) =>
      browser.fetch(`${app.url}/admin/config/max-active-containers`, {
        method: 'POST',
        body: '{"value": 5}',
        headers: { 'content-type': 'application/json', ...headers },
      });
    const refused = await post({});
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('csrf_failed');
    expect((await post({ 'sec-fetch-site': 'cross-site', origin: app.url })).status).toBe(403);
    expect((await post({ origin: 'http://evil.example' })).status).toBe(403);
    expect((await post({ origin: app.url })).status).toBe(200);
    expect((await post({ 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    const audit = (await db.dataSource.query('SELECT actor_email, action FROM audit_log')) as unknown[];
    expect(audit).toEqual([
      { actor_email: 'head@school.test', action: 'config.max-active-containers' },
      { actor_email: 'head@school.test', action: 'config.max-active-containers' },
    ]);
  });

  it('lists the enabled providers on the sign-in page', async () => {
    const page = await fetch(`${app.url}/auth/sign-in?return_to=%2Fadmin`);
    const text = await page.text();
    expect(page.status).toBe(200);
    expect(text).toContain('href="/auth/start/oidc?return_to=%2Fadmin"');
    expect(text).not.toContain('/auth/start/github');
  });
});

describe('rate limits per client address', () => {
  it('locks out wrong bearer tokens after 20 from an address, never the right one', async () => {
    const limited = await startTestApp({ anyPort: true });
    try {
      for (let i = 0; i < 20; i++) expect((await fetch(`${limited.url}/admin/status`, { headers: { authorization: 'Bearer wrong-token' } })).status).toBe(401);
      const locked = await fetch(`${limited.url}/admin/status`, { headers: { authorization: 'Bearer wrong-token' } });
      expect(locked.status).toBe(429);
      expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await fetch(`${limited.url}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('limits failing sign-in callbacks to 120 a minute, and never blocks a sign-in the browser started', async () => {
    const limited = await startTestApp({ port: otherPort });
    try {
      for (let i = 0; i < 125; i++) await fetch(`${limited.url}/auth/callback/oidc`);
      const refused = await fetch(`${limited.url}/auth/callback/oidc`);
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      // A class behind the same address still signs in.
      const { chain, browser } = await signIn(account('ada@school.test'), undefined, limited);
      expect(chain.at(-1)).toBe(`${limited.url}/u/ada/`);
      expect((await browser.fetch(`${limited.url}/auth/me`)).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('rate limits behind a proxy', () => {
  it('counts by the address the nearest proxy saw, not by what a client writes into X-Forwarded-For', async () => {
    const proxied = await startApp(db.dataSource, { ADMIN_TOKEN, TRUST_PROXY: 'true' });
    try {
      const attempt = (i: number) =>
        fetch(`${proxied.url}/admin/status`, { headers: { authorization: 'Bearer wrong-token', 'x-forwarded-for': `10.0.0.${i}, 192.0.2.1` } });
      for (let i = 0; i < 20; i++) expect((await attempt(i)).status).toBe(401);
      expect((await attempt(99)).status).toBe(429);
    } finally {
      await proxied.close();
    }
  });
});

describe('admin API for users and the allowlist', () => {
  const admin = (method: string, url: string, body?: unknown) =>
    fetch(`${app.url}${url}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });

  it('lists users with id, name, email, role and workspace slug', async () => {
    await signIn(account('ada@school.test', true, 'Ada'));
    const body = (await (await admin('GET', '/admin/users')).json()) as { users: unknown[] };
    expect(body.users).toEqual([
      { id: expect.any(String), name: 'Ada', email: 'ada@school.test', role: 'user', workspaceId: expect.any(String), workspaceSlug: 'ada' },
    ]);
  });

  it('refuses to demote the last admin and to promote a user who does not exist', async () => {
    await signIn(account('head@school.test'));
    const [head] = (await db.dataSource.query('SELECT id FROM users')) as { id: string }[];
    const last = await admin('POST', `/admin/users/${head!.id}/demote`);
    expect(last.status).toBe(409);
    expect(((await last.json()) as { error: { code: string } }).error.code).toBe('last_admin');
    const missing = await admin('POST', '/admin/users/00000000-0000-4000-8000-000000000000/promote');
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('user_not_found');
  });

  it('deletes a user and marks their workspace deleted, audited', async () => {
    await signIn(account('ada@school.test'));
    const [ada] = (await db.dataSource.query('SELECT id FROM users')) as { id: string }[];
    expect((await admin('DELETE', `/admin/users/${ada!.id}`)).status).toBe(200);
    expect(await users()).toEqual([]);
    expect(await db.dataSource.query('SELECT desired_state FROM workspaces')).toEqual([{ desired_state: 'deleted' }]);
    expect(await db.dataSource.query('SELECT action, actor_email FROM audit_log')).toEqual([{ action: 'user.delete', actor_email: 'admin-token' }]);
  });

  it('lists, adds and removes allowlist entries, normalised and audited, each in use by the time it is answered', async () => {
    expect(await (await admin('GET', '/admin/allowlist')).json()).toEqual({ entries: ['ada@school.test', 'district.test'], implicit: ['head@school.test'] });
    const added = await admin('POST', '/admin/allowlist', { entry: ' Carol@School.TEST ' });
    expect(added.status).toBe(201);
    expect(await added.json()).toEqual({ entry: 'carol@school.test', added: true });
    // Answered: in use, so a sign-in link for that email is made at once (issue 44 item 6: it was refused 409 not_allowlisted).
    expect(watcher.isAllowed('carol@school.test')).toBe(true);
    expect((await admin('POST', '/admin/sign-in-links', { email: 'carol@school.test' })).status).toBe(201);
    expect((await admin('POST', '/admin/allowlist', { entry: 'carol@school.test' })).status).toBe(200);
    const removed = await admin('DELETE', `/admin/allowlist/${encodeURIComponent('carol@school.test')}`);
    expect(await removed.json()).toEqual({ entry: 'carol@school.test', removed: true });
    expect(watcher.isAllowed('carol@school.test')).toBe(false);
    expect(((await (await admin('POST', '/admin/sign-in-links', { email: 'carol@school.test' })).json()) as { error: { code: string } }).error.code).toBe(
      'not_allowlisted',
    );
    expect((await admin('DELETE', '/admin/allowlist/nobody%40school.test')).status).toBe(404);
    expect(await db.dataSource.query('SELECT action, target_id FROM audit_log WHERE action LIKE $1 ORDER BY id', ['allowlist.%'])).toEqual([
      { action: 'allowlist.add', target_id: 'carol@school.test' },
      { action: 'allowlist.remove', target_id: 'carol@school.test' },
    ]);
  });

  it('refuses an invalid entry with 400 and a malformed file with 409, changing nothing', async () => {
    const invalid = await admin('POST', '/admin/allowlist', { entry: 'not an entry' });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { error: { code: string } }).error.code).toBe('invalid_allowlist_entry');
    await writeFile(file.path, '{"entries": [');
    const broken = await admin('POST', '/admin/allowlist', { entry: 'dave@school.test' });
    expect(broken.status).toBe(409);
    expect(((await broken.json()) as { error: { code: string } }).error.code).toBe('allowlist_file_invalid');
    expect(await db.dataSource.query('SELECT * FROM audit_log')).toEqual([]);
  });
});

describe('the sign-in page without providers', () => {
  it("tells a student to ask their coach for a new link, in a student's words (the operator's hint is the log's)", async () => {
    const bare = await startApp(db.dataSource);
    try {
      const text = await (await fetch(`${bare.url}/auth/sign-in`)).text();
      expect(text).toContain('Sign-in here is by a link from your coach. If your link was already used or has expired, ask your coach for a new one.');
      expect(text).not.toMatch(/CLIENT_ID|operator|README/);
      expect(bare.logs).toContainEqual(
        expect.objectContaining({ category: 'control.auth', message: expect.stringMatching(/^no sign-in provider configured: .*GITHUB_CLIENT_ID/) }),
      );
      expect((await fetch(`${bare.url}/auth/start/github`)).status).toBe(404);
    } finally {
      await bare.close();
    }
  });
});
