/**
 * The Driver Station's page: in the editor's webview (in-editor.ts, bundled by build.mjs and put
 * inline in the page that driver-station.ts makes), and on the workspace page (standalone.ts). It
 * shows what its host (ds-core.ts, through a PageHost) tells it and asks for what the student does:
 * every rule, and the connection to the robot, are the host's.
 *
 * Driving: the keys held while this page has the focus (ds-input.ts: the student's keys) and the
 * first gamepad of the browser's Gamepad API, read every INPUT_MS, together make joystick 0; sent to
 * the extension when they change. Losing the focus lets go of every key (neutral). A gamepad that
 * was in use and goes away disables the robot. Space and Enter disable, wherever the focus is on
 * the page, and never press a button (so that Enter never enables by accident).
 *
 * The graphs of the topics the student picks are graphs.ts's.
 */
import { FIELD, fieldTransform, footprint, poseText, ROBOT_SIZE, type ChooserView, type FieldView, type Pose } from '../dashboard.ts';
import { combine, CONTROLS, gamepadState, keyboardState, NEUTRAL, sameInput, type Control, type XboxState } from '../ds-input.ts';
import { elapsedSeconds, estopped, type Mode } from '../ds-state.ts';
import type { DashboardMessage, FromPage, StateMessage, ToPage } from '../ds-view.ts';
import { graphs } from './graphs.ts';

/** How the page reaches its host (ds-core.ts): VS Code's webview messages (in-editor.ts), or the same page's core (standalone.ts). */
export interface PageHost {
  /** Sends `message` to the host. */
  send(message: FromPage): void;
  /** Calls `receive` with each message of the host. */
  listen(receive: (message: ToPage) => void): void;
}

/** How often the keys and the gamepad are read into joystick 0 (50 a second). */
const INPUT_MS = 20;
const MODE_NAMES: Record<Mode, string> = { teleop: 'Teleoperated', autonomous: 'Autonomous', test: 'Test' };
const DISABLING_KEYS = new Set(['Space', 'Enter', 'NumpadEnter']);

/** The host, once the page has started (startPage). */
let host: PageHost | undefined;
/** Sends `message` to the host; what the student does there clears the last notice. */
function send(message: FromPage): void {
  if (notice && message.type !== 'input' && message.type !== 'ready' && message.type !== 'padLost') {
    notice = '';
    renderState();
  }
  host?.send(message);
}
const element = (id: string) => document.getElementById(id)!;

let state: StateMessage | undefined;
let dashboard: DashboardMessage | undefined;
let notice = '';
const held = new Set<string>();
let focused = document.hasFocus();
/** The gamepad being read (its index and name), null when none is. */
let pad: { index: number; id: string } | null = null;
let sent: { input: XboxState; live: boolean } = { input: NEUTRAL, live: false };
const graphed = graphs((settings) => send({ type: 'graphs', settings }));

// ---- what the student does -----------------------------------------------------------------

element('enable').addEventListener('click', () => send({ type: 'enable' }));
element('disable').addEventListener('click', () => send({ type: 'disable' }));
element('estop').addEventListener('click', () => send({ type: 'estop' }));
element('take-over').addEventListener('click', () => send({ type: 'driveFromHere' }));
element('run').addEventListener('click', () => send({ type: 'run' }));
element('change-keys').addEventListener('click', () => send({ type: 'keys' }));
for (const button of document.querySelectorAll<HTMLButtonElement>('[data-mode]')) {
  button.addEventListener('click', () => send({ type: 'mode', mode: button.dataset['mode'] as Mode }));
}

window.addEventListener(
  'keydown',
  (event) => {
    if (DISABLING_KEYS.has(event.code)) {
      event.preventDefault();
      if (!event.repeat) send({ type: 'disable' });
      return;
    }
    // A list that has the focus keeps its keys (choosing with the arrows).
    if (event.target instanceof HTMLSelectElement || !state || event.ctrlKey || event.metaKey || event.altKey) return;
    if (!Object.values(state.keys).includes(event.code)) return;
    event.preventDefault();
    held.add(event.code);
    readInput();
  },
  true,
);
window.addEventListener(
  'keyup',
  (event) => {
    // A button with the focus is pressed on Space's key up: never.
    if (DISABLING_KEYS.has(event.code)) event.preventDefault();
    if (held.delete(event.code)) readInput();
  },
  true,
);
window.addEventListener('blur', () => {
  focused = false;
  held.clear();
  readInput();
});
window.addEventListener('focus', () => {
  focused = true;
  readInput();
});
window.addEventListener('gamepaddisconnected', (event) => {
  const gone = event.gamepad;
  if (pad && gone.index === pad.index) padLost();
});

function padLost(): void {
  if (!pad) return;
  send({ type: 'padLost', id: pad.id });
  pad = null;
}

/** The first gamepad connected, as an Xbox controller (null when none). */
function readPad(): XboxState | null {
  const pads = typeof navigator.getGamepads === 'function' ? [...navigator.getGamepads()] : [];
  const found = pads.find((each): each is Gamepad => each !== null && each.connected);
  // The pad in use is gone without its event (some browsers say it only on the next read).
  if (pad && !pads.some((each) => each !== null && each.index === pad?.index && each.connected)) padLost();
  if (!found) return null;
  pad = { index: found.index, id: found.id };
  return gamepadState(found);
}

/** Joystick 0 from the keys and the pad; sent when it (or whether an input is live) changed. */
function readInput(): void {
  if (!state) return;
  const keyboard = focused ? keyboardState(held, state.keys) : NEUTRAL;
  const fromPad = readPad();
  const input = fromPad ? combine(keyboard, fromPad) : keyboard;
  const live = focused || fromPad !== null;
  if (!sameInput(input, sent.input) || live !== sent.live) {
    sent = { input, live };
    send({ type: 'input', input, live });
  }
  renderInput(input);
}
setInterval(readInput, INPUT_MS);

// ---- what the extension says ---------------------------------------------------------------

/** Starts the page: what `pageHost` says is shown, and what the student does is sent to it. */
export function startPage(pageHost: PageHost): void {
  host = pageHost;
  host.listen(receive);
  send({ type: 'ready' });
}

function receive(message: ToPage): void {
  switch (message.type) {
    case 'state':
      if (!state || state.ds.runId !== message.ds.runId) notice = '';
      state = message;
      renderState();
      renderKeys();
      return readInput();
    case 'dashboard':
      dashboard = message;
      renderChoosers(message.choosers);
      graphed.received(message.graphable, message.samples);
      return drawField();
    case 'graphs':
      return graphed.remembered(message.settings);
    case 'notice':
      notice = message.text;
      return renderState();
  }
}

function tile(id: string, level: 'ok' | 'wait' | 'off', title: string): void {
  const shown = element(id);
  shown.className = `tile ${level === 'off' ? '' : level}`;
  shown.title = title;
}

function renderState(): void {
  if (!state) return;
  const { ds, refusal } = state;
  const stopped = estopped(ds);
  const link = ds.link;
  tile(
    'tile-comms',
    link === 'connected' ? 'ok' : link === 'connecting' || link === 'lost' ? 'wait' : 'off',
    link === 'connected' ? 'Connected to the robot' : link === 'taken-over' ? 'Another tab is driving' : 'Not connected',
  );
  tile(
    'tile-code',
    ds.runId !== null ? 'ok' : state.runActive ? 'wait' : 'off',
    ds.runId !== null ? 'Your robot code is running' : state.runActive ? 'Your robot code is starting' : 'No robot code: press Run',
  );
  for (const button of document.querySelectorAll<HTMLButtonElement>('[data-mode]'))
    button.setAttribute('aria-checked', String(button.dataset['mode'] === ds.mode));
  const enable = element('enable') as HTMLButtonElement;
  enable.setAttribute('aria-pressed', String(ds.enabled));
  enable.disabled = !ds.enabled && refusal !== null;
  element('disable').setAttribute('aria-pressed', String(!ds.enabled));
  const robotState = element('robot-state');
  robotState.textContent = stopped ? 'Emergency stopped' : `${MODE_NAMES[ds.mode]} ${ds.enabled ? 'Enabled' : 'Disabled'}`;
  robotState.className = stopped ? 'estopped' : ds.enabled ? 'enabled' : '';

  let text = notice;
  let problem = notice !== '';
  const run = element('run');
  const takeOver = element('take-over');
  run.hidden = true;
  takeOver.hidden = true;
  if (link === 'taken-over') {
    text = 'Driving from another tab.';
    takeOver.hidden = false;
  } else if (ds.runId === null) {
    text = state.runActive ? 'Your robot code is starting…' : 'Press Run to start your robot.';
    run.hidden = state.runActive;
  } else if (link !== 'connected') text = `Connecting to the robot…${state.detail ? ` (${state.detail})` : ''}`;
  else if (stopped) {
    text = refusal ?? '';
    problem = true;
  }
  const shown = element('message');
  shown.textContent = text;
  shown.className = problem ? 'problem' : '';
}

/** Minutes, seconds and tenths. */
function clock(seconds: number): string {
  const minutes = Math.floor(seconds / 60);
  return `${minutes}:${(seconds - minutes * 60).toFixed(1).padStart(4, '0')}`;
}
setInterval(() => {
  if (state) element('elapsed').textContent = clock(elapsedSeconds(state.ds, Date.now()));
}, 100);

const CONTROL_NAMES: Record<Control, string> = {
  leftStickUp: 'Left stick forward',
  leftStickDown: 'Left stick back',
  leftStickLeft: 'Left stick left',
  leftStickRight: 'Left stick right',
  rightStickUp: 'Right stick forward',
  rightStickDown: 'Right stick back',
  rightStickLeft: 'Right stick left',
  rightStickRight: 'Right stick right',
  leftTrigger: 'Left trigger',
  rightTrigger: 'Right trigger',
  a: 'A',
  b: 'B',
  x: 'X',
  y: 'Y',
  leftBumper: 'Left bumper',
  rightBumper: 'Right bumper',
  back: 'Back',
  start: 'Start',
  leftStick: 'Left stick press',
  rightStick: 'Right stick press',
  povUp: 'D-pad up',
  povRight: 'D-pad right',
  povDown: 'D-pad down',
  povLeft: 'D-pad left',
};

/** A key code as it is printed on the key. */
function keyName(code: string): string {
  if (code === '') return '(none)';
  const arrows: Record<string, string> = { ArrowUp: '↑', ArrowDown: '↓', ArrowLeft: '←', ArrowRight: '→', BracketLeft: '[', BracketRight: ']' };
  return arrows[code] ?? code.replace(/^Key|^Digit/, '').replace(/^Numpad/, 'Keypad ');
}

let keysShown = '';
function renderKeys(): void {
  if (!state) return;
  const signature = JSON.stringify([state.keys, state.keyProblems]);
  if (signature === keysShown) return;
  keysShown = signature;
  const table = element('keys');
  table.replaceChildren(
    ...CONTROLS.map((control) => {
      const row = document.createElement('tr');
      for (const text of [CONTROL_NAMES[control], keyName(state!.keys[control])])
        row.append(Object.assign(document.createElement('td'), { textContent: text }));
      return row;
    }),
  );
  element('key-problems').textContent = state.keyProblems.join(' ');
}

function renderInput(input: XboxState): void {
  const joysticks = focused || pad !== null;
  tile('tile-joysticks', joysticks ? 'ok' : 'wait', joysticks ? 'Joystick 0 is live' : 'Click the Driver Station to drive with the keyboard');
  const sources = [focused ? 'the keyboard' : null, pad ? `the gamepad "${pad.id}"` : null].filter(Boolean);
  element('input-source').textContent = sources.length
    ? `Driving with ${sources.join(' and ')}.`
    : 'Click here to drive with the keyboard, or press a button on a gamepad.';
  const pressed = input.buttons.flatMap((down, index) => (down ? [['A', 'B', 'X', 'Y', 'LB', 'RB', 'Back', 'Start', 'LS', 'RS'][index]] : []));
  const axes = input.axes.map((value) => value.toFixed(2).padStart(5, ' ')).join(' ');
  element('input-values').textContent = `axes ${axes}\nbuttons ${pressed.join(' ') || '-'}, POV ${input.povs[0]}`;
}

// ---- the robot's NetworkTables: choosers and field -----------------------------------------

let choosersShown = '';
function renderChoosers(list: ChooserView[]): void {
  const container = element('choosers');
  const signature = JSON.stringify(list.map((chooser) => [chooser.table, chooser.name, chooser.options]));
  if (signature !== choosersShown) {
    choosersShown = signature;
    if (list.length === 0) {
      container.replaceChildren(
        Object.assign(document.createElement('p'), { className: 'muted', textContent: 'No autonomous chooser: your robot publishes none.' }),
      );
    } else {
      container.replaceChildren(
        ...list.map((chooser, index) => {
          const box = Object.assign(document.createElement('div'), { className: 'chooser' });
          const label = Object.assign(document.createElement('label'), { textContent: chooser.name, htmlFor: `chooser-${index}` });
          const select = Object.assign(document.createElement('select'), { id: `chooser-${index}` });
          select.dataset['table'] = chooser.table;
          select.append(...chooser.options.map((option) => Object.assign(document.createElement('option'), { value: option, textContent: option })));
          select.addEventListener('change', () => send({ type: 'choose', table: chooser.table, value: select.value }));
          const active = Object.assign(document.createElement('div'), { className: 'muted active' });
          box.append(label, select, active);
          return box;
        }),
      );
    }
  }
  list.forEach((chooser, index) => {
    const select = document.getElementById(`chooser-${index}`) as HTMLSelectElement | null;
    if (!select) return;
    // The pick, else what the robot uses, else its default: the first that is one of the options.
    const shown = [chooser.selected, chooser.active, chooser.default].find((option): option is string => option !== null && chooser.options.includes(option));
    if (shown !== undefined && document.activeElement !== select) select.value = shown;
    const active = select.parentElement?.querySelector('.active');
    if (active) active.textContent = chooser.active ? `Your robot uses: ${chooser.active}` : '';
  });
}

const canvas = element('field') as HTMLCanvasElement;
new ResizeObserver(() => drawField()).observe(canvas);

/** The field, and on it the first Field2d's objects: trajectories as lines, other objects as boxes, the robot as its footprint with its heading. */
function drawField(): void {
  const view: FieldView | undefined = dashboard?.fields[0];
  const ratio = window.devicePixelRatio || 1;
  const { width, height } = canvas.getBoundingClientRect();
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const context = canvas.getContext('2d');
  if (!context || width === 0) return;
  context.scale(ratio, ratio);
  const transform = fieldTransform(width, height, 6);
  const [left, top] = transform.toPixels(0, FIELD.widthMeters);
  const [right, bottom] = transform.toPixels(FIELD.lengthMeters, 0);
  const middle = (left + right) / 2;
  // The carpet, the centre line, the border.
  context.fillStyle = '#45494f';
  context.fillRect(left, top, right - left, bottom - top);
  // The alliances' walls in their colours (a plain field: no field elements are drawn).
  context.fillStyle = '#2f6fe0';
  context.fillRect(left - 4, top, 4, bottom - top);
  context.fillStyle = '#e0402f';
  context.fillRect(right, top, 4, bottom - top);
  context.strokeStyle = 'rgba(255, 255, 255, 0.7)';
  context.lineWidth = 1;
  context.setLineDash([6, 6]);
  context.beginPath();
  context.moveTo(middle, top);
  context.lineTo(middle, bottom);
  context.stroke();
  context.setLineDash([]);
  context.lineWidth = 2;
  context.strokeRect(left, top, right - left, bottom - top);
  context.fillStyle = 'rgba(255, 255, 255, 0.6)';
  context.font = '11px sans-serif';
  context.fillText(`Blue · ${FIELD.name}, ${FIELD.lengthMeters} m × ${FIELD.widthMeters} m`, left + 6, bottom - 6);
  context.textAlign = 'right';
  context.fillText('Red', right - 6, bottom - 6);
  context.textAlign = 'left';

  const pose = element('pose');
  if (!view) {
    pose.textContent = 'No field: your robot publishes none.';
    return;
  }
  context.globalAlpha = dashboard?.live ? 1 : 0.45;
  const polygon = (points: [number, number][]) => {
    context.beginPath();
    points.forEach(([x, y], index) => {
      const [px, py] = transform.toPixels(x, y);
      if (index === 0) context.moveTo(px, py);
      else context.lineTo(px, py);
    });
    context.closePath();
  };
  for (const object of view.objects) {
    if (object.drawn === 'line') {
      context.strokeStyle = '#f5c542';
      context.lineWidth = 2;
      context.beginPath();
      object.poses.forEach((each, index) => {
        const [px, py] = transform.toPixels(each.x, each.y);
        if (index === 0) context.moveTo(px, py);
        else context.lineTo(px, py);
      });
      context.stroke();
    } else if (object.drawn === 'boxes') {
      context.strokeStyle = '#ff9f43';
      context.lineWidth = 2;
      for (const each of object.poses) {
        polygon(footprint(each, { lengthMeters: 0.4, widthMeters: 0.4 }));
        context.stroke();
      }
    }
  }
  const robot = view.objects.find((object) => object.drawn === 'robot')?.poses[0];
  if (robot) drawRobot(context, robot, polygon);
  context.globalAlpha = 1;
  pose.textContent = robot ? `Robot: ${poseText(robot)}${dashboard?.live ? '' : ' (last values of the last run)'}` : `${view.name}: no robot pose.`;
}

/** The robot: its footprint (dashboard.ts ROBOT_SIZE) turned to its heading, and an arrow to its front. */
function drawRobot(context: CanvasRenderingContext2D, robot: Pose, polygon: (points: [number, number][]) => void): void {
  const corners = footprint(robot);
  polygon(corners);
  context.fillStyle = 'rgba(79, 195, 247, 0.3)';
  context.fill();
  context.strokeStyle = '#4fc3f7';
  context.lineWidth = 2;
  context.stroke();
  // The heading: an arrow from the back to the front bumper.
  const radians = (robot.degrees * Math.PI) / 180;
  const along = (metres: number, across: number): [number, number] => [
    robot.x + metres * Math.cos(radians) - across * Math.sin(radians),
    robot.y + metres * Math.sin(radians) + across * Math.cos(radians),
  ];
  polygon([
    along(ROBOT_SIZE.lengthMeters / 2, 0),
    along(-ROBOT_SIZE.lengthMeters / 4, ROBOT_SIZE.widthMeters / 3),
    along(-ROBOT_SIZE.lengthMeters / 8, 0),
    along(-ROBOT_SIZE.lengthMeters / 4, -ROBOT_SIZE.widthMeters / 3),
  ]);
  context.fillStyle = '#e1f5fe';
  context.fill();
}
