/**
 * The Driver Station's rules and messages (images/workspace/extension/src/ds-state.ts): as on a
 * real field, a mode switch while enabled disables first, the emergency stop latches for the run,
 * anything but a connection disables, and nothing enables but Enable; the HALSim messages that
 * carry it (WPILib's hardware_ws_api.md: DriverStation and Joystick, `>` keys, `>new_data`).
 */
import { NEUTRAL } from '../../images/workspace/extension/src/ds-input.ts';
import {
  disable,
  driverStationMessage,
  elapsedSeconds,
  enable,
  enableRefusal,
  estop,
  estopped,
  INITIAL,
  joystickMessage,
  robotDsState,
  setLink,
  setMode,
  setRun,
  type DsState,
} from '../../images/workspace/extension/src/ds-state.ts';

/** A Driver Station connected to run `run-1`'s robot, disabled, in teleop. */
const connected = (): DsState => setLink(setRun(INITIAL, 'run-1', 0), 'connected', 0);

describe('the Driver Station rules', () => {
  it('opens disabled, and enables only when connected to a running robot', () => {
    expect(INITIAL.enabled).toBe(false);
    expect(enableRefusal(INITIAL)).toBe('Press Run to start your robot.');
    expect(enable(INITIAL, 1).enabled).toBe(false);
    const running = setRun(INITIAL, 'run-1', 0);
    expect(enableRefusal(running)).toBe('Not connected to the robot yet.');
    expect(enable(running, 1).enabled).toBe(false);
    expect(enable(connected(), 1)).toMatchObject({ enabled: true, enabledAt: 1 });
  });

  it('disables first when the mode changes while enabled, and keeps a disabled robot disabled', () => {
    const teleop = enable(connected(), 1000);
    const auto = setMode(teleop, 'autonomous', 2000);
    expect(auto).toMatchObject({ enabled: false, mode: 'autonomous', disabledAt: 2000 });
    expect(setMode(auto, 'test', 3000)).toMatchObject({ enabled: false, mode: 'test' });
    // The same mode again changes nothing.
    expect(setMode(teleop, 'teleop', 4000)).toBe(teleop);
  });

  it('latches the emergency stop until another run runs', () => {
    const stopped = estop(enable(connected(), 1), 2);
    expect(stopped.enabled).toBe(false);
    expect(estopped(stopped)).toBe(true);
    expect(enableRefusal(stopped)).toBe('Emergency stopped: stop and run your robot code again to drive.');
    expect(enable(stopped, 3).enabled).toBe(false);
    // A reconnect to the same run keeps it.
    const again = setLink(setLink(stopped, 'lost', 4), 'connected', 5);
    expect(enable(again, 6).enabled).toBe(false);
    // The run ends: still refused; a new run: it may drive again.
    expect(enable(setLink(setRun(again, null, 7), 'connected', 7), 8).enabled).toBe(false);
    const next = setLink(setRun(again, 'run-2', 9), 'connected', 9);
    expect(estopped(next)).toBe(false);
    expect(enable(next, 10).enabled).toBe(true);
  });

  it('disables at once when the connection is lost or taken over, and does not enable when it comes back', () => {
    const enabled = enable(connected(), 1);
    for (const link of ['lost', 'connecting', 'taken-over', 'no-run'] as const) {
      const gone = setLink(enabled, link, 2);
      expect(gone).toMatchObject({ enabled: false, link });
      expect(setLink(gone, 'connected', 3).enabled).toBe(false);
    }
    expect(enableRefusal(setLink(enabled, 'taken-over', 2))).toBe('Another tab is driving: press "Drive from here" first.');
  });

  it('disables when the run changes', () => {
    expect(setRun(enable(connected(), 1), 'run-2', 2).enabled).toBe(false);
    expect(setRun(enable(connected(), 1), null, 2).enabled).toBe(false);
  });

  it('counts the time enabled, and keeps it after a disable until the next enable', () => {
    const enabled = enable(connected(), 10_000);
    expect(elapsedSeconds(INITIAL, 50_000)).toBe(0);
    expect(elapsedSeconds(enabled, 12_500)).toBe(2.5);
    const disabled = disable(enabled, 14_000);
    expect(elapsedSeconds(disabled, 99_000)).toBe(4);
    expect(elapsedSeconds(enable(disabled, 20_000), 21_000)).toBe(1);
  });
});

describe('the HALSim messages', () => {
  it('tells the robot the whole Driver Station state with >new_data, as WPILib names it', () => {
    expect(driverStationMessage(setMode(enable(connected(), 1), 'autonomous', 2))).toEqual({
      type: 'DriverStation',
      device: '',
      data: { '>enabled': false, '>autonomous': true, '>test': false, '>estop': false, '>ds': true, '>new_data': true },
    });
    expect(driverStationMessage(enable(setMode(connected(), 'test', 1), 2)).data).toMatchObject({ '>enabled': true, '>autonomous': false, '>test': true });
    expect(driverStationMessage(estop(enable(connected(), 1), 2)).data).toMatchObject({ '>enabled': false, '>estop': true });
  });

  it('never says enabled while not connected', () => {
    const enabledThenLost = { ...enable(connected(), 1), link: 'lost' as const };
    expect(driverStationMessage(enabledThenLost).data['>enabled']).toBe(false);
  });

  it("sends joystick 0's axes, buttons and POV", () => {
    const input = { axes: [0, -1, 0, 0, 0.5, 0], buttons: [true, ...Array<boolean>(9).fill(false)], povs: [90] };
    expect(joystickMessage(0, input)).toEqual({ type: 'Joystick', device: '0', data: { '>axes': input.axes, '>buttons': input.buttons, '>povs': [90] } });
    expect(joystickMessage(0, NEUTRAL).data['>povs']).toEqual([-1]);
  });

  it("reads the robot's Driver Station state whatever the keys' prefix, and ignores what it does not understand", () => {
    expect(robotDsState('{"type":"DriverStation","device":"","data":{">enabled":true,">autonomous":false,"<>test":false,">match_time":-1}}')).toEqual({
      enabled: true,
      autonomous: false,
      test: false,
    });
    expect(robotDsState('{"type":"PWM","device":"0","data":{"<speed":0.5}}')).toBeNull();
    expect(robotDsState('not json')).toBeNull();
    expect(robotDsState('[1,2]')).toBeNull();
    expect(robotDsState('{"type":"DriverStation","device":"","data":{">enabled":"yes"}}')).toEqual({});
  });
});
