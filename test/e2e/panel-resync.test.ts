/**
 * Issue 23: an open panel page reads its data again when its replica's change listener comes back
 * (PostgreSQL replays nothing a listener missed). Real app on real PostgreSQL with a LISTEN
 * connection, as a replica runs; Chromium on the Users page. A change made while nothing announces
 * it (plain SQL, no NOTIFY) shows on the page after the listener is cut and reconnects, without a
 * reload.
 */
import type { Browser } from 'playwright-core';
import { ChangeFeed } from '../../src/db/changes.ts';
import { categoryLogger } from '../../src/log.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { gotoAndWait, launchBrowser, signIn, withPage } from '../helpers/browser.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
const feed = new ChangeFeed();
const log = captureLogger();
let app: TestApp;
let browser: Browser;
let coach: Student;
let bob: Student;

beforeAll(async () => {
  feed.listen(db.url, categoryLogger(log.root, 'db'));
  app = await startApp(db.dataSource, {}, { changes: feed });
  await eventually('the listener connected', async () => log.records.some((record) => record.message === 'change listener connected'));
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  bob = await newStudent(app.store, 'bob', tag);
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await feed.close();
});

it('reads the page again when the change listener comes back, showing what changed unannounced meanwhile', async () => {
  await withPage(browser, async (page) => {
    await signIn(page, coach);
    const events = page.waitForResponse((response) => response.url().endsWith('/admin/events'), { timeout: 30_000 });
    const row = page.getByRole('row', { name: new RegExp(bob.email) });
    await gotoAndWait(page, `${app.url}/panel/users`, row.getByRole('button', { name: 'Make admin' }), 'panel-resync-users');
    await events;
    // Promoted with no announcement at all: the page cannot know.
    await db.dataSource.query("UPDATE users SET role = 'admin' WHERE id = $1", [bob.userId]);
    const reconnects = log.records.filter((record) => record.message === 'change listener reconnected').length;
    await db.dataSource.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()",
    );
    await eventually(
      'the listener to reconnect',
      async () => log.records.filter((record) => record.message === 'change listener reconnected').length > reconnects,
    );
    await row.getByRole('button', { name: 'Demote' }).waitFor({ timeout: 10_000 });
  });
}, 120_000);
