/**
 * The Driver Station in the editor: a webview panel beside the code, opened by the student ("Robot:
 * Open Driver Station", or the status bar's Driver Station item, which stands out while a run is
 * running and the Driver Station is closed), with Enable / Disable, Teleop / Autonomous / Test, the
 * emergency stop, the elapsed time, the communications, robot code and joysticks tiles, the robot's
 * autonomous choosers, its field, and graphs of the topics the student picks (graphs.ts).
 *
 * The page (webview/driver-station.ts) shows and asks; the connection to the robot and every rule live
 * here, in the extension host (halsim.ts, ds-state.ts): the page may be hidden, reloaded or slow, and
 * the robot is still told the truth every 50 ms. Closing the panel closes the connection (the robot
 * is disabled). One panel per window; the connection opens with it and never enables by itself.
 *
 * It never opens by itself: the robot takes one driver at a time, and opening a Driver Station takes
 * the wheel from whoever had it (another tab of the student's, a test's own driver), so only the
 * student's own click does that.
 */
import * as vscode from 'vscode';
import { isActive, type RunView } from './classroom.ts';
import { choosers, fields } from './dashboard.ts';
import { keyMap } from './ds-input.ts';
import { enableRefusal } from './ds-state.ts';
import type { FromPage, ToPage } from './ds-view.ts';
import { graphable, graphSettings, plotted, WINDOWS, type GraphSettings, type SampleBatch } from './graphs.ts';
import { DriverStationLink, type LinkUpdate } from './halsim.ts';
import type { Telemetry } from './telemetry.ts';

/** The page's script (webview/driver-station.ts), bundled by build.mjs. */
declare const DRIVER_STATION_SCRIPT: string;
/** uPlot's style sheet (the graphs' library), put in the page by build.mjs. */
declare const UPLOT_STYLE: string;

/** The setting of the student's keys (control → `KeyboardEvent.code`). */
export const KEYS_SETTING = 'classroom.driverStation.keys';
/** The most often the page gets the robot's choosers and field. */
const DASHBOARD_MS = 50;
/** Where the student's graphs (graphs.ts GraphSettings) are remembered. */
const GRAPHS_KEY = 'classroom.driverStation.graphs';

const MODE_NAMES = { teleop: 'Teleop', autonomous: 'Autonomous', test: 'Test' };

export class DriverStation implements vscode.Disposable {
  private readonly halsimUrl: string;
  private readonly telemetry: Telemetry;
  private readonly item: vscode.StatusBarItem;
  private panel: vscode.WebviewPanel | undefined;
  private link: DriverStationLink | undefined;
  private last: LinkUpdate | undefined;
  private run: RunView | null = null;
  private readonly subscriptions: vscode.Disposable[] = [];
  private dashboardTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly memory: vscode.Memento | undefined;
  private graphs: GraphSettings;
  /** The graphed topics' samples not yet sent to the page (sent with the next dashboard, DASHBOARD_MS at most). */
  private readonly samples = new Map<string, SampleBatch>();
  private wasConnected = false;

  /**
   * `editorBase`: the editor's address (ending in a slash); the HALSim WebSocket is under it.
   * `memory`: where the student's graphs are remembered (the extension's global state: the student's
   * own, in their workspace); without it, for as long as the editor is open.
   */
  constructor(editorBase: string, telemetry: Telemetry, memory?: vscode.Memento) {
    this.halsimUrl = new URL('.cp/halsim/wpilibws', editorBase).href.replace(/^http/, 'ws');
    this.telemetry = telemetry;
    this.memory = memory;
    this.graphs = graphSettings(memory?.get(GRAPHS_KEY));
    this.item = vscode.window.createStatusBarItem('classroom.driverStation', vscode.StatusBarAlignment.Left, 998);
    this.item.name = 'Driver Station';
    this.item.command = 'classroom.openDriverStation';
    this.subscriptions.push(
      this.item,
      telemetry.onValue((name, type, value) => this.graphs.topics.includes(name) && this.sample(name, plotted(type, value))),
      telemetry.onChange(() => {
        // The robot gone: a gap in every graph.
        if (this.wasConnected && !telemetry.connected) for (const name of this.graphs.topics) this.sample(name, null);
        this.wasConnected = telemetry.connected;
        this.scheduleDashboard();
      }),
      vscode.workspace.onDidChangeConfiguration((event) => event.affectsConfiguration(KEYS_SETTING) && this.postState()),
    );
    this.renderItem();
  }

  /** Opens the Driver Station beside the code (it takes the focus: the keys drive at once), or shows it. */
  open(): void {
    if (this.panel) return this.panel.reveal();
    const panel = vscode.window.createWebviewPanel(
      'classroom.driverStation',
      'Driver Station',
      vscode.ViewColumn.Beside,
      // Kept while hidden: the gamepad is read and the tiles stay current behind another tab.
      { enableScripts: true, retainContextWhenHidden: true, localResourceRoots: [] },
    );
    this.panel = panel;
    panel.iconPath = new vscode.ThemeIcon('game');
    panel.webview.html = page(panel.webview.cspSource);
    const link = new DriverStationLink(this.halsimUrl, (update) => {
      this.last = update;
      this.postState();
      this.renderItem();
    });
    this.link = link;
    panel.webview.onDidReceiveMessage((message: FromPage) => this.onPage(message));
    panel.onDidDispose(() => {
      link.dispose();
      if (this.panel === panel) {
        this.panel = undefined;
        this.link = undefined;
        this.last = undefined;
      }
      this.renderItem();
    });
    link.setRun(this.run?.status === 'running' ? this.run.id : null);
  }

  /** The workspace's run as the extension last saw it: the Driver Station connects while it runs. */
  setRun(run: RunView | null | undefined): void {
    this.run = run ?? null;
    this.link?.setRun(run?.status === 'running' ? run.id : null);
    this.renderItem();
  }

  private onPage(message: FromPage): void {
    const link = this.link;
    if (!link) return;
    switch (message.type) {
      case 'ready':
        this.post({ type: 'graphs', settings: this.graphs });
        this.sampleNow(this.graphs.topics);
        this.postState();
        this.postDashboard();
        return;
      case 'graphs': {
        const before = this.graphs.topics;
        this.graphs = graphSettings(message.settings);
        void this.memory?.update(GRAPHS_KEY, this.graphs);
        for (const name of this.samples.keys()) if (!this.graphs.topics.includes(name)) this.samples.delete(name);
        // A topic just picked starts at its value now.
        this.sampleNow(this.graphs.topics.filter((name) => !before.includes(name)));
        return this.postDashboard();
      }
      case 'enable':
        return link.enable();
      case 'disable':
        return link.disable();
      case 'mode':
        return link.setMode(message.mode);
      case 'estop':
        return link.estop();
      case 'driveFromHere':
        return link.driveFromHere();
      case 'run':
        return void vscode.commands.executeCommand('classroom.run');
      case 'input':
        return link.setInput(message.input, message.live);
      case 'padLost':
        link.disable();
        return this.post({ type: 'notice', text: `The gamepad "${message.id}" was unplugged: the robot is disabled.` });
      case 'choose':
        return void this.telemetry.publishString(`${message.table}/selected`, message.value).catch((error: unknown) => {
          this.post({ type: 'notice', text: `Your pick was not sent: ${error instanceof Error ? error.message : String(error)}` });
        });
      case 'keys':
        return void vscode.commands.executeCommand('workbench.action.openSettingsJson', { revealSetting: { key: KEYS_SETTING, edit: true } });
    }
  }

  private post(message: ToPage): void {
    // oxlint-disable-next-line unicorn/require-post-message-target-origin -- VS Code's webview API: no origin to give
    void this.panel?.webview.postMessage(message);
  }

  private postState(): void {
    const update = this.last;
    if (!update) return;
    const { keys, problems } = keyMap(vscode.workspace.getConfiguration().get(KEYS_SETTING));
    this.post({
      type: 'state',
      ds: update.state,
      robot: update.robot,
      detail: update.detail,
      refusal: enableRefusal(update.state),
      runActive: isActive(this.run),
      keys,
      keyProblems: problems,
    });
  }

  private scheduleDashboard(): void {
    if (!this.panel) return;
    this.dashboardTimer ??= setTimeout(() => {
      this.dashboardTimer = undefined;
      this.postDashboard();
    }, DASHBOARD_MS);
  }

  private postDashboard(): void {
    // The robot now running's own values; none running, the last ones (shown as such).
    const live = this.telemetry.connected;
    const values = live ? this.telemetry.current : new Map([...this.telemetry.values].map(([name, topic]) => [name, topic.value]));
    const samples = [...this.samples.values()];
    this.samples.clear();
    this.post({ type: 'dashboard', live, choosers: choosers(values), fields: fields(values), graphable: graphable(this.telemetry.values), samples });
  }

  /** A graphed topic's value received now (null: none, a gap); kept for the page only while it is open. */
  private sample(name: string, value: number | null): void {
    if (!this.panel) return;
    let batch = this.samples.get(name);
    if (!batch) this.samples.set(name, (batch = { name, times: [], values: [] }));
    batch.times.push(Date.now());
    batch.values.push(value);
  }

  /** The robot's values now of `names`, as their graphs' first samples (those it has: NetworkTables sends a value again only when it changes). */
  private sampleNow(names: string[]): void {
    if (!this.telemetry.connected) return;
    for (const name of names) {
      const topic = this.telemetry.values.get(name);
      if (topic && this.telemetry.current.has(name)) this.sample(name, plotted(topic.type, topic.value));
    }
  }

  /** The status bar: the Driver Station's state at a glance (enabled stands out). */
  private renderItem(): void {
    const state = this.last?.state;
    if (state?.enabled) {
      this.item.text = `$(game) Enabled: ${MODE_NAMES[state.mode]}`;
      this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      this.item.tooltip = 'Your robot is enabled: open the Driver Station to disable it (Space)';
    } else {
      // A robot running with nobody to enable it: the way to drive it stands out.
      const waiting = !this.panel && this.run?.status === 'running';
      this.item.text = '$(game) Driver Station';
      this.item.backgroundColor = waiting ? new vscode.ThemeColor('statusBarItem.prominentBackground') : undefined;
      this.item.tooltip = this.panel
        ? 'Show the Driver Station'
        : waiting
          ? 'Your robot is running, disabled: open the Driver Station to enable and drive it'
          : 'Open the Driver Station: enable and drive your robot';
    }
    this.item.show();
  }

  dispose(): void {
    clearTimeout(this.dashboardTimer);
    this.panel?.dispose();
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}

/** The page: its markup and style, and its script inline (allowed by its nonce; nothing else may run or load). */
function page(cspSource: string): string {
  const nonce = [...crypto.getRandomValues(new Uint8Array(16))].map((byte) => byte.toString(16).padStart(2, '0')).join('');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${cspSource} 'nonce-${nonce}'; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Driver Station</title>
<style nonce="${nonce}">${UPLOT_STYLE}${STYLE}</style>
</head>
<body tabindex="-1">
<main id="ds">
  <section class="controls" aria-label="Driver Station">
    <div class="tiles">
      <div class="tile" id="tile-comms" role="status"><span class="light"></span><span>Communications</span></div>
      <div class="tile" id="tile-code" role="status"><span class="light"></span><span>Robot code</span></div>
      <div class="tile" id="tile-joysticks" role="status"><span class="light"></span><span>Joysticks</span></div>
    </div>
    <div class="modes" role="radiogroup" aria-label="Mode">
      <button type="button" role="radio" data-mode="teleop">Teleoperated</button>
      <button type="button" role="radio" data-mode="autonomous">Autonomous</button>
      <button type="button" role="radio" data-mode="test">Test</button>
    </div>
    <div class="enable">
      <button type="button" id="enable">Enable</button>
      <button type="button" id="disable">Disable</button>
    </div>
    <div class="status">
      <div id="robot-state" aria-live="polite">Disabled</div>
      <div id="elapsed" title="Time enabled">0:00.0</div>
    </div>
    <div id="message" aria-live="polite"></div>
    <div class="actions">
      <button type="button" id="run" hidden>Run</button>
      <button type="button" id="take-over" hidden>Drive from here</button>
    </div>
    <button type="button" id="estop" title="Emergency stop: disables the robot until it runs again">Emergency stop</button>
    <p class="hint">Space or Enter disables. Driving keys work while this panel has the focus.</p>
    <section aria-labelledby="auto-title">
      <h2 id="auto-title">Autonomous</h2>
      <div id="choosers"><p class="muted">No autonomous chooser: your robot publishes none.</p></div>
    </section>
    <section aria-labelledby="input-title">
      <h2 id="input-title">Controller (joystick 0)</h2>
      <div id="input-source" class="muted">Click here to drive with the keyboard, or press a button on a gamepad.</div>
      <div id="input-values" class="muted"></div>
      <details>
        <summary>Keys</summary>
        <table id="keys"></table>
        <p id="key-problems" class="problem"></p>
        <button type="button" id="change-keys" class="link">Change the keys…</button>
      </details>
    </section>
  </section>
  <div class="view">
    <section class="field" aria-labelledby="field-title">
      <h2 id="field-title">Field</h2>
      <canvas id="field" role="img" aria-label="The field"></canvas>
      <div id="pose" class="muted">No field: your robot publishes none.</div>
    </section>
    <section id="graphs" aria-labelledby="graphs-title">
      <div class="graphs-head">
        <h2 id="graphs-title">Graphs</h2>
        <div class="windows" role="radiogroup" aria-label="Time shown">
          ${WINDOWS.map((seconds) => `<button type="button" role="radio" data-window="${seconds}">${seconds < 60 ? `${seconds} s` : `${seconds / 60} min`}</button>`).join('')}
        </div>
        <button type="button" id="graphs-pause" aria-pressed="false">Pause</button>
      </div>
      <details id="graph-topics">
        <summary>What to graph <span id="graph-topics-count" class="muted"></span></summary>
        <div id="graph-topic-list"></div>
      </details>
      <p id="graphs-empty" class="muted">Pick a number or a boolean your robot publishes (SmartDashboard.putNumber, say) to see it change over time.</p>
      <div id="graph-list"></div>
    </section>
  </div>
</main>
<script nonce="${nonce}">${DRIVER_STATION_SCRIPT}</script>
</body>
</html>`;
}

const STYLE = `
body { padding: 0 12px; color: var(--vscode-foreground); font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); outline: none; }
body:focus-within .hint, body:focus .hint { color: var(--vscode-charts-green); }
#ds { display: grid; grid-template-columns: minmax(260px, 340px) 1fr; gap: 16px; align-items: start; }
@media (max-width: 700px) { #ds { grid-template-columns: 1fr; } }
h2 { font-size: 1em; margin: 14px 0 6px; text-transform: uppercase; letter-spacing: 0.04em; color: var(--vscode-descriptionForeground); }
button { font: inherit; color: var(--vscode-button-secondaryForeground); background: var(--vscode-button-secondaryBackground); border: 1px solid var(--vscode-contrastBorder, transparent); border-radius: 3px; padding: 6px 10px; cursor: pointer; }
button:disabled { opacity: 0.5; cursor: default; }
.tiles { display: flex; gap: 6px; margin-top: 12px; }
.tile { flex: 1; display: flex; align-items: center; gap: 6px; padding: 6px; border-radius: 3px; background: var(--vscode-editorWidget-background); font-size: 0.9em; }
.light { width: 12px; height: 12px; border-radius: 50%; background: #b33; flex: none; }
.tile.ok .light { background: #2a2; }
.tile.wait .light { background: #d90; }
.modes { display: flex; gap: 4px; margin-top: 12px; }
.modes button { flex: 1; }
.modes button[aria-checked="true"] { background: var(--vscode-button-background); color: var(--vscode-button-foreground); }
.enable { display: flex; gap: 4px; margin-top: 8px; }
.enable button { flex: 1; padding: 10px; font-size: 1.15em; font-weight: 600; }
#enable[aria-pressed="true"] { background: #2a8a2a; color: #fff; }
#disable[aria-pressed="true"] { background: #b32424; color: #fff; }
.status { display: flex; justify-content: space-between; align-items: baseline; margin-top: 10px; }
#robot-state { font-size: 1.3em; font-weight: 600; }
#robot-state.enabled { color: var(--vscode-charts-green); }
#robot-state.estopped { color: var(--vscode-errorForeground); }
#elapsed { font-variant-numeric: tabular-nums; font-size: 1.3em; }
#message { min-height: 1.4em; margin-top: 6px; }
#message.problem, .problem { color: var(--vscode-errorForeground); }
.actions { display: flex; gap: 6px; }
.actions button:not([hidden]) { margin-top: 4px; background: var(--vscode-button-background); color: var(--vscode-button-foreground); }
#estop { display: block; width: 100%; margin-top: 10px; padding: 10px; background: #c00; color: #fff; font-weight: 700; letter-spacing: 0.05em; text-transform: uppercase; }
.hint { font-size: 0.9em; color: var(--vscode-descriptionForeground); }
.muted { color: var(--vscode-descriptionForeground); }
.chooser { margin-bottom: 8px; }
.chooser label { display: block; margin-bottom: 2px; }
select { font: inherit; width: 100%; padding: 3px; color: var(--vscode-dropdown-foreground); background: var(--vscode-dropdown-background); border: 1px solid var(--vscode-dropdown-border); }
#input-values { font-family: var(--vscode-editor-font-family); font-size: 0.9em; margin-top: 4px; white-space: pre; }
#keys { border-collapse: collapse; margin: 6px 0; }
#keys td { padding: 1px 8px 1px 0; }
#keys td:last-child { font-family: var(--vscode-editor-font-family); }
button.link { background: none; border: none; padding: 0; color: var(--vscode-textLink-foreground); }
.view { min-width: 0; }
.graphs-head { display: flex; align-items: center; gap: 8px; margin-top: 14px; }
.graphs-head h2 { flex: 1; margin: 0; }
.windows { display: flex; gap: 2px; }
.graphs-head button { padding: 3px 8px; }
.windows button[aria-checked="true"], #graphs-pause[aria-pressed="true"] { background: var(--vscode-button-background); color: var(--vscode-button-foreground); }
#graph-topics { margin-top: 6px; }
#graph-topics summary { cursor: pointer; }
#graph-topic-list { max-height: 180px; overflow-y: auto; margin-top: 4px; }
#graph-topic-list label { display: flex; align-items: center; gap: 6px; padding: 1px 0; }
#graph-topic-list label span:first-of-type { font-family: var(--vscode-editor-font-family); font-size: 0.9em; }
#graph-topic-list .muted { font-size: 0.85em; }
input[type="checkbox"] { accent-color: var(--vscode-button-background); margin: 0; }
#graphs-empty { font-size: 0.9em; }
.graph { margin: 8px 0 0; padding: 6px 8px 2px; background: var(--vscode-editorWidget-background); border-radius: 3px; }
.graph-head { display: flex; align-items: baseline; gap: 8px; margin-bottom: 2px; }
.graph-name { flex: 1; min-width: 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font-family: var(--vscode-editor-font-family); font-size: 0.9em; }
.graph-value { font-variant-numeric: tabular-nums; font-weight: 600; }
.graph-plot .uplot { width: 100%; font-family: var(--vscode-font-family); }
.field canvas { width: 100%; aspect-ratio: 17.548 / 8.052; display: block; background: var(--vscode-editorWidget-background); border-radius: 3px; }
#pose { margin-top: 6px; font-variant-numeric: tabular-nums; }
`;
