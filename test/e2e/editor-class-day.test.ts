/**
 * Issue 41, the editor on a class day (items 2, 4, 6, 9 and three of 10), as a student sees it:
 * Chromium, the real workspace image (code-server with the classroom extension built in), the real
 * stand-in simulator, started by the real controllers on real Docker, through the real proxy, and a
 * real OpenID Connect provider for signing in again.
 *
 * - A new student's first open says "Starting your editor…" from the click on Open until VS Code's
 *   workbench paints (its 19 MB script held back by the test, as a busy machine holds it), and the
 *   workbench comes with Run and the Driver Station in its status bar even while the classroom
 *   extension itself has not loaded (its bundle held back too). The project's README opens; there is
 *   no empty right sidebar, and the empty editor offers no "Open Chat" (chat is off).
 * - After a run stops, the Simulator view keeps the run's values under "Last run's values, stopped at
 *   …", never as if they were live.
 * - Signed out in another tab, the editor says "You are signed out", and Sign in again leads through
 *   the sign-in back into the editor; left alone, the window goes to the sign-in page by itself before
 *   VS Code's own "Disconnected" dialog would cover the notice (caused here at once by moving the
 *   page's clock past that dialog's 40 s).
 * - Stopped by a coach, with VS Code's "Disconnected. Attempting to reconnect…" dialog due (the clock
 *   moved past its 40 s), the window still reaches the workspace page by itself, which says who
 *   stopped it; its Open brings the editor back by itself.
 *
 * The tests are one day of Ada's, in one window: each goes on where the one before left it (the
 * first open's editor is the one she is signed out of; the editor she signs back into is the one her
 * coach stops; the one Open brings back is the one she is signed out of and leaves alone). A
 * workbench load costs the browser about 17 CPU-seconds: the day loads it three times, not five.
 * After a test fails, the later ones fail at once, naming it.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page, Request, Route } from 'playwright-core';
import type { RunController } from '../../controllers/runs.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { gotoAndWait, launchBrowser, openPage, recordPage, runFromPalette, waitForWorkbench } from '../helpers/browser.ts';
import { codeServerLog, createHarness, eventually, removeEverything, type Harness, workspaceImageRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.ts';
import { freePort } from '../helpers/server.ts';
import { sessionFor } from '../helpers/session.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const IMAGE = 'classroom-workspace:latest';
const ADMIN_TOKEN = 'admin-token-class-day-0123456789abcdef01';
const SHOTS = process.env['EDITOR_SNAGS_SCREENSHOTS'] ?? '/tmp/editor-snags-screenshots';
const tag = Date.now().toString(36);
const db = useTestDatabase({ truncate: false });
let provider: OidcProvider;
let app: TestApp;
let harness: Harness;
let runs: RunController;
let browser: Browser;
let ada: Student;
/** Ada's window through the day, opened by the first test that needs it. */
let day: { page: Page; record: ReturnType<typeof recordPage>; close: () => Promise<void> } | undefined;
/** The test at which the day stopped, when one failed: the later ones do not go on from what it left. */
let stoppedAt: string | undefined;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  const port = await freePort();
  provider = await startOidcProvider({
    clients: [{ client_id: 'control-plane', client_secret: 'control-plane-secret', redirect_uris: [`http://127.0.0.1:${port}/connect/oidc/callback`] }],
  });
  app = await startApp(
    db.dataSource,
    { OIDC_ISSUER: provider.issuer, OIDC_CLIENT_ID: 'control-plane', OIDC_CLIENT_SECRET: 'control-plane-secret', ADMIN_TOKEN },
    { port },
  );
  harness = createHarness(db.dataSource, { changes: app.store.changes, env: { WORKSPACE_IMAGE: IMAGE, CODE_MEMORY_LIMIT: '1g' } });
  await harness.controller.start();
  runs = workspaceImageRunController(harness, app.metrics).controller;
  await runs.start();
  ada = await newStudent(harness.store, 'ada', tag);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  day?.record.stop();
  await day?.close();
  await browser?.close();
  await runs?.stop();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
  await provider?.close();
}, 60_000);

/**
 * Ada's window, signed in as her (a session of her own) with VS Code's webviews working (the
 * README's preview needs their service worker), and the page's clock under the test's hand (it
 * runs as time does until a test moves it on).
 */
async function adasWindow(): Promise<Page> {
  if (day) return day.page;
  const { page, close } = await openPage(browser, { serviceWorkers: 'allow' });
  day = { page, record: recordPage(page), close };
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.clock.install();
  const { cookie } = await sessionFor(harness.store.sessions, ada.userId);
  const cookies = cookie.split('; ').map((pair) => ({ name: pair.split('=')[0]!, value: pair.slice(pair.indexOf('=') + 1), url: app.url }));
  await page.context().addCookies(cookies);
  return page;
}

/**
 * Runs `fn` on Ada's window, going on from where the test before left it. When it fails, the error
 * says what the window showed (its dialogs and status bar, a screenshot `<name>-failure.png`) and
 * what the page logged, and the later tests do not run.
 */
async function onAdasWindow(name: string, fn: (page: Page) => Promise<void>): Promise<void> {
  if (stoppedAt !== undefined) throw new Error(`not run: Ada's day stopped at the test before ("${stoppedAt}")`);
  const page = await adasWindow();
  try {
    await fn(page);
  } catch (error) {
    stoppedAt = name;
    await shot(page, `${name}-failure`).catch(() => undefined);
    const unreadable = (failure: unknown) => [`(unreadable: ${(failure as Error).message})`];
    const said = await page.locator('.monaco-dialog-box, .notification-list-item').allInnerTexts().catch(unreadable);
    const status = await page.locator('.statusbar').allInnerTexts().catch(unreadable);
    throw new Error(
      `${(error as Error).message}\n--- url: ${page.url()}\n--- dialogs and notifications: ${JSON.stringify(said)}\n--- the status bar: ${JSON.stringify(status.join(' ').replace(/\s+/g, ' '))}\n--- the page logged:\n${day!.record.logged.slice(-60).join('\n')}\n--- screenshot: ${path.join(SHOTS, `${name}-failure.png`)}`,
      { cause: error },
    );
  }
}

/**
 * Holds back the page's requests that `url` matches (its own and its workers') until `release()`;
 * `reached` resolves when the first one comes. They then go on through the test browser's own
 * route (loopback only).
 */
async function holdBack(page: Page, url: string | RegExp): Promise<{ reached: Promise<Request>; release: () => void }> {
  let reach!: (request: Request) => void;
  let release!: () => void;
  const reached = new Promise<Request>((resolve) => (reach = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route(url, async (route: Route) => {
    reach(route.request());
    await released;
    await route.fallback();
  });
  return { reached, release };
}

const statusItem = (page: Page, text: RegExp) => page.locator('.statusbar-item', { hasText: text }).first();
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`) });

/** What the classroom extension's state item says once it has looked at the workspace. */
const LOOKED = /Not run yet|Building|Running|Run stopped|Run failed|Run canceled/;

/** Signs Ada out from another tab of her browser, on the control plane's page. */
async function signOutElsewhere(page: Page): Promise<void> {
  const other = await page.context().newPage();
  await other.goto(`${app.url}/u/${ada.workspace.slug}/.cp/`);
  await other.getByRole('button', { name: 'Sign out' }).click();
  await other.getByRole('heading', { name: 'Sign in' }).waitFor();
  await other.close();
}

it('opens a new home with progress from the first second, Run and the Driver Station as the workbench paints, the README, no chat and no empty sidebar; marks the last run’s values', async () => {
  await onAdasWindow('first-open', async (page) => {
    await gotoAndWait(page, `${app.url}/u/${ada.workspace.slug}/`, page.locator('#state').getByText('Stopped'), 'editor-class-day-first-open');
    // VS Code's workbench script and the classroom extension's bundle, held back as a busy machine holds them.
    const workbenchScript = await holdBack(page, '**/out/vs/code/browser/workbench/workbench.js');
    const extensionBundle = await holdBack(page, /classroom-runs(%2F|\/)dist(%2F|\/)extension\.js/);

    // Open: the workspace page says at once that the editor is starting.
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    await page.locator('#starting').getByText('Starting your editor…').waitFor({ timeout: 5000 });
    await shot(page, 'workspace-page-starting');
    // The editor's own page, its workbench not there yet: it says so too, rather than a blank page.
    await workbenchScript.reached;
    await page.getByRole('status').getByText('Starting your editor…').waitFor({ timeout: 30_000 });
    await shot(page, 'editor-page-starting');
    workbenchScript.release();

    // The workbench: the notice gone, and Run, the run's state and the Driver Station in the
    // status bar although the extension has not loaded.
    await page.locator('.monaco-workbench .part.statusbar').waitFor({ timeout: 90_000 });
    await page.getByRole('status').getByText('Starting your editor…').waitFor({ state: 'hidden' });
    await statusItem(page, /^\s*Run\s*$/).waitFor({ timeout: 60_000 });
    await statusItem(page, /Driver Station/).waitFor();
    // (The extension's own state, which it shows once it runs, is not there yet.)
    expect(await statusItem(page, /Not run yet/).count()).toBe(0);
    await shot(page, 'editor-before-extension');
    extensionBundle.release();
    await statusItem(page, /Not run yet/).waitFor({ timeout: 60_000 });

    // A new home: its README open, no empty right sidebar.
    await page.getByRole('tab', { name: /README\.md/ }).waitFor({ timeout: 60_000 });
    await eventually(
      "the README's preview",
      async () => {
        for (const frame of page.frames())
          if (
            (await frame
              .getByRole('heading', { name: 'Your robot project' })
              .count()
              .catch(() => 0)) > 0
          )
            return true;
        return false;
      },
      60_000,
    );
    expect(await page.locator('.part.auxiliarybar').isVisible()).toBe(false);
    await shot(page, 'editor-first-open');
    // The empty editor offers no chat: it is off.
    await runFromPalette(page, 'View: Close All Editors');
    const watermark = page.locator('.editor-group-watermark');
    await watermark.getByText('Show All Commands').waitFor();
    expect(await watermark.innerText()).not.toContain('Open Chat');
    await shot(page, 'editor-empty');

    // A run, live in the Simulator view.
    await statusItem(page, /^\s*Run\s*$/).click();
    await statusItem(page, /Running/).waitFor({ timeout: 180_000 });
    const simulator = page.getByRole('button', { name: /Simulator/ }).first();
    if ((await simulator.getAttribute('aria-expanded')) === 'false') await simulator.click();
    const pose = page.getByRole('treeitem', { name: /\/SmartDashboard\/Field\/Robot/ });
    await pose.waitFor({ timeout: 60_000 });
    expect(await pose.getAttribute('aria-level')).toBe('1');
    expect(await page.getByRole('treeitem', { name: /Last run's values/ }).count()).toBe(0);
    // Stopped: the values stay, under the run's end, never as if live.
    await statusItem(page, /^\s*Stop\s*$/).click();
    await statusItem(page, /Run stopped/).waitFor({ timeout: 60_000 });
    // (Between the simulator's going and the extension's next look at the run, they say "not live".)
    await page.getByRole('treeitem', { name: /^Last run's values, stopped at \d{1,2}:\d{2}/ }).waitFor({ timeout: 30_000 });
    expect(await pose.getAttribute('aria-level')).toBe('2');
    await shot(page, 'simulator-last-run');
  });
}, 480_000);

it('says "You are signed out" after a sign-out in another tab, and leads back through the sign-in into the editor', async () => {
  await onAdasWindow('sign-out', async (page) => {
    const editor = page.url();
    // Signed out in the other tab: the editor says so, with the way back, in a dialog and in the status bar.
    await signOutElsewhere(page);
    const dialog = page.locator('.monaco-dialog-box');
    await dialog.getByText('You are signed out.').waitFor({ timeout: 30_000 });
    await statusItem(page, /Sign in again/).waitFor();
    expect(await statusItem(page, /Signed out/).isVisible()).toBe(true);
    await shot(page, 'editor-signed-out');
    // Sign in again: the sign-in page, then back into this editor.
    await dialog.getByRole('button', { name: 'Sign in again' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: 30_000 });
    provider.nextLogin({ id: ada.email, email: ada.email, email_verified: true, name: 'Ada' });
    await page.getByRole('link', { name: /Sign in with/ }).click();
    await waitForWorkbench(page, { more: () => codeServerLog(harness.runtime, ada.workspace.id) });
    expect(page.url()).toBe(editor);
    await statusItem(page, LOOKED).waitFor({ timeout: 60_000 });
  });
}, 300_000);

it('reaches the workspace page by itself after a coach’s stop, even with VS Code’s reconnection dialog due, and Open brings the editor back by itself', async () => {
  await onAdasWindow('stop', async (page) => {
    const stopped = await fetch(`${app.url}/admin/workspaces/${ada.workspace.id}/stop-containers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(stopped.status).toBeLessThan(300);
    // Told at once, in the editor.
    await page
      .locator('.monaco-dialog-box')
      .getByText(/^Your coach stopped your workspace at /)
      .waitFor({ timeout: 30_000 });
    await shot(page, 'editor-stopped-by-coach');
    // Past the 40 s after which VS Code puts its "Disconnected. Attempting to reconnect…" over every dialog.
    await page.clock.fastForward(60_000);
    // The workspace page, by itself: who stopped it, and Open.
    await page
      .locator('#stopped')
      .getByText(/^Your coach stopped your workspace at /)
      .waitFor({ timeout: 90_000 });
    expect(await page.locator('#state').innerText()).toBe('Stopped');
    await shot(page, 'workspace-page-after-stop');
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    await page.locator('#starting').getByText('Starting your editor…').waitFor();
    // Back in the editor by itself once it runs.
    await waitForWorkbench(page, { more: () => codeServerLog(harness.runtime, ada.workspace.id) });
    await statusItem(page, LOOKED).waitFor({ timeout: 60_000 });
    await shot(page, 'editor-back-after-open');
  });
}, 300_000);

it('left alone after a sign-out in another tab, goes to the sign-in page by itself before VS Code’s "Disconnected" dialog would cover the notice', async () => {
  await onAdasWindow('signed-out-alone', async (page) => {
    await signOutElsewhere(page);
    await page.locator('.monaco-dialog-box').getByText('You are signed out.').waitFor({ timeout: 30_000 });
    // Past VS Code's 40 s.
    await page.clock.fastForward(60_000);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: 60_000 });
    expect(new URL(page.url()).pathname).toBe('/auth/sign-in');
    await shot(page, 'signed-out-sign-in-page');
  });
}, 120_000);
