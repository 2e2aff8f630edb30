/**
 * Issue 43 item 4, the coach's side of lessons in the admin panel, in real Chromium on the real app,
 * PostgreSQL and Docker Engine, with the lesson controller live (the homes are real volumes, written
 * through the test workspace image): a coach makes a lesson by picking a folder (packed into a tar
 * in the browser, a path longer than a tar header's 100 bytes and an executable script included),
 * hands it out to everyone and sees both students' deliveries become delivered without a reload;
 * uploads a second version from a folder and hands it to one chosen student, whose copy lands beside
 * the first; resets that student's folder after a backup the page names; collects now and downloads
 * the archive (a folder per student). A bad upload shows the API's message at the form, and nothing
 * is made. A lesson from a folder of a git repository (a real git server on loopback), and a host not
 * allowed refused at the form. axe-core finds no serious or critical problem. Screenshots go to
 * `<tmpdir>/panel-lessons*.png`.
 */
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import tar from 'tar-stream';
import { DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { names } from '../../src/docker/runtime.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { accessibilityProblems, gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { newControlPlaneId, removeEverything, TEST_ENV, TEST_IMAGE } from '../helpers/controllers.ts';
import { entriesOf, zipOf } from '../helpers/archives.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startGitServer, type GitServer } from '../helpers/git-server.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const controlPlaneId = newControlPlaneId();
const runtime = new DockerRuntime({ controlPlaneId });
let app: TestApp;
let browser: Browser;
let coach: Student;
let ada: Student;
let bob: Student;
let git: GitServer;

beforeAll(async () => {
  git = await startGitServer();
  await git.repository('season', { 'README.md': '# Season\n', 'lessons/drive/Drive.java': 'class Drive {}\n', 'lessons/drive/notes.txt': 'drive\n' });
  app = await startApp(
    db.dataSource,
    { ...TEST_ENV, CONTROL_PLANE_ID: controlPlaneId, IMPORT_CA_FILE: git.caFile, IMPORT_ALLOWED_HOSTS: '127.0.0.1', IMPORT_ALLOWED_ADDRESSES: '127.0.0.1' },
    { parts: ['changes', 'http', 'workspaces', 'lessons'], tuning: { lessons: { resyncIntervalMs: 1000 } } },
  );
  browser = await launchBrowser();
}, 60_000);
beforeEach(async () => {
  const tag = Date.now().toString(36);
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
  await db.dataSource.query("UPDATE users SET name = 'Ada Lovelace' WHERE id = $1", [ada.userId]);
  await db.dataSource.query("UPDATE users SET name = 'Bob Noyce' WHERE id = $1", [bob.userId]);
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
  await git?.close();
  await removeEverything(controlPlaneId);
}, 60_000);

/** A path in the lesson longer than a tar header's name field (100 bytes): the browser's packer must keep it whole. */
const DEEP = 'src/main/java/frc/team1234/robot/subsystems/drivetrain/SwerveModuleConstantsForTheDriveLesson.java';

/** A lesson's folder on the coach's disk, `drive-intro/`, as a coach would pick it: its files by path. */
async function lessonFolder(files: Record<string, string>): Promise<string> {
  const root = path.join(await mkdtemp(path.join(os.tmpdir(), 'panel-lessons-')), 'drive-intro');
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await writeFile(path.join(root, name), text);
  }
  return root;
}

/** Opens a panel page as the coach at the panel's usual size, once its heading shows. */
async function open(page: Page, to: string): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 800 });
  await signIn(page, coach);
  await gotoAndWait(page, `${app.url}${to}`, page.locator('main h1'), 'panel-lessons-open-failure');
}

/** The files of a student's home under `lessons/` (path → text and mode), read from the volume. */
async function lessonFiles(student: Student): Promise<Map<string, { text: string; mode: number }>> {
  const workspace = (await app.store.workspaces.get(student.workspace.id))!;
  const stream = await runtime.exportVolume(names.home(workspace), { workspaceId: workspace.id, slug: workspace.slug }, TEST_IMAGE);
  const extract = tar.extract();
  stream.pipe(extract);
  const found = new Map<string, { text: string; mode: number }>();
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    const name = entry.header.name.replace(/^student\//, '');
    if (name.startsWith('lessons/') && entry.header.type === 'file')
      found.set(name, { text: Buffer.concat(chunks).toString('utf8'), mode: entry.header.mode! & 0o777 });
  }
  return found;
}

/** A student's row of the lesson's Students table. */
const rowOf = (page: Page, name: string) =>
  page
    .getByRole('table', { name: 'Students' })
    .getByRole('row')
    .filter({ has: page.getByRole('rowheader', { name }) });

describe("the coach's side of lessons", () => {
  it('makes a lesson from a picked folder, hands it out, sees it delivered live, a second version beside the first, a reset, and collects it', async () => {
    const folder = await lessonFolder({
      'src/Robot.java': 'class Robot {}\n',
      gradlew: '#!/bin/sh\necho build\n',
      'README.md': '# Drive\n',
      [DEEP]: 'class SwerveModuleConstants {}\n',
    });
    await withPage(browser, async (page) => {
      await open(page, '/panel/class');
      await page.getByRole('navigation', { name: 'Admin panel' }).getByRole('link', { name: 'Lessons' }).click();
      await page.getByRole('heading', { name: 'Lessons', level: 1 }).waitFor();
      await page.getByText('No lesson yet').waitFor();

      // New lesson from a folder: the folder names it unless the coach does.
      const form = page.getByRole('form', { name: 'New lesson' });
      await form.getByLabel('A folder').setInputFiles(folder);
      await form.getByText('The folder drive-intro: 4 files').waitFor();
      expect(await form.getByLabel(/^Name/).inputValue()).toBe('drive-intro');
      await form.getByLabel(/^Name/).fill('Drive Intro');
      await form.getByRole('button', { name: 'Create the lesson' }).click();
      // Packing a folder needs the packer module, which the server bundles at its first request (seconds on a busy machine).
      await page.getByRole('heading', { name: 'Drive Intro', level: 1 }).waitFor({ timeout: 60_000 });
      const [lesson] = await app.store.lessons.list();
      expect(lesson).toMatchObject({ name: 'Drive Intro', latest: { version: 1, files: 4 } });
      expect(new URL(page.url()).pathname).toBe(`/panel/lessons/${lesson!.id}`);
      await page.evaluate(() => ((globalThis as unknown as { notReloaded: boolean }).notReloaded = true));

      // Handed out to everyone: both deliveries turn delivered on the page as the controller writes them.
      await page.getByRole('button', { name: 'Hand out to everyone' }).click();
      await page.getByText('Version 1 is on its way to 2 students.').waitFor();
      for (const name of ['Ada Lovelace', 'Bob Noyce']) await rowOf(page, name).getByText('Delivered in lessons/Drive Intro').waitFor({ timeout: 30_000 });
      // The folder's files reached the home whole: the long path, and the script executable.
      const bobs = await lessonFiles(bob);
      expect([...bobs.keys()].toSorted()).toEqual(['README.md', 'gradlew', 'src/Robot.java', DEEP].map((name) => `lessons/Drive Intro/${name}`).toSorted());
      expect(bobs.get(`lessons/Drive Intro/${DEEP}`)?.text).toBe('class SwerveModuleConstants {}\n');
      expect(bobs.get('lessons/Drive Intro/gradlew')?.mode).toBe(0o755);
      expect(bobs.get('lessons/Drive Intro/README.md')?.mode).toBe(0o644);

      // A second version, from a folder, handed to Ada alone: it lands beside her first.
      const next = await lessonFolder({ 'src/Robot.java': 'class Robot { /* v2 */ }\n', 'README.md': '# Drive, part 2\n' });
      const versionForm = page.getByRole('form', { name: 'Upload version 2' });
      await versionForm.getByLabel('A folder').setInputFiles(next);
      await versionForm.getByRole('button', { name: 'Upload version 2' }).click();
      await page.getByText('Version 2 is made: hand it out to send it.').waitFor();
      await page.getByRole('button', { name: 'Hand out to chosen students' }).click();
      await page
        .getByRole('group', { name: 'Hand version 2 to' })
        .getByLabel(/Ada Lovelace/)
        .check();
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-lessons-picker.png') });
      await page.getByRole('button', { name: 'Hand out to 1 student' }).click();
      await page.getByText('Version 2 is on its way to 1 student.').waitFor();
      await rowOf(page, 'Ada Lovelace').getByText('Delivered in lessons/Drive Intro (v2)').waitFor({ timeout: 30_000 });
      await rowOf(page, 'Ada Lovelace').getByText('Landed beside their own lessons/Drive Intro, which is as they left it.').waitFor();
      expect(await rowOf(page, 'Bob Noyce').getByRole('cell', { name: 'v1', exact: true }).count()).toBe(1);

      // Reset Ada's folder: the confirmation says a backup comes first; the row names it once done.
      await rowOf(page, 'Ada Lovelace').getByRole('button', { name: "Reset Ada Lovelace's folder" }).click();
      const dialog = page.getByRole('dialog', { name: "Reset Ada Lovelace's Drive Intro?" });
      await dialog.getByText('Their home is backed up first').waitFor();
      await dialog.getByRole('button', { name: 'Back up and reset' }).click();
      const backupName = rowOf(page, 'Ada Lovelace').getByRole('link', { name: new RegExp(`^${ada.workspace.slug}-`) });
      await backupName.waitFor({ timeout: 30_000 });
      const detail = await app.store.lessons.detail(lesson!.id);
      expect(await backupName.textContent()).toBe(detail.students.find((each) => each.slug === ada.workspace.slug && each.version === 2)?.resetBackup);

      // Collect now: each student's snapshot shows as taken, then the archive downloads with a folder per student.
      await page.getByRole('button', { name: 'Collect now' }).click();
      const download = page.getByRole('link', { name: /^Download the collection/ });
      await download.waitFor({ timeout: 30_000 });
      const snapshots = page.getByRole('table', { name: "Each student's snapshot" });
      for (const name of ['Ada Lovelace', 'Bob Noyce'])
        await snapshots
          .getByRole('row')
          .filter({ has: page.getByRole('rowheader', { name }) })
          .getByText('Taken')
          .waitFor();
      expect(await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
      expect(await accessibilityProblems(page)).toEqual([]);
      // The page as docs/panel-lessons.png shows it: from the top, the pointer off the buttons, the notice read.
      await page.getByRole('button', { name: 'Dismiss' }).click();
      await page.mouse.move(0, 0);
      await page.evaluate('scrollTo(0, 0)');
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-lessons.png') });
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-lessons-full.png'), fullPage: true });

      const [file] = await Promise.all([page.waitForEvent('download'), download.click()]);
      const entries = await entriesOf(await readFile((await file.path())!));
      expect(entries.get(`Drive Intro/${bob.workspace.slug}/Drive Intro/src/Robot.java`)).toBe('class Robot {}\n');
      expect(entries.get(`Drive Intro/${bob.workspace.slug}/Drive Intro/${DEEP}`)).toBe('class SwerveModuleConstants {}\n');
      expect(entries.get(`Drive Intro/${ada.workspace.slug}/Drive Intro (v2)/src/Robot.java`)).toBe('class Robot { /* v2 */ }\n');
      expect(entries.get(`Drive Intro/${ada.workspace.slug}/Drive Intro/README.md`)).toBe('# Drive\n');

      await page.getByRole('link', { name: '← Lessons' }).click();
      const listed = page
        .getByRole('table', { name: 'Lessons, by name' })
        .getByRole('row')
        .filter({ has: page.getByRole('rowheader', { name: 'Drive Intro' }) });
      await listed.getByText('3 delivered').waitFor();
      expect(await listed.getByRole('cell', { name: 'v2', exact: true }).count()).toBe(1);
      expect(await accessibilityProblems(page)).toEqual([]);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-lessons-list.png') });
    });
  });

  it('serves the folder packer as one module bundled at its first request, cached for good, and does not preload it', async () => {
    const shell = await (await fetch(`${app.url}/panel/lessons`, { headers: { cookie: coach.cookie } })).text();
    const imports = (JSON.parse(/<script type="importmap">(.*?)<\/script>/.exec(shell)![1]!) as { imports: Record<string, string> }).imports;
    const packer = imports['modern-tar']!;
    expect(packer).toMatch(/^\/panel\/assets\/[0-9a-f]{12}\/vendor-modern-tar\.mjs$/);
    expect(shell).not.toContain(`<link rel="modulepreload" href="${packer}">`);
    const response = await fetch(`${app.url}${packer}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const source = await response.text();
    expect(source).toMatch(/export\s*\{[^}]*createTarPacker/);
    expect(source).not.toMatch(/^import |\bfrom\s*["']/m);
  });

  it("shows the API's message at the form for an archive that holds a link out, and makes nothing", async () => {
    const pack = tar.pack();
    pack.entry({ name: 'lesson/src/Robot.java', mode: 0o644 }, 'class Robot {}\n');
    pack.entry({ name: 'lesson/secrets', type: 'symlink', linkname: '/etc/passwd' });
    pack.finalize();
    const chunks: Buffer[] = [];
    for await (const chunk of pack) chunks.push(chunk as Buffer);
    await withPage(browser, async (page) => {
      await open(page, '/panel/lessons');
      const form = page.getByRole('form', { name: 'New lesson' });
      await form.getByLabel(/^Name/).fill('Links');
      await form
        .getByLabel('An archive (.zip, .tar, .tar.gz)')
        .setInputFiles({ name: 'links.tar.gz', mimeType: 'application/gzip', buffer: gzipSync(Buffer.concat(chunks)) });
      await form.getByRole('button', { name: 'Create the lesson' }).click();
      await form.getByRole('alert').getByText('The archive\'s entry "lesson/secrets"').waitFor();
      expect(await form.getByRole('alert').textContent()).toMatch(/nothing was kept/);
      expect(new URL(page.url()).pathname).toBe('/panel/lessons');
      expect(await app.store.lessons.list()).toEqual([]);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-lessons-refused.png') });
    });
  });

  it('makes a lesson from a .zip picked as the archive (as a computer compresses a folder)', async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/lessons');
      const form = page.getByRole('form', { name: 'New lesson' });
      await form.getByLabel(/^Name/).fill('Zipped');
      const zip = await zipOf([
        { name: 'drive/src/Robot.java', text: 'class Robot {}\n' },
        { name: 'drive/gradlew', text: '#!/bin/sh\n', mode: 0o100755 },
      ]);
      await form.getByLabel('An archive (.zip, .tar, .tar.gz)').setInputFiles({ name: 'drive.zip', mimeType: 'application/zip', buffer: zip });
      await form.getByRole('button', { name: 'Create the lesson' }).click();
      await page.waitForURL(/\/panel\/lessons\/[0-9a-f-]{36}$/);
      const [lesson] = await app.store.lessons.list();
      expect(lesson).toMatchObject({ name: 'Zipped', latest: { version: 1, files: 2 } });
    });
  });

  it("makes a lesson from a folder of a git repository, and shows the API's message for a host not allowed", async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/lessons');
      const form = page.getByRole('form', { name: 'New lesson' });
      await form.getByLabel(/^Name/).fill('Drive');
      await form.getByLabel('A git repository (https://)').fill('https://example.org/team/lessons.git');
      await form.getByRole('button', { name: 'Create the lesson' }).click();
      await form
        .getByRole('alert')
        .getByText(/example\.org/)
        .waitFor();
      expect(await app.store.lessons.list()).toEqual([]);

      await form.getByLabel('A git repository (https://)').fill(`${git.origin('127.0.0.1')}/git/season.git`);
      await form.getByLabel('Its folder (optional)').fill('lessons/drive');
      await form.getByText(`The repository ${git.origin('127.0.0.1')}/git/season.git, its folder lessons/drive`).waitFor();
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-lessons-git.png') });
      await form.getByRole('button', { name: 'Create the lesson' }).click();
      await page.getByRole('heading', { name: 'Drive', level: 1 }).waitFor({ timeout: 60_000 });
      expect(await app.store.lessons.list()).toMatchObject([{ name: 'Drive', latest: { version: 1, files: 2 } }]);
    });
  });
});
