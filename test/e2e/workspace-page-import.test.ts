/**
 * The workspace page's Restart, Reset to starter and Import in a real browser (Debian Chromium),
 * against the test image and a git server on loopback (test/helpers/git-server.ts): each asks first
 * in a dialog, stops the running workspace itself, and says what happened; an import's phases show
 * as they pass, and a failure says why with the home as it was. Screenshots are kept in
 * /tmp/import-screenshots for a look.
 */
import { mkdir, mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { names } from '../../src/docker/runtime.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { gotoAndWait, launchBrowser, withPage } from '../helpers/browser.ts';
import { createHarness, eventually, removeEverything, testRunController, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startGitServer, type GitServer } from '../helpers/git-server.ts';
import { newStudent, openAndWait, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
const shots = '/tmp/import-screenshots';
let app: TestApp;
let harness: Harness;
let browser: Browser;
let git: GitServer;
let dataDir: string;

beforeAll(async () => {
  await mkdir(shots, { recursive: true });
  git = await startGitServer();
  await git.repository('robot', {
    'README.md': '# Team 9999 robot\n',
    'build.gradle': 'plugins { id "java" }\n',
    'src/main/java/frc/robot/Robot.java': 'public class Robot {}\n',
  });
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-import-page-'));
  harness = createHarness(db.dataSource);
  app = await startApp(
    db.dataSource,
    {
      DATA_DIR: dataDir,
      CONTROL_PLANE_ID: harness.controlPlaneId,
      WORKSPACE_IMAGE: TEST_IMAGE,
      IMPORT_ALLOWED_HOSTS: 'localhost',
      IMPORT_ALLOWED_ADDRESSES: '127.0.0.1',
      IMPORT_CA_FILE: git.caFile,
    },
    { changes: harness.changes },
  );
  await harness.controller.start();
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await harness?.stop();
  await git?.close();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

/** The student's session cookies as the browser stores them. */
function cookiesOf(student: Student) {
  return student.cookie.split('; ').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
  });
}

/** A student whose workspace runs, on its page (always at `.cp/`). */
async function onPage(page: Page, local: string): Promise<Student> {
  const student = await newStudent(harness.store, local, tag);
  await openAndWait(harness.store, student.workspace);
  await page.context().addCookies(cookiesOf(student));
  await gotoAndWait(page, `${app.url}/u/${student.workspace.slug}/.cp/`, page.locator('#state').getByText('Running'), `workspace-page-import-${local}`);
  return student;
}

it('imports a team project after asking, showing each phase, then says where the old files are', async () => {
  await withPage(browser, async (page) => {
    const student = await onPage(page, 'importer');
    const url = `${git.origin()}/slow/git/robot.git`;
    await page.getByLabel("Your team's repository (https://)").fill(url);
    await page.getByRole('button', { name: 'Import…' }).click();
    const dialog = page.getByRole('dialog', { name: "Import your team's project?" });
    await dialog.waitFor();
    expect(await dialog.locator('#confirm-text').textContent()).toBe(
      `The project in your home is replaced by ${url}. A backup of your whole home is made first, so nothing is lost: your coach can bring it back. Your workspace is stopped first (Open starts it again after).`,
    );
    await page.screenshot({ path: path.join(shots, '1-import-confirm.png') });
    await dialog.getByRole('button', { name: 'Back up, then import' }).click();

    // The phases as they pass: the slow server keeps each long enough to be seen.
    const progress = page.locator('#import-progress');
    await progress.locator('li.now', { hasText: 'Checking the address…' }).waitFor();
    await page.screenshot({ path: path.join(shots, '2-import-checking.png') });
    await progress.locator('li.now', { hasText: /^Cloning \(\d+\.\d MB\)…$/ }).waitFor({ timeout: 20_000 });
    await page.screenshot({ path: path.join(shots, '3-import-cloning.png') });
    await page
      .locator('#import-text')
      .getByText(/^Done: your project is now /)
      .waitFor({ timeout: 30_000 });
    const done = await page.locator('#import-text').textContent();
    const [backup] = (await readdir(path.join(dataDir, 'backups'))).filter((name) => name.endsWith('.tar.gz'));
    expect(done).toMatch(
      new RegExp(
        `^Done: your project is now ${url.replace(/[.?/]/g, '\\$&')} at commit [0-9a-f]{7}\\. What was in your home before is in the backup ${backup!.replace(/\./g, '\\.')} \\(your coach can bring it back\\)\\. Open starts your workspace\\.$`,
      ),
    );
    expect(await progress.locator('li.past').allTextContents()).toEqual(['Checking the address', 'Cloning', 'Backing up your home', 'Copying into your home']);
    await page.screenshot({ path: path.join(shots, '4-import-done.png'), fullPage: true });
    // It stopped the workspace itself, and the home is the team's project.
    expect((await harness.store.workspaces.get(student.workspace.id))?.spec.desiredState).toBe('stopped');
    expect(names.home((await harness.store.workspaces.get(student.workspace.id))!)).toMatch(/-home-restore-/);
    expect(await page.getByRole('button', { name: 'Open', exact: true }).isEnabled()).toBe(true);
  });
}, 90_000);

it('says why an import failed, and that the home is as it was', async () => {
  await withPage(browser, async (page) => {
    const student = await onPage(page, 'mistyped');
    await page.getByLabel("Your team's repository (https://)").fill(`${git.origin()}/page/team`);
    await page.getByRole('button', { name: 'Import…' }).click();
    await page.getByRole('button', { name: 'Back up, then import' }).click();
    await page
      .locator('#import-text')
      .getByText(/^Import failed: /)
      .waitFor({ timeout: 30_000 });
    expect(await page.locator('#import-text').textContent()).toBe(
      `Import failed: ${git.origin()}/page/team is not a git repository (the server answered a web page); give the repository's address. Your home is as it was.`,
    );
    await page.screenshot({ path: path.join(shots, '5-import-failed.png'), fullPage: true });
    // A refusal at once is a message too (not https), and nothing is stopped for it twice.
    await waitForState(harness.store, student.workspace.id, 'stopped');
    await page.getByLabel("Your team's repository (https://)").fill('http://github.com/team/robot');
    await page.getByRole('button', { name: 'Import…' }).click();
    await page.getByRole('button', { name: 'Back up, then import' }).click();
    await page
      .locator('#toast-text')
      .getByText(/is not https:\/\//)
      .waitFor();
    expect(names.home((await harness.store.workspaces.get(student.workspace.id))!)).toBe(names.volume(student.workspace.slug));
  });
}, 60_000);

it('resets to the starter after asking, naming the backup, and Cancel does nothing', async () => {
  await withPage(browser, async (page) => {
    const student = await onPage(page, 'resetter');
    await page.getByRole('button', { name: 'Reset to starter…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Reset to starter?' });
    await dialog.waitFor();
    await page.screenshot({ path: path.join(shots, '6-reset-confirm.png') });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await dialog.isVisible()).toBe(false);
    expect((await harness.store.workspaces.get(student.workspace.id))?.spec.desiredState).toBe('running');

    await page.getByRole('button', { name: 'Reset to starter…' }).click();
    await dialog.getByRole('button', { name: 'Back up, then reset' }).click();
    await page
      .locator('#toast-text')
      .getByText(/^Your project is back to the starter\./)
      .waitFor({ timeout: 30_000 });
    const backup = (await readdir(path.join(dataDir, 'backups'))).find((name) => name.startsWith(`${student.workspace.slug}-`) && name.endsWith('.tar.gz'));
    expect(await page.locator('#toast-text').textContent()).toBe(
      `Your project is back to the starter. Everything that was in your home is in the backup ${backup} (your coach can bring it back). Open starts your workspace.`,
    );
    await page.screenshot({ path: path.join(shots, '7-reset-done.png') });
    const [entry] = (await db.dataSource.query("SELECT actor_email, metadata FROM audit_log WHERE action = 'workspace.reset' AND target_id = $1", [
      student.workspace.id,
    ])) as { actor_email: string; metadata: { backup: string } }[];
    expect(entry).toEqual({ actor_email: student.email, metadata: { slug: student.workspace.slug, backup } });
  });
}, 60_000);

it('restarts a run in one click: the run stopped, a new one followed', async () => {
  const runs = testRunController(harness, 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100 node /app/sim.mjs');
  await runs.controller.start();
  try {
    await withPage(browser, async (page) => {
      const student = await onPage(page, 'restarter');
      await page.getByRole('button', { name: 'Run', exact: true }).click();
      await page.locator('#run-state').getByText('Running').waitFor({ timeout: 30_000 });
      const first = (await harness.store.runs.active(student.workspace.id))!;
      await page.getByRole('button', { name: 'Restart' }).click();
      await eventually('a new run', async () => {
        const active = await harness.store.runs.active(student.workspace.id);
        return active && active.id !== first.id;
      });
      await page.locator('#run-state').getByText('Running').waitFor({ timeout: 30_000 });
      expect((await harness.store.runs.get(first.id))?.status.phase).toBe('stopped');
      expect(await page.locator('#runs tr').count()).toBe(2);
      await page.screenshot({ path: path.join(shots, '8-restarted.png'), fullPage: true });
    });
  } finally {
    await runs.controller.stop();
  }
}, 90_000);
