/**
 * Issue 23, the rolling upgrade with a real editor: two real server processes on one PostgreSQL
 * behind HAProxy (classroom-base/haproxy:2.6, Debian's haproxy, configured by deploy/haproxy.cfg as
 * compose.replicas.yaml does), the real workspace image (code-server with the classroom extension)
 * open in Chromium through the balancer, and a run of the student's robot code going.
 *
 * The student types into a file and does not save. Each replica in turn is stopped with SIGTERM
 * and a new one started in its place (operations.md, "A rolling upgrade"). Every WebSocket the
 * editor had is closed on the way and VS Code opens new ones through the balancer to the other
 * replica; then the student types more and saves: the file holds both. The workspace's editor
 * container and the run's simulator container are the ones from before (never restarted), and the
 * run is still running, its output still growing.
 */
import type { Browser, Page, WebSocket } from 'playwright-core';
import type { DataSource } from 'typeorm';
import { editFile, gotoAndWait, launchBrowser, runFromPalette, waitForWorkbench, withPage } from '../helpers/browser.ts';
import { createHarness, docker, eventually, execIn, newControlPlaneId, removeEverything, type Harness } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import { createBalancer, replicaEnv, type Balancer } from '../helpers/replicas.ts';
import { startServer, type ServerProcess } from '../helpers/server.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const IMAGE = 'classroom-workspace:latest';
const HOME = '/home/student';
/** Ada's own editor settings (code-server's user settings in her home). */
const USER_SETTINGS = `${HOME}/.local/share/code-server/User/settings.json`;
const tag = Date.now().toString(36);
const controlPlaneId = newControlPlaneId();
let db: { url: string; dataSource: DataSource };
let harness: Harness;
let browser: Browser;
let ada: Student;
let balancer: Balancer;
let env: (port: number) => Record<string, string>;
const replicas: ServerProcess[] = [];

beforeAll(async () => {
  db = await openTestDatabase();
  harness = createHarness(db.dataSource, { controlPlaneId });
  balancer = await createBalancer(controlPlaneId, { places: 2 });
  // code-server needs far more than the test image's 64 MiB.
  env = replicaEnv(balancer, { databaseUrl: db.url, controlPlaneId, env: { WORKSPACE_IMAGE: IMAGE, CODE_MEMORY_LIMIT: '1g' } });
  for (const port of balancer.ports) replicas.push(await startServer(env(port)));
  await balancer.start();
  await balancer.answering();
  ada = await newStudent(harness.store, 'ada', tag);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const replica of replicas) await replica.stop('SIGKILL');
  await balancer?.remove();
  await removeEverything(controlPlaneId);
  await db?.dataSource.destroy();
}, 60_000);

/** A container's id and when it started (a restarted container starts again; a replaced one has another id). */
async function started(id: string): Promise<{ id: string; startedAt: string }> {
  const info = await docker.getContainer(id).inspect();
  return { id: info.Id, startedAt: info.State.StartedAt };
}

/** The one running container with these labels. */
async function runningContainer(...labels: string[]): Promise<string> {
  const found = await docker.listContainers({ filters: { label: labels, status: ['running'] } });
  if (found.length !== 1) throw new Error(`${found.length} running containers labelled ${labels.join(', ')}`);
  return found[0]!.Id;
}

/** The student's editor container. */
const editorContainer = () => runningContainer(`service.workspace-id=${ada.workspace.id}`, 'service.role=code');

async function fileInWorkspace(file: string): Promise<string> {
  const { code, output } = await execIn(await editorContainer(), ['cat', file]);
  if (code !== 0) throw new Error(`cat ${file} exited ${code}: ${output}`);
  return output;
}

/**
 * Replaces replica `index` as an upgrade does: SIGTERM (it exits by itself), then a new server on
 * the same port, which the balancer takes back once its /healthz answers (two checks a second apart).
 */
async function upgrade(index: number): Promise<void> {
  expect(await replicas[index]!.stop('SIGTERM')).toBe(0);
  replicas[index] = await startServer(env(balancer.ports[index]!));
}

it('upgrades both replicas under an open editor and a going run: the editor reconnects, the unsaved edit is saved whole, nothing restarts', async () => {
  await withPage(browser, async (page: Page) => {
    await page.setViewportSize({ width: 1280, height: 800 });
    const sockets: WebSocket[] = [];
    page.on('websocket', (socket) => sockets.push(socket));
    await page
      .context()
      .addCookies(ada.cookie.split('; ').map((pair) => ({ name: pair.split('=')[0]!, value: pair.slice(pair.indexOf('=') + 1), url: balancer.url })));

    // The workspace page through the balancer; Open; the editor.
    const openButton = page.getByRole('button', { name: 'Open', exact: true });
    await gotoAndWait(page, `${balancer.url}/u/${ada.workspace.slug}/`, openButton, 'rolling-upgrade-page');
    await openButton.click();
    await waitForWorkbench(page, { timeout: 180_000 });
    const editorBefore = await started(await editorContainer());

    // Typed, not saved. (A new window opens the project's README first, the image's editor defaults;
    // opened later, it would take the editor's place and the keys typed below.) VS Code for the web
    // saves a second after typing stops (`files.autoSave` is `afterDelay` there): Ada turns that off,
    // as a student can (the palette, from the file's editor), and it is off once her settings say
    // so (a read of the file late on a busy machine found the edit saved, CI 2026-12-02).
    await page.getByRole('tab', { name: /README\.md/ }).waitFor({ timeout: 60_000 });
    const editor = await editFile(page, 'src/main/java/frc/robot/Robot.java');
    await runFromPalette(page, 'File: Toggle Auto Save');
    await eventually('auto save off in her settings', async () => /"files\.autoSave":\s*"off"/.test(await fileInWorkspace(USER_SETTINGS)));
    await editor.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type(`\n// before the upgrade ${tag}`);
    const robot = `${HOME}/src/main/java/frc/robot/Robot.java`;
    await page.locator('.view-line', { hasText: `// before the upgrade ${tag}` }).waitFor();
    expect(await fileInWorkspace(robot)).not.toContain(`before the upgrade ${tag}`);

    // A run going, started as the editor's Run does (the student API through the balancer).
    const answer = await fetch(`${balancer.url}/u/${ada.workspace.slug}/api/runs`, { method: 'POST', headers: { cookie: ada.cookie, origin: balancer.url } });
    expect(answer.status).toBe(202);
    const runId = ((await answer.json()) as { run: { id: string } }).run.id;
    await eventually('the run running', async () => (await harness.store.runs.get(runId))?.status.phase === 'running', 180_000);
    const simBefore = await started(await runningContainer(`service.run-id=${runId}`));

    // One replica at a time; after each, the editor is connected again (each WebSocket closed by
    // the stop replaced by a new one through the balancer) before the next goes.
    const first = sockets.filter((socket) => !socket.isClosed());
    expect(first.length).toBeGreaterThan(0);
    for (const index of [0, 1]) {
      const open = sockets.filter((socket) => !socket.isClosed());
      const count = sockets.length;
      await upgrade(index);
      await eventually(
        `the editor connected again after replica ${index}'s upgrade`,
        async () => sockets.slice(count).filter((socket) => !socket.isClosed()).length >= open.filter((socket) => socket.isClosed()).length,
        60_000,
      );
    }
    // Every WebSocket the editor had went down with its replica; it has new ones.
    await eventually(
      'the first WebSockets all closed, new ones open',
      async () => first.every((socket) => socket.isClosed()) && sockets.some((socket) => !socket.isClosed()),
      60_000,
    );
    expect(sockets.every((socket) => socket.url().startsWith(`ws://127.0.0.1:${new URL(balancer.url).port}/u/${ada.workspace.slug}/`))).toBe(true);

    // More typing, then Save: the file holds the edit from before the upgrade and the one after.
    await editor.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type(`\n// after the upgrade ${tag}`);
    await page.keyboard.press('Control+S');
    await eventually('the edit saved', async () => (await fileInWorkspace(robot)).includes(`after the upgrade ${tag}`), 30_000);
    expect(await fileInWorkspace(robot)).toMatch(new RegExp(`// before the upgrade ${tag}\\n// after the upgrade ${tag}`));

    // Nothing was restarted: the same editor container, the same simulator, the run still going.
    expect(await started(await editorContainer())).toEqual(editorBefore);
    expect(await started(await runningContainer(`service.run-id=${runId}`))).toEqual(simBefore);
    const run = (await harness.store.runs.get(runId))!;
    expect(run.status.phase).toBe('running');
    await eventually('the run output still growing', async () => (await harness.store.runs.get(runId))!.status.outputLength > run.status.outputLength, 30_000);
  });
}, 600_000);
