/**
 * Issue 19, the run loop on the pages, in real Chromium on real PostgreSQL and Docker (the test
 * image's stand-in simulator, started by the real run controller): the workspace page runs the
 * student's code without the editor, shows the run's output as it is written and the compile
 * errors picked out of it, the run's state, Stop, and the past runs with their output to download;
 * the panel's Runs page lists the class's runs with their owners, filters them through the URL,
 * shows one run's output live, and stops it after naming the student (audited `run.stop`). Each
 * page passes the accessibility check and is kept as a screenshot for a look.
 */
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { RunController } from '../../controllers/runs.ts';
import { categoryLogger } from '../../src/log.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { accessibilityProblems, gotoAndWait, launchBrowser, withPage } from '../helpers/browser.ts';
import { captureLogger, createHarness, eventually, removeEverything, TEST_ENV, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
/** Where the screenshots go (kept after the run for a look). */
const SHOTS = path.join(os.tmpdir(), 'runs-screenshots');
const tag = Date.now().toString(36);
let app: TestApp;
let harness: Harness;
let runs: RunController | undefined;
let browser: Browser;
let coach: Student;
let ada: Student;

/** A compile that fails as javac does: an error on a line of a file, then Gradle's verdict. */
const BROKEN_BUILD = `echo 'Compiling 2 files'; echo "src/main/java/frc/robot/Robot.java:12: error: ';' expected" >&2; echo 'BUILD FAILED'; exit 1`;
/** A build that works, then a robot that prints a tick every 200 ms until stopped. */
const WORKING_ROBOT = 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100 SIM_PRINT_EVERY_MS=200 node /app/sim.mjs';

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  harness = createHarness(db.dataSource);
  await harness.controller.start();
  // One change feed: the pages hear the collector's output and the controller's status at once.
  app = await startApp(db.dataSource, {}, { changes: harness.changes });
  coach = await newStudent(harness.store, 'coach', tag, 'admin');
  ada = await newStudent(harness.store, 'ada', tag);
  ada.workspace = await openAndWait(harness.store, ada.workspace);
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await runs?.stop();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

/** (Re)starts the run controller with simulators that run `command`. */
async function simulatorsRun(command: string): Promise<void> {
  await runs?.stop();
  runs = new RunController({
    store: harness.store,
    runtime: harness.runtime,
    metrics: app.metrics,
    log: categoryLogger(captureLogger().root, 'runs'),
    buildTimeoutMs: 60_000,
    probeIntervalMs: 100,
    runningCheckMs: 300,
    template: { image: TEST_IMAGE, memoryBytes: 64 * 1024 * 1024, network: TEST_ENV.WORKSPACE_NETWORK, nt4Port: 5810, command },
  });
  await runs.start();
}

/** Signs the page's browser in as `who` (their session cookie, as the browser stores it). */
async function signIn(page: Page, who: Student): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.context().addCookies(
    who.cookie.split('; ').map((pair) => {
      const at = pair.indexOf('=');
      return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
    }),
  );
}

/** Checks the page with axe (no serious or critical violation) and keeps a screenshot of it. */
async function lookAt(page: Page, name: string): Promise<void> {
  expect(await accessibilityProblems(page)).toEqual([]);
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

const auditActions = async () =>
  ((await db.dataSource.query('SELECT actor_email, action FROM audit_log ORDER BY id')) as { actor_email: string; action: string }[]).map(
    (row) => `${row.actor_email} ${row.action}`,
  );

it('runs from the workspace page: the output live, the compile error picked out, the state, Stop, and the past runs to download', async () => {
  await withPage(browser, async (page) => {
    await signIn(page, ada);
    const response = await page.goto(`${app.url}/u/${ada.workspace.slug}/.cp/`);
    expect(response?.status()).toBe(200);
    await page.locator('#state').filter({ hasText: 'Running' }).waitFor();
    await page.locator('#no-runs').waitFor();
    // No run yet: no empty output box (issue 41).
    expect(await page.locator('#output').isVisible()).toBe(false);
    // The editor runs: a link to it, no Open; no Stop while nothing runs.
    await page.getByRole('link', { name: 'Open the editor' }).waitFor();
    expect(await page.getByRole('button', { name: 'Open', exact: true }).isVisible()).toBe(false);
    expect(await page.getByRole('button', { name: 'Stop', exact: true }).isVisible()).toBe(false);

    // A broken build: its output, the error on its file and line, and how the run ended.
    await simulatorsRun(BROKEN_BUILD);
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('#output').filter({ hasText: 'BUILD FAILED' }).waitFor({ timeout: 30_000 });
    await page.locator('#problems').filter({ hasText: "Robot.java line 12: error: ';' expected" }).waitFor();
    await page.locator('#run-state').filter({ hasText: 'Failed: compile or boot failed (exit code 1)' }).waitFor({ timeout: 30_000 });
    await page.locator('#runs tr').first().filter({ hasText: 'Failed' }).waitFor();
    // The output's end line says the exit code once (issue 41: it said it twice).
    await page.locator('#output').filter({ hasText: '■ Failed: compile or boot failed (exit code 1)' }).waitFor();
    expect((await page.locator('#output').innerText()).match(/exit code 1/g)).toHaveLength(1);

    // Fixed: it runs, its prints come as they are written, and Stop ends it.
    await simulatorsRun(WORKING_ROBOT);
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('#run-state').filter({ hasText: 'Running' }).waitFor({ timeout: 30_000 });
    await page.locator('#problems').waitFor({ state: 'hidden' });
    await page
      .locator('#output')
      .filter({ hasText: /tick 3 / })
      .waitFor({ timeout: 30_000 });
    // Live: more ticks come while the page looks, without a reload.
    await page
      .locator('#output')
      .filter({ hasText: /tick 6 / })
      .waitFor({ timeout: 30_000 });
    await lookAt(page, 'workspace-page-running');
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    await page.locator('#run-state').filter({ hasText: 'Stopped: stopped by request' }).waitFor({ timeout: 30_000 });
    await page.locator('#output').filter({ hasText: '■ Stopped: stopped by request' }).waitFor();
    // Stop goes once nothing runs; Run comes back.
    await page.getByRole('button', { name: 'Stop', exact: true }).waitFor({ state: 'hidden' });
    expect(await page.getByRole('button', { name: 'Run', exact: true }).isEnabled()).toBe(true);

    // Both runs listed, newest first, each with its output to download.
    await page.locator('#runs tr').nth(1).waitFor();
    const rows = await page.locator('#runs tr').allInnerTexts();
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(/Stopped: stopped by request/);
    expect(rows[1]).toMatch(/Failed: compile or boot failed \(exit code 1\)\s+1/);
    const href = await page.locator('#runs tr').first().getByRole('link').getAttribute('href');
    const download = await page.request.get(`${app.url}${href}`);
    expect(download.headers()['content-disposition']).toMatch(/^attachment; filename="run-/);
    expect(await download.text()).toMatch(/compiling[\s\S]*tick 6 /);
    await lookAt(page, 'workspace-page-runs');
  });
}, 120_000);

it("lists the class's runs in the panel, filtered through the URL, shows one live, and stops it after naming the student (audited)", async () => {
  await simulatorsRun(WORKING_ROBOT);
  const started = await fetch(`${app.url}/u/${ada.workspace.slug}/api/runs`, { method: 'POST', headers: { cookie: ada.cookie, origin: app.url } });
  expect(started.status).toBe(202);
  const { run } = (await started.json()) as { run: { id: string } };
  await withPage(browser, async (page) => {
    await signIn(page, coach);
    await gotoAndWait(page, `${app.url}/panel/runs`, page.locator('main h1').filter({ hasText: 'Runs' }), 'panel-runs-failure');
    // Every run of the class, newest first, with whose it is.
    const table = page.locator('table.runs tbody tr');
    await table.nth(2).waitFor();
    expect(await table.count()).toBe(3);
    expect(await table.first().innerText()).toContain(ada.email);
    await lookAt(page, 'panel-runs');

    // "Failed": the filter goes into the URL, and only the failed run is left.
    await page.getByLabel('Outcome').selectOption('failed');
    await page.waitForURL(/\/panel\/runs\?status=failed$/);
    await eventually('the list to be filtered', async () => (await table.count()) === 1, 30_000);
    expect(await table.first().innerText()).toContain('failed: compile or boot failed (exit code 1)');

    // The failed one's own page says its exit code once (issue 41: the reason says it, and it was added again).
    const failed = (await harness.store.runs.recent(ada.workspace.id, 5)).find((each) => each.status.phase === 'failed')!;
    await gotoAndWait(
      page,
      `${app.url}/panel/runs/${failed.id}`,
      page.locator('main h1').filter({ hasText: `Run of ${ada.workspace.slug}` }),
      'panel-run-failure',
    );
    await page.locator('dl.facts').filter({ hasText: 'compile or boot failed (exit code 1)' }).waitFor();
    expect((await page.locator('dl.facts').innerText()).match(/exit code 1/g)).toHaveLength(1);

    // The running one, at its own address (as a link or a reload opens it), its output as it is written.
    await gotoAndWait(
      page,
      `${app.url}/panel/runs/${run.id}`,
      page.locator('main h1').filter({ hasText: `Run of ${ada.workspace.slug}` }),
      'panel-run-failure',
    );
    const output = page.getByLabel('Output of the run');
    await output.filter({ hasText: /tick 2 / }).waitFor({ timeout: 30_000 });
    await output.filter({ hasText: /tick 4 / }).waitFor({ timeout: 30_000 });
    await lookAt(page, 'panel-run');

    // Stop: the confirmation names the student; the run ends and the audit log says who stopped it.
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.textContent()).toContain(ada.email);
    await dialog.getByRole('button', { name: 'Stop the run' }).click();
    await page.locator('.facts').filter({ hasText: 'stopped: stopped by a coach' }).waitFor({ timeout: 30_000 });
    expect(await auditActions()).toContain(`${coach.email} run.stop`);
  });
}, 120_000);
