/**
 * A first run in real Chromium: the server, with no admin yet, prints its setup link; opening it
 * shows a form; completing it makes the browser's user the first admin and lands them on the admin
 * panel, signed in. A screenshot of the form is kept for a look.
 */
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { startApp, type TestApp } from '../helpers/app.ts';
import { doAndWait, launchBrowser, withPage } from '../helpers/browser.ts';
import { useTestDatabase } from '../helpers/db.ts';

const db = useTestDatabase({ truncate: false });
const SHOTS = path.join(os.tmpdir(), 'panel-screenshots');
let app: TestApp;
let browser: Browser;

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  app = await startApp(db.dataSource, {}, { parts: ['http', 'setup'] });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
});

it('turns whoever completes the printed setup link into the first admin, on the panel', async () => {
  const printed = app.logs.map((record) => String(record.message)).find((message) => message.startsWith('no admin yet: open '));
  const url = /open (\S+) within/.exec(printed ?? '')?.[1];
  expect(url).toMatch(new RegExp(`^${app.url}/auth/setup/`));
  await withPage(browser, async (page) => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(url!);
    await page.getByLabel('Your name').fill('Grace Hopper');
    await page.getByLabel('Your email').fill('grace@school.test');
    await page.screenshot({ path: path.join(SHOTS, 'setup.png'), fullPage: true });
    await doAndWait(
      page,
      async () => {
        await page.getByRole('button', { name: 'Become the first admin' }).click();
        await page.waitForURL(`${app.url}/panel/`, { timeout: 30_000 });
      },
      page.getByRole('heading', { name: 'Overview' }),
      'first-run-panel-failure',
    );
    expect(await page.getByText('grace@school.test').first().isVisible()).toBe(true);
    // Back to the link: it is spent.
    await page.goto(url!);
    expect(await page.locator('h1').textContent()).toBe('This link cannot be used');
  });
});
