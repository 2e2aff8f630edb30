/**
 * Issue 43 item 3, the robot's field in a coach's look, in real Chromium on the real app,
 * PostgreSQL and Docker Engine with a real run (the stand-in simulator, whose robot drives a circle
 * on `/SmartDashboard/Field`): the look page draws the field and the robot where the control plane
 * read it from the run's NetworkTables, says where it is, and follows it as it moves; axe-core finds
 * no serious or critical problem. Screenshot: `<tmpdir>/panel-look-field.png`.
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import type { RunController } from '../../controllers/runs.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { accessibilityProblems, gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { createHarness, eventually, removeEverything, type Harness, testRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
let harness: Harness;
let app: TestApp;
let runs: RunController;
let browser: Browser;
let coach: Student;
let ada: Student;

beforeAll(async () => {
  harness = createHarness(db.dataSource, { environmentCap: 10 });
  await harness.controller.start();
  app = await startApp(db.dataSource, {}, { changes: harness.changes });
  runs = testRunController(harness, 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100 node /app/sim.mjs').controller;
  await runs.start();
  coach = await newStudent(harness.store, 'coach', tag, 'admin');
  ada = await newStudent(harness.store, 'ada', tag);
  await db.dataSource.query("UPDATE users SET name = 'Ada Lovelace' WHERE id = $1", [ada.userId]);
  ada.workspace = await openAndWait(harness.store, ada.workspace);
  browser = await launchBrowser();
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await runs?.stop();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

describe("the robot's field in a coach's look", () => {
  it('draws the field and the robot of the run in progress, and follows it', async () => {
    await withPage(browser, async (page) => {
      await page.setViewportSize({ width: 1280, height: 900 });
      await signIn(page, coach);
      await gotoAndWait(
        page,
        `${app.url}/panel/look/${ada.workspace.id}`,
        page.getByRole('heading', { name: "Looking at Ada Lovelace's workspace" }),
        'panel-look-field-failure',
      );
      const started = await fetch(`${app.url}/u/${ada.workspace.slug}/api/runs`, { method: 'POST', headers: { cookie: ada.cookie, origin: app.url } });
      expect(started.status).toBe(202);

      const region = page.getByRole('region', { name: "The robot's field" });
      const caption = region.locator('.field-caption');
      await caption.getByText(/^Field: robot at x /).waitFor({ timeout: 30_000 });
      const drawn = region.getByRole('img', { name: /^The field, the robot at x / });
      await drawn.waitFor();
      expect(await region.locator('g.robot polygon').count()).toBe(1);
      const first = await caption.textContent();
      // The stand-in's robot drives a circle: the caption follows it.
      await eventually('the robot moving on the page', async () => ((await caption.textContent()) !== first ? true : undefined));
      expect(await accessibilityProblems(page)).toEqual([]);
      await page.screenshot({ path: path.join(os.tmpdir(), 'panel-look-field.png'), fullPage: true });
    });
  }, 90_000);
});
