/**
 * The values in a NetworkTables 4 binary frame, read as hostile input (a simulator runs student
 * code). A frame is MessagePack messages one after another, each `[topic id, time, type, value]`;
 * the value a scalar or an array of scalars. A general MessagePack decoder builds whatever a header
 * announces (an array header of 16,383 costs 128 KiB before a single item arrives, and nested ones
 * add up to gigabytes from a few kilobytes), so this walks the bytes itself and builds only what is
 * kept: a number, a boolean, a string of at most `maxText` characters, or an array of at most
 * `maxItems` numbers. Anything else (a map, an extension, a nested array, raw bytes, a longer
 * string or array) is skipped by its length without being built, so a frame costs time in
 * proportion to its bytes and memory in proportion to what is kept. A frame that is cut short or
 * holds what MessagePack does not define ends there; what came before it stands.
 */

/** One value message: its topic id and its value (undefined: a value that is not kept). */
export interface Nt4Value {
  id: number;
  value: number | boolean | string | number[] | undefined;
}

/** The frame is cut short or holds a byte MessagePack does not define. */
class Malformed extends Error {}

/** A cursor over one frame. */
class Cursor {
  private readonly bytes: Buffer;
  at = 0;
  constructor(bytes: Buffer) {
    this.bytes = bytes;
  }

  get done(): boolean {
    return this.at >= this.bytes.length;
  }

  /** `n` bytes from here (throws when the frame holds fewer). */
  take(n: number): number {
    if (n < 0 || this.at + n > this.bytes.length) throw new Malformed();
    const start = this.at;
    this.at += n;
    return start;
  }

  byte(): number {
    return this.bytes[this.take(1)]!;
  }

  /** An unsigned big-endian integer of 1, 2 or 4 bytes (a length). */
  length(size: 1 | 2 | 4): number {
    const at = this.take(size);
    return size === 1 ? this.bytes.readUInt8(at) : size === 2 ? this.bytes.readUInt16BE(at) : this.bytes.readUInt32BE(at);
  }

  /** A number of the format `head` introduces (already read), or undefined when `head` is not a number's. */
  number(head: number): number | undefined {
    if (head <= 0x7f) return head;
    if (head >= 0xe0) return head - 0x100;
    const b = this.bytes;
    switch (head) {
      case 0xca:
        return b.readFloatBE(this.take(4));
      case 0xcb:
        return b.readDoubleBE(this.take(8));
      case 0xcc:
        return b.readUInt8(this.take(1));
      case 0xcd:
        return b.readUInt16BE(this.take(2));
      case 0xce:
        return b.readUInt32BE(this.take(4));
      case 0xcf:
        return Number(b.readBigUInt64BE(this.take(8)));
      case 0xd0:
        return b.readInt8(this.take(1));
      case 0xd1:
        return b.readInt16BE(this.take(2));
      case 0xd2:
        return b.readInt32BE(this.take(4));
      case 0xd3:
        return Number(b.readBigInt64BE(this.take(8)));
      default:
        return undefined;
    }
  }

  /** A string's length when `head` introduces one (its length bytes read), else undefined. */
  stringLength(head: number): number | undefined {
    if (head >= 0xa0 && head <= 0xbf) return head & 0x1f;
    if (head === 0xd9) return this.length(1);
    if (head === 0xda) return this.length(2);
    if (head === 0xdb) return this.length(4);
    return undefined;
  }

  /** An array's length when `head` introduces one (its length bytes read), else undefined. */
  arrayLength(head: number): number | undefined {
    if (head >= 0x90 && head <= 0x9f) return head & 0x0f;
    if (head === 0xdc) return this.length(2);
    if (head === 0xdd) return this.length(4);
    return undefined;
  }

  text(length: number): string {
    const at = this.take(length);
    return this.bytes.toString('utf8', at, at + length);
  }

  /**
   * Skips the rest of a value whose first byte `head` was read, and everything inside it, without
   * building any of it: a count of values still to skip, not a stack, so nesting costs nothing.
   */
  skip(head: number): void {
    let pending = 0;
    for (let next = head; ; next = this.byte()) {
      const items = this.arrayLength(next);
      if (items !== undefined) pending += items;
      else if ((next >= 0x80 && next <= 0x8f) || next === 0xde || next === 0xdf)
        pending += 2 * (next <= 0x8f ? next & 0x0f : this.length(next === 0xde ? 2 : 4));
      else this.skipScalar(next);
      if (pending === 0) return;
      pending -= 1;
    }
  }

  private skipScalar(head: number): void {
    if (head <= 0x7f || head >= 0xe0 || head === 0xc0 || head === 0xc2 || head === 0xc3) return;
    if (this.number(head) !== undefined) return;
    const text = this.stringLength(head);
    if (text !== undefined) return void this.take(text);
    switch (head) {
      case 0xc4: // bin 8, 16, 32
        return void this.take(this.length(1));
      case 0xc5:
        return void this.take(this.length(2));
      case 0xc6:
        return void this.take(this.length(4));
      case 0xc7: // ext 8, 16, 32: a length, a type, the data
        return void this.take(this.length(1) + 1);
      case 0xc8:
        return void this.take(this.length(2) + 1);
      case 0xc9:
        return void this.take(this.length(4) + 1);
      case 0xd4: // fixext 1, 2, 4, 8, 16: a type, the data
        return void this.take(2);
      case 0xd5:
        return void this.take(3);
      case 0xd6:
        return void this.take(5);
      case 0xd7:
        return void this.take(9);
      case 0xd8:
        return void this.take(17);
      default:
        throw new Malformed();
    }
  }
}

/** The value messages of a frame, as far as it holds well-formed ones (see the file comment). */
export function nt4Values(frame: Buffer, limits: { maxText: number; maxItems: number }): Nt4Value[] {
  const found: Nt4Value[] = [];
  const cursor = new Cursor(frame);
  try {
    while (!cursor.done) {
      const head = cursor.byte();
      const fields = cursor.arrayLength(head);
      if (fields === undefined) {
        cursor.skip(head);
        continue;
      }
      if (fields !== 4) {
        // Not a value message: skipped whole (its fields are the array's items).
        for (let i = 0; i < fields; i++) cursor.skip(cursor.byte());
        continue;
      }
      const idHead = cursor.byte();
      const id = cursor.number(idHead);
      if (id === undefined) cursor.skip(idHead);
      cursor.skip(cursor.byte()); // the time
      cursor.skip(cursor.byte()); // the type
      const value = readValue(cursor, limits);
      if (id !== undefined && Number.isInteger(id)) found.push({ id, value });
    }
  } catch (error) {
    if (!(error instanceof Malformed)) throw error;
  }
  return found;
}

/** A value as kept, or undefined (skipped whole) for one that is not. */
function readValue(cursor: Cursor, limits: { maxText: number; maxItems: number }): Nt4Value['value'] {
  const head = cursor.byte();
  if (head === 0xc2 || head === 0xc3) return head === 0xc3;
  const number = cursor.number(head);
  if (number !== undefined) return number;
  const textLength = cursor.stringLength(head);
  if (textLength !== undefined) {
    if (textLength <= limits.maxText * 4) {
      const text = cursor.text(textLength);
      return text.length <= limits.maxText ? text : undefined;
    }
    cursor.take(textLength);
    return undefined;
  }
  const items = cursor.arrayLength(head);
  if (items === undefined) {
    cursor.skip(head);
    return undefined;
  }
  // A number array: built only when it is short enough and each item is a number; otherwise the rest is skipped.
  let kept: number[] | undefined = items <= limits.maxItems ? [] : undefined;
  for (let i = 0; i < items; i++) {
    const item = cursor.byte();
    const each = kept ? cursor.number(item) : undefined;
    if (kept && each !== undefined) kept.push(each);
    else {
      kept = undefined;
      cursor.skip(item);
    }
  }
  return kept;
}
