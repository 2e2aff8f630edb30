/**
 * Issue 18, framing: no page the control plane serves can be put in a frame, so none can be
 * clicked through by someone who cannot see it (a student's page laying an admin's own sign-in link
 * under a button would sign the admin in as the student). A page on another origin frames each of
 * them in real Chromium, which must refuse every one, while the same page frames one of its own
 * (the control case: framing works, the refusals are the headers). Every answer also says so in its
 * headers, checked one by one.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { launchBrowser, withPage } from '../helpers/browser.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let app: TestApp;
let browser: Browser;
let ada: Student;
let attacker: http.Server;
let attackerUrl = '';
const targets: Record<string, string> = {};

beforeAll(async () => {
  app = await startApp(db.dataSource, {}, { parts: ['http'] });
  // Before any admin exists: the setup link is there to be framed.
  const setup = await app.store.links.createSetup();
  ada = await newStudent(app.store, 'ada', Date.now().toString(36));
  const link = await app.store.links.createSignIn(SYSTEM_ACTOR, ada.email, { isAllowed: () => true });
  Object.assign(targets, {
    'the sign-in page': '/auth/sign-in',
    'a sign-in link': `/auth/link/${link.token}`,
    'the setup link': `/auth/setup/${setup!.token}`,
    'the start page': '/',
    'the panel': '/panel/',
    "a student's workspace page": `/u/${ada.workspace.slug}/`,
    'an error': '/no/such/page',
  });
  // Another origin (another port): a page that frames every target, and one of its own.
  attacker = http.createServer((req, res) => {
    res.setHeader('content-type', 'text/html');
    if (req.url === '/own') return res.end('<p id="own">framed fine</p>');
    const frames = Object.entries(targets).map(([name, target]) => `<iframe title="${name}" src="${app.url}${target}"></iframe>`);
    res.end(`<!doctype html><iframe title="own" src="/own"></iframe>${frames.join('')}`);
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => attacker?.close(resolve));
  await app?.close();
});

it('refuses to be framed on every page, in Chromium, while a page that allows it is framed', async () => {
  await withPage(browser, async (page) => {
    // Signed in as Ada (the attacker's page is on the same site, so her cookies go with its frames).
    const cookies = ada.cookie.split('; ').map((pair) => ({ name: pair.split('=')[0]!, value: pair.slice(pair.indexOf('=') + 1), url: app.url }));
    await page.context().addCookies(cookies);
    await page.goto(attackerUrl, { waitUntil: 'load' });
    const own = page.frameLocator('iframe[title="own"]');
    await own.locator('#own').waitFor();
    for (const name of Object.keys(targets)) {
      const frame = await page.locator(`iframe[title="${name}"]`).elementHandle();
      const content = await frame!.contentFrame();
      // Chromium shows its own error page in a frame it refused to show the page in.
      expect({ name, url: content?.url() }).toEqual({ name, url: 'chrome-error://chromewebdata/' });
    }
  });
});

it('says so in the headers of every answer: X-Frame-Options DENY and frame-ancestors none', async () => {
  for (const [name, target] of Object.entries(targets)) {
    const answer = await fetch(`${app.url}${target}`, { redirect: 'manual', headers: { cookie: ada.cookie, accept: 'text/html' } });
    expect({ name, frameOptions: answer.headers.get('x-frame-options') }).toEqual({ name, frameOptions: 'DENY' });
    expect(answer.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  }
});
