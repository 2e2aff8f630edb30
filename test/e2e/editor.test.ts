/**
 * The real editor end to end: a student signs in through the test OpenID Connect provider in
 * Chromium, opens their workspace (the real workspace image, code-server, started by the workspace
 * controller on real Docker), and the VS Code workbench renders through the proxy at `/u/<slug>/`.
 * They open a file of the starter project, type into it and save it (it is on their volume), and run
 * a command in the integrated terminal (a WebSocket through the proxy). An admin then stops the
 * workspace through the admin API: the editor's tunnels close at once, the editor says at once that
 * the coach stopped it (the classroom extension), and once the editor is gone the window shows the
 * workspace page ("Stopped", why, and Open); opening it again brings back a fresh editor over the same files.
 *
 * The workspace image is built by provisioning (scripts/build-workspace-image.sh, cached by the
 * hash of its inputs); a missing image fails this test in its first step, with the engine's message.
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page, WebSocket } from 'playwright-core';
import { startApp, type TestApp } from '../helpers/app.ts';
import { editFile, launchBrowser, waitForWorkbench, withPage } from '../helpers/browser.ts';
import { codeServerLog, createHarness, eventually, execIn, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startOidcProvider, type OidcProvider } from '../helpers/oidc.ts';
import { freePort } from '../helpers/server.ts';

const ADMIN_TOKEN = 'admin-token-editor-0123456789abcdef0123';
const IMAGE = 'classroom-workspace:latest';
const HOME = '/home/student';
const tag = Date.now().toString(36);
const email = `ada-${tag}@school.test`;
const slug = `ada-${tag}`;
const db = useTestDatabase({ truncate: false });
let provider: OidcProvider;
let app: TestApp;
let harness: Harness;
let browser: Browser;

beforeAll(async () => {
  const port = await freePort();
  provider = await startOidcProvider({
    clients: [{ client_id: 'control-plane', client_secret: 'control-plane-secret', redirect_uris: [`http://127.0.0.1:${port}/connect/oidc/callback`] }],
  });
  app = await startApp(
    db.dataSource,
    { OIDC_ISSUER: provider.issuer, OIDC_CLIENT_ID: 'control-plane', OIDC_CLIENT_SECRET: 'control-plane-secret', ADMIN_TOKEN },
    { port, allowlist: { isAllowed: (candidate) => candidate === email } },
  );
  // code-server needs far more than the test image's 64 MiB.
  harness = createHarness(db.dataSource, { changes: app.store.changes, env: { WORKSPACE_IMAGE: IMAGE, CODE_MEMORY_LIMIT: '1g' } });
  await harness.controller.start();
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
  await provider?.close();
}, 60_000);

/** The contents of `file` in the workspace's running code container (`cat` through the engine). */
async function readInWorkspace(workspaceId: string, file: string): Promise<string> {
  const [container] = (await harness.runtime.listContainers({ workspaceId })).filter((each) => each.role === 'code' && each.state === 'running');
  if (!container) throw new Error('no running code container');
  const { code, output } = await execIn(container.id, ['cat', file]);
  if (code !== 0) throw new Error(`cat ${file} exited ${code}: ${output}`);
  return output;
}

/** Waits for the VS Code workbench with the starter project; when it does not come, says why, with code-server's log. */
async function workbench(page: Page, workspaceId: string): Promise<void> {
  await waitForWorkbench(page, { more: () => codeServerLog(harness.runtime, workspaceId) });
}

it('signs in, opens the real editor through the proxy, edits and saves a file, runs a terminal command, and survives a stop by an admin', async () => {
  await withPage(browser, async (page) => {
    await page.setViewportSize({ width: 1280, height: 800 });
    const sockets: WebSocket[] = [];
    page.on('websocket', (socket) => sockets.push(socket));

    // Sign in: the provider vouches for Ada; the callback lands on her workspace page.
    provider.nextLogin({ id: email, email, email_verified: true, name: 'Ada' });
    await page.goto(`${app.url}/auth/start/oidc`);
    await page.waitForURL(`${app.url}/u/${slug}/`);
    expect(await page.locator('#state').textContent()).toBe('Stopped');
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    const user = (await app.store.users.getByEmail(email))!;
    await workbench(page, user.workspaceId!);
    expect(page.url()).toBe(`${app.url}/u/${slug}/?folder=${HOME}`);
    // The editor's own service worker may claim its workspace's path (code-server allows `/`), and no wider.
    const allowed = await page.evaluate(async () => (await fetch('_static/out/browser/serviceWorker.js')).headers.get('service-worker-allowed'));
    expect(allowed).toBe(`/u/${slug}/`);

    // A new home opens its README first (the image's editor defaults); opened later, it would take
    // the keys typed below. Then a file of the starter project: opened, typed into, saved to the volume.
    await page.getByRole('tab', { name: /README\.md/ }).waitFor({ timeout: 60_000 });
    await editFile(page, 'src/main/java/frc/robot/Robot.java');
    await page.keyboard.press('Control+End');
    const line = `// typed in the browser ${tag}`;
    await page.keyboard.type(`\n${line}`);
    await page.keyboard.press('Control+S');
    const robot = `${HOME}/src/main/java/frc/robot/Robot.java`;
    await eventually('the edit saved in the volume', async () => (await readInWorkspace(user.workspaceId!, robot)).includes(line), 20_000);

    // The integrated terminal: a shell in the container, over a WebSocket through the proxy.
    await page.keyboard.press('Control+Backquote');
    await page.locator('.terminal-wrapper .xterm').first().waitFor({ timeout: 30_000 });
    await page.locator('.terminal-wrapper .xterm').first().click();
    await page.keyboard.type(`echo "terminal $((6 * 7))" > ${HOME}/from-terminal.txt\n`);
    await eventually(
      'the terminal command ran',
      async () => (await readInWorkspace(user.workspaceId!, `${HOME}/from-terminal.txt`).catch(() => '')) === 'terminal 42\n',
      20_000,
    );
    const open = sockets.filter((socket) => !socket.isClosed());
    expect(open.length).toBeGreaterThan(0);
    expect(open.every((socket) => socket.url().startsWith(`ws://127.0.0.1:${new URL(app.url).port}/u/${slug}/`))).toBe(true);

    // An admin stops it: the tunnels close at once, and the editor says at once who stopped it and
    // how to go on, rather than VS Code's generic "Cannot reconnect. Please reload the window.".
    const stopped = await fetch(`${app.url}/admin/workspaces/${user.workspaceId}/stop-containers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(stopped.status).toBeLessThan(300);
    await eventually('the editor tunnels closed', async () => open.every((socket) => socket.isClosed()), 5000);
    const dialog = page.locator('.monaco-dialog-box');
    await dialog
      .getByText(/^Your coach stopped your workspace at \d{1,2}:\d{2}(\s?[AP]M)?\.$/)
      .waitFor({ timeout: 15_000 })
      .catch(async (error: unknown) => {
        // What the window showed instead (seen once on a busy machine), for the next look.
        const shot = path.join(os.tmpdir(), 'editor-no-stop-dialog.png');
        await page.screenshot({ path: shot });
        const shown = await page.locator('.monaco-dialog-box, .notification-list-item').allInnerTexts();
        throw new Error(`${(error as Error).message}\n--- dialogs and notifications: ${JSON.stringify(shown)}\n--- screenshot: ${shot}`, { cause: error });
      });
    expect(await dialog.textContent()).toContain('Your files are kept.');
    // VS Code retries its connection quietly meanwhile: it did not give up (its dialog would be first).
    expect(await page.getByText('Cannot reconnect').count()).toBe(0);
    await page.screenshot({ path: path.join(os.tmpdir(), 'editor-stopped-by-coach.png') });

    // Once the editor is gone, the window goes to the workspace page by itself (issue 41: never left
    // under VS Code's own "Disconnected" dialog), which says the same; Open brings a fresh editor over the same files.
    await page.locator('#state').getByText('Stopped').waitFor({ timeout: 30_000 });
    // The state is in the page as served; why it stopped comes with the page's first read of the API.
    await page
      .locator('#stopped')
      .getByText(/^Your coach stopped your workspace at /)
      .waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    await workbench(page, user.workspaceId!);
    expect(await readInWorkspace(user.workspaceId!, robot)).toContain(line);
  });
}, 300_000);
