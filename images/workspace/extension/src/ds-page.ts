/**
 * The Driver Station page's markup and style, the same in the editor's panel (driver-station.ts)
 * and on the workspace page (the control plane's `<editor>/.cp/driver-station`): its script is
 * webview/driver-station.ts. Colours come from VS Code's theme variables (`--vscode-*`), which the
 * editor sets; a page outside the editor sets them itself.
 */
import { WINDOWS } from './graphs.ts';

/** The page's body: the controls, the field and the graphs (the ids webview/driver-station.ts fills). */
export function driverStationMarkup(): string {
  return `<main id="ds">
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
</main>`;
}

export const DRIVER_STATION_STYLE = `
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
