/**
 * What the classroom extension writes to the Robot run terminal for a run's output
 * (images/workspace/extension/src/terminal-text.ts): lines end at the start of the next row, and
 * the student's control characters never reach the terminal.
 */
import { terminalText } from '../../images/workspace/extension/src/terminal-text.ts';

it('ends each line at the start of the next row, for Unix and Windows line ends alike', () => {
  expect(terminalText('> Task :compileJava\n1 error\r\n\nBUILD FAILED\n')).toBe('> Task :compileJava\r\n1 error\r\n\r\nBUILD FAILED\r\n');
});

it('keeps tabs, carriage returns and text in any script', () => {
  expect(terminalText('t=\t1.0 s\rspeed=0.5 ✓ Größe 速度')).toBe('t=\t1.0 s\rspeed=0.5 ✓ Größe 速度');
});

it("takes out escape sequences' ESC, bells, backspaces, DEL and C1 controls, so the output cannot drive the terminal", () => {
  const hostile = '\u001b]52;c;cGF3bmVk\u0007\u001b[2J\u001b]0;title\u0007red\u001b[31m\b\u007f\u009b2J\u0090end';
  const shown = terminalText(hostile);
  expect(shown).toBe(']52;c;cGF3bmVk[2J]0;titlered[31m2Jend');
});
