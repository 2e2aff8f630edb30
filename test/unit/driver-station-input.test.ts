/**
 * The Driver Station's controller (images/workspace/extension/src/ds-input.ts): the keyboard and a
 * gamepad as an Xbox controller on joystick 0, in WPILib's XboxController layout; the student's keys
 * (the `classroom.driverStation.keys` setting, which package.json declares control by control).
 */
import { readFileSync } from 'node:fs';
import {
  combine,
  CONTROLS,
  DEFAULT_KEYS,
  gamepadState,
  isNeutral,
  keyboardState,
  keyMap,
  NEUTRAL,
  povAngle,
  type PadReading,
} from '../../images/workspace/extension/src/ds-input.ts';

const held = (...codes: string[]) => new Set(codes);

describe('the keyboard as an Xbox controller', () => {
  it('drives the left stick with WASD: W forward is axis 1 negative, as on a real pad; D right is axis 0 positive', () => {
    expect(keyboardState(held('KeyW'), DEFAULT_KEYS).axes).toEqual([0, -1, 0, 0, 0, 0]);
    expect(keyboardState(held('KeyS'), DEFAULT_KEYS).axes).toEqual([0, 1, 0, 0, 0, 0]);
    expect(keyboardState(held('KeyA', 'KeyW'), DEFAULT_KEYS).axes).toEqual([-1, -1, 0, 0, 0, 0]);
    expect(keyboardState(held('KeyD'), DEFAULT_KEYS).axes).toEqual([1, 0, 0, 0, 0, 0]);
  });

  it('drives the right stick with the arrows (axes 4 and 5) and the triggers with Z and C (axes 2 and 3, 0..1)', () => {
    expect(keyboardState(held('ArrowUp', 'ArrowRight'), DEFAULT_KEYS).axes).toEqual([0, 0, 0, 0, 1, -1]);
    expect(keyboardState(held('KeyZ', 'KeyC'), DEFAULT_KEYS).axes).toEqual([0, 0, 1, 1, 0, 0]);
  });

  it('cancels opposite keys', () => {
    expect(isNeutral(keyboardState(held('KeyW', 'KeyS', 'ArrowLeft', 'ArrowRight'), DEFAULT_KEYS))).toBe(true);
  });

  it("presses WPILib's buttons in order: 1 A, 2 B, 3 X, 4 Y, 5 LB, 6 RB, 7 Back, 8 Start, 9 LS, 10 RS", () => {
    const keys = ['KeyK', 'KeyL', 'KeyJ', 'KeyI', 'KeyQ', 'KeyE', 'BracketLeft', 'BracketRight', 'KeyR', 'KeyU'];
    keys.forEach((code, index) => {
      const buttons = keyboardState(held(code), DEFAULT_KEYS).buttons;
      expect(buttons).toHaveLength(10);
      expect(buttons.map((pressed, at) => (pressed ? at : -1)).filter((at) => at >= 0)).toEqual([index]);
    });
  });

  it('makes the POV from the keypad: degrees clockwise from up, diagonals, -1 when none', () => {
    expect(keyboardState(held(), DEFAULT_KEYS).povs).toEqual([-1]);
    expect(keyboardState(held('Numpad8'), DEFAULT_KEYS).povs).toEqual([0]);
    expect(keyboardState(held('Numpad6'), DEFAULT_KEYS).povs).toEqual([90]);
    expect(keyboardState(held('Numpad2', 'Numpad4'), DEFAULT_KEYS).povs).toEqual([225]);
    expect(povAngle(true, false, false, true)).toBe(315);
    expect(povAngle(true, false, true, false)).toBe(-1);
  });

  it('ignores keys that are no control, and is neutral with nothing held', () => {
    expect(keyboardState(held('KeyP', 'Space'), DEFAULT_KEYS)).toEqual(NEUTRAL);
  });
});

describe("the student's keys", () => {
  it('applies a change and keeps the defaults of the rest', () => {
    const { keys, problems } = keyMap({ leftStickUp: 'KeyT', a: 'Digit1' });
    expect(problems).toEqual([]);
    expect(keys.leftStickUp).toBe('KeyT');
    expect(keys.a).toBe('Digit1');
    expect(keys.leftStickDown).toBe('KeyS');
    expect(keyboardState(held('KeyT'), keys).axes[1]).toBe(-1);
    expect(keyboardState(held('KeyW'), keys).axes[1]).toBe(0);
  });

  it('gives a key the student moved to another control to that control only: the control that had it by default has none', () => {
    const { keys, problems } = keyMap({ leftStickUp: 'KeyS' });
    expect(keys.leftStickUp).toBe('KeyS');
    expect(keys.leftStickDown).toBe('');
    expect(problems).toEqual(["KeyS is leftStickUp's key: leftStickDown has no key."]);
    expect(keyboardState(held('KeyS'), keys).axes[1]).toBe(-1);
  });

  it("refuses, and says why: an unknown control, a value that is no key code, the Driver Station's own keys", () => {
    const { keys, problems } = keyMap({ jump: 'KeyJ', a: 42, b: 'space bar', x: 'Space', y: 'Enter' });
    expect(keys).toEqual(DEFAULT_KEYS);
    expect(problems).toHaveLength(5);
    expect(problems[0]).toMatch(/^"jump" is not a control/);
    expect(problems[1]).toBe('a: 42 is not a key code (such as "KeyW" or "ArrowUp").');
    expect(problems[3]).toBe("x: Space is the Driver Station's own key.");
    expect(keyMap('KeyW').problems).toEqual(['The key setting must be an object of control: key code.']);
    expect(keyMap(undefined)).toEqual({ keys: DEFAULT_KEYS, problems: [] });
  });

  it("is declared in the extension's package.json control by control, with each default", () => {
    const manifest = JSON.parse(readFileSync(new URL('../../images/workspace/extension/package.json', import.meta.url), 'utf8')) as {
      contributes: { configuration: { properties: Record<string, { properties: Record<string, { markdownDescription: string }> }> } };
    };
    const declared = manifest.contributes.configuration.properties['classroom.driverStation.keys']!.properties;
    expect(Object.keys(declared)).toEqual([...CONTROLS]);
    for (const control of CONTROLS) expect(declared[control]!.markdownDescription).toBe(`Default: \`${DEFAULT_KEYS[control]}\`.`);
  });
});

/** A pad as the Gamepad API gives it ("standard" mapping), nothing pressed. */
function pad(axes: number[] = [0, 0, 0, 0], pressed: Record<number, number> = {}): PadReading {
  return {
    mapping: 'standard',
    axes,
    buttons: Array.from({ length: 17 }, (_, index) => ({ pressed: (pressed[index] ?? 0) > 0.5, value: pressed[index] ?? 0 })),
  };
}

describe('a gamepad (the Gamepad API, standard mapping) as an Xbox controller', () => {
  it("puts the sticks where WPILib's XboxController reads them: left 0 and 1, right 4 and 5; the analog triggers on 2 and 3", () => {
    expect(gamepadState(pad([0.25, -0.5, 0.75, 1], { 6: 0.3, 7: 1 })).axes).toEqual([0.25, -0.5, 0.3, 1, 0.75, 1]);
  });

  it('maps the buttons (A B X Y, bumpers, Back, Start, stick presses) and the D-pad to the POV', () => {
    const state = gamepadState(pad(undefined, { 0: 1, 5: 1, 8: 1, 11: 1, 12: 1, 15: 1 }));
    expect(state.buttons).toEqual([true, false, false, false, false, true, true, false, false, true]);
    expect(state.povs).toEqual([45]);
  });

  it("rounds a pad's noise away and keeps axes within -1..1", () => {
    expect(gamepadState(pad([0.00004, -1.2, Number.NaN, 0.12345])).axes).toEqual([0, -1, 0, 0, 0, 0.123]);
  });

  it('adds the keyboard and a pad together, within -1..1', () => {
    const both = combine(keyboardState(held('KeyW', 'KeyK'), DEFAULT_KEYS), gamepadState(pad([0.5, -0.5, 0, 0], { 1: 1, 13: 1 })));
    expect(both.axes).toEqual([0.5, -1, 0, 0, 0, 0]);
    expect(both.buttons.slice(0, 2)).toEqual([true, true]);
    expect(both.povs).toEqual([180]);
  });
});
