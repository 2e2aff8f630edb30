/**
 * The "Robot run" terminal: a run's output, written as it comes, in the Terminal panel (a
 * pseudoterminal: no shell, nothing typed into it goes anywhere).
 *
 * Not an output channel. In a web extension (this one) an output channel's text goes through the
 * browser's file logger, whose every flush reads the channel's whole file and writes it back: two
 * flushes that overlap (an append while the previous one is being written, which a build's burst
 * of lines makes on a busy machine) keep only the later one, and the lines of the earlier append
 * are lost from the panel (code-server 4.139: seen in CI, a compile error missing from the panel
 * while it was in Problems). A terminal's text is sent as messages, in order, and nothing is lost.
 *
 * The output is the student's code's own text: it is written as terminalText makes it, so it shows
 * as text and never drives the terminal.
 */
import * as vscode from 'vscode';
import { terminalText } from './terminal-text.ts';

export class RunTerminal implements vscode.Disposable {
  private readonly name: string;
  private readonly writes = new vscode.EventEmitter<string>();
  private terminal: vscode.Terminal | undefined;
  /** The terminal is open: what is written now reaches it (before, it would be dropped). */
  private open = false;
  /** What was written since the last clear, to fill a terminal that opens (again) later. */
  private shown = '';
  /** The student closed it: it opens again on show or on the next run (clear), not on every write. */
  private dismissed = false;
  private readonly subscriptions: vscode.Disposable[];

  constructor(name: string) {
    this.name = name;
    this.subscriptions = [
      this.writes,
      // Closed by the student: show or the next run opens a new one, with what the run printed so far.
      vscode.window.onDidCloseTerminal((closed) => {
        if (closed !== this.terminal) return;
        this.terminal = undefined;
        this.open = false;
        this.dismissed = true;
      }),
    ];
  }

  /** Appends `text` (the run's output, or a line of the extension's own). */
  append(text: string): void {
    const shown = terminalText(text);
    this.shown += shown;
    if (!this.dismissed) this.ensure();
    if (this.open) this.writes.fire(shown);
  }

  appendLine(text: string): void {
    this.append(`${text}\n`);
  }

  /** Empties it: what a new run writes starts on a blank terminal, its scrollback gone too. */
  clear(): void {
    this.shown = '';
    this.dismissed = false;
    // Clear the screen and the scrollback, cursor home.
    if (this.open) this.writes.fire('\u001b[2J\u001b[3J\u001b[H');
  }

  /** Shows it in the Terminal panel (opening one when the student closed it). */
  show(preserveFocus: boolean): void {
    this.dismissed = false;
    this.ensure().show(preserveFocus);
  }

  private ensure(): vscode.Terminal {
    if (this.terminal) return this.terminal;
    const pty: vscode.Pseudoterminal = {
      onDidWrite: this.writes.event,
      open: () => {
        this.open = true;
        if (this.shown) this.writes.fire(this.shown);
      },
      close: () => {
        this.open = false;
      },
    };
    // Transient: a reloaded window does not bring it back empty; the extension opens it again.
    this.terminal = vscode.window.createTerminal({ name: this.name, pty, isTransient: true, iconPath: new vscode.ThemeIcon('play') });
    return this.terminal;
  }

  dispose(): void {
    this.terminal?.dispose();
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}
