/**
 * Issue 18, the cookie bomb: a workspace's page sets a dozen 4 KB cookies on a parent domain, and
 * from then on the browser's requests to every host under it carry more header than Node reads
 * (16 KB). Node's own answer is a bare 431 on every page, for as long as the cookies live. The
 * control plane answers with a page that says what happened and clears what it can: in real
 * Chromium, the next load works. Over a raw socket: the headers that do it, JSON for a client that
 * asked for no page, a plain 400 for a request that is not HTTP, and the server serving on.
 */
import net from 'node:net';
import type { Browser } from 'playwright-core';
import { startApp, type TestApp } from '../helpers/app.ts';
import { launchBrowser, withPage } from '../helpers/browser.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { freePort } from '../helpers/server.ts';

const db = useTestDatabase({ truncate: false });
let app: TestApp;
let browser: Browser;
let port = 0;
/** The control plane on a name under the domain the bomb is set on (the same-site layout). */
let origin = '';
const bomb = Array.from({ length: 12 }, (_, i) => ({ name: `bomb${i}`, value: 'x'.repeat(4000) }));

beforeAll(async () => {
  port = await freePort();
  origin = `http://cp.school.localhost:${port}`;
  app = await startApp(db.dataSource, { PUBLIC_URL: origin }, { port });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

/** Sends `head` (a request head, CRLF line ends) on a raw socket; resolves with the whole answer once the server ends it. */
function rawRequest(head: string): Promise<{ status: number; headers: [string, string][]; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(head));
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => {
      const [top = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = top.split('\r\n');
      const headers = lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()] as [string, string]);
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
  });
}

const bombHeader = bomb.map(({ name, value }) => `${name}=${value}`).join('; ');
const valuesOf = (headers: [string, string][], name: string) => headers.filter(([key]) => key === name).map(([, value]) => value);

it('answers a browser whose cookies grew too large with a page that says so, clearing the cookies by name on this host and its parent domains', async () => {
  const from = app.logs.length;
  const answer = await rawRequest(
    `GET /panel/ HTTP/1.1\r\nHost: cp.school.localhost:${port}\r\nAccept: text/html\r\nCookie: cp_session=abc; cp_session.sig=def; ${bombHeader}\r\n\r\n`,
  );
  expect(answer.status).toBe(431);
  expect(valuesOf(answer.headers, 'content-type')).toEqual(['text/html; charset=utf-8']);
  expect(answer.body).toContain('<h1>Your browser sent too many cookies</h1>');
  expect(valuesOf(answer.headers, 'clear-site-data')).toEqual(['"cookies"']);
  const cleared = valuesOf(answer.headers, 'set-cookie');
  for (const { name } of bomb) {
    expect(cleared).toContain(`${name}=; Max-Age=0; Path=/`);
    expect(cleared).toContain(`${name}=; Max-Age=0; Path=/; Domain=school.localhost`);
  }
  // The control plane's own session cookie on its own host is no planted one: cleared only where it was planted.
  expect(cleared).not.toContain('cp_session=; Max-Age=0; Path=/');
  expect(cleared).toContain('cp_session=; Max-Age=0; Path=/; Domain=school.localhost');
  expect(valuesOf(answer.headers, 'x-frame-options')).toEqual(['DENY']);
  expect(app.logs.slice(from)).toContainEqual(expect.objectContaining({ level: 'warning', cookies: 14 }));
  expect(app.logs.slice(from).filter((record) => record.level === 'error')).toEqual([]);
  expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
});

it('answers a client that asked for no page with JSON, and a request that is not HTTP with a 400', async () => {
  const api = await rawRequest(`GET /admin/status HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nCookie: ${bombHeader}\r\n\r\n`);
  expect(api.status).toBe(431);
  expect(JSON.parse(api.body)).toEqual({ error: { code: 'headers_too_large', message: expect.stringContaining('too many or too large cookies') } });
  const garbage = await rawRequest('NOT HTTP AT ALL\r\n\r\n');
  expect(garbage.status).toBe(400);
  expect(JSON.parse(garbage.body)).toEqual({ error: { code: 'bad_request', message: 'The request could not be read.' } });
  expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
});

it('gets a bombed browser back: the page clears the cookies, and the next load works', async () => {
  await withPage(browser, async (page) => {
    const context = page.context();
    // As a workspace's page on ada.ws.school.localhost would set them: for the whole parent domain.
    await context.addCookies(bomb.map(({ name, value }) => ({ name, value, domain: '.school.localhost', path: '/' })));
    const refused = await page.goto(`${origin}/auth/sign-in`);
    expect(refused?.status()).toBe(431);
    await page.getByRole('heading', { name: 'Your browser sent too many cookies' }).waitFor();
    expect((await context.cookies()).filter((cookie) => cookie.name.startsWith('bomb'))).toEqual([]);
    // Try again: the start page sends a signed-out browser on to sign in, which it can now.
    const again = page.waitForResponse((response) => response.url().startsWith(`${origin}/auth/sign-in`));
    await page.getByRole('link', { name: 'Try again' }).click();
    expect((await again).status()).toBe(200);
  });
});
