/**
 * A run's output as the Robot run terminal is given it (run-terminal.ts). The output is the
 * student's code's own text: its control characters are taken out (tab, newline and carriage
 * return stay), so that it shows as text and never drives the terminal (colours, titles, the
 * clipboard, links, the cursor); and each line ends at the start of the next row, as a terminal
 * needs (`\r\n`).
 */

/** C0 but tab, line feed and carriage return; DEL; C1. */
// oxlint-disable-next-line no-control-regex -- these are what it removes
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;

export function terminalText(text: string): string {
  return text.replace(CONTROL, '').replace(/\r?\n/g, '\r\n');
}
