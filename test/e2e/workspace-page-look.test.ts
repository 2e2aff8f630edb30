/**
 * Issue 43 item 3, the student's side of a coach's look over the shoulder on the workspace page, in
 * a real browser (Debian Chromium) against the real app and PostgreSQL: a coach begins a look
 * (through the admin API) and the open page, polling, says "Your coach Grace Hopper is looking at
 * your workspace (read only)." without a reload; a coach's name that is markup shows as text (no
 * element of it, no script run); the coach ends the look and the notice goes. Nothing the page does
 * is refused by its Content-Security-Policy. With LOOK_CONSENT=ask (a second app on the same
 * database), a look begins by asking: the page says "Your coach Grace Hopper asks to look at your
 * workspace (read only)." with "Let them look" and "Not now"; the first lets the look happen (its
 * state `accepted`, the notice then "is looking"), the second says no (`declined`, the notice goes).
 * Screenshots at `<tmpdir>/workspace-look-*.png`.
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { LookAnswer } from '../../src/wire/schemas.ts';
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
/** A coach with a name, as a signed-in coach's account has one. */
let grace: { id: string; cookie: string };

beforeAll(async () => {
  app = await startApp(db.dataSource);
  browser = await launchBrowser();
}, 30_000);
// Made after the test database's truncation, which comes before each test.
beforeEach(async () => {
  ada = await newStudent(app.store, 'ada', tag);
  const { user } = await app.store.users.create({ email: `grace-${tag}@school.test`, name: 'Grace Hopper', role: 'admin' });
  grace = { id: user.id, cookie: (await sessionFor(app.store.sessions, user.id)).cookie };
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
}, 30_000);

/** A coach's change to a look on `on` (a session cookie and the same origin), which must succeed. */
async function asCoach(address: string, on: TestApp = app): Promise<LookAnswer> {
  const response = await fetch(`${on.url}${address}`, { method: 'POST', headers: { cookie: grace.cookie, origin: on.url, accept: 'application/json' } });
  const body = (await response.json()) as LookAnswer;
  if (!response.ok) throw new Error(`POST ${address}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

/** The student's session cookies (`cp_session` and its signature) as the browser stores them. */
function cookiesOf(student: Student) {
  return student.cookie.split('; ').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
  });
}

const shot = (page: Page, state: string) => page.screenshot({ path: path.join(os.tmpdir(), `workspace-look-${state}.png`) });
const notice = (page: Page) => page.locator('#looked[role="status"]');
const HOSTILE = '<img src=x onerror="window.coachRan=1">';

it("says who is looking while a coach's look lasts, without a reload, with the coach's name as text, and stops saying it when the look ends", async () => {
  await withPage(browser, async (page) => {
    const record = recordPage(page);
    await page.context().addCookies(cookiesOf(ada));
    expect((await page.goto(`${app.url}/u/${ada.workspace.slug}/.cp/`))?.status()).toBe(200);
    await page.getByRole('button', { name: 'Ask for help' }).waitFor();
    expect(await notice(page).isVisible()).toBe(false);
    await page.evaluate('window.notReloaded = true');

    const { look } = await asCoach(`/admin/workspaces/${ada.workspace.id}/looks`);
    await notice(page).getByText('Your coach Grace Hopper is looking at your workspace (read only).', { exact: true }).waitFor();
    expect(await page.evaluate('window.notReloaded')).toBe(true);
    await shot(page, 'looking');

    // The coach's name is their own text: markup in it is shown as typed, never made into an element.
    await db.dataSource.query('UPDATE users SET name = $1 WHERE id = $2', [HOSTILE, grace.id]);
    await notice(page).getByText(`Your coach ${HOSTILE} is looking at your workspace (read only).`, { exact: true }).waitFor();
    expect(await notice(page).locator('img').count()).toBe(0);
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.evaluate('window.coachRan')).toBeUndefined();

    await asCoach(`/admin/looks/${look.id}/end`);
    await notice(page).waitFor({ state: 'hidden' });
    expect(await notice(page).textContent()).toBe('');
    await shot(page, 'ended');
    expect(record.logged.filter((line) => /Content.Security.Policy/i.test(line))).toEqual([]);
    record.stop();
  });
}, 40_000);

describe('with LOOK_CONSENT=ask', () => {
  let asking: TestApp;
  beforeAll(async () => {
    asking = await startApp(db.dataSource, { LOOK_CONSENT: 'ask' });
  }, 30_000);
  afterAll(async () => asking?.close(), 30_000);

  it('asks the student first: "Let them look" lets the look happen and the notice says the coach is looking; "Not now" says no and the notice goes', async () => {
    await withPage(browser, async (page) => {
      const record = recordPage(page);
      await page.context().addCookies(cookiesOf(ada));
      expect((await page.goto(`${asking.url}/u/${ada.workspace.slug}/.cp/`))?.status()).toBe(200);
      await page.getByRole('button', { name: 'Ask for help' }).waitFor();
      const letThem = page.getByRole('button', { name: 'Let them look' });
      const notNow = page.getByRole('button', { name: 'Not now' });

      const first = (await asCoach(`/admin/workspaces/${ada.workspace.id}/looks`, asking)).look;
      expect(first.state).toBe('asking');
      await notice(page).getByText('Your coach Grace Hopper asks to look at your workspace (read only).', { exact: true }).waitFor();
      expect(await letThem.isVisible()).toBe(true);
      expect(await notNow.isVisible()).toBe(true);
      await shot(page, 'asking');
      await letThem.click();
      await notice(page).getByText('Your coach Grace Hopper is looking at your workspace (read only).', { exact: true }).waitFor();
      expect(await letThem.isVisible()).toBe(false);
      // The coach's keep answers with the look as stored: the student let it happen.
      expect((await asCoach(`/admin/looks/${first.id}/keep`, asking)).look.state).toBe('accepted');
      await asCoach(`/admin/looks/${first.id}/end`, asking);
      await notice(page).waitFor({ state: 'hidden' });

      const second = (await asCoach(`/admin/workspaces/${ada.workspace.id}/looks`, asking)).look;
      await notice(page).getByText('Your coach Grace Hopper asks to look at your workspace (read only).', { exact: true }).waitFor();
      await notNow.click();
      await notice(page).waitFor({ state: 'hidden' });
      expect((await asCoach(`/admin/looks/${second.id}/keep`, asking)).look.state).toBe('declined');
      expect(record.logged.filter((line) => /Content.Security.Policy/i.test(line))).toEqual([]);
      record.stop();
    });
  }, 40_000);
});
