/**
 * Issue 43 item 4, the student's side of lessons on the workspace page, in a real browser (Debian
 * Chromium) against the real app and PostgreSQL: with no lesson the section is not shown; a lesson
 * that reached the home is listed with the folder it is in; a later version that landed beside the
 * first says so (the student's own folder is as they left it), without a reload. The deliveries are
 * written as the lesson controller writes them (its own work is tested in
 * test/integration/lessons.test.ts). Screenshot at `<tmpdir>/workspace-lessons.png`.
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { startApp, type TestApp } from '../helpers/app.ts';
import { launchBrowser, recordPage, withPage } from '../helpers/browser.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const tag = Date.now().toString(36);
let app: TestApp;
let browser: Browser;
let ada: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource);
  browser = await launchBrowser();
}, 30_000);
beforeEach(async () => {
  ada = await newStudent(app.store, 'ada', tag);
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
}, 30_000);

/** A lesson's version delivered into Ada's home, in `folder`, as the lesson controller records it. */
async function delivered(lessonId: string, version: number, folder: string): Promise<void> {
  await db.dataSource.query(
    `INSERT INTO lesson_versions (lesson_id, version, files, size_bytes, sha256, created_by) VALUES ($1, $2, 1, 10, 'x', 'coach@school.test')`,
    [lessonId, version],
  );
  await db.dataSource.query(
    `INSERT INTO lesson_deliveries (lesson_id, workspace_id, version, state, folder, volume, requested_by, delivered_at)
      VALUES ($1, $2, $3, 'delivered', $4, 'v', 'coach@school.test', now())`,
    [lessonId, ada.workspace.id, version, folder],
  );
}

function cookiesOf(student: Student) {
  return student.cookie.split('; ').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
  });
}

it('lists the lessons that reached the home and where each landed, a later version beside the first, without a reload', async () => {
  const [lesson] = (await db.dataSource.query("INSERT INTO lessons (name, created_by) VALUES ('Drive Intro', 'coach@school.test') RETURNING id")) as {
    id: string;
  }[];
  const id = lesson!.id;
  await withPage(browser, async (page) => {
    const record = recordPage(page);
    await page.context().addCookies(cookiesOf(ada));
    expect((await page.goto(`${app.url}/u/${ada.workspace.slug}/.cp/`))?.status()).toBe(200);
    await page.getByRole('button', { name: 'Ask for help' }).waitFor();
    const section = page.getByRole('region', { name: 'Lessons from your coach' });
    expect(await section.isVisible()).toBe(false);
    await page.evaluate('window.notReloaded = true');

    await delivered(id, 1, 'Drive Intro');
    await section.getByText('Drive Intro: in lessons/Drive Intro.', { exact: true }).waitFor();
    await delivered(id, 2, 'Drive Intro (v2)');
    await section
      .getByText('Drive Intro, version 2: in lessons/Drive Intro (v2), beside your lessons/Drive Intro, which is as you left it.', { exact: true })
      .waitFor();
    expect(await section.getByRole('listitem').allTextContents()).toEqual([
      'Drive Intro, version 2: in lessons/Drive Intro (v2), beside your lessons/Drive Intro, which is as you left it.',
      'Drive Intro: in lessons/Drive Intro.',
    ]);
    expect(await page.evaluate('window.notReloaded')).toBe(true);
    await page.screenshot({ path: path.join(os.tmpdir(), 'workspace-lessons.png'), fullPage: true });
    expect(record.logged.filter((line) => /Content.Security.Policy|pageerror/i.test(line))).toEqual([]);
    record.stop();
  });
}, 60_000);
