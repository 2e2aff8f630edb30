/**
 * Issue 19, the student's loop in the real editor: Chromium, the real workspace image (code-server
 * with the classroom extension built in), the real stand-in Gradle and simulator (Java, speaking
 * NetworkTables 4), started by the real controllers on real Docker, through the real proxy.
 *
 * A student breaks Robot.java, presses Run in the status bar and sees the build's output appear in
 * the "Robot run" terminal as it is written and the compile error marked on its line; fixes it, runs
 * again (Ctrl+Alt+R), drives the robot (a Driver Station's HALSim messages, straight to the run's
 * simulator), sees the Simulator view show the robot's pose change, and stops the run. Then,
 * with a short idle limit, the idle warning appears in the editor and "Keep working" keeps the
 * workspace. The workspace page at /u/<slug>/.cp/ shows the runs too.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import type { RunController } from '../../controllers/runs.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { editFile, launchBrowser, runFromPalette, waitForWorkbench, windowEvidence, withPage } from '../helpers/browser.ts';
import { codeServerLog, createHarness, eventually, execIn, removeEverything, type Harness, workspaceImageRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { HalSimClient } from '../helpers/robot-protocols.ts';
import { EDITOR_START_MS, newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const IMAGE = 'classroom-workspace:latest';
const tag = Date.now().toString(36);
const db = useTestDatabase({ truncate: false });
let app: TestApp;
let harness: Harness;
let runs: RunController;
/** What the run controller logged (shown when the test fails). */
let runLog: Record<string, unknown>[];
let browser: Browser;
let ada: Student;
/** code-server's user settings in the workspace (its default user data directory). */
const USER_SETTINGS = '/home/student/.local/share/code-server/User/settings.json';
/** The line the broken line lands on, typed after the end of the starter's Robot.java (which ends with a newline). */
const BROKEN_LINE =
  readFileSync(path.resolve(import.meta.dirname, '../../images/workspace/starter/src/main/java/frc/robot/Robot.java'), 'utf8').split('\n').length + 1;
/** The robot's line once a second in the Robot run terminal (the starter's robotPeriodic). */
const ROBOT_LINE = /t=\s*\d+\.\d\ss\s+x=/;
/** Kept after the run for a look (docs/students.md's screenshot is made the same way). */
const SCREENSHOT = path.join(os.tmpdir(), 'editor-run-in-progress.png');

beforeAll(async () => {
  // Idle after 40 s, warned from 30 s before: the warning shows while the test looks.
  app = await startApp(db.dataSource, { IDLE_STOP_MINUTES: '0.7', IDLE_WARNING_MINUTES: '0.5' });
  harness = createHarness(db.dataSource, { changes: app.store.changes, env: { WORKSPACE_IMAGE: IMAGE, CODE_MEMORY_LIMIT: '1g' } });
  await harness.controller.start();
  ({ controller: runs, records: runLog } = workspaceImageRunController(harness, app.metrics));
  await runs.start();
  ada = await newStudent(harness.store, 'ada', tag);
  ada.workspace = await openAndWait(harness.store, ada.workspace, EDITOR_START_MS);
  // The terminal drawn in the page's DOM, which the test reads, rather than on a canvas (a user
  // setting of Ada's editor, as a student could choose it; read when the window opens).
  const [code] = (await harness.runtime.listContainers({ workspaceId: ada.workspace.id })).filter((each) => each.role === 'code');
  const settings = await execIn(code!.id, [
    'sh',
    '-c',
    `mkdir -p ${USER_SETTINGS.replace(/\/[^/]+$/, '')} && echo '{"terminal.integrated.gpuAcceleration": "off"}' > ${USER_SETTINGS}`,
  ]);
  if (settings.code !== 0) throw new Error(`writing Ada's editor settings failed: ${settings.output}`);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await runs?.stop();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

/** The student's session cookies, as the browser keeps them. */
const cookiesOf = (student: Student) =>
  student.cookie.split('; ').map((pair) => ({ name: pair.split('=')[0]!, value: pair.slice(pair.indexOf('=') + 1), url: app.url }));

/**
 * The editor, with the starter project in its explorer and the classroom extension's Run in the
 * status bar (from the classroom extension in the browser's web worker extension host). When Run
 * does not come, the error says what the page and the editor logged, and a screenshot is left.
 *
 * This window was reloaded once when Run did not come, after one CI run whose window had no
 * extension's contributions for over a minute. The likely cause, found later in the editor test's
 * evidence, was the test browser's: Playwright's WebSocket relay reordered large and small binary
 * messages (test/helpers/browser.ts, notLoopbackWebSocket). It is gone, and so is the reload.
 */
async function editor(page: Page): Promise<void> {
  const logged: string[] = [];
  page.on('console', (message) => logged.push(`console.${message.type()}: ${message.text()}`));
  page.on('pageerror', (error) => logged.push(`pageerror: ${error.message}`));
  page.on('requestfailed', (request) => logged.push(`requestfailed: ${request.url()} ${request.failure()?.errorText ?? ''}`));
  await page.context().addCookies(cookiesOf(ada));
  // The answer committed is enough: the workbench below is the event waited on ('load' waits on every asset of the editor).
  await page.goto(`${app.url}/u/${ada.workspace.slug}/?folder=/home/student`, { waitUntil: 'commit' });
  await waitForWorkbench(page, { more: editorLog });
  try {
    await runButton(page, 'Run').waitFor({ timeout: 60_000 });
  } catch (error) {
    const shot = path.join(os.tmpdir(), 'run-loop-no-run-button.png');
    await page.screenshot({ path: shot });
    throw new Error(
      `no Run in the status bar after 60 s; the page logged:\n${logged.slice(-80).join('\n')}\n--- the editor's log:\n${await editorLog()}\n--- screenshot: ${shot}`,
      { cause: error },
    );
  }
}

/** The last lines that the workspace's code-server wrote. */
const editorLog = () => codeServerLog(harness.runtime, ada.workspace.id);

const runButton = (page: Page, text: 'Run' | 'Stop') => page.locator('.statusbar-item', { hasText: new RegExp(`^\\s*${text}\\s*$`) }).first();

/** Robot.java as it is on the workspace's volume (`cat` in its running code container). */
async function robotJava(): Promise<string> {
  const [container] = (await harness.runtime.listContainers({ workspaceId: ada.workspace.id })).filter(
    (each) => each.role === 'code' && each.state === 'running',
  );
  const { output } = await execIn(container!.id, ['cat', '/home/student/src/main/java/frc/robot/Robot.java']);
  return output;
}

/** The rows of the "Robot run" terminal, as xterm.js draws them (its DOM renderer: USER_SETTINGS). */
const terminalRows = (page: Page) => page.locator('.part.panel .terminal-wrapper.active .xterm-rows');

/**
 * Waits for `text` in the Robot run terminal; when it does not come, fails with what the terminal
 * shows, what was kept of the latest run and what the run controller logged (a failure on a busy
 * machine says why).
 */
async function panelShows(page: Page, text: string | RegExp, timeout: number): Promise<void> {
  try {
    // The first row that matches: a pattern may match several (one line per second of a run).
    await terminalRows(page).getByText(text).first().waitFor({ timeout });
  } catch (error) {
    const [run] = await harness.store.runs.recent(ada.workspace.id, 1);
    const kept = run ? await harness.store.runs.outputText(run.id) : '';
    const panel = await outputText(page).catch((failure: unknown) => `(unreadable: ${(failure as Error).message})`);
    await page.screenshot({ path: path.join(os.tmpdir(), 'run-loop-failure.png') });
    throw new Error(
      `${(error as Error).message}\n--- the Robot run terminal:\n${panel}\n--- the run: ${JSON.stringify({ ...run, output: undefined })}\n--- its kept output (end):\n${kept.slice(-2000)}\n--- the run controller:\n${runLog.map((record) => JSON.stringify(record)).join('\n')}`,
      { cause: error },
    );
  }
}

/** What the Robot run terminal shows now (its visible rows). */
const outputText = async (page: Page) => (await terminalRows(page).innerText()).replaceAll('\u00a0', ' ');

it('runs the code from the editor: live output, a compile error marked on its line, fixed, run again, the pose in the Simulator view, stopped', async () => {
  await withPage(browser, async (page) => {
    await page.setViewportSize({ width: 1400, height: 900 });
    await editor(page);
    // A new home opens its README first (the image's editor defaults); opened later, it would take the keys typed below.
    await page.getByRole('tab', { name: /README\.md/ }).waitFor({ timeout: 60_000 });

    // Break the robot: a line that is no Java at the end of Robot.java.
    const code = await editFile(page, 'src/main/java/frc/robot/Robot.java');
    await page.keyboard.press('Control+End');
    await page.keyboard.type('\nthis is not java');
    await page.keyboard.press('Control+S');
    await eventually('the broken line saved', async () => (await robotJava()).includes('this is not java'), 30_000);

    // Run (the status bar): the build's output, live, then the failure and the error on its line.
    await runButton(page, 'Run').click();
    await panelShows(page, '> Task :compileJava', 60_000);
    await page.locator('.statusbar-item', { hasText: 'Run failed' }).waitFor({ timeout: 120_000 });
    // The error's line.
    await panelShows(page, /Robot\.java:\d+:\serror:\sclass,\sinterface,\senum,\sor\srecord\sexpected/, 30_000);
    // Every line of the failed compile, in order, none lost (the terminal wraps a long line at any column, even in a word).
    expect((await outputText(page)).replace(/\s+/g, '')).toMatch(/Robot\.java:\d+:error:class,interface,enum,orrecordexpectedthisisnotjava\^1errorFAILURE/);
    // How it ended, the exit code said once (the reason has it).
    await panelShows(page, '■ Run failed: compile or boot failed (exit code 1).', 30_000);
    // In Problems, on its file and line; chosen there, the line in the editor is marked.
    await page.keyboard.press('Control+Shift+M');
    const problem = page
      .locator('.markers-panel')
      .getByText(/class, interface, enum, or record expected/)
      .first();
    await problem.waitFor({ timeout: 30_000 });
    expect(await page.locator('.markers-panel').innerText()).toMatch(new RegExp(`Robot\\.java[\\s\\S]*Ln ${BROKEN_LINE}, Col 1`));
    await problem.click();
    await code.locator('.squiggly-error').first().waitFor({ timeout: 30_000 });

    // Fix it (the line taken out again), save, and run with the keyboard.
    await code.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.press('Shift+Home');
    await page.keyboard.press('Delete');
    await page.keyboard.press('Backspace');
    await page.keyboard.press('Control+S');
    await eventually('the fix saved', async () => !(await robotJava()).includes('this is not java'), 30_000);
    await page.keyboard.press('Control+Alt+R');
    await page.locator('.statusbar-item', { hasText: 'Running' }).waitFor({ timeout: 120_000 });
    // The robot's own prints, live (the panel shows its last lines: on a busy machine the boot's
    // lines may already have scrolled by, and the channel was cleared for this run).
    await panelShows(page, ROBOT_LINE, 120_000);
    // Closed by the student, the terminal opens again from the run's state in the status bar, with
    // what the run printed meanwhile.
    await runFromPalette(page, 'Terminal: Kill the Active Terminal Instance');
    await terminalRows(page).waitFor({ state: 'detached', timeout: 30_000 });
    await page.locator('.statusbar-item', { hasText: 'Running' }).click();
    await panelShows(page, ROBOT_LINE, 30_000);
    await eventually('the compile error gone', async () => (await code.locator('.squiggly-error').count()) === 0, 30_000);

    // Driven in teleop as a Driver Station drives it (HALSim, straight to the run's simulator): the
    // left stick forward and the right stick turning, so that it goes round and round.
    const going = await harness.store.runs.active(ada.workspace.id);
    const driver = await HalSimClient.connect(`ws://${going!.simEndpoint!.replace(/:\d+$/, '')}:3300/wpilibws`);
    if (typeof driver === 'number') throw new Error(`the robot refused a HALSim connection: ${driver}`);
    driver.driveTeleop([0, -0.6, 0, 0, 0.5, 0]);
    await driver.until('the robot driving', (client) => client.state('PWM', '0')['<speed'] !== 0);

    // The Simulator view: the robot's pose, live, and it moves.
    const simulator = page.getByRole('button', { name: /Simulator/ }).first();
    if ((await simulator.getAttribute('aria-expanded')) === 'false') await simulator.click();
    const pose = page.getByRole('treeitem', { name: /\/SmartDashboard\/Field\/Robot/ });
    await pose.waitFor({ timeout: 60_000 });
    const first = await pose.innerText();
    await eventually('the pose to change', async () => (await pose.innerText()) !== first, 60_000);
    await page.screenshot({ path: SCREENSHOT });
    await driver.close();

    // Stop.
    await runButton(page, 'Stop').click();
    await page.locator('.statusbar-item', { hasText: 'Run stopped' }).waitFor({ timeout: 60_000 });
    await terminalRows(page)
      .getByText(/■\sRun\sstopped/)
      .waitFor({ timeout: 30_000 });

    // The workspace page lists both runs, the failed one with its reason.
    const list = await (await fetch(`${app.url}/u/${ada.workspace.slug}/api/runs`, { headers: { cookie: ada.cookie } })).json();
    expect((list as { runs: { status: string }[] }).runs.map((run) => run.status)).toEqual(['stopped', 'failed']);

    // The way back from the editor to the workspace page (runs, Stop, Sign out): its command opens it
    // in a tab. The command runs in the workspace's extension host and asks the window to open the
    // tab: 30 s were too few once in CI (2026-12-02, beside the heaviest files); a failure says what
    // the window showed.
    const opened = page.context().waitForEvent('page', { timeout: 90_000 });
    await runFromPalette(page, 'Robot: Open my workspace page (stop, sign out, past output)');
    const tab = await opened.catch(async (error: unknown) => {
      throw new Error(`${(error as Error).message}\n${await windowEvidence(page, 'run-loop-no-workspace-page')}\n--- the editor's log:\n${await editorLog()}`, {
        cause: error,
      });
    });
    await tab.locator('h1').getByText(`Workspace ${ada.workspace.slug}`).waitFor();
    expect(tab.url()).toBe(`${app.url}/u/${ada.workspace.slug}/.cp/`);
    expect(await tab.getByRole('button', { name: 'Sign out' }).isVisible()).toBe(true);
    await tab.close();
  });
}, 420_000);

it('warns in the editor before the idle sweep stops the workspace, and Keep working keeps it', async () => {
  // No run in progress (a run is activity: nothing would be idle).
  const active = await harness.store.runs.active(ada.workspace.id);
  if (active) {
    await harness.store.runs.requestStop(ada.workspace.id, active.id);
    await eventually('the run to end', async () => (await harness.store.runs.active(ada.workspace.id)) === undefined, 60_000);
  }
  await withPage(browser, async (page) => {
    await editor(page);
    // Nobody touches anything: within the warning's time, the notice comes.
    const notice = page.locator('.notifications-toasts').getByText(/will be stopped in about/);
    await notice.waitFor({ timeout: 60_000 });
    const before = (await app.store.workspaces.get(ada.workspace.id))!.status.lastActivityAt!.getTime();
    await page.locator('.notifications-toasts').getByRole('button', { name: 'Keep working' }).click();
    await page.locator('.notifications-toasts').getByText('Your workspace keeps running.').waitFor();
    expect((await app.store.workspaces.get(ada.workspace.id))!.status.lastActivityAt!.getTime()).toBeGreaterThan(before);
    expect((await app.store.workspaces.get(ada.workspace.id))!.spec.desiredState).toBe('running');
  });
}, 240_000);
