/**
 * Asking the coach for help from the editor: the status bar's "Ask for help" (and the command
 * palette's "Classroom: Ask your coach for help") asks for an optional message and raises a hand in
 * the class's help queue; while the request is open the same item says where the student is
 * ("Waiting for a coach (2nd in line)", then "Grace Hopper is coming") and offers to take the hand
 * back ("Classroom: Take back my help request" does it at once). The same request as the workspace
 * page's: one at a time per workspace, raised from either, shown in both.
 *
 * Its state is read (`GET .cp/api/help`) once at the start, when the window gets the focus back (a
 * hand raised on the workspace page in another tab), and every HELP_POLL_MS while a request is open
 * only: a place moves whenever anyone's request does, and there is nothing to read while none is open.
 *
 * The message is the student's plain text: it is sent as typed and shown only where VS Code shows
 * text as text (a tooltip string, an input's placeholder), never as markdown, links or icons; a
 * coach's name in the status bar has its `$(...)` escaped.
 */
import * as vscode from 'vscode';
import { ApiError, type Classroom, type HelpView } from './classroom.ts';

/** How often an open request is read (its place in the queue, a coach taking it). */
const HELP_POLL_MS = 5000;
/** The longest message the control plane keeps, in characters (src/store/help.ts HELP_MESSAGE_MAX). */
const MESSAGE_MAX = 500;
/** The quick pick's choice that withdraws the request. */
const TAKE_BACK = 'Take my hand back';

const ORDINAL_RULES = new Intl.PluralRules('en-US', { type: 'ordinal' });
const ORDINAL_SUFFIX: Record<string, string> = { one: 'st', two: 'nd', few: 'rd', other: 'th' };
/** 1st, 2nd, 3rd, 4th, 11th, 22nd... */
const ordinal = (n: number) => `${n}${ORDINAL_SUFFIX[ORDINAL_RULES.select(n)] ?? 'th'}`;

/** `text` as the status bar shows it: its `$(name)` shown as typed, not as an icon. */
const noIcons = (text: string) => text.replaceAll('$(', '\\$(');

const isOpen = (help: HelpView | null): help is HelpView => help?.state === 'waiting' || help?.state === 'taken';

/** Where an open request is, in the student's words: "Waiting for a coach (2nd in line)" or "Grace Hopper is coming". */
function whereText(help: HelpView): string {
  if (help.state === 'taken' && help.takenBy) return `${help.takenBy.name || help.takenBy.email} is coming`;
  return help.place === null ? 'Waiting for a coach' : `Waiting for a coach (${ordinal(help.place)} in line)`;
}

/**
 * The status bar's help item and the two commands (`classroom.askForHelp`,
 * `classroom.withdrawHelp`). Made before the extension awaits anything (the item is also
 * package.json's `statusBarItems`); `start` gives it the student API, registers the commands and
 * reads the state once.
 */
export class HelpHand implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private classroom: Classroom | undefined;
  /** The open request (waiting or taken), or null. */
  private help: HelpView | null = null;
  /** The next read while a request is open. */
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Counts the changes made here: a read begun before one answers with what was before it, and is dropped. */
  private changes = 0;

  constructor() {
    this.item = vscode.window.createStatusBarItem('classroom.help', vscode.StatusBarAlignment.Left, 997);
    this.item.name = 'Ask for help';
    this.item.command = 'classroom.askForHelp';
    this.render();
  }

  /** Starts with the student API: the commands, the first read, and a read when the window gets the focus back. */
  start(classroom: Classroom): vscode.Disposable[] {
    this.classroom = classroom;
    void this.refresh();
    return [
      vscode.commands.registerCommand('classroom.askForHelp', () => this.ask()),
      vscode.commands.registerCommand('classroom.withdrawHelp', () => this.takeBack()),
      vscode.window.onDidChangeWindowState((state) => state.focused && !isOpen(this.help) && void this.refresh()),
    ];
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.item.dispose();
  }

  private render(): void {
    const help = this.help;
    if (!isOpen(help)) {
      this.item.text = '$(question) Ask for help';
      this.item.tooltip = 'Ask your coach for help, with a message if you like';
    } else {
      this.item.text = `${help.state === 'taken' ? '$(person)' : '$(watch)'} ${noIcons(whereText(help))}`;
      // A plain string: VS Code shows it as text.
      this.item.tooltip = `You asked for help${help.message ? `: ${help.message}` : '.'}\nClick to take your hand back.`;
    }
    this.item.show();
  }

  /** Shows `help` (null or closed: none open), and reads it again in HELP_POLL_MS while it is open. */
  private show(help: HelpView | null): void {
    this.help = isOpen(help) ? help : null;
    this.render();
    clearTimeout(this.timer);
    this.timer = this.help ? setTimeout(() => void this.refresh(), HELP_POLL_MS) : undefined;
  }

  private async refresh(): Promise<void> {
    if (!this.classroom) return;
    const changes = this.changes;
    // Not read (a lost connection, a restarting control plane, signed out: extension.ts tells that): as it was, read again later.
    const help = await this.classroom.help().catch(() => this.help);
    if (changes !== this.changes) return;
    this.show(help);
  }

  /** The status bar's click and "Classroom: Ask your coach for help": asks for a message and raises a hand, or, while one is up, offers to take it back. */
  private async ask(): Promise<void> {
    if (!this.classroom) return;
    if (isOpen(this.help)) return this.offerTakeBack(this.help);
    const message = await vscode.window.showInputBox({
      title: 'Ask your coach for help',
      prompt: 'What are you stuck on? (optional) Enter asks; Escape cancels.',
      placeHolder: 'My robot does not drive',
      ignoreFocusOut: true,
      validateInput: (text) => (Array.from(text.trim()).length > MESSAGE_MAX ? `At most ${MESSAGE_MAX} characters.` : undefined),
    });
    if (message === undefined) return;
    this.changes++;
    try {
      this.show(await this.classroom.raiseHand(message.trim() || undefined));
    } catch (error) {
      // One open already (raised on the workspace page): said, and shown once read. Too many: the server says when to try again.
      if (error instanceof ApiError && error.code === 'help_request_open') void vscode.window.showWarningMessage(error.message);
      else void vscode.window.showErrorMessage(error instanceof Error ? error.message : String(error));
      await this.refresh();
    }
  }

  /** While a hand is up: where it is, what was written, and Take my hand back. */
  private async offerTakeBack(help: HelpView): Promise<void> {
    const choice = await vscode.window.showQuickPick(
      [
        { label: TAKE_BACK, detail: 'You no longer need help: your request leaves the queue.' },
        { label: 'Keep my hand up', detail: 'Keep waiting for your coach.' },
      ],
      // The placeholder is the input's own placeholder: the message is shown as text.
      { title: 'Your request for help', placeHolder: `${whereText(help)}.${help.message ? ` You wrote: ${help.message}` : ''}` },
    );
    if (choice?.label === TAKE_BACK) await this.takeBack();
  }

  /** "Classroom: Take back my help request" and the quick pick's Take my hand back: withdraws the open request. */
  private async takeBack(): Promise<void> {
    if (!this.classroom) return;
    this.changes++;
    try {
      this.show(await this.classroom.withdrawHelp());
      void vscode.window.showInformationMessage('You took your request for help back.');
    } catch (error) {
      if (error instanceof ApiError && error.code === 'help_request_not_found') {
        this.show(null);
        void vscode.window.showInformationMessage(error.message);
      } else {
        void vscode.window.showErrorMessage(error instanceof Error ? error.message : String(error));
        await this.refresh();
      }
    }
  }
}
