/**
 * Issue 43 item 3, a coach's look at a student's workspace in the admin panel, in real Chromium on
 * the real app, PostgreSQL and Docker Engine (the student's home a real volume): from the Class
 * page, Look opens the workspace read only, which the student's workspace answer says at once; the
 * file tree opens folder by folder; a file is shown as text (markup in it and in its name stays
 * text), a binary one named; leaving the page ends the look; axe-core finds no serious or critical
 * problem; the run in progress shows its output live, as text. Screenshots go to
 * `<tmpdir>/panel-look.png` and `panel-look-run.png`.
 */
import os from 'node:os';
import path from 'node:path';
import { PassThrough, pipeline } from 'node:stream';
import type { Browser } from 'playwright-core';
import tar from 'tar-stream';
import { DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { names } from '../../src/docker/runtime.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { accessibilityProblems, gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { eventually, newControlPlaneId, removeEverything, TEST_ENV, TEST_IMAGE } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const controlPlaneId = newControlPlaneId();
const runtime = new DockerRuntime({ controlPlaneId });
let app: TestApp;
let browser: Browser;
let coach: Student;
let ada: Student;

beforeAll(async () => {
  app = await startApp(db.dataSource, { ...TEST_ENV, CONTROL_PLANE_ID: controlPlaneId });
  browser = await launchBrowser();
}, 60_000);
beforeEach(async () => {
  const tag = Date.now().toString(36);
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  await db.dataSource.query("UPDATE users SET name = 'Ada Lovelace' WHERE id = $1", [ada.userId]);
  const body = new PassThrough();
  const pack = tar.pack();
  const owner = { uid: 1000, gid: 1000 };
  pack.entry({ name: 'student', type: 'directory', mode: 0o40755, ...owner });
  pack.entry({ name: 'student/src', type: 'directory', mode: 0o40755, ...owner });
  pack.entry({ name: 'student/src/Robot.java', ...owner }, 'public class Robot {\n  // <img src=x onerror="globalThis.pwned=1">\n}\n');
  pack.entry({ name: 'student/<em>notes.txt', ...owner }, 'plain\n');
  pack.entry({ name: 'student/logo.png', ...owner }, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0x0d]));
  pack.finalize();
  pipeline(pack, body, () => undefined);
  await runtime.importVolume(names.home(ada.workspace), { workspaceId: ada.workspace.id, slug: ada.workspace.slug }, TEST_IMAGE, body);
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await removeEverything(controlPlaneId);
}, 60_000);

const looking = async () => (await app.store.looks.activeOn(ada.workspace.id)) !== undefined;

describe("a coach's look at a student's workspace", () => {
  it('opens from the Class page read only, tells the student, shows the files as text, and ends when the coach leaves', async () => {
    await withPage(browser, async (page) => {
      await page.setViewportSize({ width: 1280, height: 800 });
      await signIn(page, coach);
      await gotoAndWait(page, `${app.url}/panel/class`, page.locator('main table.class'), 'panel-look-open-failure');
      expect(await looking()).toBe(false);
      await page.getByRole('link', { name: "Look at Ada Lovelace's workspace" }).click();
      await page.getByRole('heading', { name: "Looking at Ada Lovelace's workspace" }).waitFor();
      expect(new URL(page.url()).pathname).toBe(`/panel/look/${ada.workspace.id}`);
      await eventually('the look begun', async () => (await looking()) || undefined);

      const files = page.getByRole('region', { name: 'Files' });
      await files.getByRole('button', { name: 'src/' }).click();
      await files.getByRole('button', { name: 'Robot.java' }).click();
      const shown = page.locator('pre.file');
      await shown.waitFor();
      expect(await shown.textContent()).toBe('public class Robot {\n  // <img src=x onerror="globalThis.pwned=1">\n}\n');
      expect(await files.getByRole('button', { name: '<em>notes.txt' }).count()).toBe(1);
      await files.getByRole('button', { name: 'logo.png' }).click();
      await page.getByText('A binary file of 8 B: not shown.').waitFor();
      expect(await page.evaluate(() => (globalThis as unknown as { pwned?: number }).pwned)).toBeUndefined();
      await files.getByRole('button', { name: 'Robot.java' }).click();
      await shown.waitFor();
      expect(await accessibilityProblems(page)).toEqual([]);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-look.png') });

      // The run in progress: its output shows under the files as it is written (as text).
      await app.store.workspaces.open(ada.workspace.id);
      const run = await app.store.runs.create(ada.workspace.id);
      // Kept, then published in this process, as the run controller's collector does (this app runs no change listener).
      const write = async (offset: number, text: string) => {
        await app.store.runs.appendOutput([{ runId: run.id, offset, text, sourceBytes: offset + text.length, truncated: false }]);
        app.store.changes.publishOutput({ runId: run.id, offset, text });
      };
      await write(0, 'compiling... 1/3\n');
      const output = page.getByRole('region', { name: 'The run in progress' }).locator('pre.output');
      await output.getByText('compiling... 1/3').waitFor();
      await write(17, '<b>error</b>: not markup\n');
      await eventually('the output live', async () => (await output.textContent()) === 'compiling... 1/3\n<b>error</b>: not markup\n' || undefined);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-look-run.png'), fullPage: true });

      await page.getByRole('link', { name: '← Class' }).click();
      await page.locator('main table.class').waitFor();
      await eventually('the look ended', async () => !(await looking()) || undefined);
    });
  });
});

describe('a look that asks the student first (LOOK_CONSENT=ask)', () => {
  let asking: TestApp;
  beforeAll(async () => {
    asking = await startApp(db.dataSource, { ...TEST_ENV, CONTROL_PLANE_ID: controlPlaneId, LOOK_CONSENT: 'ask' });
  }, 30_000);
  afterAll(async () => asking?.close());

  /** The student answers the look asking them, as their page or editor does. */
  async function answer(verdict: 'accept' | 'decline'): Promise<void> {
    const look = await eventually('the look asking', async () => app.store.looks.activeOn(ada.workspace.id));
    const response = await fetch(`${asking.url}/u/${ada.workspace.slug}/api/looks/${look.id}/${verdict}`, {
      method: 'POST',
      headers: { cookie: ada.cookie, origin: asking.url },
    });
    expect(response.status).toBe(200);
  }

  it('waits for the student, shows the files once they let it happen, and says so when they say no', async () => {
    await withPage(browser, async (page) => {
      await page.setViewportSize({ width: 1280, height: 800 });
      await signIn(page, coach);
      await gotoAndWait(page, `${asking.url}/panel/look/${ada.workspace.id}`, page.getByText('is asked to let you look'), 'panel-look-ask-failure');
      expect(await page.getByRole('region', { name: 'Files' }).count()).toBe(0);
      await answer('accept');
      await page.getByRole('region', { name: 'Files' }).getByRole('button', { name: 'src/' }).waitFor();

      await page.goto(`${asking.url}/panel/class`);
      await eventually('the first look ended', async () => (await app.store.looks.activeOn(ada.workspace.id)) === undefined || undefined);
      await gotoAndWait(page, `${asking.url}/panel/look/${ada.workspace.id}`, page.getByText('is asked to let you look'), 'panel-look-ask-again');
      await answer('decline');
      await page.getByText('said no to this look').waitFor();
      expect(await page.getByRole('region', { name: 'Files' }).count()).toBe(0);
    });
  });
});
