/**
 * The Driver Station's rules, as on a real field, and the HALSim messages that carry its state to the
 * robot (WPILib's "Robot Hardware Interface WebSockets API", allwpilib
 * simulation/halsim_ws_core/doc/hardware_ws_api.md; the classroom's contract: the issue 40 notes).
 * Pure: no timers, no sockets; halsim.ts and driver-station.ts apply them.
 *
 * - The robot starts disabled, and nothing but the student's Enable enables it: not opening the
 *   Driver Station, not a reload, not a reconnect.
 * - Switching mode while enabled disables first (the student enables again in the new mode).
 * - The emergency stop disables and latches until the run restarts (a new run: the robot program
 *   restarts too, which is what ends an estop in WPILib).
 * - The connection to the robot gone: disabled at once (the control plane and the robot disable it
 *   too; the Driver Station shows it).
 */
import type { XboxState } from './ds-input.ts';

/** A mode as WPILib has them (disabled is `enabled: false` in any of them). */
export type Mode = 'teleop' | 'autonomous' | 'test';

/**
 * The HALSim connection: `no-run` (no run is running: nothing to connect to), `connecting`,
 * `connected`, `taken-over` (another tab took over driving: close code 4001; it stays so until the
 * student asks to drive from here), `lost` (closed otherwise; retried).
 */
export type Link = 'no-run' | 'connecting' | 'connected' | 'taken-over' | 'lost';

/** What the Driver Station holds. */
export interface DsState {
  link: Link;
  /** The running run's id (null: none running). */
  runId: string | null;
  enabled: boolean;
  mode: Mode;
  /** The run whose robot was emergency stopped (null: none): latched until another run runs. */
  estoppedRun: string | null;
  /** When the robot was last enabled (ms since the epoch), for the elapsed time; null before the first enable. */
  enabledAt: number | null;
  /** When it was last disabled after that, null while enabled: the elapsed time stops there. */
  disabledAt: number | null;
}

/** A Driver Station that has just opened: disabled, teleop, not connected. */
export const INITIAL: DsState = { link: 'no-run', runId: null, enabled: false, mode: 'teleop', estoppedRun: null, enabledAt: null, disabledAt: null };

/** Whether the robot of this run was emergency stopped. */
export const estopped = (state: DsState): boolean => state.estoppedRun !== null && state.estoppedRun === state.runId;

/** Why Enable is refused now, in the student's words, or null when it may enable. */
export function enableRefusal(state: DsState): string | null {
  if (estopped(state)) return 'Emergency stopped: stop and run your robot code again to drive.';
  if (state.runId === null) return 'Press Run to start your robot.';
  if (state.link === 'taken-over') return 'Another tab is driving: press "Drive from here" first.';
  if (state.link !== 'connected') return 'Not connected to the robot yet.';
  return null;
}

/** Enable, when allowed (enableRefusal says why not); enabled already: unchanged. */
export function enable(state: DsState, now: number): DsState {
  if (state.enabled || enableRefusal(state) !== null) return state;
  return { ...state, enabled: true, enabledAt: now, disabledAt: null };
}

export function disable(state: DsState, now: number): DsState {
  return state.enabled ? { ...state, enabled: false, disabledAt: now } : state;
}

/** Another mode: disables first when enabled (as the FRC Driver Station does). */
export function setMode(state: DsState, mode: Mode, now: number): DsState {
  if (mode === state.mode) return state;
  return { ...disable(state, now), mode };
}

/** The emergency stop: disabled, and latched for this run. */
export function estop(state: DsState, now: number): DsState {
  return { ...disable(state, now), estoppedRun: state.runId ?? state.estoppedRun };
}

/** The connection changed: anything but connected disables at once. */
export function setLink(state: DsState, link: Link, now: number): DsState {
  const next = link === 'connected' ? state : disable(state, now);
  return next.link === link ? next : { ...next, link };
}

/** The running run (null: none). Another run is another robot program: disabled, and its estop is not latched. */
export function setRun(state: DsState, runId: string | null, now: number): DsState {
  if (runId === state.runId) return state;
  return { ...disable(state, now), runId };
}

/** The time enabled, in seconds: running while enabled, kept after a disable, 0 before the first enable. */
export function elapsedSeconds(state: DsState, now: number): number {
  if (state.enabledAt === null) return 0;
  return Math.max(0, ((state.disabledAt ?? now) - state.enabledAt) / 1000);
}

/** A HALSim message (one JSON object per text frame). */
export interface HalSimMessage {
  type: string;
  device: string;
  data: Record<string, unknown>;
}

/**
 * The whole Driver Station state as the robot is to see it, with `>new_data` (the one-shot that makes
 * it and the joysticks' latest values visible to robot code). Sent as the heartbeat and after every
 * joystick message: the full state every time, so that a message lost or a robot that restarted never
 * keeps an old one.
 */
export function driverStationMessage(state: DsState): HalSimMessage {
  const enabled = state.enabled && state.link === 'connected' && !estopped(state);
  return {
    type: 'DriverStation',
    device: '',
    data: {
      '>enabled': enabled,
      '>autonomous': state.mode === 'autonomous',
      '>test': state.mode === 'test',
      '>estop': estopped(state),
      '>ds': true,
      '>new_data': true,
    },
  };
}

/** Joystick `port`'s values (an Xbox controller's 6 axes, 10 buttons and its POV). */
export function joystickMessage(port: number, input: XboxState): HalSimMessage {
  return { type: 'Joystick', device: String(port), data: { '>axes': [...input.axes], '>buttons': [...input.buttons], '>povs': [...input.povs] } };
}

/** What the robot said about its Driver Station state (its `DriverStation` messages; null for anything else). */
export interface RobotDsState {
  enabled?: boolean;
  autonomous?: boolean;
  test?: boolean;
  estop?: boolean;
}

/**
 * Reads a message from the robot: its Driver Station state (the keys it sends back, whatever their
 * prefix), or null for other devices and anything malformed (the spec: ignore what is not understood).
 */
export function robotDsState(text: string): RobotDsState | null {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof message !== 'object' || message === null) return null;
  const { type, data } = message as { type?: unknown; data?: unknown };
  if (type !== 'DriverStation' || typeof data !== 'object' || data === null) return null;
  const state: RobotDsState = {};
  for (const [key, value] of Object.entries(data)) {
    const name = key.replace(/^(<>|<|>)/, '');
    if (typeof value === 'boolean' && (name === 'enabled' || name === 'autonomous' || name === 'test' || name === 'estop')) state[name] = value;
  }
  return state;
}
