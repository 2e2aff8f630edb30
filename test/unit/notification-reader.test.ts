/**
 * How the embedded database's owner finds its guests' NOTIFYs in the backend messages its socket
 * sends them (src/db/embedded.ts): only NotificationResponse ('A') messages are passed on, wherever
 * the chunks split the stream.
 */
import { NotificationReader } from '../../src/db/embedded.ts';

/** A backend message: type byte, int32 length (itself included), body. */
function message(type: string, body: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.write(type, 0, 'latin1');
  header.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([header, body]);
}

const notification = (channel: string, payload: string) => {
  const pid = Buffer.alloc(4);
  pid.writeInt32BE(42);
  return message('A', Buffer.concat([pid, Buffer.from(`${channel}\0${payload}\0`)]));
};

// What a COMMIT that delivers two notifications sends back, among ordinary messages (one large row too).
const stream = Buffer.concat([
  message('D', Buffer.alloc(300, 7)),
  message('C', Buffer.from('COMMIT\0')),
  notification('cp_workspaces', '7d0c4a57-4b8e-4a44-9a0e-9f0e1f1d2c3b'),
  notification('cp_users', 'ü-1'),
  message('Z', Buffer.from('I')),
]);
const expected = [
  ['cp_workspaces', '7d0c4a57-4b8e-4a44-9a0e-9f0e1f1d2c3b'],
  ['cp_users', 'ü-1'],
];

describe('NotificationReader', () => {
  it('passes on the notifications of one whole chunk, and nothing else', () => {
    const seen: string[][] = [];
    new NotificationReader((channel, payload) => seen.push([channel, payload])).push(stream);
    expect(seen).toEqual(expected);
  });

  it.each([1, 2, 3, 5, 7, 64, 301])('finds them whatever the chunks (%i bytes each)', (size) => {
    const seen: string[][] = [];
    const reader = new NotificationReader((channel, payload) => seen.push([channel, payload]));
    for (let at = 0; at < stream.length; at += size) reader.push(stream.subarray(at, at + size));
    expect(seen).toEqual(expected);
  });
});
