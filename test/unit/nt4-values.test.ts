/**
 * NetworkTables 4 binary frames read as hostile input (api/proxy/nt4-values.ts): value messages as
 * WPILib's servers and @msgpack/msgpack write them are read back; what is not kept (maps,
 * extensions, raw bytes, nested arrays, long strings and arrays) is skipped and the next message
 * read; a frame of nested array headers that a general decoder would turn into gigabytes costs
 * nothing; a frame cut short keeps what came before.
 */
import { encode } from '@msgpack/msgpack';
import { nt4Values } from '../../api/proxy/nt4-values.ts';

const limits = { maxText: 16, maxItems: 6 };
const frame = (...messages: unknown[]) => Buffer.concat(messages.map((message) => Buffer.from(encode(message))));
const read = (bytes: Buffer) => nt4Values(bytes, limits);

describe('the values of a NetworkTables 4 frame', () => {
  it('reads value messages: numbers of every width, floats, booleans, short strings and number arrays', () => {
    const doubles = Buffer.alloc(1 + 8);
    doubles[0] = 0xcb;
    doubles.writeDoubleBE(2.5, 1);
    const values = read(
      Buffer.concat([
        frame([1, 10, 1, 1.5], [2, 10, 2, -3], [3, 10, 2, 70_000], [4, 10, 2, -2_000_000_000], [5, 10, 2, 2 ** 40], [6, 10, 0, true], [7, 10, 4, 'Field2d']),
        frame([8, 10, 17, [1, 2.25, -3]], [9, 10, 2, 255], [10, 10, 2, -100]),
        Buffer.from([0x94, 11, 10, 1]),
        doubles,
      ]),
    );
    expect(values).toEqual([
      { id: 1, value: 1.5 },
      { id: 2, value: -3 },
      { id: 3, value: 70_000 },
      { id: 4, value: -2_000_000_000 },
      { id: 5, value: 2 ** 40 },
      { id: 6, value: true },
      { id: 7, value: 'Field2d' },
      { id: 8, value: [1, 2.25, -3] },
      { id: 9, value: 255 },
      { id: 10, value: -100 },
      { id: 11, value: 2.5 },
    ]);
  });

  it('skips what is not kept, each whole, and reads on: a map, raw bytes, an extension, a nested or long array, a long string', () => {
    const values = read(
      frame(
        [1, 0, 5, { x: [1, 2, { y: 3 }] }],
        [2, 0, 5, new Uint8Array([1, 2, 3])],
        [3, 0, 17, [1, [2, 3], 4]],
        [4, 0, 17, [1, 2, 3, 4, 5, 6, 7]],
        [5, 0, 4, 'x'.repeat(17)],
        [6, 0, 20, ['a', 'b']],
        ['not a message'],
        7,
        [8, 0, 1, 8.5],
      ),
    );
    expect(values).toEqual([
      { id: 1, value: undefined },
      { id: 2, value: undefined },
      { id: 3, value: undefined },
      { id: 4, value: undefined },
      { id: 5, value: undefined },
      { id: 6, value: undefined },
      { id: 8, value: 8.5 },
    ]);
  });

  it('builds nothing of nested array headers (a general decoder would ask for gigabytes), and reads nothing past where a frame is cut', () => {
    // 30,000 array16 headers of 16,383 items each, nested: about 90 KB.
    const nested = Buffer.alloc(30_000 * 3);
    for (let at = 0; at < nested.length; at += 3) nested.set([0xdc, 0x3f, 0xff], at);
    const before = process.memoryUsage().heapUsed;
    expect(read(Buffer.concat([frame([1, 0, 1, 1]), Buffer.from([0x94, 2, 0, 17]), nested]))).toEqual([{ id: 1, value: 1 }]);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(64 * 1024 * 1024);
    // Cut in the middle of the second message, and a byte MessagePack does not define.
    const whole = frame([1, 0, 1, 1], [2, 0, 17, [1, 2, 3]]);
    expect(read(whole.subarray(0, whole.length - 2))).toEqual([{ id: 1, value: 1 }]);
    expect(read(Buffer.concat([frame([1, 0, 1, 1]), Buffer.from([0xc1]), frame([2, 0, 1, 2])]))).toEqual([{ id: 1, value: 1 }]);
  });
});
