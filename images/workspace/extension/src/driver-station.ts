/**
 * The Driver Station in the editor: a webview panel beside the code, opened by the student ("Robot:
 * Open Driver Station", or the status bar's Driver Station item, which stands out while a run is
 * running and the Driver Station is closed), with Enable / Disable, Teleop / Autonomous / Test, the
 * emergency stop, the elapsed time, the communications, robot code and joysticks tiles, the robot's
 * autonomous choosers, its field, and graphs of the topics the student picks (graphs.ts).
 *
 * The page (webview/driver-station.ts) shows and asks; the connection to the robot and every rule live
 * in the extension host (ds-core.ts, the same as the workspace page's Driver Station): the page may be
 * hidden, reloaded or slow, and the robot is still told the truth every 50 ms. Closing the panel
 * closes the connection (the robot is disabled). One panel per window; the connection opens with it
 * and never enables by itself.
 *
 * It never opens by itself: the robot takes one driver at a time, and opening a Driver Station takes
 * the wheel from whoever had it (another tab of the student's, a test's own driver), so only the
 * student's own click does that.
 */
import * as vscode from 'vscode';
import type { RunView } from './classroom.ts';
import { DriverStationCore } from './ds-core.ts';
import { DRIVER_STATION_STYLE, driverStationMarkup } from './ds-page.ts';
import type { ToPage } from './ds-view.ts';
import type { Telemetry } from './telemetry.ts';

/** The page's script (webview/in-editor.ts and webview/driver-station.ts), bundled by build.mjs. */
declare const DRIVER_STATION_SCRIPT: string;
/** uPlot's style sheet (the graphs' library), put in the page by build.mjs. */
declare const UPLOT_STYLE: string;

/** The setting of the student's keys (control → `KeyboardEvent.code`). */
export const KEYS_SETTING = 'classroom.driverStation.keys';
/** Where the student's graphs (graphs.ts GraphSettings) are remembered. */
const GRAPHS_KEY = 'classroom.driverStation.graphs';

const MODE_NAMES = { teleop: 'Teleop', autonomous: 'Autonomous', test: 'Test' };

export class DriverStation implements vscode.Disposable {
  private readonly core: DriverStationCore;
  private readonly item: vscode.StatusBarItem;
  private panel: vscode.WebviewPanel | undefined;
  private run: RunView | null = null;
  private readonly subscriptions: vscode.Disposable[] = [];

  /**
   * `editorBase`: the editor's address (ending in a slash); the HALSim WebSocket is under it.
   * `memory`: where the student's graphs are remembered (the extension's global state: the student's
   * own, in their workspace); without it, for as long as the editor is open.
   */
  constructor(editorBase: string, telemetry: Telemetry, memory?: vscode.Memento) {
    this.core = new DriverStationCore(editorBase, telemetry, {
      // oxlint-disable-next-line unicorn/require-post-message-target-origin -- VS Code's webview API: no origin to give
      post: (message: ToPage) => void this.panel?.webview.postMessage(message),
      keySetting: () => vscode.workspace.getConfiguration().get(KEYS_SETTING),
      rememberedGraphs: () => memory?.get(GRAPHS_KEY),
      rememberGraphs: (settings) => void memory?.update(GRAPHS_KEY, settings),
      run: () => void vscode.commands.executeCommand('classroom.run'),
      changeKeys: () => void vscode.commands.executeCommand('workbench.action.openSettingsJson', { revealSetting: { key: KEYS_SETTING, edit: true } }),
      changed: () => this.renderItem(),
    });
    this.item = vscode.window.createStatusBarItem('classroom.driverStation', vscode.StatusBarAlignment.Left, 998);
    this.item.name = 'Driver Station';
    this.item.command = 'classroom.openDriverStation';
    this.subscriptions.push(
      this.core,
      this.item,
      vscode.workspace.onDidChangeConfiguration((event) => event.affectsConfiguration(KEYS_SETTING) && this.core.keysChanged()),
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
    panel.webview.onDidReceiveMessage((message) => this.core.onPage(message));
    panel.onDidDispose(() => {
      if (this.panel !== panel) return;
      this.panel = undefined;
      this.core.close();
    });
    this.core.open();
    this.renderItem();
  }

  /** The workspace's run as the extension last saw it: the Driver Station connects while it runs. */
  setRun(run: RunView | null | undefined): void {
    this.run = run ?? null;
    this.core.setRun(run);
    this.renderItem();
  }

  /** The status bar: the Driver Station's state at a glance (enabled stands out). */
  private renderItem(): void {
    const state = this.core.state?.state;
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
<style nonce="${nonce}">${UPLOT_STYLE}${DRIVER_STATION_STYLE}</style>
</head>
<body tabindex="-1">
${driverStationMarkup()}
<script nonce="${nonce}">${DRIVER_STATION_SCRIPT}</script>
</body>
</html>`;
}
