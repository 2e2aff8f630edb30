/**
 * Issue 43, a coach teaching a class of three, end to end: Chromium, the real workspace image
 * (code-server with the classroom extension) for two running editors, started by the real
 * controllers on real Docker through the real proxy, the real simulator's build for a run, the
 * lesson controller and the join codes' expiry live, against the real app and PostgreSQL. Ada and
 * Bob work in their editors; Cy never opened her workspace; the coach has the panel open.
 *
 * - Ada's run fails to compile: the coach's Class page shows her compile error, without a reload.
 * - Bob raises a hand while the coach is on another page (Runs): the notice names him there.
 * - The coach opens Ada's workspace from the Class page, read only: her files are listed, and her
 *   editor says "Your coach is looking".
 * - A guest joins with a join code (a third browser, `/join`) and lands on their workspace page.
 * - A lesson handed out to everyone appears in Ada's and Bob's explorers (each editor tells it once),
 *   and in Cy's and the guest's homes, which were never started; when Cy opens hers at last, the
 *   starter project is copied in beside the lesson.
 * - Collecting it gives one archive with a folder per student.
 * - Closing the join code backs the guest's home up, then removes their workspace.
 */
import type { Browser, Page } from 'playwright-core';
import { DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { names } from '../../src/docker/runtime.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { gotoAndWait, launchBrowser, signIn, waitForWorkbench, withPage } from '../helpers/browser.ts';
import { codeServerLog, docker, eventually, execIn, inspectByName, newControlPlaneId, removeEverything, TEST_ENV } from '../helpers/controllers.ts';
import { entriesOf, tarOf } from '../helpers/archives.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, waitForState, type Student } from '../helpers/workspaces.ts';

const IMAGE = 'classroom-workspace:latest';
const tag = Date.now().toString(36);
const db = useTestDatabase({ truncate: false });
const controlPlaneId = newControlPlaneId();
const runtime = new DockerRuntime({ controlPlaneId });
let app: TestApp;
let browser: Browser;
let coach: Student;
let ada: Student;
let bob: Student;
let cy: Student;

beforeAll(async () => {
  app = await startApp(
    db.dataSource,
    // code-server needs far more than the test image's 64 MiB; so does the robot's build.
    { ...TEST_ENV, CONTROL_PLANE_ID: controlPlaneId, WORKSPACE_IMAGE: IMAGE, CODE_MEMORY_LIMIT: '1g', RUN_MEMORY_LIMIT: '1g', JOIN_CODES: 'on' },
    { parts: ['changes', 'activity', 'http', 'workspaces', 'runs', 'lessons', 'joins'] },
  );
  coach = await newStudent(app.store, 'coach', tag, 'admin');
  ada = await newStudent(app.store, 'ada', tag);
  bob = await newStudent(app.store, 'bob', tag);
  cy = await newStudent(app.store, 'cy', tag);
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await removeEverything(controlPlaneId);
}, 120_000);

/** A call as `as` (a session cookie; the same origin for a change), with a JSON or archive body when given; its answer, which must be a success. */
async function call<T>(as: Student, method: 'GET' | 'POST', address: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { cookie: as.cookie, accept: 'application/json' };
  const init: RequestInit = { method, headers };
  if (method === 'POST') headers.origin = app.url;
  if (Buffer.isBuffer(body)) {
    headers['content-type'] = 'application/gzip';
    init.body = new Uint8Array(body);
  } else if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`${app.url}${address}`, init);
  const answer = (response.headers.get('content-type') ?? '').includes('json') ? await response.json() : Buffer.from(await response.arrayBuffer());
  if (!response.ok) throw new Error(`${method} ${address}: ${response.status} ${JSON.stringify(answer)}`);
  return answer as T;
}

/** Opens a student's editor in `page` and waits for its workbench. */
async function openEditor(page: Page, student: Student): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 800 });
  await signIn(page, student);
  await page.goto(`${app.url}/u/${student.workspace.slug}/?folder=/home/student`, { waitUntil: 'commit' });
  await waitForWorkbench(page, { timeout: 240_000, more: () => codeServerLog(runtime, student.workspace.id) });
}

/** The lesson "Drive Intro" as a coach tars its folder. */
const lessonArchive = () =>
  tarOf([
    { name: 'drive-intro/Drive.java', text: 'class Drive {}\n' },
    { name: 'drive-intro/README.md', text: '# Drive Intro\n' },
  ]);

const statusItem = (page: Page, text: RegExp) => page.locator('.statusbar-item', { hasText: text }).first();
const notification = (page: Page, text: string) => page.locator('.notification-list-item').getByText(text, { exact: true });
const rowOf = (page: Page, student: Student) => page.locator(`main tbody tr[data-student="${student.email}"]`);

it('teaches a class: a compile error on the Class page, a raised hand on any page, a look, a lesson handed out and collected, and a join code that ends', async () => {
  // Two editors open at once, as a class does.
  await app.store.workspaces.open(ada.workspace.id);
  await app.store.workspaces.open(bob.workspace.id);
  await waitForState(app.store, ada.workspace.id, 'running', 120_000);
  await waitForState(app.store, bob.workspace.id, 'running', 120_000);
  await withPage(browser, async (adaPage) => {
    await withPage(browser, async (bobPage) => {
      await withPage(browser, async (panel) => {
        await openEditor(adaPage, ada);
        await openEditor(bobPage, bob);

        // The coach's Class page.
        await panel.setViewportSize({ width: 1280, height: 800 });
        await signIn(panel, coach);
        await gotoAndWait(panel, `${app.url}/panel/class`, rowOf(panel, ada), 'class-coach-panel-failure');

        // Ada's code does not compile; she runs it: her row says so.
        const ada1000 = async (command: string) => {
          const container = await inspectByName(names.code(ada.workspace.slug));
          const { code, output } = await execIn(container!.Id, ['sh', '-c', command], { user: '1000:1000' });
          if (code !== 0) throw new Error(`${command}: ${output}`);
        };
        await ada1000("printf 'int broken = ;\\n' >> src/main/java/frc/robot/Robot.java");
        await call(ada, 'POST', `/u/${ada.workspace.slug}/api/runs`);
        await rowOf(panel, ada)
          .getByText(/^\d+ compile errors?$/)
          .waitFor({ timeout: 180_000 });

        // Bob raises a hand while the coach looks at the Runs page: the notice names him there.
        await panel.getByRole('navigation', { name: 'Admin panel' }).getByRole('link', { name: 'Runs' }).click();
        await call(bob, 'POST', `/u/${bob.workspace.slug}/api/help`, { message: 'My robot does not drive' });
        await panel.locator('.toasts .hand').getByText(`${bob.email} asks for help:`, { exact: false }).waitFor({ timeout: 20_000 });

        // The coach looks at Ada's workspace from the Class page: her files, read only; her editor says so.
        await panel
          .getByRole('navigation', { name: 'Admin panel' })
          .getByRole('link', { name: /^Class/ })
          .click();
        await rowOf(panel, ada)
          .getByRole('link', { name: `Look at ${ada.email}'s workspace` })
          .click();
        await panel.getByRole('region', { name: 'Files' }).getByText('build.gradle').waitFor({ timeout: 30_000 });
        await statusItem(adaPage, /^\s*Your coach is looking\s*$/).waitFor({ timeout: 20_000 });

        // A guest joins with a code, in a browser of their own.
        const { code: joinCode } = await call<{ code: { id: string; code: string } }>(coach, 'POST', '/admin/join-codes', { hours: 1, label: 'Outreach' });
        const guestSlug = await withPage(browser, async (guest) => {
          await gotoAndWait(guest, `${app.url}/join`, guest.getByLabel('Join code'), 'class-coach-join-failure');
          await guest.getByLabel('Join code').fill(joinCode.code);
          await guest.getByLabel('Your name').fill('Visiting Grace');
          await guest.getByRole('button', { name: 'Join' }).click();
          await guest.waitForURL(/\/u\/guest-[0-9a-f]+\//);
          return /\/u\/(guest-[0-9a-f]+)\//.exec(guest.url())![1]!;
        });

        // A lesson for everyone: in both running editors' explorers (each tells it once), and in Cy's and the guest's homes.
        const { lesson } = await call<{ lesson: { id: string } }>(coach, 'POST', '/admin/lessons?name=Drive%20Intro', await lessonArchive());
        expect(await call(coach, 'POST', `/admin/lessons/${lesson.id}/handout`, { all: true })).toEqual({ version: 1, students: 4 });
        // Both at once: a toast waited for after the other editor's could be gone by then. Each
        // delivery is a helper container on the engine: on a busy machine it can take a minute or more.
        await Promise.all(
          [adaPage, bobPage].map(async (page) => {
            await notification(page, 'Your coach handed out Drive Intro: it is in lessons/Drive Intro.')
              .waitFor({ timeout: 120_000 })
              .catch(async (error: unknown) => {
                const detail = await call<{ students: unknown[] }>(coach, 'GET', `/admin/lessons/${lesson.id}`).catch((failure: unknown) => failure);
                throw new Error(`${(error as Error).message}\n--- the lesson's deliveries then: ${JSON.stringify(detail)}`, { cause: error });
              });
            await page.getByRole('treeitem', { name: 'lessons' }).waitFor({ timeout: 30_000 });
          }),
        );
        const delivered = await eventually(
          'every delivery',
          async () => {
            const detail = await call<{ students: { slug: string; state: string }[] }>(coach, 'GET', `/admin/lessons/${lesson.id}`);
            return detail.students.every((each) => each.state === 'delivered') ? detail.students : undefined;
          },
          60_000,
        );
        expect(delivered.map((each) => each.slug).toSorted()).toEqual([ada.workspace.slug, bob.workspace.slug, cy.workspace.slug, guestSlug].toSorted());
        expect((await app.store.workspaces.get(cy.workspace.id))!.status.observedState).not.toBe('running');

        // Collected: one archive, a folder per student.
        const { collection } = await call<{ collection: { id: string } }>(coach, 'POST', `/admin/lessons/${lesson.id}/collections`, {});
        await eventually(
          'the collection done',
          async () =>
            (await call<{ collection: { doneAt: string | null } }>(coach, 'GET', `/admin/lessons/${lesson.id}/collections/${collection.id}`)).collection.doneAt,
          60_000,
        );
        const entries = await entriesOf(await call<Buffer>(coach, 'GET', `/admin/lessons/${lesson.id}/collections/${collection.id}/archive`));
        for (const slug of [ada.workspace.slug, bob.workspace.slug, cy.workspace.slug, guestSlug])
          expect(entries.get(`Drive Intro/${slug}/Drive Intro/Drive.java`)).toBe('class Drive {}\n');

        // Cy opens her workspace at last: her home, which held only the lesson, gets the starter project beside it.
        await app.store.workspaces.open(cy.workspace.id);
        await waitForState(app.store, cy.workspace.id, 'running', 120_000);
        const cyContainer = await inspectByName(names.code(cy.workspace.slug));
        expect(
          await execIn(cyContainer!.Id, ['sh', '-c', 'cd /home/student && ls build.gradle "lessons/Drive Intro/Drive.java"'], { user: '1000:1000' }),
        ).toEqual({
          code: 0,
          output: 'build.gradle\nlessons/Drive Intro/Drive.java\n',
        });

        // The code closed: the guest's home backed up, then their workspace removed.
        const guestWorkspace = (await app.store.workspaces.getBySlug(guestSlug))!;
        await call(coach, 'POST', `/admin/join-codes/${joinCode.id}/close`);
        await eventually('the guest removed', async () => (await app.store.workspaces.get(guestWorkspace.id)) === undefined || undefined, 60_000);
        const backups = await call<{ backups: { name: string }[] }>(coach, 'GET', '/admin/backups');
        expect(backups.backups.some((each) => each.name.startsWith(`${guestSlug}-`))).toBe(true);
        await eventually('the guest’s home gone', async () => (await inspectVolume(names.home(guestWorkspace))) === undefined || undefined, 60_000);
      });
    });
  });
}, 900_000);

/** A volume's inspection, or undefined when it does not exist. */
const inspectVolume = (name: string): Promise<unknown> =>
  docker
    .getVolume(name)
    .inspect()
    .catch(() => undefined);
