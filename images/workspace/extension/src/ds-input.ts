/**
 * Driving input as an Xbox controller on joystick port 0, in WPILib's XboxController layout:
 * axes 0 left X, 1 left Y, 2 left trigger, 3 right trigger, 4 right X, 5 right Y (sticks -1..1,
 * forward and left negative as on a real pad; triggers 0..1); buttons 1 A, 2 B, 3 X, 4 Y, 5 LB, 6 RB,
 * 7 Back, 8 Start, 9 left stick, 10 right stick (index 0 is button 1); one POV (degrees clockwise
 * from up, -1 when not pressed).
 *
 * From the keyboard (a key per control, `KeyboardEvent.code`: the key's place, whatever the layout)
 * and from a gamepad of the browser's Gamepad API ("standard" mapping: W3C Gamepad §"Remapping").
 * Pure: the Driver Station's page reads the keys and pads and sends what these make.
 */

/** An Xbox controller's state as the robot reads it. */
export interface XboxState {
  /** 6 axes: left X, left Y, left trigger, right trigger, right X, right Y. */
  axes: number[];
  /** 10 buttons: A, B, X, Y, LB, RB, Back, Start, left stick, right stick. */
  buttons: boolean[];
  /** One POV: degrees clockwise from up, or -1. */
  povs: number[];
}

/** Nothing pressed, sticks centred. */
export const NEUTRAL: XboxState = Object.freeze({ axes: [0, 0, 0, 0, 0, 0], buttons: Array<boolean>(10).fill(false), povs: [-1] });

/** The buttons in WPILib's order (button n is index n-1). */
export const BUTTONS = ['a', 'b', 'x', 'y', 'leftBumper', 'rightBumper', 'back', 'start', 'leftStick', 'rightStick'] as const;

/** Every control a key can press. */
export const CONTROLS = [
  'leftStickUp',
  'leftStickDown',
  'leftStickLeft',
  'leftStickRight',
  'rightStickUp',
  'rightStickDown',
  'rightStickLeft',
  'rightStickRight',
  'leftTrigger',
  'rightTrigger',
  ...BUTTONS,
  'povUp',
  'povRight',
  'povDown',
  'povLeft',
] as const;
export type Control = (typeof CONTROLS)[number];

/** A key for each control (`KeyboardEvent.code`; empty: none). */
export type KeyMap = Record<Control, string>;

/**
 * The default keys: WASD the left stick (W forward), the arrows the right stick, the IJKL diamond the
 * face buttons where they are on the pad (I = Y on top, J = X left, L = B right, K = A below), Q and E
 * the bumpers, Z and C the triggers, R and U the stick clicks, [ and ] Back and Start, the numeric
 * keypad's 8 6 2 4 the POV.
 */
export const DEFAULT_KEYS: KeyMap = {
  leftStickUp: 'KeyW',
  leftStickDown: 'KeyS',
  leftStickLeft: 'KeyA',
  leftStickRight: 'KeyD',
  rightStickUp: 'ArrowUp',
  rightStickDown: 'ArrowDown',
  rightStickLeft: 'ArrowLeft',
  rightStickRight: 'ArrowRight',
  leftTrigger: 'KeyZ',
  rightTrigger: 'KeyC',
  a: 'KeyK',
  b: 'KeyL',
  x: 'KeyJ',
  y: 'KeyI',
  leftBumper: 'KeyQ',
  rightBumper: 'KeyE',
  back: 'BracketLeft',
  start: 'BracketRight',
  leftStick: 'KeyR',
  rightStick: 'KeyU',
  povUp: 'Numpad8',
  povRight: 'Numpad6',
  povDown: 'Numpad2',
  povLeft: 'Numpad4',
};

/** Keys that are the Driver Station's own (Space and Enter disable the robot) and never a control. */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(['Space', 'Enter', 'NumpadEnter', 'Tab', 'Escape']);

/** A `KeyboardEvent.code`: letters, digits, names (`ArrowUp`, `Numpad8`, `BracketLeft`, `ShiftLeft`, `F5`). */
const KEY_CODE = /^[A-Z][A-Za-z0-9]{1,19}$/;

/**
 * The keys to use: the defaults, with the student's changes (the `classroom.driverStation.keys`
 * setting: control → key code). What cannot be used is left at its default and said in `problems`:
 * an unknown control, a value that is no key code, a reserved key, a key given to two controls.
 */
export function keyMap(changes: unknown): { keys: KeyMap; problems: string[] } {
  const keys: KeyMap = { ...DEFAULT_KEYS };
  const problems: string[] = [];
  if (changes === undefined || changes === null) return { keys, problems };
  if (typeof changes !== 'object' || Array.isArray(changes)) return { keys, problems: ['The key setting must be an object of control: key code.'] };
  const controls: ReadonlySet<string> = new Set(CONTROLS);
  const changed = new Set<Control>();
  for (const [control, code] of Object.entries(changes)) {
    if (!controls.has(control)) problems.push(`"${control}" is not a control (the controls: ${CONTROLS.join(', ')}).`);
    else if (typeof code !== 'string' || !KEY_CODE.test(code))
      problems.push(`${control}: ${JSON.stringify(code)} is not a key code (such as "KeyW" or "ArrowUp").`);
    else if (RESERVED_KEYS.has(code)) problems.push(`${control}: ${code} is the Driver Station's own key.`);
    else {
      keys[control as Control] = code;
      changed.add(control as Control);
    }
  }
  // One control per key: the student's choices first (in the order of CONTROLS), then the defaults;
  // a control whose key is taken has none.
  const owner = new Map<string, Control>();
  for (const control of CONTROLS.toSorted((a, b) => Number(changed.has(b)) - Number(changed.has(a)))) {
    const other = owner.get(keys[control]);
    if (other === undefined) owner.set(keys[control], control);
    else {
      problems.push(`${keys[control]} is ${other}'s key: ${control} has no key.`);
      keys[control] = '';
    }
  }
  return { keys, problems };
}

/** The POV's angle for the directions held (diagonals from two neighbours; opposite ones cancel), -1 for none. */
export function povAngle(up: boolean, right: boolean, down: boolean, left: boolean): number {
  const y = (up ? 1 : 0) - (down ? 1 : 0);
  const x = (right ? 1 : 0) - (left ? 1 : 0);
  if (x === 0 && y === 0) return -1;
  // Clockwise from up.
  return (Math.round((Math.atan2(x, y) * 180) / Math.PI) + 360) % 360;
}

/** The controller as the keys held make it (`held`: their codes). Opposite keys cancel. */
export function keyboardState(held: ReadonlySet<string>, keys: KeyMap): XboxState {
  const on = (control: Control) => held.has(keys[control]);
  const axis = (negative: Control, positive: Control) => (on(positive) ? 1 : 0) - (on(negative) ? 1 : 0);
  return {
    axes: [
      axis('leftStickLeft', 'leftStickRight'),
      axis('leftStickUp', 'leftStickDown'),
      on('leftTrigger') ? 1 : 0,
      on('rightTrigger') ? 1 : 0,
      axis('rightStickLeft', 'rightStickRight'),
      axis('rightStickUp', 'rightStickDown'),
    ],
    buttons: BUTTONS.map(on),
    povs: [povAngle(on('povUp'), on('povRight'), on('povDown'), on('povLeft'))],
  };
}

/** What the Gamepad API gives of a pad (a `Gamepad`, or a test's stand-in for one). */
export interface PadReading {
  mapping: string;
  axes: readonly number[];
  buttons: readonly { pressed: boolean; value: number }[];
}

/** An axis within -1..1, rounded to 3 decimals (a pad's noise below that is not a change). */
const axisValue = (value: number | undefined) =>
  value === undefined || !Number.isFinite(value) ? 0 : Math.round(Math.max(-1, Math.min(1, value)) * 1000) / 1000;

/**
 * The controller as a pad makes it. "standard" mapping: axes 0..3 are left X, left Y, right X, right Y;
 * buttons 0 A, 1 B, 2 X, 3 Y, 4 LB, 5 RB, 6 LT and 7 RT (analog, their value the trigger axis),
 * 8 Back, 9 Start, 10 and 11 the stick clicks, 12..15 the D-pad up, down, left, right. Another
 * mapping is read the same way (most pads the browser does not know still put the sticks first).
 */
export function gamepadState(pad: PadReading): XboxState {
  const button = (index: number) => pad.buttons[index]?.pressed === true;
  const trigger = (index: number) => Math.max(0, axisValue(pad.buttons[index]?.value ?? (button(index) ? 1 : 0)));
  return {
    axes: [axisValue(pad.axes[0]), axisValue(pad.axes[1]), trigger(6), trigger(7), axisValue(pad.axes[2]), axisValue(pad.axes[3])],
    buttons: [0, 1, 2, 3, 4, 5, 8, 9, 10, 11].map(button),
    povs: [povAngle(button(12), button(15), button(13), button(14))],
  };
}

/** Keyboard and pad together: axes added (within -1..1), buttons either, the first POV pressed. */
export function combine(a: XboxState, b: XboxState): XboxState {
  return {
    axes: a.axes.map((value, index) => Math.max(-1, Math.min(1, value + (b.axes[index] ?? 0)))),
    buttons: a.buttons.map((pressed, index) => pressed || b.buttons[index] === true),
    povs: a.povs.map((angle, index) => (angle !== -1 ? angle : (b.povs[index] ?? -1))),
  };
}

/** The same values. */
export function sameInput(a: XboxState, b: XboxState): boolean {
  const same = <T>(x: readonly T[], y: readonly T[]) => x.length === y.length && x.every((value, index) => value === y[index]);
  return same(a.axes, b.axes) && same(a.buttons, b.buttons) && same(a.povs, b.povs);
}

/** Nothing pressed, sticks centred. */
export const isNeutral = (state: XboxState): boolean => sameInput(state, NEUTRAL);
