/**
 * The one rule for text from outside on its way into PostgreSQL (src/db/text.ts): what text cannot
 * hold becomes U+FFFD, one code unit for one, so that offsets into it stay as they were.
 */
import { storableText } from '../../src/db/text.ts';

it('makes each NUL a U+FFFD, keeping the length', () => {
  const text = 'a\u0000b\u0000\u0000c';
  expect(storableText(text)).toBe('a\uFFFDb\uFFFD\uFFFDc');
  expect(storableText(text)).toHaveLength(text.length);
});

it('makes each lone surrogate (a high one cut from its pair, a low one alone) a U+FFFD, and keeps pairs', () => {
  const robot = '\u{1F916}';
  expect(storableText(`cut ${robot.slice(0, 1)}`)).toBe('cut \uFFFD');
  expect(storableText(`${robot.slice(1)} alone`)).toBe('\uFFFD alone');
  expect(storableText(`whole ${robot}`)).toBe(`whole ${robot}`);
});

it('keeps every other character, control characters and U+FFFD from decoding included, and changes nothing the second time', () => {
  const text = `tab\tcr\rlf\n\u001b[31m\u007f\u009b ✓ Größe 速度 ${Buffer.from([0x66, 0xff, 0xfe, 0x67]).toString('utf8')}`;
  expect(storableText(text)).toBe(text);
  const once = storableText('x\u0000\uD800y');
  expect(storableText(once)).toBe(once);
});
