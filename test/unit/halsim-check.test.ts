/**
 * Issue 40: what the HALSim relay lets a browser send a robot (api/proxy/halsim.ts, messageCheck):
 * DriverStation and Joystick messages with only the keys a driver sets, each of its JSON type and
 * range, sent on as checked; anything else refused with the reason the browser's close frame carries.
 */
import { messageCheck, type MessageCheck } from '../../api/proxy/halsim.ts';

let check: MessageCheck;
beforeAll(async () => {
  check = await messageCheck();
});

const text = (message: unknown) => check(Buffer.from(typeof message === 'string' ? message : JSON.stringify(message)), false);

describe('a driver may send', () => {
  it('every key of a DriverStation message, and of a Joystick message of ports 0 to 5, each at its bounds', () => {
    const station = {
      type: 'DriverStation',
      device: '',
      data: {
        '>enabled': true,
        '>autonomous': false,
        '>test': false,
        '>estop': false,
        '>fms': false,
        '>ds': true,
        '>station': 'blue3',
        '>match_time': -1,
        '>game_data': 'x'.repeat(64),
        '>new_data': true,
      },
    };
    expect(text(station)).toEqual({ message: JSON.stringify(station) });
    for (const device of ['0', '5']) {
      const joystick = {
        type: 'Joystick',
        device,
        data: {
          '>axes': [-1, ...Array<number>(10).fill(0.25), 1],
          '>buttons': Array<boolean>(32).fill(true),
          '>povs': [-1, 0, 359, ...Array<number>(9).fill(90)],
        },
      };
      expect(text(joystick)).toEqual({ message: JSON.stringify(joystick) });
    }
    expect(text({ type: 'Joystick', device: '1', data: {} })).toEqual({ message: '{"type":"Joystick","device":"1","data":{}}' });
  });

  it('as checked: what the robot gets is serialised again, so that no parser of its reads anything else', () => {
    expect(text('{ "type":"DriverStation", "device":"", "data":{">enabled":true, ">enabled":false} }')).toEqual({
      message: '{"type":"DriverStation","device":"","data":{">enabled":false}}',
    });
  });
});

describe('a driver may not send', () => {
  const refused: [string, unknown, string][] = [
    ['a binary frame', null, 'HALSim messages are JSON text; a binary frame was sent.'],
    ['no JSON', '{"type":', 'A HALSim message must be JSON; this was not.'],
    ['an array', '[1]', 'the message must be object.'],
    ['another type', { type: 'PWM', device: '1', data: { '<speed': 1 } }, 'type must be DriverStation or Joystick.'],
    ['no type', { device: '', data: {} }, 'type must be DriverStation or Joystick.'],
    ['no data', { type: 'DriverStation', device: '' }, "the message must have required property 'data'."],
    ['more than type, device and data', { type: 'DriverStation', device: '', data: {}, extra: 1 }, 'the message may not hold "extra".'],
    ['a key out of the robot', { type: 'Joystick', device: '0', data: { '<rumble_left': 1 } }, 'data may not hold "<rumble_left".'],
    ['a key both ways', { type: 'DriverStation', device: '', data: { '<>enabled': true } }, 'data may not hold "<>enabled".'],
    ['a prototype key', '{"type":"DriverStation","device":"","data":{"__proto__":{"x":1}}}', 'data may not hold "__proto__".'],
    ['a DriverStation of a device', { type: 'DriverStation', device: '0', data: {} }, 'device must be equal to constant.'],
    ['a seventh joystick', { type: 'Joystick', device: '6', data: {} }, 'device must be equal to one of the allowed values.'],
    ['a string for a boolean', { type: 'DriverStation', device: '', data: { '>enabled': 'true' } }, 'data/>enabled must be boolean.'],
    ['an unknown station', { type: 'DriverStation', device: '', data: { '>station': 'green1' } }, 'data/>station must be equal to one of the allowed values.'],
    ['a match time past an hour', { type: 'DriverStation', device: '', data: { '>match_time': 3601 } }, 'data/>match_time must be <= 3600.'],
    [
      'game data past 64 characters',
      { type: 'DriverStation', device: '', data: { '>game_data': 'x'.repeat(65) } },
      'data/>game_data must NOT have more than 64 characters.',
    ],
    ['an axis past 1', { type: 'Joystick', device: '0', data: { '>axes': [0, 1.5] } }, 'data/>axes/1 must be <= 1.'],
    ['an axis too large for a number', '{"type":"Joystick","device":"0","data":{">axes":[1e400]}}', 'data/>axes/0 must be number.'],
    ['a thirteenth axis', { type: 'Joystick', device: '0', data: { '>axes': Array<number>(13).fill(0) } }, 'data/>axes must NOT have more than 12 items.'],
    [
      'a 33rd button',
      { type: 'Joystick', device: '0', data: { '>buttons': Array<boolean>(33).fill(false) } },
      'data/>buttons must NOT have more than 32 items.',
    ],
    ['a POV of 360 degrees', { type: 'Joystick', device: '0', data: { '>povs': [360] } }, 'data/>povs/0 must be <= 359.'],
    ['a POV between degrees', { type: 'Joystick', device: '0', data: { '>povs': [45.5] } }, 'data/>povs/0 must be integer.'],
  ];
  it.each(refused)('%s', (_what, message, reason) => {
    expect(message === null ? check(Buffer.from('{}'), true) : text(message)).toEqual({ refused: reason });
  });
});
