/**
 * Issue 14 (security review), in a real browser (Debian Chromium): in path mode a student's editor
 * runs on the control plane's origin, so a page it serves that calls the admin API would do so with
 * the session of whoever opened it. An admin therefore cannot load a student's editor at all (a 403
 * page), while the owner still gets it. The editor is the student's real container (the test
 * image's), serving a hostile page from the home that calls `fetch('/admin/users')`, behind the
 * real proxy, app and PostgreSQL.
 */
import type { Browser, Page } from 'playwright-core';
import type { ServingContainer } from '../../src/docker/runtime.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { launchBrowser, withPage } from '../helpers/browser.ts';
import { createHarness, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { requestsSeen, servingOf, storePage } from '../helpers/stand-ins.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let app: TestApp;
let harness: Harness;
let browser: Browser;
/** Sam's editor, as the engine reports it. */
let editor: ServingContainer;
let sam: Student;
let coach: Student;
const tag = Date.now().toString(36);
/** Where Sam's editor serves the hostile page, under the workspace's path. */
const PAGE = '/www/editor.html';

/** The page a student's code could serve: it reads the admin API with whatever session the browser has, and shows what it got. */
const HOSTILE_PAGE = `<!doctype html><html><head><title>editor</title></head><body><h1>student editor</h1><script>
fetch('/admin/users', { headers: { accept: 'application/json' } })
  .then((answer) => { document.title = 'admin-api:' + answer.status; })
  .catch(() => { document.title = 'admin-api:failed'; });
</script></body></html>`;

beforeAll(async () => {
  app = await startApp(db.dataSource);
  harness = createHarness(db.dataSource, { changes: app.store.changes });
  await harness.controller.start();
  sam = await newStudent(app.store, 'sam', tag);
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  sam.workspace = await openAndWait(harness.store, sam.workspace);
  editor = await servingOf(harness.runtime, { workspaceId: sam.workspace.id });
  await storePage(editor, 'editor.html', HOSTILE_PAGE);
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 30_000);

/** The requests Sam's editor has been sent so far. */
const served = () => requestsSeen(harness.runtime, editor);

/** The signed-in user's session cookies (`cp_session` and its signature) as the browser stores them. */
function cookiesOf(student: Student) {
  return student.cookie.split('; ').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
  });
}

/** Waits until the hostile page has reported what the admin API answered it. */
const adminApiAnswer = async (page: Page) => {
  await page.waitForFunction("document.title.startsWith('admin-api:')", undefined, { timeout: 5000 });
  return page.title();
};

it("refuses an admin a student's editor (a 403 page, so its code never runs with the admin's session), and serves the owner", async () => {
  // The owner gets the editor; its page reaches the admin API only with the owner's own rights.
  await withPage(browser, async (page) => {
    await page.context().addCookies(cookiesOf(sam));
    const response = await page.goto(`${app.url}/u/${sam.workspace.slug}${PAGE}`);
    expect(response?.status()).toBe(200);
    expect(await page.locator('h1').textContent()).toBe('student editor');
    expect(await adminApiAnswer(page)).toBe('admin-api:403');
  });
  const servedToOwner = (await served()).length;
  expect(await served()).toContain(`GET ${PAGE}`);

  // The admin gets a page that says why, and the editor is never asked for anything.
  await withPage(browser, async (page) => {
    await page.context().addCookies(cookiesOf(coach));
    const response = await page.goto(`${app.url}/u/${sam.workspace.slug}${PAGE}`);
    expect(response?.status()).toBe(403);
    expect(response?.headers()['content-type']).toMatch(/^text\/html/);
    const text = (await page.locator('body').textContent()) ?? '';
    expect(text).toContain('ask the student');
    expect(text).not.toContain('student editor');
    // Had the page loaded, its script would have set the title within this time.
    await page.waitForTimeout(500);
    expect(await page.title()).not.toMatch(/^admin-api:/);
    // The admin's session itself still opens the admin API (nothing else was taken from the admin).
    expect((await page.request.get(`${app.url}/admin/users`)).status()).toBe(200);
  });
  expect((await served()).slice(servedToOwner)).toEqual([]);
}, 35_000);
