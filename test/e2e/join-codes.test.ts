/**
 * Issue 43, item 5, join codes in real Chromium on the real app and PostgreSQL: the coach's Join
 * codes page (shown only with JOIN_CODES=on) opens a code with a label and shows it large, with its
 * guests live as they join, and closes it after a confirmation; a student on /join sees a wrong
 * code said on the form with their name kept, then joins with the code typed in lower case and lands
 * on their workspace page. axe-core finds no serious or critical problem on either page. Screenshots
 * go to `<tmpdir>/join-codes-*.png`.
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startApp, type TestApp } from '../helpers/app.ts';
import { accessibilityProblems, gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const tag = Date.now().toString(36);
let app: TestApp;
let off: TestApp;
let browser: Browser;
let coach: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource, { JOIN_CODES: 'on' }, { allowlist: { isAllowed: () => false } });
  off = await startApp(db.dataSource);
  browser = await launchBrowser();
}, 60_000);
beforeEach(async () => {
  coach = await newStudent(app.store, 'coach', tag, 'admin');
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await off?.close();
}, 30_000);

const tabOf = (page: Page) => page.getByRole('navigation', { name: 'Admin panel' }).getByRole('link', { name: 'Join codes' });

/** Opens a panel page as the coach at 1280×800, once its live stream answered (a change after this is heard live). */
async function openPanel(page: Page, on: TestApp, to: string): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 800 });
  await signIn(page, coach);
  const live = page.waitForResponse((response) => response.url().endsWith('/admin/events'), { timeout: 30_000 });
  const asked = page.waitForResponse((response) => new URL(response.url()).pathname === '/admin/config/join-codes', { timeout: 30_000 });
  await gotoAndWait(page, `${on.url}${to}`, page.locator('main h1'), 'join-codes-open-failure');
  await Promise.all([live, asked]);
}

describe("the coach's Join codes page", () => {
  it('opens a code shown large with its label, shows guests as they join without a reload, and closes it after a confirmation', async () => {
    await withPage(browser, async (page) => {
      await openPanel(page, app, '/panel/join-codes');
      await tabOf(page).waitFor();
      await page.getByRole('heading', { level: 1, name: 'Join codes' }).waitFor();
      await page.getByText('No code is open.').waitFor();
      await page.getByLabel('Hours').fill('3');
      await page.getByLabel('Label (optional)').fill('Outreach day');
      await page.getByRole('button', { name: 'Open a code' }).click();
      const card = page.locator('.join-code-card');
      await card.waitFor();
      const shown = (await card.locator('.join-code').textContent())!;
      expect(shown).toMatch(/^[A-Z2-9]{4}-[A-Z2-9]{4}$/);
      const [code] = await app.store.joinCodes.list();
      expect(code).toMatchObject({ code: shown, label: 'Outreach day', state: 'open' });
      await card.getByText('Outreach day').waitFor();
      await card.getByText(`${app.url}/join`).waitFor();
      // Large enough to project: a line of the code at least 60 px high at this width (the page's text is 16 px).
      expect((await card.locator('.join-code').boundingBox())!.height).toBeGreaterThanOrEqual(60);

      await page.evaluate(() => ((globalThis as unknown as { notReloaded: boolean }).notReloaded = true));
      await app.store.joinCodes.join({ code: shown, name: 'Ada Lovelace', address: '10.3.0.1' });
      await card.getByText('1 guest').waitFor();
      await card.getByText('Ada Lovelace').waitFor();
      expect(await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
      expect(await accessibilityProblems(page)).toEqual([]);
      await page.screenshot({ path: path.join(os.tmpdir(), 'join-codes-panel.png'), fullPage: true });

      await card.getByRole('button', { name: 'Close now' }).click();
      const dialog = page.getByRole('dialog', { name: `Close join code ${shown}?` });
      await dialog.getByRole('button', { name: 'Close the code' }).click();
      await page.getByText(`Join code ${shown} is closed.`).waitFor();
      await page.getByText('No code is open.').waitFor();
      const past = page.locator('main tbody tr').filter({ has: page.getByRole('rowheader', { name: shown }) });
      await past.getByText(`closed by ${coach.email}`).waitFor();
      expect((await app.store.joinCodes.get(code!.id))!.state).toBe('closed');
      await page.screenshot({ path: path.join(os.tmpdir(), 'join-codes-panel-closed.png'), fullPage: true });
    });
  });

  it('is not offered while JOIN_CODES=off', async () => {
    await withPage(browser, async (page) => {
      await openPanel(page, off, '/panel/help');
      await page.getByRole('heading', { level: 1, name: 'Help' }).waitFor();
      expect(await tabOf(page).count()).toBe(0);
    });
  });
});

describe('a student on /join', () => {
  it('sees a wrong code said with their name kept, then joins with the code in lower case and lands on their workspace page', async () => {
    const code = await app.store.joinCodes.open({ id: null, email: coach.email }, { hours: 2 });
    await withPage(browser, async (page) => {
      await page.setViewportSize({ width: 1280, height: 800 });
      await gotoAndWait(page, `${app.url}/join`, page.getByRole('heading', { name: 'Join your class' }), 'join-codes-join-failure');
      await page.getByLabel('Join code').fill('ZZZZ-ZZZZ');
      await page.getByLabel('Your name').fill('Grace Hopper');
      await page.getByRole('button', { name: 'Join' }).click();
      await page.getByRole('alert').getByText('That join code is not right. Check it on the board and type it again.').waitFor();
      expect(await page.getByLabel('Your name').inputValue()).toBe('Grace Hopper');
      expect(await accessibilityProblems(page)).toEqual([]);
      await page.screenshot({ path: path.join(os.tmpdir(), 'join-codes-wrong.png'), fullPage: true });

      await page.getByLabel('Join code').fill(code.code.replace('-', '').toLowerCase());
      await page.getByRole('button', { name: 'Join' }).click();
      await page.waitForURL(/\/u\/guest-[0-9a-f]{8}\/$/);
      const slug = new URL(page.url()).pathname.split('/')[2]!;
      await page.getByRole('heading', { level: 1, name: `Workspace ${slug}` }).waitFor();
      // The page says when their guest workspace ends: the code's expiry, in the browser's time.
      const ends = await page.evaluate((at) => new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }), code.expiresAt.toISOString());
      await page
        .getByText(`You joined as a guest with a join code. At ${ends}, when the code ends, this workspace is backed up for your coach and then removed.`)
        .waitFor();
      await page.screenshot({ path: path.join(os.tmpdir(), 'join-codes-workspace.png'), fullPage: true });
      const [guest] = (await app.store.joinCodes.get(code.id))!.guests;
      expect(guest).toMatchObject({ name: 'Grace Hopper', workspaceSlug: slug });
    });
  });
});
