/**
 * Issue 43 item 2, the coach's side of the help queue in the admin panel, in real Chromium on the
 * real app and PostgreSQL: a student's raised hand (through the student API) shows on whatever
 * panel page the coach is on, as the Help tab's count and a notice naming the student and their
 * message, without a reload; Coming and Resolve on the Help page change the request and the count;
 * a second coach's Coming on a request another coach took shows who; a hostile message is shown as
 * text; axe-core finds no serious or critical problem on the Help page or the notice. Screenshots
 * of the Help page and of the notice go to `<tmpdir>/panel-help-*.png`.
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { StudentHelpAnswer } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { accessibilityProblems, gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const tag = Date.now().toString(36);
let app: TestApp;
let browser: Browser;
let coach: Student;
let head: Student;
let ada: Student;
let bob: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource);
  browser = await launchBrowser();
}, 60_000);
beforeEach(async () => {
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  head = await newStudent(app.store, 'head', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
}, 30_000);

/**
 * Opens a panel page as `who` at 1280×800 and waits until it shows, its help queue was read and its
 * live stream answered: a hand raised after this is news to the page, heard live.
 */
async function open(page: Page, to: string, who: Student = coach): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 800 });
  await signIn(page, who);
  const queueRead = page.waitForResponse((response) => new URL(response.url()).pathname === '/admin/help', { timeout: 30_000 });
  const live = page.waitForResponse((response) => response.url().endsWith('/admin/events'), { timeout: 30_000 });
  await gotoAndWait(page, `${app.url}${to}`, page.locator('main h1'), 'panel-help-open-failure');
  await Promise.all([queueRead, live]);
}

/** Raises `student`'s hand through the student API, as their workspace page or editor does. */
async function raise(student: Student, message?: string): Promise<string> {
  const response = await fetch(`${app.url}/u/${student.workspace.slug}/api/help`, {
    method: 'POST',
    headers: { cookie: student.cookie, origin: app.url, 'content-type': 'application/json' },
    body: JSON.stringify(message === undefined ? {} : { message }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as StudentHelpAnswer).help.id;
}

/** The Help tab's count of waiting requests, as a locator (absent when none wait). */
const badgeOf = (page: Page) => page.getByRole('navigation', { name: 'Admin panel' }).getByRole('link', { name: /^Help/ }).locator('.badge');
/** The Help page's row of a student. */
const rowOf = (page: Page, student: Student) => page.locator('main tbody tr').filter({ has: page.getByRole('rowheader', { name: student.email }) });

describe("the coach's side of the help queue", () => {
  it('shows a raised hand on another page without a reload: the Help tab counts it and a notice names the student and their message', async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/workspaces');
      expect(await badgeOf(page).count()).toBe(0);
      expect(await page.locator('.toasts').count()).toBe(0);
      // A reload would forget this.
      await page.evaluate(() => ((globalThis as unknown as { notReloaded: boolean }).notReloaded = true));

      await raise(ada, 'My robot does not drive');
      const notice = page.locator('.toasts .hand');
      await notice.getByText('My robot does not drive').waitFor();
      expect(await notice.textContent()).toContain(`${ada.email} asks for help:`);
      await badgeOf(page)
        .filter({ hasText: /^1 waiting$/ })
        .waitFor();
      expect(await accessibilityProblems(page)).toEqual([]);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-help-notice.png') });

      await raise(bob);
      await notice.getByText(`${bob.email} asks for help.`).waitFor();
      expect(await notice.textContent()).toContain('2 hands raised since you last dismissed this.');
      expect(await notice.textContent()).not.toContain(ada.email);
      expect(await badgeOf(page).textContent()).toBe('2 waiting');
      expect(await page.getByRole('heading', { name: 'Workspaces' }).isVisible()).toBe(true);
      expect(await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);

      await notice.getByRole('link', { name: 'See the help queue' }).click();
      await page.getByRole('heading', { name: 'Help' }).waitFor();
      await rowOf(page, ada).waitFor();
      expect(new URL(page.url()).pathname).toBe('/panel/help');
      await notice.getByRole('button', { name: 'Dismiss' }).click();
      expect(await page.locator('.toasts').count()).toBe(0);
    });
  });

  it('lists the queue oldest first; Coming and Resolve change the state and the count, and an empty queue says so', async () => {
    const adaRequest = await raise(ada, 'Gradle fails');
    await raise(bob, 'Where is the deploy button?');
    await withPage(browser, async (page) => {
      await open(page, '/panel/help');
      await rowOf(page, bob).waitFor();
      expect(await page.locator('main tbody th[scope=row]').allTextContents()).toEqual([ada.email, bob.email]);
      const adaRow = rowOf(page, ada);
      expect(await adaRow.textContent()).toContain('Gradle fails');
      expect(await adaRow.textContent()).toContain('waiting (#1)');
      expect(await adaRow.getByRole('link', { name: ada.workspace.slug, exact: true }).getAttribute('href')).toBe(
        `/panel/workspaces?q=${encodeURIComponent(ada.workspace.slug)}`,
      );
      expect(await badgeOf(page).textContent()).toBe('2 waiting');
      // The age counts on between reads.
      const ageCell = adaRow.locator('td.number');
      const firstAge = await ageCell.textContent();
      await ageCell.filter({ hasNotText: new RegExp(`^${firstAge}$`) }).waitFor();
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-help-queue.png'), fullPage: true });

      await adaRow.getByRole('button', { name: 'Coming' }).click();
      await adaRow.getByText('taken by you').waitFor();
      await page.getByText(`${ada.email} is told you are coming.`).waitFor();
      await badgeOf(page)
        .filter({ hasText: /^1 waiting$/ })
        .waitFor();
      expect(await adaRow.getByRole('button', { name: 'Coming' }).isDisabled()).toBe(true);
      const [taken] = await db.dataSource.query('SELECT state, taken_by_email FROM help_requests WHERE id = $1', [adaRequest]);
      expect(taken).toEqual({ state: 'taken', taken_by_email: coach.email });
      expect(await accessibilityProblems(page)).toEqual([]);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-help-taken.png'), fullPage: true });

      await adaRow.getByRole('button', { name: 'Resolve' }).click();
      await adaRow.waitFor({ state: 'detached' });
      expect(await badgeOf(page).textContent()).toBe('1 waiting');
      await rowOf(page, bob).getByRole('button', { name: 'Resolve' }).click();
      await page.getByText('No one is asking for help.').waitFor();
      expect(await accessibilityProblems(page)).toEqual([]);
      expect(await badgeOf(page).count()).toBe(0);
      const audit = await db.dataSource.query("SELECT actor_email, action FROM audit_log WHERE action IN ('help.take', 'help.resolve') ORDER BY id");
      expect(audit).toEqual([
        { actor_email: coach.email, action: 'help.take' },
        { actor_email: coach.email, action: 'help.resolve' },
        { actor_email: coach.email, action: 'help.resolve' },
      ]);
    });
  });

  it("tells a second coach whose Coming came after another coach's who is on the way", async () => {
    const request = await raise(ada, 'Stuck');
    await withPage(browser, async (page) => {
      // The second coach's page hears no live change (as if its news were still on the way), so it still offers Coming.
      await page.route('**/admin/events', (route) => route.abort());
      await signIn(page, head);
      await page.setViewportSize({ width: 1280, height: 800 });
      await gotoAndWait(page, `${app.url}/panel/help`, rowOf(page, ada), 'panel-help-second-coach');
      const taken = await fetch(`${app.url}/admin/help/${request}/take`, { method: 'POST', headers: { cookie: coach.cookie, origin: app.url } });
      expect(taken.status).toBe(200);
      await rowOf(page, ada).getByRole('button', { name: 'Coming' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.textContent()).toContain(`${coach.email} is on the way already.`);
      // The list is read again after the refusal: it says who took it.
      await rowOf(page, ada).getByText(`taken by ${coach.email}`).waitFor();
      const [row] = await db.dataSource.query('SELECT taken_by_email FROM help_requests WHERE id = $1', [request]);
      expect(row).toEqual({ taken_by_email: coach.email });
    });
  });

  it('shows a hostile message as text, in the notice and on the Help page, and runs none of it', async () => {
    const hostile = '<img src=x onerror=alert(1)><b>bold</b>';
    await withPage(browser, async (page) => {
      const dialogs: string[] = [];
      page.on('dialog', (dialog) => {
        dialogs.push(dialog.message());
        void dialog.dismiss();
      });
      await open(page, '/panel/users');
      await raise(ada, hostile);
      const notice = page.locator('.toasts .hand');
      await notice.getByText(hostile).waitFor();
      expect(await notice.locator('img, b').count()).toBe(0);

      await page.getByRole('navigation', { name: 'Admin panel' }).getByRole('link', { name: /^Help/ }).click();
      const cell = rowOf(page, ada).locator('td.help-message');
      await cell.waitFor();
      expect(await cell.textContent()).toBe(hostile);
      expect(await page.locator('main img, main b, .toasts img').count()).toBe(0);
      expect(dialogs).toEqual([]);
    });
  });
});
