/**
 * The workspace page in a real browser (Debian Chromium): at the cap, Open shows the spec's toast,
 * which stays until dismissed; once a slot is free, Open starts the workspace, the page polls, and
 * reloads into the editor. The student stops their own workspace and signs out from the page. While
 * the editor starts, the page asks for its workspace every 500 ms.
 */
import { rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { STARTING_REFRESH_MS } from '../../api/pages/workspace-page.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { AT_CAPACITY_MESSAGE } from '../../src/errors.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { gotoAndWait, launchBrowser, withPage } from '../helpers/browser.ts';
import { createHarness, eventually, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let app: TestApp;
let harness: Harness;
let browser: Browser;
let sam: Student;
let other: Student;
const tag = Date.now().toString(36);
/** Kept after the run for a look (overwritten by the next one). */
const screenshot = path.join(os.tmpdir(), 'workspace-page-at-capacity.png');

beforeAll(async () => {
  app = await startApp(db.dataSource, { MAX_ACTIVE_CONTAINERS: '1' });
  harness = createHarness(db.dataSource, { changes: app.store.changes });
  sam = await newStudent(harness.store, 'sam', tag);
  other = await newStudent(harness.store, 'other', tag);
  // Started after the students exist, the controller reconciles them at once: Sam's is observed stopped.
  await harness.controller.start();
  await waitForState(harness.store, sam.workspace.id, 'stopped');
  // The one slot is taken: another workspace is wanted running.
  await harness.store.workspaces.open(other.workspace.id);
  browser = await launchBrowser();
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 30_000);

/** The student's session cookies (`cp_session` and its signature) as the browser stores them. */
function cookiesOf(student: Student) {
  return student.cookie.split('; ').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
  });
}

it('shows the capacity toast on Open at the cap, then opens the editor once a slot is free', async () => {
  await withPage(browser, async (page) => {
    const cookies = cookiesOf(sam);
    expect(cookies.map((cookie) => cookie.name)).toEqual(['cp_session', 'cp_session.sig']);
    await page.context().addCookies(cookies);
    // The page's own timers, on a clock the test can move: a message must outlast a student looking away.
    await page.clock.install();

    // (a) At the cap: the page with the state and an Open button; Open shows the spec's message.
    const response = await page.goto(`${app.url}/u/${sam.workspace.slug}/`);
    expect(response?.status()).toBe(200);
    expect(await page.locator('h1').textContent()).toBe(`Workspace ${sam.workspace.slug}`);
    expect(await page.locator('#state').textContent()).toBe('Stopped');
    const open = page.getByRole('button', { name: 'Open', exact: true });
    expect(await open.isEnabled()).toBe(true);
    const toast = page.locator('#toast');
    expect(await toast.isVisible()).toBe(false);

    await open.click();
    await toast.waitFor({ state: 'visible', timeout: 5000 });
    expect(await page.locator('#toast-text').textContent()).toBe(AT_CAPACITY_MESSAGE);
    expect(AT_CAPACITY_MESSAGE).toBe('Server at capacity. Your coach has been notified. Please try again in a few minutes.');
    // Still there a minute later: it goes when dismissed, or when an Open succeeds.
    await page.clock.fastForward(60_000);
    expect(await toast.isVisible()).toBe(true);
    expect((await harness.store.workspaces.get(sam.workspace.id))?.spec.desiredState).toBe('stopped');
    await rm(screenshot, { force: true });
    await page.screenshot({ path: screenshot });
    expect((await stat(screenshot)).size).toBeGreaterThan(0);
    // The button comes back for another try.
    expect(await open.isEnabled()).toBe(true);

    // (b) A slot frees up: Open starts the workspace, the page polls, and reloads into the editor.
    await harness.store.workspaces.stop(SYSTEM_ACTOR, other.workspace.id, 'coach');
    await open.click();
    await page.getByText('editor stand-in').waitFor({ timeout: 20_000 });
    expect(await page.locator('body').textContent()).toContain(`editor stand-in: /`);
    expect(page.url()).toBe(`${app.url}/u/${sam.workspace.slug}/`);
    expect((await harness.store.workspaces.get(sam.workspace.id))?.spec.desiredState).toBe('running');
  });
}, 35_000);

it('lets a student stop their own workspace and sign out from its page, and offers sign-out at the sign-out address', async () => {
  await withPage(browser, async (page) => {
    await page.context().addCookies(cookiesOf(sam));
    await harness.store.workspaces.open(sam.workspace.id);
    await waitForState(harness.store, sam.workspace.id, 'running');
    // The workspace page stays reachable while the editor runs.
    const stop = page.getByRole('button', { name: 'Stop my workspace' });
    await gotoAndWait(page, `${app.url}/u/${sam.workspace.slug}/.cp/`, stop, 'workspace-page-stop');
    await stop.click();
    await page.locator('#toast-text').getByText('Your workspace is stopping. Your files are kept; Open starts it again.').waitFor();
    await page
      .locator('#state')
      .getByText(/^(Stopping…|Stopped)$/)
      .waitFor();
    // Why, by whom and when, and how to go on.
    expect(await page.locator('#stopped').textContent()).toMatch(
      /^You stopped your workspace at \d{1,2}:\d{2}(\s?[AP]M)?\. Your files are kept: Open starts it again\.$/,
    );
    expect(await page.getByRole('button', { name: 'Open', exact: true }).isEnabled()).toBe(true);
    expect(await page.getByRole('button', { name: 'Stop my workspace' }).isVisible()).toBe(false);
    // Nothing offers the editor or a run of a workspace that is stopping.
    expect(await page.getByRole('link', { name: 'Open the editor' }).isVisible()).toBe(false);
    expect(await page.getByRole('button', { name: 'Run', exact: true }).isEnabled()).toBe(false);
    expect((await harness.store.workspaces.get(sam.workspace.id))?.spec.desiredState).toBe('stopped');
    const [entry] = (await db.dataSource.query("SELECT actor_email FROM audit_log WHERE action = 'container.stop' ORDER BY id DESC LIMIT 1")) as {
      actor_email: string;
    }[];
    expect(entry?.actor_email).toBe(sam.email);
    await page.screenshot({ path: path.join(os.tmpdir(), 'workspace-page-stopped-by-student.png') });

    // The sign-out address, as a browser asks for it, offers the button; the page's button signs out.
    const offered = await page.goto(`${app.url}/auth/sign-out`);
    expect(offered?.status()).toBe(200);
    expect(await page.locator('body').textContent()).toContain(`Signed in as ${sam.email}.`);
    await page.goto(`${app.url}/u/${sam.workspace.slug}/.cp/`);
    await Promise.all([page.waitForURL(`${app.url}/auth/sign-in`), page.getByRole('button', { name: 'Sign out' }).click()]);
    const after = await page.request.get(`${app.url}/u/${sam.workspace.slug}/api/workspace`, { failOnStatusCode: false });
    expect(after.status()).toBe(401);
  });
}, 35_000);

it('asks for its workspace every 500 ms while the editor starts after Open (every 2 s otherwise)', async () => {
  const ty = await newStudent(harness.store, 'ty', tag);
  await waitForState(harness.store, ty.workspace.id, 'stopped');
  await withPage(browser, async (page) => {
    await page.context().addCookies(cookiesOf(ty));
    // The page's timers on a clock the test can stop and move.
    await page.clock.install();
    let asked = 0;
    let inFlight = 0;
    let starting = false;
    // The page's reads of its workspace, counted; once Open is pressed they say the editor is starting, however fast it really starts.
    await page.route(
      (url) => url.pathname === `/u/${ty.workspace.slug}/api/workspace`,
      async (route) => {
        if (route.request().method() !== 'GET') return route.fallback();
        asked++;
        inFlight++;
        const masked = starting;
        const answer = await route.fetch();
        const body = (await answer.json()) as { workspace: Record<string, unknown> };
        if (masked) body.workspace = { ...body.workspace, desiredState: 'running', observedState: 'starting', ready: false };
        await route.fulfill({ response: answer, json: body }).finally(() => inFlight--);
      },
    );
    await gotoAndWait(page, `${app.url}/u/${ty.workspace.slug}/`, page.locator('#state').getByText('Stopped'), 'workspace-page-read');
    // From here the page's time moves only when the test moves it: no read of the page's own timers
    // comes between `starting` and the click (one would disable Open).
    await page.clock.pauseAt(Date.now() + 1000);
    await eventually('no read of the workspace in flight', async () => inFlight === 0);
    starting = true;
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    await page.locator('#starting').waitFor();
    // The read that follows Open has reached the page: until it has, the page still holds the
    // stopped workspace it read before, and its timers rightly ask for nothing.
    await eventually('the page to hold its starting workspace', () => page.evaluate("typeof workspace === 'object' && workspace.observedState === 'starting'"));
    // Every 500 ms of the page's clock, one more read (at 2 s, three of these four steps would have none).
    for (let step = 0; step < 4; step++) {
      const before = asked;
      await page.clock.runFor(STARTING_REFRESH_MS);
      // The page's clock stands still between steps: however long a busy machine takes, a read comes only from a timer the step fired.
      await eventually(`a read of the workspace in step ${step + 1}`, async () => asked > before, 20_000);
    }
    expect(await page.locator('#starting').isVisible()).toBe(true);
    // The page keeps asking: its reads in flight end with the page, not in a later test.
    await page.unrouteAll({ behavior: 'ignoreErrors' });
  });
}, 150_000);
