/**
 * Issue 43 items 2 and 3, the student's side of the help queue and of a coach's look in the editor:
 * Chromium, the real workspace
 * image (code-server with the classroom extension built in) started by the real controller on real
 * Docker, through the real proxy, against the real app and PostgreSQL; a coach through the admin API.
 * One workbench load:
 *
 * - a hand raised on the workspace page before the editor opened shows in its status bar ("Waiting
 *   for a coach (1st in line)"), and "Classroom: Take back my help request" withdraws it;
 * - the status bar's "Ask for help" asks for a message: the request is in the coach's queue with the
 *   message as typed (markup and `$(icon)` included: plain text); the coach takes it and the status bar
 *   says "Grace Hopper is coming" (the extension reading it while the request is open); a click on it
 *   offers "Take my hand back", which withdraws it, and the queue is empty;
 * - "Classroom: Ask your coach for help" while a hand is up on the workspace page (the editor not
 *   knowing it yet) says so in the server's words and then shows the request;
 * - a coach begins a look (through the admin API): the status bar says "Your coach is looking", its
 *   tooltip who, a notification that the coach reads only; the coach ends it and the item goes;
 * - with LOOK_CONSENT=ask (a second app on the same database, which the coach begins the look
 *   through; the editor's app reads it as stored), the status bar says "Your coach asks to look" and
 *   a notification asks with "Let them look": clicked, the look is accepted and the status bar says
 *   "Your coach is looking"; another, a click on the status bar offers the same choices, and "Not
 *   now" declines it and the item goes.
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { HelpQueue, HelpRequestAnswer, LookAnswer, StudentHelpAnswer } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { launchBrowser, openPalette, readmeShown, recordPage, runFromPalette, signIn, waitForWorkbench, withPage } from '../helpers/browser.ts';
import { codeServerLog, createHarness, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { sessionFor } from '../helpers/session.ts';
import { EDITOR_START_MS, newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const IMAGE = 'classroom-workspace:latest';
const tag = Date.now().toString(36);
const db = useTestDatabase({ truncate: false });
let app: TestApp;
/** The same database with LOOK_CONSENT=ask: a coach's look begun through it asks the student first. */
let asking: TestApp;
let harness: Harness;
let browser: Browser;
let ada: Student;
/** A coach with a name, as a signed-in coach's account has one. */
let grace: { cookie: string };

beforeAll(async () => {
  app = await startApp(db.dataSource);
  asking = await startApp(db.dataSource, { LOOK_CONSENT: 'ask' });
  // code-server needs far more than the test image's 64 MiB.
  harness = createHarness(db.dataSource, { changes: app.store.changes, env: { WORKSPACE_IMAGE: IMAGE, CODE_MEMORY_LIMIT: '1g' } });
  await harness.controller.start();
  ada = await newStudent(app.store, 'ada', tag);
  const { user } = await app.store.users.create({ email: `grace-${tag}@school.test`, name: 'Grace Hopper', role: 'admin' });
  grace = { cookie: (await sessionFor(app.store.sessions, user.id)).cookie };
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await asking?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

/** A call to the control plane `on` as `as` (a session cookie; the same origin for a change), with a JSON body when given. */
async function call<T>(as: { cookie: string }, method: 'GET' | 'POST', address: string, body?: unknown, on: TestApp = app): Promise<T> {
  const headers: Record<string, string> = { cookie: as.cookie, accept: 'application/json' };
  if (method === 'POST') headers.origin = on.url;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${on.url}${address}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const answer = (await response.json()) as T;
  if (!response.ok) throw new Error(`${method} ${address}: ${response.status} ${JSON.stringify(answer)}`);
  return answer;
}
/** Raises Ada's hand as her workspace page does. */
const raiseOnPage = (message: string) => call<StudentHelpAnswer>(ada, 'POST', `/u/${ada.workspace.slug}/api/help`, { message });
const queue = async () => (await call<HelpQueue>(grace, 'GET', '/admin/help')).requests;

const statusItem = (page: Page, text: RegExp) => page.locator('.statusbar-item', { hasText: text }).first();
const ASK = /^\s*Ask for help\s*$/;
const FIRST_IN_LINE = /^\s*Waiting for a coach \(1st in line\)\s*$/;
/** The quick input (the input box, the quick pick) with the title `title`. */
const quickInput = (page: Page, title: string) => page.locator('.quick-input-widget', { has: page.locator('.quick-input-title', { hasText: title }) });

const LOOKING = /^\s*Your coach is looking\s*$/;
const ASKS = /^\s*Your coach asks to look\s*$/;

// One workbench load (about 20 s of CPU) for both: the help queue, then a coach's look.
it('raises a hand from the status bar with a message, shows the coach coming, takes it back; shows and withdraws one raised on the page; says when one is open already; says while a coach looks, and asks first with LOOK_CONSENT=ask', async () => {
  await withPage(
    browser,
    async (page) => {
      await page.setViewportSize({ width: 1280, height: 800 });
      const record = recordPage(page);
      try {
        // A hand raised on the workspace page before the editor opens: the editor shows it from its first read.
        await raiseOnPage('raised on the page');
        ada.workspace = await openAndWait(harness.store, ada.workspace, EDITOR_START_MS);
        await signIn(page, ada);
        await page.goto(`${app.url}/u/${ada.workspace.slug}/?folder=/home/student`, { waitUntil: 'commit' });
        await waitForWorkbench(page, { more: () => codeServerLog(harness.runtime, ada.workspace.id) });
        await statusItem(page, FIRST_IN_LINE).waitFor({ timeout: 60_000 });
        await readmeShown(page);
        await runFromPalette(page, 'Classroom: Take back my help request');
        await statusItem(page, ASK).waitFor();
        await page.locator('.notification-list-item').getByText('You took your request for help back.').waitFor();
        expect(await queue()).toEqual([]);

        // The status bar's Ask for help: a message (plain text, as typed), Enter raises the hand.
        const message = 'My robot does not drive $(bug) <b>at all</b>';
        await statusItem(page, ASK).click();
        const ask = quickInput(page, 'Ask your coach for help');
        await ask.locator('input:focus').waitFor();
        await page.keyboard.type(message);
        await page.keyboard.press('Enter');
        await ask.waitFor({ state: 'hidden' });
        await statusItem(page, FIRST_IN_LINE).waitFor();
        const [raised, ...others] = await queue();
        expect(others).toEqual([]);
        expect(raised).toMatchObject({ state: 'waiting', message, place: 1, student: { email: ada.email }, workspace: { slug: ada.workspace.slug } });

        // The coach takes it: the editor, reading the open request, says who is coming.
        const taken = await call<HelpRequestAnswer>(grace, 'POST', `/admin/help/${raised!.id}/take`);
        expect(taken.request.state).toBe('taken');
        await statusItem(page, /^\s*Grace Hopper is coming\s*$/).waitFor({ timeout: 20_000 });
        await page.screenshot({ path: path.join(os.tmpdir(), 'editor-help-coming.png') });

        // A click on it: where it is and what was written (as text), and Take my hand back.
        await statusItem(page, /Grace Hopper is coming/).click();
        const offer = quickInput(page, 'Your request for help');
        await offer.locator('.quick-input-list .monaco-list-row', { hasText: 'Take my hand back' }).waitFor();
        expect(await offer.locator('input').getAttribute('placeholder')).toBe(`Grace Hopper is coming. You wrote: ${message}`);
        await offer.locator('.quick-input-list .monaco-list-row', { hasText: 'Take my hand back' }).click();
        await statusItem(page, ASK).waitFor();
        expect(await queue()).toEqual([]);
        const [row] = (await db.dataSource.query('SELECT state FROM help_requests WHERE id = $1', [raised!.id])) as { state: string }[];
        expect(row?.state).toBe('withdrawn');

        // Raised on the page meanwhile (the editor reads only while one is open): the palette's Ask is told, in the server's words, and shows it.
        await raiseOnPage('raised on the page again');
        await openPalette(page, 'Classroom: Ask your coach for help');
        await page
          .locator('.quick-input-list .monaco-list-row.focused .label-name')
          .filter({ hasText: /^\s*Classroom: Ask your coach for help\s*$/ })
          .waitFor();
        await page.keyboard.press('Enter');
        await quickInput(page, 'Ask your coach for help').locator('input:focus').waitFor();
        await page.keyboard.press('Enter');
        await page
          .locator('.notification-list-item')
          .getByText('You have a help request open already: a coach will come, or you can take it back first.')
          .waitFor();
        await statusItem(page, FIRST_IN_LINE).waitFor();
        expect((await queue()).map((each) => each.message)).toEqual(['raised on the page again']);

        // A coach looks: the editor, reading the workspace every 2 s, says so while it lasts, and tells it once.
        expect(await statusItem(page, LOOKING).count()).toBe(0);
        const { look } = await call<LookAnswer>(grace, 'POST', `/admin/workspaces/${ada.workspace.id}/looks`);
        await statusItem(page, LOOKING).waitFor({ timeout: 20_000 });
        await page.locator('.notification-list-item').getByText('Your coach is looking at your workspace (read only).').waitFor();
        await statusItem(page, LOOKING).hover();
        await page.locator('.monaco-hover').getByText('Grace Hopper is looking at your workspace (read only)').waitFor();
        await page.screenshot({ path: path.join(os.tmpdir(), 'editor-look.png') });
        await call<LookAnswer>(grace, 'POST', `/admin/looks/${look.id}/end`);
        await statusItem(page, LOOKING).waitFor({ state: 'hidden', timeout: 20_000 });

        // A look that asks first (LOOK_CONSENT=ask): the status bar and a notification ask; "Let them look" lets it happen.
        const asked = (await call<LookAnswer>(grace, 'POST', `/admin/workspaces/${ada.workspace.id}/looks`, undefined, asking)).look;
        expect(asked.state).toBe('asking');
        await statusItem(page, ASKS).waitFor({ timeout: 20_000 });
        const question = page.locator('.notification-list-item', { hasText: 'Your coach asks to look at your workspace (read only).' });
        await question.getByRole('button', { name: 'Not now' }).waitFor();
        await page.screenshot({ path: path.join(os.tmpdir(), 'editor-look-asking.png') });
        await question.getByRole('button', { name: 'Let them look' }).click();
        await statusItem(page, LOOKING).waitFor({ timeout: 20_000 });
        expect(await statusItem(page, ASKS).count()).toBe(0);
        // The coach's keep answers with the look as stored: the student let it happen.
        expect((await call<LookAnswer>(grace, 'POST', `/admin/looks/${asked.id}/keep`)).look.state).toBe('accepted');
        await call<LookAnswer>(grace, 'POST', `/admin/looks/${asked.id}/end`);
        await statusItem(page, LOOKING).waitFor({ state: 'hidden', timeout: 20_000 });
        // Another: a click on the status bar offers the same choices (who asks, as text); Not now says no and the item goes.
        const again = (await call<LookAnswer>(grace, 'POST', `/admin/workspaces/${ada.workspace.id}/looks`, undefined, asking)).look;
        await statusItem(page, ASKS).click();
        const choices = quickInput(page, 'Your coach asks to look');
        await choices.locator('.quick-input-list .monaco-list-row', { hasText: 'Not now' }).waitFor();
        expect(await choices.locator('input').getAttribute('placeholder')).toBe('Grace Hopper asks to look at your workspace (read only).');
        await choices.locator('.quick-input-list .monaco-list-row', { hasText: 'Not now' }).click();
        await statusItem(page, ASKS).waitFor({ state: 'hidden', timeout: 20_000 });
        expect((await call<LookAnswer>(grace, 'POST', `/admin/looks/${again.id}/keep`)).look.state).toBe('declined');
      } catch (error) {
        const shot = path.join(os.tmpdir(), 'editor-help-failure.png');
        await page.screenshot({ path: shot }).catch(() => undefined);
        const said = await page
          .locator('.monaco-dialog-box, .notification-list-item, .quick-input-widget')
          .allInnerTexts()
          .catch(() => []);
        const status = await page
          .locator('.statusbar')
          .allInnerTexts()
          .catch(() => []);
        throw new Error(
          `${(error as Error).message}\n--- dialogs, notifications, quick input: ${JSON.stringify(said)}\n--- the status bar: ${JSON.stringify(status.join(' ').replace(/\s+/g, ' '))}\n--- the page logged:\n${record.logged.slice(-60).join('\n')}\n--- screenshot: ${shot}`,
          { cause: error },
        );
      } finally {
        record.stop();
      }
    },
    // VS Code's webviews need their service worker (the README's preview).
    { serviceWorkers: 'allow' },
  );
}, 300_000);
