/**
 * Issue 43 item 2, the student's side of the help queue on the workspace page, in a real browser
 * (Debian Chromium) against the real app and PostgreSQL: the student asks for help with a message
 * and sees their place in the queue; a coach's take (through the admin API) shows as "<coach> is
 * coming" without a reload; "Never mind" withdraws the request and the control comes back, as a
 * coach's resolve brings it back; a second student sees place 2 while the first waits, then place 1;
 * the API's refusals (409 one open already, 429 too many raises) are shown as the page's messages.
 * Nothing the page does is refused by its Content-Security-Policy. Screenshots of each state are
 * kept at `<tmpdir>/workspace-help-*.png` for a look.
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { HELP_RAISES_PER_WINDOW } from '../../src/store/help.ts';
import type { HelpRequestAnswer, StudentHelpAnswer, StudentHelpStatus } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { launchBrowser, recordPage, withPage } from '../helpers/browser.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { sessionFor } from '../helpers/session.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const tag = Date.now().toString(36);
let app: TestApp;
let browser: Browser;
let ada: Student;
let bob: Student;
/** A coach with a name, as a signed-in coach's account has one. */
let grace: { email: string; cookie: string };

beforeAll(async () => {
  app = await startApp(db.dataSource);
  browser = await launchBrowser();
}, 30_000);
beforeEach(async () => {
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
  const email = `grace-${tag}@school.test`;
  const { user } = await app.store.users.create({ email, name: 'Grace Hopper', role: 'admin' });
  grace = { email, cookie: (await sessionFor(app.store.sessions, user.id)).cookie };
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
}, 30_000);

/** A call to the control plane as `as` (a session cookie; the same origin for a change), with a JSON body when given. */
async function call(as: { cookie: string }, method: 'GET' | 'POST', address: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { cookie: as.cookie, accept: 'application/json' };
  if (method === 'POST') headers.origin = app.url;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${app.url}${address}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: response.status, body: await response.json() };
}
const helpOf = (student: Student) => `/u/${student.workspace.slug}/api/help`;
const mine = async (student: Student) => ((await call(student, 'GET', helpOf(student))).body as StudentHelpStatus).help;
async function coach(action: 'take' | 'resolve', id: string): Promise<void> {
  const answer = await call(grace, 'POST', `/admin/help/${id}/${action}`);
  expect(answer.status).toBe(200);
  expect((answer.body as HelpRequestAnswer).request.state).toBe(action === 'take' ? 'taken' : 'resolved');
}

/** The student's session cookies (`cp_session` and its signature) as the browser stores them. */
function cookiesOf(student: Student) {
  return student.cookie.split('; ').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
  });
}

/** Opens `student`'s workspace page signed in as them, and waits until it offers to ask for help. */
async function openPage(page: Page, student: Student): Promise<void> {
  await page.context().addCookies(cookiesOf(student));
  const response = await page.goto(`${app.url}/u/${student.workspace.slug}/.cp/`);
  expect(response?.status()).toBe(200);
  await page.getByRole('button', { name: 'Ask for help' }).waitFor();
}

const shot = (page: Page, state: string) => page.screenshot({ path: path.join(os.tmpdir(), `workspace-help-${state}.png`) });
const cspLines = (logged: string[]) => logged.filter((line) => /Content.Security.Policy/i.test(line));

it('asks for help with a message and shows the place, then the coach coming without a reload, then Never mind withdraws it and the control returns', async () => {
  await withPage(browser, async (page) => {
    const record = recordPage(page);
    await openPage(page, ada);
    expect(await page.getByLabel('What are you stuck on? (optional, at most 500 characters)').getAttribute('maxlength')).toBe('500');
    await shot(page, 'ask');

    await page.getByLabel('What are you stuck on?').fill('My robot does not drive');
    await page.getByRole('button', { name: 'Ask for help' }).click();
    await page.locator('#help-text').getByText('You are number 1 in the queue.').waitFor();
    expect(await page.locator('#help-said').textContent()).toBe('You wrote: My robot does not drive');
    expect(await page.getByRole('button', { name: 'Ask for help' }).isVisible()).toBe(false);
    const raised = await mine(ada);
    expect(raised).toMatchObject({ state: 'waiting', message: 'My robot does not drive', place: 1 });
    await shot(page, 'waiting');

    // The coach takes it: the page, polling, says who is coming (the same page: a mark set on it is still there).
    await page.evaluate('window.notReloaded = true');
    await coach('take', raised!.id);
    await page.locator('#help-text').getByText('Grace Hopper is coming.').waitFor();
    expect(await page.evaluate('window.notReloaded')).toBe(true);
    await shot(page, 'coming');

    // Never mind: the request is withdrawn, and the page offers to ask again.
    await page.getByRole('button', { name: 'Never mind' }).click();
    await page.getByRole('button', { name: 'Ask for help' }).waitFor();
    expect(await page.locator('#help-open').isVisible()).toBe(false);
    expect(await mine(ada)).toBeNull();
    const [row] = (await db.dataSource.query('SELECT state FROM help_requests WHERE id = $1', [raised!.id])) as { state: string }[];
    expect(row?.state).toBe('withdrawn');
    expect(await page.locator('#toast-text').textContent()).toBe('You took your request for help back.');
    await shot(page, 'withdrawn');
    expect(cspLines(record.logged)).toEqual([]);
    record.stop();
  });
}, 40_000);

it('shows a second student place 2 while the first waits, moves them up when the first is taken, and returns the control once a coach resolves theirs', async () => {
  await withPage(browser, async (first) => {
    await withPage(browser, async (second) => {
      const record = recordPage(second);
      await openPage(first, ada);
      await openPage(second, bob);
      await first.getByRole('button', { name: 'Ask for help' }).click();
      await first.locator('#help-text').getByText('You are number 1 in the queue.').waitFor();
      await second.getByRole('button', { name: 'Ask for help' }).click();
      await second.locator('#help-text').getByText('You are number 2 in the queue.').waitFor();
      // No message: nothing said of one.
      expect(await second.locator('#help-said').isVisible()).toBe(false);
      expect(await first.locator('#help-text').textContent()).toBe('You are number 1 in the queue.');
      await shot(second, 'second');

      // The first is taken: the second moves up, on their page's own polling.
      await coach('take', (await mine(ada))!.id);
      await second.locator('#help-text').getByText('You are number 1 in the queue.').waitFor();
      await first.locator('#help-text').getByText('Grace Hopper is coming.').waitFor();

      // Resolved by the coach: the control returns.
      await coach('resolve', (await mine(bob))!.id);
      await second.getByRole('button', { name: 'Ask for help' }).waitFor();
      expect(await second.locator('#help-open').isVisible()).toBe(false);
      expect(cspLines(record.logged)).toEqual([]);
      record.stop();
    });
  });
}, 40_000);

it("shows the API's refusals as the page's messages: one request open already (409, and the open one is shown), too many raises (429)", async () => {
  await withPage(browser, async (page) => {
    const record = recordPage(page);
    // The page's polling on a clock the test moves: the request raised elsewhere stays unseen until the student asks.
    await page.clock.install();
    await openPage(page, ada);

    // Raised from the editor meanwhile: the page's Ask is refused, says why, and shows the open request.
    const elsewhere = await call(ada, 'POST', helpOf(ada), {});
    expect(elsewhere.status).toBe(201);
    expect((elsewhere.body as StudentHelpAnswer).help.place).toBe(1);
    await page.getByRole('button', { name: 'Ask for help' }).click();
    await page.locator('#toast-text').getByText('You have a help request open already: a coach will come, or you can take it back first.').waitFor();
    await page.locator('#help-text').getByText('You are number 1 in the queue.').waitFor();
    await shot(page, 'open-already');

    // The rest of the raises a window allows, each withdrawn; then the page's Ask is refused with the limit's message.
    expect((await call(ada, 'POST', `${helpOf(ada)}/withdraw`)).status).toBe(200);
    for (let raise = 1; raise < HELP_RAISES_PER_WINDOW; raise++) {
      expect((await call(ada, 'POST', helpOf(ada), {})).status).toBe(201);
      expect((await call(ada, 'POST', `${helpOf(ada)}/withdraw`)).status).toBe(200);
    }
    await page.clock.runFor(2000);
    await page.getByRole('button', { name: 'Ask for help' }).waitFor();
    await page.getByLabel('What are you stuck on?').fill('Still stuck');
    await page.getByRole('button', { name: 'Ask for help' }).click();
    await page
      .locator('#toast-text')
      .getByText(new RegExp(`^You asked for help ${HELP_RAISES_PER_WINDOW} times in the last 10 minutes: try again in \\d+ minutes?\\.$`))
      .waitFor();
    // Nothing raised, the message kept for a later try.
    expect(await mine(ada)).toBeNull();
    expect(await page.getByLabel('What are you stuck on?').inputValue()).toBe('Still stuck');
    await shot(page, 'rate-limited');
    expect(cspLines(record.logged)).toEqual([]);
    record.stop();
  });
}, 40_000);
