// @lane alone
/**
 * Issue 40, the Driver Station in the editor, and issue 41 item 3, the command palette: Chromium, the
 * real workspace image (code-server with the classroom extension built in), the real stand-in robot
 * (its HALSim WebSocket and NetworkTables 4), started by the real controllers on real Docker, driven
 * through the real control plane's relay (`.cp/halsim/wpilibws`) from the extension in the browser.
 *
 * The student types "Robot: Run" in the command palette and Enter runs the robot code (not another
 * command that matches, even one used just before). Then, from the Driver Station: it opens disabled;
 * Enable in teleop, W held drives the robot forward on the field (its pose on NetworkTables, and as the
 * Driver Station draws it), and on a graph of the robot's speed (the starter's SmartDashboard "Speed")
 * picked in the Driver Station, which holds while paused and follows again resumed, and is kept
 * (with its time window) when the Driver Station closes and opens again; Enter and Space disable and
 * never press the Enable button; a mode switch
 * while enabled disables; a gamepad (injected through the Gamepad API: Playwright has no real pad)
 * drives, and unplugged it disables the robot; the autonomous routine picked in the Driver Station is
 * the one the robot runs; the emergency stop holds until the run restarts; and the tab closed, the
 * robot is disabled at once by the relay (not by its watchdog; bench/ds-disable.ts times it).
 * The workspace page's own Driver Station (api/driver-station.ts: the same page and core, framed from
 * the editor's address) opens only when the student opens it, enables, drives with the keyboard,
 * graphs, disables with Space and when its tab is hidden, runs with nothing refused by its
 * Content-Security-Policy, and closed disables the robot.
 *
 * What the robot does is read from its own NetworkTables (straight from the run's simulator, as a
 * dashboard on the robot's network would), never from the page that is being tested.
 *
 * The relay disables a robot whose driver says nothing for 400 ms (its watchdog, which
 * halsim-proxy.test.ts tests). Here it waits 10 s: with a second browser or swarm file beside it, the
 * page's input once stalled longer than 400 ms (the robot, disabled, did not drive: a CI run of
 * 2026-11-29).
 *
 * Alone (scripts/test-lanes.sh) all the same: in the shared lane it starts with the other longest
 * files (two swarms and the class day's editors), took 447 s there instead of about 100 s alone,
 * and a swarm file beside it could not get a database connection within 5 s (CI, 2026-12-02).
 */
import os from 'node:os';
import path from 'node:path';
import type { Browser, Frame, FrameLocator, Page } from 'playwright-core';
import type { RunController } from '../../controllers/runs.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { editFile, gotoAndWait, launchBrowser, openPalette, recordPage, runFromPalette, waitForWorkbench, withPage } from '../helpers/browser.ts';
import { codeServerLog, createHarness, eventually, removeEverything, type Harness, workspaceImageRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { Nt4Client } from '../helpers/robot-protocols.ts';
import { EDITOR_START_MS, newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const IMAGE = 'classroom-workspace:latest';
const tag = Date.now().toString(36);
const db = useTestDatabase({ truncate: false });
let app: TestApp;
let harness: Harness;
let runs: RunController;
let browser: Browser;
let ada: Student;
/** The screenshots, kept for a look (docs/students.md's is made here). */
const SHOTS = process.env['DS_SCREENSHOTS'] ?? os.tmpdir();
const MODE = '/classroom/mode';
const POSE = '/SmartDashboard/Field/Robot';
const SPEED = '/SmartDashboard/Speed';

beforeAll(async () => {
  app = await startApp(db.dataSource, {}, { tuning: { driverWatchdogMs: 10_000 } });
  harness = createHarness(db.dataSource, { changes: app.store.changes, env: { WORKSPACE_IMAGE: IMAGE, CODE_MEMORY_LIMIT: '1g' } });
  await harness.controller.start();
  runs = workspaceImageRunController(harness, app.metrics).controller;
  await runs.start();
  ada = await newStudent(harness.store, 'ada', tag);
  ada.workspace = await openAndWait(harness.store, ada.workspace, EDITOR_START_MS);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await runs?.stop();
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

/** How many robots the relay has disabled for `reason` (ended: a driver's connection; silence: its watchdog). */
const disables = async (reason: string) => (await app.metrics.halsimDisables.get()).values.find((value) => value.labels.reason === reason)?.value ?? 0;

/** A page with VS Code's webviews working: they need their service worker. */
const withEditorPage = <T>(fn: (page: Page) => Promise<T>) => withPage(browser, fn, { serviceWorkers: 'allow' });

/** Ada's editor, with the classroom extension's Run (or Stop, while a run is active) in the status bar. */
async function editor(page: Page): Promise<void> {
  await page.setViewportSize({ width: 1500, height: 900 });
  await page
    .context()
    .addCookies(ada.cookie.split('; ').map((pair) => ({ name: pair.split('=')[0]!, value: pair.slice(pair.indexOf('=') + 1), url: app.url })));
  await page.goto(`${app.url}/u/${ada.workspace.slug}/?folder=/home/student`, { waitUntil: 'commit' });
  await waitForWorkbench(page, { more: () => codeServerLog(harness.runtime, ada.workspace.id) });
  await page
    .locator('.statusbar-item', { hasText: /^\s*(Run|Stop)\s*$/ })
    .first()
    .waitFor({ timeout: 60_000 });
  // A new window opens the project's README first (the image's editor defaults); opened later, it
  // would take the keys typed below. Then the student's code, where the keys go.
  await page.getByRole('tab', { name: /README\.md/ }).waitFor({ timeout: 60_000 });
  await editFile(page, 'src/main/java/frc/robot/Robot.java');
}

/** A run of Ada's that is running (the active one, or a new one), with its robot's NetworkTables. */
async function runningRobot(): Promise<{ runId: string; nt: Nt4Client }> {
  const runId = (await harness.store.runs.active(ada.workspace.id))?.id ?? (await harness.store.runs.create(ada.workspace.id)).id;
  const run = await eventually(
    'the run running',
    async () => {
      const current = await harness.store.runs.get(runId);
      if (current && current.status.phase !== 'queued' && current.status.phase !== 'running') throw new Error(`the run ended: ${JSON.stringify(current)}`);
      return current?.status.phase === 'running' && current.status.simEndpoint ? current : undefined;
    },
    180_000,
  );
  const nt = await Nt4Client.connect(`ws://${run.status.simEndpoint}/nt/driver-station-test`);
  await nt.until(MODE, () => true);
  return { runId, nt };
}

/** The Driver Station's page: the inner frame of its webview. */
async function driverStation(page: Page): Promise<Frame> {
  return eventually(
    'the Driver Station page',
    async () => {
      for (const frame of page.frames())
        if (
          (await frame
            .locator('#ds')
            .count()
            .catch(() => 0)) > 0
        )
          return frame;
      return undefined;
    },
    60_000,
  );
}

/** The robot's place as the Driver Station says it under its field ("Robot: x 2.00 m, y 4.00 m, ..."). */
async function drawnAt(ds: Frame | FrameLocator): Promise<number[]> {
  const text = await ds.locator('#pose').innerText();
  const match = /Robot: x (-?\d+\.\d+) m, y (-?\d+\.\d+) m/.exec(text);
  if (!match) throw new Error(`no pose under the field: ${text}`);
  return [Number(match[1]), Number(match[2])];
}

/** The robot's pose on its NetworkTables: x and y in metres, its heading in degrees. */
const poseOf = (nt: Nt4Client) => nt.values.get(POSE) as number[];

/**
 * How far the robot at `place` (x and y) went forward from `start` (a pose): along the heading it
 * had there. A run keeps its robot's pose from one test to the next, so forward is not always +x
 * (the first test leaves it turned by however far a busy machine let it turn).
 */
function ahead(start: readonly number[], place: readonly number[]): number {
  const radians = (start[2]! * Math.PI) / 180;
  return (place[0]! - start[0]!) * Math.cos(radians) + (place[1]! - start[1]!) * Math.sin(radians);
}

/** The Driver Station's graph of the robot's speed: its figure says what it received and shows (webview/graphs.ts). */
const speedGraph = (ds: Frame) => ds.locator(`figure.graph[data-topic="${SPEED}"]`);
/** What the speed graph shows (the value at its window's end, and that end's time), and the latest value it received. */
async function graphed(ds: Frame): Promise<{ shown: { last: string | null; to: string | null }; last: string | null; received: number }> {
  const graph = speedGraph(ds);
  return {
    shown: { last: await graph.getAttribute('data-shown-last'), to: await graph.getAttribute('data-shown-to') },
    last: await graph.getAttribute('data-last'),
    received: Number(await graph.getAttribute('data-received')),
  };
}

/** The Driver Station panel closed (its tab middle-clicked) and its page gone. */
async function closeDriverStation(page: Page): Promise<void> {
  await page.getByRole('tab', { name: 'Driver Station' }).click({ button: 'middle' });
  await eventually(
    'the Driver Station closed',
    async () => {
      for (const frame of page.frames())
        if (
          (await frame
            .locator('#ds')
            .count()
            .catch(() => 0)) > 0
        )
          return undefined;
      return true;
    },
    30_000,
  );
}

/** In the Driver Station's page: counts the Enable button's clicks (`window.enableClicks`). */
const COUNT_ENABLE_CLICKS = `window.enableClicks = 0; document.getElementById('enable').addEventListener('click', () => window.enableClicks++)`;
/** In the Driver Station's page: a gamepad plugged in, as the Gamepad API gives one ("standard" mapping), its left stick pushed forward. */
const PLUG_PAD = `(() => {
  const pad = { id: 'Test pad (STANDARD GAMEPAD)', index: 0, connected: true, mapping: 'standard', timestamp: 0, axes: [0, -1, 0, 0],
    buttons: Array.from({ length: 17 }, () => ({ pressed: false, touched: false, value: 0 })) };
  Object.defineProperty(navigator, 'getGamepads', { configurable: true, value: () => [pad, null, null, null] });
  window.dispatchEvent(Object.assign(new Event('gamepadconnected'), { gamepad: pad }));
})()`;
/** In the Driver Station's page: that gamepad unplugged. */
const UNPLUG_PAD = `(() => {
  const pad = navigator.getGamepads()[0];
  Object.defineProperty(navigator, 'getGamepads', { configurable: true, value: () => [null, null, null, null] });
  window.dispatchEvent(Object.assign(new Event('gamepaddisconnected'), { gamepad: pad }));
})()`;

it('runs the robot code when the student types "Robot: Run" in the command palette and presses Enter, even after using another Robot command', async () => {
  await withEditorPage(async (page) => {
    await editor(page);
    // Another Robot command from the palette first: a recently used command is listed first when it matches.
    await runFromPalette(page, 'Robot: Keep working (my workspace stays on)');
    await openPalette(page, 'Robot: Run');
    const first = page.locator('.quick-input-list .monaco-list-row').first();
    expect(await first.locator('.label-name').innerText()).toBe('Robot: Run robot code');
    await page.screenshot({ path: path.join(SHOTS, 'palette-robot-run.png') });
    await page.keyboard.press('Enter');
    await eventually('a run started', async () => (await harness.store.runs.active(ada.workspace.id)) !== undefined, 30_000);
    await page
      .locator('.statusbar-item', { hasText: /Building|Running/ })
      .first()
      .waitFor({ timeout: 30_000 });
  });
}, 300_000);

it('drives the robot from the Driver Station: enable, keyboard, Space and Enter, modes, a gamepad, the autonomous chooser, the emergency stop, and a closed tab', async () => {
  let { runId, nt } = await runningRobot();
  await withEditorPage(async (page) => {
    const record = recordPage(page);
    try {
      // The student's code open (editor() opens it), the Driver Station beside it.
      await editor(page);
      // The status bar's Driver Station: nothing opens it but the student.
      for (const frame of page.frames()) expect(await frame.locator('#ds').count()).toBe(0);
      await page.locator('.statusbar-item', { hasText: 'Driver Station' }).first().click();
      let ds = await driverStation(page);
      await ds.locator('#tile-comms.ok').waitFor({ timeout: 30_000 });
      await ds.locator('#tile-code.ok').waitFor();

      // Opened, connected: disabled, and the robot too.
      expect(await ds.locator('#robot-state').innerText()).toBe('Teleoperated Disabled');
      expect(await nt.until(MODE, (mode) => mode === 'disabled')).toBe('disabled');

      // Enable in teleop, hold W: the robot drives forward, on its NetworkTables and on the drawn field.
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      await ds.locator('#robot-state').getByText('Teleoperated Enabled').waitFor();
      // A graph of the robot's speed, picked among its topics: still, it starts at 0.
      await ds.locator('#graph-topics summary').click();
      await ds.locator(`#graph-topic-list input[data-topic="${SPEED}"]`).check();
      await eventually('the speed graphed, still', async () => (await graphed(ds)).shown.last === '0', 10_000);
      // W is held no longer than the checks that need it: the robot drives 3 m/s, its start 15 m from
      // the wall ahead. Held through two screenshots on a busy machine, it reached the wall, and the
      // gamepad could not move it after (2026-12-01, under load).
      const start = poseOf(nt);
      await page.keyboard.down('KeyW');
      await nt.until<number[]>(POSE, (pose) => ahead(start, pose) > 1);
      await eventually('the graph to show the robot driving', async () => Number((await graphed(ds)).shown.last) > 1, 10_000);
      // Paused, the graph holds what it shows while the robot's speed still comes in: back to 0, W let go.
      await ds.locator('#graphs-pause').click();
      const paused = await graphed(ds);
      await page.keyboard.up('KeyW');
      await nt.until<number>(SPEED, (speed) => speed === 0);
      await eventually('the drawn robot to move', async () => ahead(start, await drawnAt(ds)) > 1, 10_000);
      await eventually(
        'the graph to receive the robot stopping',
        async () => {
          const now = await graphed(ds);
          return now.last === '0' && now.received > paused.received;
        },
        10_000,
      );
      expect((await graphed(ds)).shown).toEqual(paused.shown);
      expect(await ds.locator('#graphs-pause').innerText()).toBe('Resume');
      await page.screenshot({ path: path.join(SHOTS, 'driver-station-driving.png') });
      await ds.locator('#graphs').screenshot({ path: path.join(SHOTS, 'graphs-paused.png') });
      // Resumed, it follows the robot again.
      await ds.locator('#graphs-pause').click();
      await eventually('the graph to follow the robot again', async () => (await graphed(ds)).shown.last === '0', 10_000);

      // Enter disables, and does not press the focused Enable button (which would enable again); nor does Space.
      await ds.evaluate(COUNT_ENABLE_CLICKS);
      await ds.locator('#enable').focus();
      await page.keyboard.press('Enter');
      await nt.until(MODE, (mode) => mode === 'disabled');
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      await ds.locator('#enable').focus();
      await page.keyboard.press('Space');
      await nt.until(MODE, (mode) => mode === 'disabled');
      // The key events are dispatched when press resolves: a button pressed by them was clicked by then.
      expect(await ds.evaluate('window.enableClicks')).toBe(1);

      // Another mode while enabled: disabled first, and it stays so in the new mode.
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      await ds.locator('[data-mode="test"]').click();
      await nt.until(MODE, (mode) => mode === 'disabled');
      await ds.locator('#robot-state').getByText('Test Disabled').waitFor();
      await ds.locator('[data-mode="teleop"]').click();

      // A gamepad, as the Gamepad API gives one, its left stick forward: it drives.
      await ds.evaluate(PLUG_PAD);
      await ds.locator('#input-source').getByText('Test pad').waitFor();
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      const padStart = poseOf(nt);
      await nt.until<number[]>(POSE, (pose) => Math.hypot(pose[0]! - padStart[0]!, pose[1]! - padStart[1]!) > 0.5);
      // Unplugged while driving: the robot is disabled, and the student is told why.
      await ds.evaluate(UNPLUG_PAD);
      await nt.until(MODE, (mode) => mode === 'disabled');
      await ds.locator('#message').getByText('The gamepad "Test pad (STANDARD GAMEPAD)" was unplugged: the robot is disabled.').waitFor();

      // The autonomous chooser: the robot's routines listed; the pick is the routine the robot runs.
      const chooser = ds.locator('select');
      await chooser.locator('option', { hasText: 'Drive and turn' }).waitFor({ state: 'attached' });
      expect(await chooser.locator('option').allInnerTexts()).toEqual(['Drive forward', 'Drive and turn']);
      await chooser.selectOption('Drive and turn');
      await nt.until('/SmartDashboard/Auto choices/active', (active) => active === 'Drive and turn');
      await ds.getByText('Your robot uses: Drive and turn').waitFor();
      await ds.locator('[data-mode="autonomous"]').click();
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'autonomous');
      await eventually(
        'the robot running the routine picked',
        async () => (await harness.store.runs.outputText(runId)).includes('Auto selected: Drive and turn'),
        30_000,
      );
      const autoStart = poseOf(nt);
      await nt.until<number[]>(POSE, (pose) => Math.hypot(pose[0]! - autoStart[0]!, pose[1]! - autoStart[1]!) > 0.5);
      await page.screenshot({ path: path.join(SHOTS, 'driver-station-autonomous.png') });

      // The emergency stop: disabled, and Enable refused until the run restarts.
      await ds.locator('#estop').click();
      await nt.until(MODE, (mode) => mode === 'disabled');
      await ds.locator('#robot-state').getByText('Emergency stopped').waitFor();
      expect(await ds.locator('#enable').isDisabled()).toBe(true);
      expect(await ds.locator('#message').innerText()).toBe('Emergency stopped: stop and run your robot code again to drive.');
      await page.screenshot({ path: path.join(SHOTS, 'driver-station-estop.png') });
      nt.close();
      await harness.store.runs.requestStop(ada.workspace.id, runId);
      await eventually('the run ended', async () => (await harness.store.runs.active(ada.workspace.id)) === undefined, 60_000);
      ({ runId, nt } = await runningRobot());
      // The new run's robot: connected again, disabled, and it may be enabled.
      await ds.locator('#robot-state').getByText('Autonomous Disabled').waitFor({ timeout: 30_000 });
      await ds.locator('#tile-comms.ok').waitFor({ timeout: 30_000 });
      await ds.locator('[data-mode="teleop"]').click();
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      // Forward and to the left (the right stick), for the picture (docs/driver-station.png).
      await page.keyboard.down('KeyW');
      await page.keyboard.down('ArrowLeft');
      await nt.until<number[]>(POSE, (pose) => Math.abs(pose[2]!) > 40);
      await page.keyboard.up('ArrowLeft');
      await page.keyboard.up('KeyW');
      // Tall enough for the graph under the field, the list of topics folded.
      await ds.locator('#graph-topics summary').click();
      await page.setViewportSize({ width: 1500, height: 1100 });
      await page.screenshot({ path: path.join(SHOTS, 'driver-station.png') });

      // The graphs and their window are kept when the Driver Station closes (which disables the robot) and opens again.
      await ds.locator('[data-window="120"]').click();
      await closeDriverStation(page);
      await nt.until(MODE, (mode) => mode === 'disabled');
      await page.locator('.statusbar-item', { hasText: 'Driver Station' }).first().click();
      ds = await driverStation(page);
      await speedGraph(ds).waitFor();
      expect(await ds.locator('[data-window="120"]').getAttribute('aria-checked')).toBe('true');
      await ds.locator('#tile-comms.ok').waitFor({ timeout: 30_000 });
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      await page.keyboard.down('KeyW');
      await eventually('the graph to show the robot driving', async () => Number((await graphed(ds)).shown.last) > 1, 10_000);
      await page.keyboard.up('KeyW');
      // In VS Code's light and dark themes, for a look.
      const theme = (await ds.locator('body').getAttribute('class'))?.includes('vscode-light') ? 'light' : 'dark';
      await ds.locator('#graphs').screenshot({ path: path.join(SHOTS, `graphs-${theme}.png`) });
      await page.getByRole('tab', { name: /Robot\.java/ }).click();
      await runFromPalette(page, 'Preferences: Toggle between Light/Dark Themes');
      const other = theme === 'light' ? 'dark' : 'light';
      await ds.locator(`body.vscode-${other}`).waitFor();
      await ds.locator('#graphs').screenshot({ path: path.join(SHOTS, `graphs-${other}.png`) });
    } catch (error) {
      const shot = path.join(SHOTS, 'driver-station-failure.png');
      await page.screenshot({ path: shot }).catch(() => undefined);
      const relay = app.logs.filter((line) => JSON.stringify(line).toLowerCase().includes('halsim')).slice(-30);
      throw new Error(
        `${(error as Error).message}\n--- the page logged:\n${record.logged.slice(-60).join('\n')}\n--- the control plane on HALSim:\n${relay.map((line) => JSON.stringify(line)).join('\n')}\n--- screenshot: ${shot}`,
        { cause: error },
      );
    } finally {
      record.stop();
    }

    // The tab closed while the robot is enabled: disabled at once, because the driver's connection
    // ended (the relay's own disable), not after the silence its watchdog waits for (10 s here). How
    // long it takes is bench/driver-input.ts's to measure, not a test's.
    const [endedBefore, silenceBefore] = [await disables('ended'), await disables('silence')];
    await page.close();
    // The close is the event waited on.
    await eventually('the disable of the ended connection', async () => (await disables('ended')) === endedBefore + 1);
    await nt.until(MODE, (mode) => mode === 'disabled', 5000);
    expect(await disables('silence')).toBe(silenceBefore);
  });
  nt.close();
}, 600_000);

it("drives the robot from the workspace page's own Driver Station: opened by the student, enable, keyboard, a graph, Space, its tab hidden, and closed", async () => {
  // A robot of its own, where the starter puts it (x 2 m, heading 0: the field ahead): the last
  // test's robot may be against a wall, turned and driven there for as long as a busy machine held
  // its keys (seen under load: in a corner, facing it, and W could not move it).
  const active = await harness.store.runs.active(ada.workspace.id);
  if (active) {
    await harness.store.runs.requestStop(ada.workspace.id, active.id);
    await eventually('the run ended', async () => (await harness.store.runs.active(ada.workspace.id)) === undefined, 60_000);
  }
  const { nt } = await runningRobot();
  await withPage(browser, async (page) => {
    const record = recordPage(page);
    try {
      await page.setViewportSize({ width: 1000, height: 1300 });
      await page
        .context()
        .addCookies(ada.cookie.split('; ').map((pair) => ({ name: pair.split('=')[0]!, value: pair.slice(pair.indexOf('=') + 1), url: app.url })));
      // Nothing drives until the student opens it (it takes the wheel from any other Driver Station).
      const open = page.getByRole('button', { name: 'Open the Driver Station' });
      await gotoAndWait(page, `${app.url}/u/${ada.workspace.slug}/.cp/`, page.locator('#ds-open:enabled'), 'driver-station-page');
      expect(await page.locator('#ds-frame').count()).toBe(0);
      await open.click();
      const ds = page.locator('#ds-frame').contentFrame();
      await ds.locator('#tile-comms.ok').waitFor({ timeout: 30_000 });
      await ds.locator('#tile-code.ok').waitFor();
      expect(await ds.locator('#robot-state').innerText()).toBe('Teleoperated Disabled');
      await nt.until(MODE, (mode) => mode === 'disabled');

      // Enable, a graph of the speed, W held: the robot drives, on its NetworkTables, the drawn field and the graph.
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      await ds.locator('#graph-topics summary').click();
      await ds.locator(`#graph-topic-list input[data-topic="${SPEED}"]`).check();
      await ds.locator('#graph-topics summary').click();
      // W held no longer than the checks that need it (the first test says why).
      const start = poseOf(nt);
      await page.keyboard.down('KeyW');
      await nt.until<number[]>(POSE, (pose) => ahead(start, pose) > 1);
      await eventually(
        'the graph to show the robot driving',
        async () => Number(await ds.locator(`figure.graph[data-topic="${SPEED}"]`).getAttribute('data-shown-last')) > 1,
        10_000,
      );
      await page.keyboard.up('KeyW');
      await eventually('the drawn robot to move', async () => ahead(start, await drawnAt(ds)) > 1, 10_000);
      // The section of the page, for a look (docs/workspace-page-driver-station.png is made here).
      await page.locator('section', { has: page.locator('#ds-title') }).screenshot({ path: path.join(SHOTS, 'workspace-page-driver-station.png') });
      // Space disables.
      await page.keyboard.press('Space');
      await nt.until(MODE, (mode) => mode === 'disabled');
      // Nothing it loads or runs is refused by its Content-Security-Policy.
      expect(record.logged.filter((line) => /Content.Security.Policy/i.test(line))).toEqual([]);
      // Its frame is as tall as its page: nothing of it hidden behind a scroll bar of its own.
      await eventually('the frame sized to its page', () => ds.locator('body').evaluate('document.documentElement.scrollHeight <= innerHeight'), 10_000);

      // Its tab hidden while enabled (a page's timers then run once a second): disabled, and the student told why.
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      await ds
        .locator('body')
        .evaluate(
          "(() => { Object.defineProperty(document, 'hidden', { configurable: true, get: () => true }); document.dispatchEvent(new Event('visibilitychange')); delete document.hidden; })()",
        );
      await nt.until(MODE, (mode) => mode === 'disabled');
      await ds.locator('#message').getByText('Disabled: this tab was hidden').waitFor();

      // Closed while enabled: the robot is disabled (its connection ended, not its watchdog).
      await ds.locator('#enable').click();
      await nt.until(MODE, (mode) => mode === 'teleop');
      const [endedBefore, silenceBefore] = [await disables('ended'), await disables('silence')];
      await page.getByRole('button', { name: 'Close the Driver Station' }).click();
      await nt.until(MODE, (mode) => mode === 'disabled');
      // The page may disable it first: the relay's disable of the ended connection is waited on.
      await eventually('the disable of the ended connection', async () => (await disables('ended')) === endedBefore + 1);
      expect(await disables('silence')).toBe(silenceBefore);
      expect(await page.locator('#ds-frame').count()).toBe(0);
    } catch (error) {
      const shot = path.join(SHOTS, 'workspace-page-driver-station-failure.png');
      await page.screenshot({ path: shot, fullPage: true }).catch(() => undefined);
      throw new Error(`${(error as Error).message}\n--- the page logged:\n${record.logged.slice(-60).join('\n')}\n--- screenshot: ${shot}`, { cause: error });
    } finally {
      record.stop();
    }
  });
  nt.close();
}, 300_000);
