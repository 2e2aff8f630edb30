/**
 * A real headless browser for the tests: Debian's Chromium (installed by scripts/provision.sh)
 * driven by playwright-core. Playwright's own browser download is never used. The tests run its old
 * headless shell, the benchmarks the full browser (launchBrowser says why).
 *
 * Pages may only reach 127.0.0.1 and `*.localhost` names (host mode's workspaces in tests, e.g.
 * `sam.ws.localhost`), which Chromium itself resolves to loopback without asking DNS: every other
 * request (HTTP or WebSocket) is aborted in the browser before it is sent, so a test can never send
 * traffic elsewhere.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, ConsoleMessage, Locator, Page, Request, Response, Route, WebSocket, WebSocketRoute } from 'playwright-core';
import { PROJECT_ROOT } from '../../src/config.ts';
import { eventually } from './controllers.ts';

/** Debian's Chromium (package `chromium`): the browser a student has. */
export const chromiumPath = '/usr/bin/chromium';

/**
 * Debian's build of Chromium's old headless shell (package `chromium-headless-shell`, the one
 * Playwright itself runs headless): the same Blink, V8 and network stack without the browser's own
 * window and UI, drawing the same pages for a quarter to a half less CPU than `chromium --headless`
 * (docs/testing.md, "Where the time goes", has the figures).
 */
export const headlessShellPath = '/usr/bin/chromium-headless-shell';

/**
 * How `request.failure()?.errorText` begins for a request the helper blocked
 * (`route.abort('blockedbyclient')`; Chromium 156 reports `net::ERR_BLOCKED_BY_CLIENT.Inspector`).
 * A request that was really sent to an unknown host would fail with `net::ERR_NAME_NOT_RESOLVED`.
 */
export const blockedErrorText = 'net::ERR_BLOCKED_BY_CLIENT';

/** Flags for a closed network: without the background-networking ones Chromium keeps dialling out. */
const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * The library that keeps Chromium off the host's network changes (test/helpers/no-netlink.c says
 * why), as scripts/provision.sh builds it: named by its source's hash, in TEST_BROWSER_CACHE.
 */
export function noNetlinkLibrary(): string {
  const hash = createHash('sha256')
    .update(readFileSync(path.join(PROJECT_ROOT, 'test/helpers/no-netlink.c')))
    .digest('hex')
    .slice(0, 16);
  return path.join(process.env.TEST_BROWSER_CACHE ?? '/var/cache/classroom-test', `no-netlink-${hash}.so`);
}

/**
 * Starts headless Chromium, with noNetlinkLibrary preloaded: a Docker network or container made by
 * another test beside it does not fail what its pages are loading. Each launch gets a fresh, empty
 * profile: playwright-core makes a new temporary --user-data-dir
 * (`<tmpdir>/playwright_chromiumdev_profile-*`) and removes it on close (passing --user-data-dir in
 * args is refused by playwright). The tests' browser is the headless shell (headlessShellPath: a
 * test checks what a page does, at half the CPU); `full` starts the browser a student has, for a
 * benchmark that times what they see.
 */
export async function launchBrowser(options: { full?: boolean } = {}): Promise<Browser> {
  const library = noNetlinkLibrary();
  if (!existsSync(library)) throw new Error(`${library} is missing: run bash scripts/provision.sh, which builds it`);
  return chromium.launch({
    executablePath: options.full ? chromiumPath : headlessShellPath,
    args: chromiumArgs,
    headless: true,
    timeout: 30_000,
    env: { ...process.env, LD_PRELOAD: library },
  });
}

/**
 * True for an address on 127.0.0.1 or a `localhost` name (`localhost`, `*.localhost`), over http,
 * https, ws or wss. Chromium answers `localhost` names with loopback itself, never through DNS
 * (RFC 6761 §6.3), so these never leave the machine.
 */
export function isLoopback(url: string): boolean {
  try {
    const { hostname, protocol } = new URL(url);
    if (!['http:', 'https:', 'ws:', 'wss:'].includes(protocol)) return false;
    return hostname === '127.0.0.1' || hostname === 'localhost' || hostname.endsWith('.localhost');
  } catch {
    return false;
  }
}

/**
 * A WebSocket address whose host is not 127.0.0.1 or a `localhost` name (isLoopback's rule, as a
 * pattern, which Playwright's driver matches itself: a function would have every socket routed to
 * it). Only these are routed, and closed:
 * Playwright's relay of a routed socket (`connectToServer`) reads each binary message as a Blob and
 * hands it on when the read ends, so a large message came to the page after a small one sent after
 * it (the editor's protocol then failed to parse them; test/integration/browser-harness.test.ts). A
 * socket no pattern matches passes straight through, in order.
 */
const notLoopbackWebSocket = /^(?!wss?:\/\/(?:127\.0\.0\.1|localhost|[^/?#@:]*\.localhost)(?::\d+)?(?:[/?#]|$))/;

/**
 * How long a page's wait is given by default: what a page shows may wait for the control plane, an
 * editor's container or the browser itself, and on a 2-core machine beside the suite's heaviest
 * files (a load of 14) 10 s were too few for a tab to open (security-host-mode, CI 2026-12-02). Only
 * a failing wait takes this long.
 */
const PAGE_WAIT_MS = 30_000;

/**
 * Runs `fn` with a page in a fresh browser context (openPage), and always closes the context
 * afterwards.
 */
export async function withPage<T>(
  browser: Browser,
  fn: (page: Page) => Promise<T>,
  options: { baseURL?: string; serviceWorkers?: 'allow' | 'block' } = {},
): Promise<T> {
  const { page, close } = await openPage(browser, options);
  try {
    return await fn(page);
  } finally {
    await close();
  }
}

/**
 * A page in a fresh browser context (no cookies or storage shared with other tests), for tests that
 * go on with one page from one to the next; `close` closes its context. Requests not to 127.0.0.1
 * or a `localhost` name are aborted; WebSockets to them are closed (code 1008) before they connect.
 *
 * Service workers are blocked (what one answers would bypass the routes) unless `serviceWorkers` is
 * 'allow': VS Code's webviews need theirs, which answers only for the webview's own resources, from
 * the editor (so still on loopback).
 *
 * Every wait of the page (a locator's, a new tab's) is given PAGE_WAIT_MS unless it says otherwise.
 */
export async function openPage(
  browser: Browser,
  options: { baseURL?: string; serviceWorkers?: 'allow' | 'block' } = {},
): Promise<{ page: Page; close: () => Promise<void> }> {
  const context: BrowserContext = await browser.newContext({
    serviceWorkers: options.serviceWorkers ?? 'block',
    ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
  });
  const close = () => context.close();
  try {
    context.setDefaultTimeout(PAGE_WAIT_MS);
    await context.route('**/*', (route: Route) => (isLoopback(route.request().url()) ? route.continue() : route.abort('blockedbyclient')));
    await context.routeWebSocket(notLoopbackWebSocket, (ws: WebSocketRoute) => void ws.close({ code: 1008, reason: 'blocked by the test browser' }));
    return { page: await context.newPage(), close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** How long a click on a collapsed folder is given to show it expanded before the next click. */
const EXPAND_PATIENCE_MS = 15_000;

/**
 * Opens a file of the workspace from the explorer, as a student does: expands its top-level folder
 * and clicks the file. VS Code shows a chain of folders that each hold one folder as one row
 * (`src/main/java/frc/robot`), so one expansion reaches the file in the starter project.
 *
 * The folder is clicked only while it shows collapsed, and again only after EXPAND_PATIENCE_MS: a
 * click toggles, so clicking at every look would fold back up a folder whose files a busy editor
 * is still fetching. When the file does not show, the error says what the window showed
 * (windowEvidence).
 *
 * Not Quick Open: its palette lists a file only once code-server's file search has indexed the
 * folder, which on a busy machine came later than 90 s (twice in CI), while the explorer lists a
 * folder's files as soon as it is expanded.
 */
export async function openFromExplorer(page: Page, file: string): Promise<void> {
  const segments = file.split('/');
  const name = segments.at(-1)!;
  const rows = page.locator('.explorer-folders-view .monaco-list-row');
  const folder = rows.and(page.locator('[aria-level="1"]')).filter({ hasText: new RegExp(`^${escapeRegExp(segments[0]!)}(/|$)`) });
  const row = rows.and(page.getByRole('treeitem', { name, exact: true }));
  let clickedAt = -Infinity;
  try {
    await eventually(
      `the explorer to list ${file}`,
      async () => {
        if (segments.length > 1 && Date.now() - clickedAt > EXPAND_PATIENCE_MS && (await folder.getAttribute('aria-expanded', { timeout: 5000 })) === 'false') {
          await folder.click();
          clickedAt = Date.now();
        }
        return row.waitFor({ timeout: 5000 }).then(
          () => true,
          () => false,
        );
      },
      90_000,
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${await windowEvidence(page, `explorer-without-${name}`)}`, { cause: error });
  }
  await row.click();
}

/**
 * Opens `file` of the home from the explorer (openFromExplorer) and clicks into its text, so that
 * the keys typed next go there, as a student does; answers its editor. The click waits for the
 * file's own editor (its `data-uri`) to show and hold still; while its tab is not the one in front,
 * the tab is chosen first. One click with 10 s for all of it failed in CI (2026-12-01: the editor
 * never showed as clickable in 10 s on a busy machine); here it is tried again for 60 s, and a
 * failure says what the window showed (windowEvidence: tabs, dialogs, screenshot).
 */
export async function editFile(page: Page, file: string): Promise<Locator> {
  await openFromExplorer(page, file);
  const name = file.split('/').at(-1)!;
  const tab = page.getByRole('tab', { name: new RegExp(escapeRegExp(name)) }).first();
  const code = page.locator(`.editor-instance .monaco-editor[data-uri$="/${file}"]`).first();
  try {
    await eventually(
      `the editor of ${file} to take a click`,
      async () => {
        if ((await tab.getAttribute('aria-selected', { timeout: 5000 })) !== 'true') await tab.click({ timeout: 5000 });
        return code.click({ timeout: 5000 }).then(
          () => true,
          () => false,
        );
      },
      60_000,
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${await windowEvidence(page, `editor-of-${name}`)}`, { cause: error });
  }
  return code;
}

/**
 * Opens the editor's command palette with `text` typed in it, as a student does (F1, then the
 * text), once the palette's input has the keyboard: keys typed before go to the editor (seen: the
 * first three letters lost, and the palette then chose another command).
 */
export async function openPalette(page: Page, text: string): Promise<void> {
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input:focus').waitFor();
  await page.keyboard.type(text);
  await page.locator('.quick-input-list .monaco-list-row').first().waitFor();
}

/**
 * Waits until a new home's README shows (VS Code opens it as a preview at a new window's start,
 * `workbench.startupEditor: readme`): its webview takes the keyboard once it has loaded, which
 * would close a palette opened before.
 */
export async function readmeShown(page: Page): Promise<void> {
  const shows = async () => {
    for (const frame of page.frames()) {
      const headings = await frame
        .getByRole('heading', { name: 'Your robot project' })
        .count()
        .catch(() => 0);
      if (headings > 0) return true;
    }
    return false;
  };
  await eventually('the README preview', shows, 60_000);
}

/**
 * Runs the editor command labelled `label` from the command palette: its label typed, Enter once
 * the palette has chosen exactly that entry (before, Enter runs whatever the text typed so far
 * chose), then the palette gone.
 */
export async function runFromPalette(page: Page, label: string): Promise<void> {
  await openPalette(page, label);
  await page
    .locator('.quick-input-list .monaco-list-row.focused .label-name')
    .filter({ hasText: new RegExp(`^\\s*${escapeRegExp(label)}\\s*$`) })
    .waitFor();
  await page.keyboard.press('Enter');
  await page.locator('.quick-input-widget').waitFor({ state: 'hidden' });
}

/**
 * Records what a page logs from now on (its console, its uncaught errors, its failed requests and
 * its HTTP errors, its WebSockets), for a failure's message; `stop` ends the recording.
 */
export function recordPage(page: Page): { logged: string[]; stop: () => void } {
  const logged: string[] = [];
  const onConsole = (message: ConsoleMessage) => logged.push(`console.${message.type()}: ${message.text()}`);
  const onError = (error: Error) => logged.push(`pageerror: ${error.message}`);
  const onFailed = (request: Request) => logged.push(`requestfailed: ${request.url()} ${request.failure()?.errorText ?? ''}`);
  const onResponse = (response: Response) => {
    if (response.status() >= 400) logged.push(`response ${response.status()}: ${response.request().method()} ${response.url()}`);
  };
  const onSocket = (socket: WebSocket) => {
    logged.push(`websocket opened: ${socket.url()}`);
    socket.on('close', () => logged.push(`websocket closed: ${socket.url()}`));
  };
  page.on('console', onConsole);
  page.on('pageerror', onError);
  page.on('requestfailed', onFailed);
  page.on('response', onResponse);
  page.on('websocket', onSocket);
  const stop = () => {
    page.off('console', onConsole);
    page.off('pageerror', onError);
    page.off('requestfailed', onFailed);
    page.off('response', onResponse);
    page.off('websocket', onSocket);
  };
  return { logged, stop };
}

/** Goes to `url` and waits up to `timeout` for `shown` (a page's heading, say), as doAndWait does. */
export async function gotoAndWait(page: Page, url: string, shown: Locator, name: string, timeout = 30_000): Promise<void> {
  await doAndWait(page, () => page.goto(url, { timeout }), shown, name, timeout);
}

/**
 * Does `act` (a navigation: a goto, a click that submits a form) and waits for `shown`, both within
 * `timeout`. When it does not show, the error says what the page showed instead, what it logged
 * meanwhile (recordPage), and where its screenshot `<tmpdir>/<name>.png` is: a failure on a busy
 * machine says why.
 */
export async function doAndWait(page: Page, act: () => Promise<unknown>, shown: Locator, name: string, timeout = 30_000): Promise<void> {
  const record = recordPage(page);
  try {
    const deadline = Date.now() + timeout;
    await act();
    await shown.waitFor({ timeout: Math.max(1, deadline - Date.now()) });
  } catch (error) {
    const shot = path.join(os.tmpdir(), `${name}.png`);
    await page.screenshot({ path: shot, fullPage: true }).catch(() => undefined);
    const text = await page
      .locator('body')
      .innerText({ timeout: 5000 })
      .catch((failure: unknown) => `(unreadable: ${(failure as Error).message})`);
    throw new Error(
      `${(error as Error).message}\n--- the page (${page.url()}):\n${text}\n--- the page logged:\n${record.logged.slice(-80).join('\n')}\n--- screenshot: ${shot}`,
      { cause: error },
    );
  } finally {
    record.stop();
  }
}

/**
 * Waits up to `timeout` (150 s unless said) for the VS Code workbench to render and its explorer to
 * list the starter project (`build.gradle`, at the folder's top). When it does not, the error says
 * what the window showed (windowEvidence), what the page logged meanwhile (recordPage), and what
 * `more` adds (the editor's own log).
 */
export async function waitForWorkbench(page: Page, options: { timeout?: number; more?: () => Promise<string> } = {}): Promise<void> {
  const record = recordPage(page);
  try {
    const deadline = Date.now() + (options.timeout ?? 150_000);
    await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: deadline - Date.now() });
    await page.getByRole('treeitem', { name: 'build.gradle' }).waitFor({ timeout: Math.max(1, deadline - Date.now()) });
  } catch (error) {
    const more = options.more ? await options.more().catch((failure: unknown) => `(unreadable: ${(failure as Error).message})`) : '';
    throw new Error(
      `${(error as Error).message}\n${await windowEvidence(page, 'workbench-without-project')}\n--- the page logged:\n${record.logged.slice(-80).join('\n')}${more ? `\n--- more:\n${more}` : ''}`,
      { cause: error },
    );
  } finally {
    record.stop();
  }
}

/**
 * What a VS Code window shows, for a failure's message: the explorer's rows (level, expanded, text),
 * its tabs, its dialogs and notifications, its status bar; and a screenshot `<tmpdir>/<name>.png`.
 */
export async function windowEvidence(page: Page, name: string): Promise<string> {
  const shot = path.join(os.tmpdir(), `${name}.png`);
  await page.screenshot({ path: shot }).catch(() => undefined);
  const unreadable = (failure: unknown) => [`(unreadable: ${(failure as Error).message})`];
  const rows = await page
    .locator('.explorer-folders-view .monaco-list-row')
    .evaluateAll((each) =>
      each.map((element) => `${element.getAttribute('aria-level')} ${element.getAttribute('aria-expanded') ?? '-'} ${element.textContent}`),
    )
    .catch(unreadable);
  const tabs = await page
    .getByRole('tab')
    .evaluateAll((each) => each.map((element) => `${element.getAttribute('aria-selected') === 'true' ? '*' : ' '} ${element.getAttribute('aria-label')}`))
    .catch(unreadable);
  const said = await page.locator('.monaco-dialog-box, .notification-list-item').allInnerTexts().catch(unreadable);
  const status = await page.locator('.statusbar').allInnerTexts().catch(unreadable);
  return [
    `--- the explorer's rows (level, expanded, text):\n${rows.join('\n')}`,
    `--- the tabs (* in front):\n${tabs.join('\n')}`,
    `--- dialogs and notifications: ${JSON.stringify(said)}`,
    `--- the status bar: ${JSON.stringify(status.join(' ').replace(/\s+/g, ' '))}`,
    `--- url: ${page.url()}`,
    `--- screenshot: ${shot}`,
  ].join('\n');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Signs the page's browser in as `who` (their session cookie, as the browser stores it). */
export async function signIn(page: Page, who: { cookie: string }): Promise<void> {
  await page.context().addCookies(
    who.cookie.split('; ').map((pair) => {
      const at = pair.indexOf('=');
      return { name: pair.slice(0, at), value: pair.slice(at + 1), domain: '127.0.0.1', path: '/', httpOnly: true, sameSite: 'Lax' as const };
    }),
  );
}

let axeSource: Promise<string> | undefined;

/** axe-core's serious and critical violations of the page (run inside it; the page's CSP is not bypassed for its own scripts). */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  axeSource ??= readFile(path.join(PROJECT_ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8');
  await page.evaluate(await axeSource);
  return page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe;
    const { violations } = await axe.run();
    return violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`);
  });
}
