/**
 * The admin panel in real Chromium, on real PostgreSQL and Docker (the test image): each page shows
 * what the API says, each action changes state and writes its audit entry, API errors are shown,
 * students and signed-out browsers are refused, a capacity refusal appears on an open overview
 * without a reload, filters live in the URL, every page passes an accessibility check (axe-core, no
 * serious or critical violation), and a screenshot of each page at 1280×800 is kept for a look.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import { request } from 'undici';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { accessibilityProblems, gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { createHarness, eventually, newControlPlaneId, removeEverything, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
/** Where the screenshots go (kept after the run for a look). */
const SHOTS = path.join(os.tmpdir(), 'panel-screenshots');
let app: TestApp;
let harness: Harness;
let browser: Browser;
let coach: Student;
let head: Student;
let ada: Student;
let bob: Student;
const tag = Date.now().toString(36);

beforeAll(async () => {
  await mkdir(SHOTS, { recursive: true });
  // One control plane id for both, so that what a backup or restore makes is removed with the rest.
  const controlPlaneId = newControlPlaneId();
  app = await startApp(db.dataSource, { MAX_ACTIVE_CONTAINERS: '1', CONTROL_PLANE_ID: controlPlaneId, WORKSPACE_IMAGE: TEST_IMAGE });
  harness = createHarness(db.dataSource, { changes: app.store.changes, controlPlaneId });
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  head = await newStudent(app.store, 'head', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
  await harness.controller.start();
  await app.store.workspaces.open(ada.workspace.id);
  await waitForState(app.store, ada.workspace.id, 'running');
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 30_000);

/** Opens a panel page as the coach, at 1280×800. */
async function open(page: Page, to: string): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 800 });
  await signIn(page, coach);
  // The first page of a cold browser on a busy 2-core CI machine has taken over 10 s.
  await gotoAndWait(page, `${app.url}${to}`, page.locator('main h1'), 'panel-open-failure');
}

/** Checks the page with axe and keeps a screenshot of it. */
async function lookAt(page: Page, name: string): Promise<void> {
  expect(await accessibilityProblems(page)).toEqual([]);
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

const auditActions = async () =>
  ((await db.dataSource.query('SELECT actor_email, action FROM audit_log ORDER BY id')) as { actor_email: string; action: string }[]).map(
    (row) => `${row.actor_email} ${row.action}`,
  );

describe('who may see the panel', () => {
  it('sends a signed-out browser to sign in, and back to the page afterwards', async () => {
    await withPage(browser, async (page) => {
      const response = await page.goto(`${app.url}/panel/users`);
      expect(new URL(page.url()).pathname).toBe('/auth/sign-in');
      expect(new URL(page.url()).searchParams.get('return_to')).toBe('/panel/users');
      expect(response?.status()).toBe(200);
    });
  });

  it('refuses a student with a 403 page', async () => {
    await withPage(browser, async (page) => {
      await signIn(page, ada);
      const response = await page.goto(`${app.url}/panel/`);
      expect(response?.status()).toBe(403);
      expect(await page.locator('h1').textContent()).toBe('Admins only');
    });
  });

  it("serves the page with a Content-Security-Policy that allows no inline script but the import map's hash, and assets cached for good", async () => {
    const response = await fetch(`${app.url}/panel/`, { headers: { cookie: coach.cookie } });
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).not.toContain('unsafe-inline');
    const page = await response.text();
    const asset = /href="(\/panel\/assets\/[0-9a-f]{12}\/panel\.css)"/.exec(page)![1]!;
    const css = await fetch(`${app.url}${asset}`);
    expect(css.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await fetch(`${app.url}${asset.replace(/[0-9a-f]{12}/, '000000000000')}`)).status).toBe(404);
  });

  it('preloads every module the page runs, and sends each asset compressed to a browser that takes brotli or gzip', async () => {
    const page = await (await fetch(`${app.url}/panel/`, { headers: { cookie: coach.cookie } })).text();
    const preloaded = [...page.matchAll(/<link rel="modulepreload" href="([^"]+)">/g)].map((match) => match[1]!);
    expect(preloaded).toEqual(expect.arrayContaining([expect.stringMatching(/\/main\.ts$/), expect.stringMatching(/\/vendor-preact\.mjs$/)]));
    const main = preloaded.find((href) => href.endsWith('/main.ts'))!;
    const as = async (encoding: string) => {
      const response = await request(`${app.url}${main}`, { headers: { 'accept-encoding': encoding } });
      return { encoding: response.headers['content-encoding'], vary: response.headers.vary, body: Buffer.from(await response.body.arrayBuffer()) };
    };
    const [plain, br, gzip] = [await as('identity'), await as('br, gzip'), await as('gzip')];
    expect([plain.encoding, br.encoding, gzip.encoding]).toEqual([undefined, 'br', 'gzip']);
    expect(br.vary).toBe('Accept-Encoding');
    expect(br.body.length).toBeLessThan(plain.body.length / 2);
    expect(brotliDecompressSync(br.body).equals(plain.body)).toBe(true);
    expect(gunzipSync(gzip.body).equals(plain.body)).toBe(true);
  });
});

it('has an accessibility check that finds a planted violation (so a clean result means something)', async () => {
  await withPage(browser, async (page) => {
    await open(page, '/panel/');
    await page.evaluate(`document.querySelector('main').insertAdjacentHTML('beforeend', '<input type="text"><img src="data:,">')`);
    expect((await accessibilityProblems(page)).map((problem) => problem.split(':')[0])).toEqual(expect.arrayContaining(['image-alt', 'label']));
  });
});

describe('overview', () => {
  it('shows the capacity as the API does, and saves the cap inline (validated, audited, in force at once)', async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/');
      const api = (await (await fetch(`${app.url}/admin/overview`, { headers: { cookie: coach.cookie } })).json()) as {
        capacity: { running: number; cap: number };
      };
      expect(await page.locator('.card').first().locator('.figure').textContent()).toBe(`${api.capacity.running} running of ${api.capacity.cap}`);
      // No identity provider here: the coach learns how students sign in, and what the operator would set.
      expect(await page.locator('.notice.info').textContent()).toMatch(/^\s*No identity provider is configured: students sign in with one-time links/);
      await lookAt(page, 'overview');
      const cap = page.getByLabel('Cap on running workspaces');
      await cap.fill('lots');
      await page.getByRole('button', { name: 'Save' }).click();
      expect(await page.getByRole('alert').textContent()).toContain('The cap is a whole number from 0 to 10000.');
      await cap.fill('2');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('Saved: the cap is 2 (was 1).').waitFor();
      expect(await app.store.settings.cap()).toEqual({ value: 2, source: 'override' });
      expect((await auditActions()).at(-1)).toBe(`${coach.email} config.max-active-containers`);
      await app.store.settings.setCap(SYSTEM_ACTOR, 1);
    });
  });

  it('reads the overview again by itself after a failed read (a 503, as in a restart), saying so meanwhile', async () => {
    await withPage(browser, async (page) => {
      let answered = 0;
      await page.route('**/admin/overview', (route) =>
        answered++ === 0
          ? route.fulfill({ status: 503, json: { error: { code: 'unavailable', message: 'The database is not answering.' } } })
          : route.continue(),
      );
      await page.setViewportSize({ width: 1280, height: 800 });
      await signIn(page, coach);
      await page.goto(`${app.url}/panel/`);
      await page.getByText('The database is not answering. Trying again in 2 s.').waitFor({ timeout: 30_000 });
      await page.locator('main h1').filter({ hasText: 'Overview' }).waitFor({ timeout: 30_000 });
      expect(await page.getByText('Trying again').count()).toBe(0);
      expect(answered).toBe(2);
    });
  });

  it("shows a student's capacity refusal on an open overview without a reload", async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/');
      await page.getByText('No one was refused in the last hour.').waitFor();
      const refused = await fetch(`${app.url}/u/${bob.workspace.slug}/api/workspace/open`, {
        method: 'POST',
        headers: { cookie: bob.cookie, origin: app.url },
      });
      expect(refused.status).toBe(503);
      const row = page.getByRole('row', { name: new RegExp(bob.email) });
      await row.waitFor({ timeout: 5000 });
      expect(await row.textContent()).toContain(bob.workspace.slug);
    });
  });

  it('tells a coach on any other page of a refusal at once: a toast until dismissed, and a count on Overview until it is looked at', async () => {
    // Someone not refused yet (Bob was, above: a person's repeats within a minute fold into their first refusal, which tells no one again).
    await withPage(browser, async (page) => {
      // Nothing is replayed to a live stream that opens after a refusal: refuse once it is open (its answer came).
      const live = page.waitForResponse((response) => response.url().endsWith('/admin/events'), { timeout: 30_000 });
      await open(page, '/panel/allowlist');
      await page.getByRole('heading', { name: 'Allowlist' }).waitFor();
      await live;
      const refused = await fetch(`${app.url}/u/${head.workspace.slug}/api/workspace/open`, {
        method: 'POST',
        headers: { cookie: head.cookie, origin: app.url },
      });
      expect(refused.status).toBe(503);
      const toast = page.locator('.toasts');
      await toast.waitFor();
      expect(await toast.textContent()).toMatch(new RegExp(`${head.email} was refused at the cap \\(1 of 1 running\\)\\.`));
      const badge = page.getByRole('link', { name: /Overview/ }).locator('.badge');
      expect(Number(await badge.textContent().then((text) => text!.match(/^\d+/)![0]))).toBeGreaterThan(0);
      // A second student refused: still one toast, the latest refusal and the count.
      const cy = await newStudent(app.store, 'cy', tag);
      expect(
        (await fetch(`${app.url}/u/${cy.workspace.slug}/api/workspace/open`, { method: 'POST', headers: { cookie: cy.cookie, origin: app.url } })).status,
      ).toBe(503);
      await toast.getByText(`${cy.email} was refused at the cap`).waitFor();
      expect(await toast.textContent()).toContain('2 refusals since you last dismissed this.');
      expect(await toast.textContent()).not.toContain(head.email);
      // It covers no row for good: on a short window, the end of a table scrolls out from under it.
      await page.setViewportSize({ width: 1280, height: 420 });
      await page.getByRole('link', { name: 'Workspaces' }).click();
      await page.getByRole('row', { name: new RegExp(cy.workspace.slug) }).waitFor();
      const lastRow = page.locator('main tbody tr').last();
      await page.evaluate('window.scrollTo(0, document.documentElement.scrollHeight)');
      const [row, box] = [(await lastRow.boundingBox())!, (await toast.boundingBox())!];
      expect(row.y + row.height).toBeLessThanOrEqual(box.y);
      await lookAt(page, 'refusal-toast');
      await page.setViewportSize({ width: 1280, height: 800 });
      await toast.getByRole('link', { name: 'See the overview' }).click();
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      expect(await badge.count()).toBe(0);
      expect(await toast.isVisible()).toBe(true);
      await toast.getByRole('button', { name: 'Dismiss' }).click();
      expect(await toast.count()).toBe(0);
    });
  });
});

describe('workspaces', () => {
  it('lists what the API lists, filters through the URL (kept on reload), and stops one with a confirmation (audited)', async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/workspaces');
      const rows = page.locator('table.workspaces tbody tr');
      // Ada's (running), Bob's, Head's, the coach's, and Cy's, made and refused at the cap above.
      await eventually('five rows', async () => (await rows.count()) === 5);
      expect(await page.locator('.counts').textContent()).toMatch(/^5 in all: 1 running, 4 stopped$/);
      await lookAt(page, 'workspaces');
      // A tablet in portrait: fewer columns, nothing cut off.
      await page.setViewportSize({ width: 768, height: 1024 });
      await lookAt(page, 'workspaces-tablet');
      expect(Number(await page.evaluate('document.documentElement.scrollWidth'))).toBeLessThanOrEqual(768);
      expect(await page.locator('.scroll').evaluate((box) => box.scrollWidth - box.clientWidth)).toBe(0);
      await page.setViewportSize({ width: 1280, height: 800 });

      await page.getByLabel('Search').fill('ada');
      await eventually('the search applied', async () => (await rows.count()) === 1);
      expect(new URL(page.url()).searchParams.get('q')).toBe('ada');
      await page.reload();
      await eventually('the search kept', async () => (await rows.count()) === 1 && (await page.getByLabel('Search').inputValue()) === 'ada');

      await page.getByRole('button', { name: `Stop ${ada.workspace.slug}` }).click();
      const dialog = page.getByRole('dialog');
      expect(await dialog.textContent()).toContain(ada.email);
      await dialog.getByRole('button', { name: 'Stop' }).click();
      await page.getByText(`${ada.workspace.slug} is stopping.`).waitFor();
      expect((await app.store.workspaces.get(ada.workspace.id))?.spec.desiredState).toBe('stopped');
      expect((await auditActions()).at(-1)).toBe(`${coach.email} container.stop`);
      // It updates live: the controller's stop reaches the page without a reload.
      await page.locator('.state.stopped').waitFor({ timeout: 20_000 });
    });
  }, 40_000);

  it('stops a selection, naming who is affected and skipping those already stopped', async () => {
    await app.store.workspaces.open(ada.workspace.id);
    await withPage(browser, async (page) => {
      await open(page, '/panel/workspaces');
      await page.getByRole('checkbox', { name: 'Select every running workspace on this page' }).check();
      await page.getByRole('button', { name: 'Stop selected (1)' }).click();
      const dialog = page.getByRole('dialog');
      expect(await dialog.locator('ul.names').textContent()).toBe(`${ada.workspace.slug} (${ada.email})`);
      await dialog.getByRole('button', { name: 'Stop them' }).click();
      await page.getByText('Stopping 1; 0 skipped.').waitFor();
      expect((await app.store.workspaces.get(ada.workspace.id))?.spec.desiredState).toBe('stopped');
    });
    const skipped = await fetch(`${app.url}/admin/workspaces/stop`, {
      method: 'POST',
      headers: { cookie: coach.cookie, origin: app.url, 'content-type': 'application/json' },
      body: JSON.stringify({ ids: [ada.workspace.id, 'no-such-id'] }),
    });
    expect(await skipped.json()).toEqual({
      stopped: [],
      skipped: [
        { id: ada.workspace.id, slug: ada.workspace.slug, reason: 'already stopped' },
        { id: 'no-such-id', slug: null, reason: 'not found' },
      ],
    });
  });
});

describe('users', () => {
  it('promotes and demotes (audited), explains the last admin, and shows a refusal the API gives', async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/users');
      await lookAt(page, 'users');
      await page
        .getByRole('row', { name: new RegExp(bob.email) })
        .getByRole('button', { name: 'Make admin' })
        .click();
      // A confirmation names the person first; nothing changed yet.
      const promoting = page.getByRole('dialog', { name: `Make ${bob.email} an admin?` });
      await promoting.waitFor();
      await lookAt(page, 'users-promote-confirm');
      expect((await auditActions()).at(-1)).not.toBe(`${coach.email} user.promote`);
      await promoting.getByRole('button', { name: 'Make admin' }).click();
      await page.getByText(`${bob.email} is now an admin.`).waitFor();
      expect((await auditActions()).at(-1)).toBe(`${coach.email} user.promote`);
      await page
        .getByRole('row', { name: new RegExp(bob.email) })
        .getByRole('button', { name: 'Demote' })
        .click();
      const demoting = page.getByRole('dialog', { name: `Demote ${bob.email}?` });
      expect(await demoting.textContent()).toContain('stay signed in');
      await demoting.getByRole('button', { name: 'Demote' }).click();
      await page.getByText(`${bob.email} is no longer an admin.`).waitFor();
      expect((await auditActions()).at(-1)).toBe(`${coach.email} user.demote`);
    });
    // The panel thinks two admins remain (its live updates are cut off); the API refuses to demote the last one.
    await withPage(browser, async (page) => {
      await page.route('**/admin/events', (route) => route.abort());
      await open(page, '/panel/users');
      await page.getByRole('row', { name: new RegExp(coach.email) }).waitFor();
      await app.store.users.demote(SYSTEM_ACTOR, head.userId);
      await page
        .getByRole('row', { name: new RegExp(coach.email) })
        .getByRole('button', { name: 'Demote' })
        .click();
      await page.getByRole('dialog').getByRole('button', { name: 'Demote' }).click();
      expect(await page.getByRole('dialog').getByRole('alert').textContent()).toContain('is the last admin and cannot be demoted');
      await app.store.users.promote(SYSTEM_ACTOR, head.userId);
    });
  });

  it('makes a one-time sign-in link after naming whom it signs in, shows it once to copy, and it signs them in', async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/users');
      await page.getByRole('button', { name: `Make a sign-in link for ${bob.email}` }).click();
      const dialog = page.getByRole('dialog');
      expect(await dialog.textContent()).toContain(`signs in as ${bob.email}`);
      await dialog.getByRole('button', { name: 'Make the link' }).click();
      const field = page.getByLabel(/^Sign-in link for/);
      await field.waitFor();
      const url = await field.inputValue();
      expect(url).toMatch(new RegExp(`^${app.url}/auth/link/[A-Za-z0-9_-]{43}$`));
      await lookAt(page, 'users-sign-in-link');
      expect(await accessibilityProblems(page)).toEqual([]);
      expect((await auditActions()).at(-1)).toBe(`${coach.email} auth.sign-in-link`);
      // In another browser, the link signs bob in.
      await withPage(browser, async (other) => {
        await other.goto(url);
        await other.getByRole('button', { name: `Sign in as ${bob.email}` }).click();
        await other.waitForURL(new RegExp(`/u/${bob.workspace.slug}/`));
      });
    });
  });

  it('deletes a user only after their email is typed, naming the workspace that goes', async () => {
    const gone = await newStudent(app.store, 'gone', tag);
    await withPage(browser, async (page) => {
      await open(page, '/panel/users');
      await page.getByRole('button', { name: `Delete ${gone.email}` }).click();
      const dialog = page.getByRole('dialog');
      expect(await dialog.textContent()).toContain(`the workspace ${gone.workspace.slug} with all its files`);
      const confirm = dialog.getByRole('button', { name: 'Delete' });
      expect(await confirm.isDisabled()).toBe(true);
      await dialog.getByRole('textbox').fill(gone.email);
      await confirm.click();
      await page.getByText(`Deleted ${gone.email}.`).waitFor();
      expect(await app.store.users.get(gone.userId)).toBeUndefined();
      expect((await auditActions()).at(-1)).toBe(`${coach.email} user.delete`);
    });
  });
});

describe('allowlist', () => {
  it("adds (audited), shows the API's refusal of a bad entry inline, removes with a confirmation, and shows a malformed file's error", async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/allowlist');
      await page.getByText('No one is on the allowlist yet: add an email or a domain.').waitFor();
      await lookAt(page, 'allowlist-empty');
      const entry = page.getByLabel('Email or domain');
      await entry.fill('a@b@school.org');
      await page.getByRole('button', { name: 'Add' }).click();
      expect(await page.locator('#entry-problem').textContent()).toBe('Invalid allowlist entry: "a@b@school.org" has more than one \'@\'.');
      await entry.fill('School.org');
      await page.getByRole('button', { name: 'Add' }).click();
      await page.getByText('Added school.org.').waitFor();
      expect((await auditActions()).at(-1)).toBe(`${coach.email} allowlist.add`);
      await lookAt(page, 'allowlist');
      await page.getByRole('button', { name: 'Remove school.org' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
      await page.getByText('Removed school.org.').waitFor();
      expect((await auditActions()).at(-1)).toBe(`${coach.email} allowlist.remove`);

      const file = path.join(app.dataDir, 'allowlist.json');
      await writeFile(file, '{"entries": [');
      // A reload on a busy machine has taken over 10 s (the default wait) to show it.
      await page.reload();
      await page.getByRole('alert').filter({ hasText: 'The allowlist file is not valid; fix it first.' }).waitFor({ timeout: 30_000 });
      await writeFile(file, '{"entries": []}');
    });
  });
});

describe('audit log', () => {
  it('filters by actor, action and time, keeps the filters in the URL across a reload, and shows a cap change as before and after', async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/audit');
      await lookAt(page, 'audit');
      await page.getByLabel('Action').fill('config.');
      await page.getByLabel('Actor').fill(coach.email.slice(0, 8));
      await page.getByRole('button', { name: 'Apply' }).click();
      const rows = page.locator('table.audit tbody tr');
      await eventually('filtered', async () => (await rows.count()) === 1);
      await page.reload();
      await eventually('kept after a reload', async () => (await rows.count()) === 1 && (await page.getByLabel('Action').inputValue()) === 'config.');
      await rows.first().locator('summary').click();
      expect(await rows.first().locator('.before').textContent()).toBe('1');
      expect(await rows.first().locator('.after').textContent()).toBe('2');
    });
  });

  it('pages through more entries with the cursor', async () => {
    await db.dataSource.query(
      "INSERT INTO audit_log (actor_email, action, target_kind, target_id) SELECT 'filler@school.test', 'allowlist.add', 'allowlist', 'e' || i FROM generate_series(1, 120) AS i",
    );
    await withPage(browser, async (page) => {
      await open(page, '/panel/audit?actor=filler');
      const rows = page.locator('table.audit tbody tr');
      await eventually('first page', async () => (await rows.count()) === 50);
      await page.getByRole('button', { name: 'Load more' }).click();
      await eventually('second page', async () => (await rows.count()) === 100);
      await page.getByRole('button', { name: 'Load more' }).click();
      await eventually('last page', async () => (await rows.count()) === 120);
      await page.getByText('That is all.').waitFor();
    });
  });
});

describe('backups', () => {
  it("backs a workspace up, offers it for download, and restores it into another student's workspace after naming it", async () => {
    await withPage(browser, async (page) => {
      await open(page, '/panel/backups');
      await page.getByText('No backups yet').waitFor();
      expect(await page.locator('main').textContent()).toContain('(or run cli backup <slug> on the server)');
      await page.getByLabel('Back up the workspace').selectOption({ label: `${ada.workspace.slug} (${ada.email})` });
      await page.getByRole('button', { name: 'Back up', exact: true }).click();
      await page.getByText(`Backed up ${ada.workspace.slug}:`).waitFor({ timeout: 30_000 });
      const row = page.getByRole('row', { name: new RegExp(ada.workspace.slug) });
      await row.waitFor();
      await lookAt(page, 'backups');
      expect((await auditActions()).at(-1)).toBe(`${coach.email} workspace.backup`);

      const href = (await row.getByRole('link', { name: /^Download / }).getAttribute('href'))!;
      const download = await fetch(`${app.url}${href}`, { headers: { cookie: coach.cookie } });
      expect(download.status).toBe(200);
      expect(Buffer.from(await download.arrayBuffer()).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));

      await row.getByRole('button', { name: /^Restore / }).click();
      const dialog = page.getByRole('dialog');
      // Words apart where they should be, and what a coach must know before replacing files.
      expect((await dialog.locator('p').first().textContent())!.replace(/\s+/g, ' ')).toMatch(
        /the backup \(taken \S.*\)\. .*Its current files are first kept as a backup of their own/,
      );
      await dialog.getByLabel('Into the workspace').selectOption({ label: `${bob.workspace.slug} (${bob.email})` });
      await dialog.getByRole('button', { name: 'Replace the files' }).click();
      await page.getByText(`into ${bob.workspace.slug}, without the first student's editor state, credentials and history.`).waitFor({ timeout: 30_000 });
      expect((await auditActions()).at(-1)).toBe(`${coach.email} workspace.restore`);
      expect((await app.store.workspaces.get(bob.workspace.id))!.spec.homeVolume).toMatch(new RegExp(`^ws-${bob.workspace.slug}-home-restore-`));
    });
  }, 90_000);

  it('shows the refusal of a restore into a running workspace in the dialog', async () => {
    // Wanted running is what the rule looks at (an earlier test may have stopped it).
    await app.store.workspaces.open(ada.workspace.id);
    await withPage(browser, async (page) => {
      await open(page, '/panel/backups');
      await page
        .getByRole('button', { name: /^Restore / })
        .first()
        .click();
      const dialog = page.getByRole('dialog');
      await dialog.getByLabel('Into the workspace').selectOption({ label: `${ada.workspace.slug} (${ada.email}) — its own — running` });
      await dialog.getByRole('button', { name: 'Replace the files' }).click();
      expect(await dialog.getByRole('alert').textContent()).toContain(`${ada.workspace.slug} is running: stop it, then replace its files`);
      await lookAt(page, 'backups-restore-running');
      // The dialog offers the way out in one press: stop, wait until it is stopped, restore.
      await dialog.getByRole('button', { name: `Stop ${ada.workspace.slug} and replace the files` }).click();
      await page.getByText(`into ${ada.workspace.slug}.`).waitFor({ timeout: 30_000 });
      expect(await dialog.isVisible()).toBe(false);
      expect((await app.store.workspaces.get(ada.workspace.id))!.spec.desiredState).toBe('stopped');
      // Stopped, its current files kept (the restore's own safety copy), then restored: one press.
      expect((await auditActions()).slice(-3)).toEqual([
        `${coach.email} container.stop`,
        `${coach.email} workspace.backup`,
        `${coach.email} workspace.restore`,
      ]);
    });
  }, 90_000);

  it('draws the restore dialog from live state: a workspace stopped meanwhile is no longer marked running', async () => {
    await app.store.workspaces.open(ada.workspace.id);
    await waitForState(harness.store, ada.workspace.id, 'running');
    await withPage(browser, async (page) => {
      await open(page, '/panel/backups');
      await page
        .getByRole('button', { name: /^Restore / })
        .first()
        .click();
      const dialog = page.getByRole('dialog');
      const select = dialog.getByLabel('Into the workspace');
      await select.selectOption({ label: `${ada.workspace.slug} (${ada.email}) — its own — running` });
      // Another coach (or the CLI) stops it while the dialog is open.
      await app.store.workspaces.stop(SYSTEM_ACTOR, ada.workspace.id, 'coach');
      await dialog.getByRole('option', { name: `${ada.workspace.slug} (${ada.email}) — its own`, exact: true }).waitFor({ state: 'attached', timeout: 30_000 });
      expect(await select.inputValue()).toBe(ada.workspace.id);
      await dialog.getByRole('button', { name: 'Replace the files' }).click();
      await page.getByText(`into ${ada.workspace.slug}.`).waitFor({ timeout: 30_000 });
    });
  }, 90_000);
});

describe('nodes', () => {
  it("lists a swarm's nodes on the Overview as the leader recorded them: state, a drain, workspaces, free memory", async () => {
    // The leader records what it sees every few seconds (here one engine): stopped, so that these stay.
    await harness.stop();
    const gib = 1024 ** 3;
    await harness.store.nodes.record([
      {
        name: 'node-a',
        state: 'ready',
        availability: 'active',
        address: '10.0.0.1',
        memoryBytes: 16 * gib,
        reservedMemoryBytes: 4 * gib,
        nanoCpus: 8e9,
        reachable: true,
      },
      {
        name: 'node-b',
        state: 'down',
        availability: 'active',
        address: '10.0.0.2',
        memoryBytes: 16 * gib,
        reservedMemoryBytes: 0,
        nanoCpus: 8e9,
        reachable: false,
      },
      {
        name: 'node-c',
        state: 'ready',
        availability: 'pause',
        address: '10.0.0.3',
        memoryBytes: 16 * gib,
        reservedMemoryBytes: 0,
        nanoCpus: 8e9,
        reachable: true,
      },
    ]);
    await app.store.nodes.drain(SYSTEM_ACTOR, 'node-c');
    await withPage(browser, async (page) => {
      await open(page, '/panel/');
      const table = page.getByRole('table', { name: 'Nodes' });
      await table.waitFor();
      const rows = await Promise.all(
        (await table.locator('tbody tr').all()).map(async (row) =>
          (await row.locator('td').allTextContents())
            .slice(0, 5)
            .map((cell) => cell.trim())
            .join(' | '),
        ),
      );
      expect(rows).toEqual([
        'node-a | ready | 0 | 0 | 12.0 GiB of 16.0 GiB',
        'node-b | down | 0 | 0 | 16.0 GiB of 16.0 GiB',
        'node-c | ready, draining (cli nodes undrain takes it back) | 0 | 0 | 16.0 GiB of 16.0 GiB',
      ]);
      await lookAt(page, 'overview-nodes');
    });
  });
});
