/**
 * Issue 43 item 1, the Class page, in real Chromium on the real app and PostgreSQL: one row per
 * student (no coach); a run's progress and how it ended reach the open page without a reload (a run
 * queued shows Building, a run failed with javac's errors shows the count and the first error, as
 * the run controller records them through the store); presence (online, the robot, NetworkTables)
 * and a raised hand likewise; the attention order puts the hand first; the filters and the search
 * narrow the rows and live in the address; a hostile name and message are shown as text; axe-core
 * finds no serious or critical problem. `GET /` takes a coach here. Screenshots go to
 * `<tmpdir>/panel-class-*.png`.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startApp, type TestApp } from '../helpers/app.ts';
import { accessibilityProblems, gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
let app: TestApp;
let browser: Browser;
let coach: Student;
let ada: Student;
let bob: Student;
let cy: Student;

const JAVAC = [
  '> Task :compileJava FAILED',
  "/home/student/src/main/java/frc/robot/Robot.java:12: error: ';' expected",
  '    int x = 1',
  '             ^',
  '/home/student/src/main/java/frc/robot/Drive.java:30: error: cannot find symbol',
  '2 errors',
].join('\n');

beforeAll(async () => {
  app = await startApp(db.dataSource);
  browser = await launchBrowser();
}, 60_000);
beforeEach(async () => {
  const tag = randomUUID().slice(0, 8);
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
  cy = await newStudent(app.store, 'cy', tag);
  await db.dataSource.query("UPDATE users SET name = 'Ada Lovelace' WHERE id = $1", [ada.userId]);
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
}, 30_000);

/** Opens the Class page as the coach at 1280×800 and waits until it shows the class and its live stream answered. */
async function open(page: Page, query = ''): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 800 });
  await signIn(page, coach);
  const read = page.waitForResponse((response) => new URL(response.url()).pathname === '/admin/class', { timeout: 30_000 });
  const live = page.waitForResponse((response) => response.url().endsWith('/admin/events'), { timeout: 30_000 });
  await gotoAndWait(page, `${app.url}/panel/class${query}`, page.locator('main h1'), 'panel-class-open-failure');
  await Promise.all([read, live]);
  await page.locator('main table.class').waitFor();
}

/** The row of a student. */
const rowOf = (page: Page, student: Student) => page.locator(`main tbody tr[data-student="${student.email}"]`);
/** The students' emails in the order the page lists them. */
const order = (page: Page) => page.locator('main tbody tr').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-student')));

describe('the Class page', () => {
  it('is where GET / takes a coach, lists every student and no coach, and says who has not started', async () => {
    const home = await fetch(`${app.url}/`, { headers: { cookie: coach.cookie }, redirect: 'manual' });
    expect(home.headers.get('location')).toBe('/panel/class');
    await withPage(browser, async (page) => {
      await open(page);
      expect(await order(page)).toEqual([ada.email, bob.email, cy.email]);
      expect(await rowOf(page, ada).getByRole('rowheader').textContent()).toContain('Ada Lovelace');
      expect(await page.locator('main .counts').textContent()).toBe('3 students: 0 online, 0 asking for help, 0 failing, 0 idle, 3 not started.');
      expect(await accessibilityProblems(page)).toEqual([]);
    });
  });

  it('downloads the usage report of the days chosen as CSV, and says when the first day is after the last', async () => {
    await withPage(browser, async (page) => {
      await open(page);
      const form = page.getByRole('form', { name: 'Usage report' });
      await form.getByLabel('From').fill('2026-11-01');
      await form.getByLabel('To').fill('2026-11-02');
      const [download] = await Promise.all([page.waitForEvent('download'), form.getByRole('link', { name: 'Download CSV' }).click()]);
      const href = new URL((await form.getByRole('link', { name: 'Download CSV' }).getAttribute('href'))!, app.url);
      expect(href.pathname).toBe('/admin/usage.csv');
      // The days are the browser's: from the first's midnight to the midnight after the last.
      expect(Date.parse(href.searchParams.get('until')!) - Date.parse(href.searchParams.get('since')!)).toBe(2 * 86_400_000);
      const text = await readFile((await download.path())!, 'utf8');
      expect(text.split('\r\n').slice(0, 2)).toEqual(['email,name,workspace_hours,runs,failed_builds,last_seen', `${ada.email},Ada Lovelace,0.00,0,0,`]);
      await form.getByLabel('From').fill('2026-11-05');
      await form.getByText('The first day must not be after the last.').waitFor();
      expect(await form.getByRole('link', { name: 'Download CSV' }).count()).toBe(0);
    });
  });

  it('shows a run building, then its compile errors and the first of them, without a reload', async () => {
    await app.store.workspaces.open(bob.workspace.id);
    await withPage(browser, async (page) => {
      await open(page);
      await page.evaluate(() => ((globalThis as unknown as { notReloaded: boolean }).notReloaded = true));
      const run = await app.store.runs.create(bob.workspace.id);
      await rowOf(page, bob)
        .getByText(/^Building \d+:\d\d$/)
        .waitFor();
      await app.store.runs.finish(run.id, { status: 'failed', reason: 'compile or boot failed (exit code 1)', exitCode: 1, output: JAVAC });
      await rowOf(page, bob).getByText('2 compile errors').waitFor();
      expect(await rowOf(page, bob).locator('.first-error').textContent()).toBe("Robot.java:12: ';' expected");
      expect(await rowOf(page, bob).getByRole('link', { name: '2 compile errors' }).getAttribute('href')).toBe(`/panel/runs/${run.id}`);
      // Failing: ahead of the others in the attention order, and under the Failing filter.
      expect((await order(page))[0]).toBe(bob.email);
      await page.getByText(/^Failing/).click();
      await page.waitForURL(/show=failing/);
      expect(await order(page)).toEqual([bob.email]);
      expect(await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-class-failing.png'), fullPage: true });
    });
  });

  it('shows a student online, their robot enabled in its mode and NetworkTables connected, as the proxy records them', async () => {
    const server = { id: randomUUID(), publicUrl: app.url, hostname: 'test', pid: process.pid, pidNamespace: 'test' };
    await app.store.servers.heartbeat(server);
    await withPage(browser, async (page) => {
      await open(page);
      const none = { pages: 0, editors: 0, ntClients: 0, driver: false, robotEnabled: false, robotMode: null };
      await app.store.presence.write(server.id, [
        { ...none, workspaceId: cy.workspace.id, editors: 1, ntClients: 1, driver: true, robotEnabled: true, robotMode: 'autonomous' },
      ]);
      await rowOf(page, cy).getByText('Enabled · Autonomous').waitFor();
      expect(await rowOf(page, cy).locator('.presence').getAttribute('title')).toBe('Online now');
      expect(await rowOf(page, cy).getByText('Connected').count()).toBe(1);
      await app.store.presence.write(server.id, [{ ...none, workspaceId: cy.workspace.id, editors: 1, driver: true }]);
      await rowOf(page, cy).getByText('Disabled').waitFor();
      expect(await rowOf(page, cy).getByText('Connected').count()).toBe(0);
    });
  });

  it('keeps up while changes never stop: a change shows while others go on arriving every 100 ms', async () => {
    const server = { id: randomUUID(), publicUrl: app.url, hostname: 'test', pid: process.pid, pidNamespace: 'test' };
    await app.store.servers.heartbeat(server);
    const none = { pages: 0, editors: 0, ntClients: 0, driver: false, robotEnabled: false, robotMode: null };
    await withPage(browser, async (page) => {
      await open(page);
      // Bob comes and goes every 100 ms (a `status` change each time), for 20 s at most.
      let seen = false;
      let writes = 0;
      const churn = (async () => {
        for (; writes < 200 && !seen; writes++) {
          await app.store.presence.write(server.id, [{ ...none, workspaceId: bob.workspace.id, editors: writes % 2 }]);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      await app.store.presence.write(server.id, [{ ...none, workspaceId: cy.workspace.id, driver: true, robotMode: 'test' }]);
      await rowOf(page, cy).getByText('Disabled').waitFor({ timeout: 30_000 });
      const whileChurning = writes < 200;
      seen = true;
      await churn;
      expect(whileChurning).toBe(true);
    });
  });

  it('shows a raised hand first, with its message as text, and the Needs help filter and the search narrow the rows', async () => {
    const hostile = '<img src=x onerror="globalThis.pwned=1"> help';
    await db.dataSource.query('UPDATE users SET name = $2 WHERE id = $1', [cy.userId, '<b>Cy</b>']);
    await withPage(browser, async (page) => {
      await open(page);
      await app.store.help.raise({ id: cy.userId, email: cy.email }, cy.workspace, hostile);
      await rowOf(page, cy)
        .getByText(/^Waiting \d+ s$/)
        .waitFor();
      expect(await rowOf(page, cy).locator('.help-message').textContent()).toBe(hostile);
      expect(await rowOf(page, cy).getByRole('rowheader').textContent()).toContain('<b>Cy</b>');
      expect(await page.evaluate(() => (globalThis as unknown as { pwned?: number }).pwned)).toBeUndefined();
      expect((await order(page))[0]).toBe(cy.email);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-class-help.png'), fullPage: true });

      await page.getByText(/^Needs help/).click();
      await page.waitForURL(/show=help/);
      expect(await order(page)).toEqual([cy.email]);
      await page.getByText(/^Everyone/).click();
      await page.getByRole('searchbox', { name: 'Search' }).fill('lovelace');
      await page.waitForURL(/q=lovelace/);
      expect(await order(page)).toEqual([ada.email]);
      expect(await accessibilityProblems(page)).toEqual([]);
    });
  });
});
