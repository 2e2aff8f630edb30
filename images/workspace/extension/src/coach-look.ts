/**
 * A coach looking over the student's shoulder, told in the editor: while a coach's read-only look
 * at this workspace lasts (`lookedAt` on `GET .cp/api/workspace`, which extension.ts reads every
 * 2 s), the status bar says "Your coach is looking", with who in its tooltip, and a notification
 * says so once when a look begins. The coach reads the files through the control plane; they never
 * type here.
 *
 * With LOOK_CONSENT=ask a look begins by asking (`lookedAt.asking`): the coach reads nothing until
 * the student lets it happen. A notification asks once per look, with "Let them look" and "Not now";
 * meanwhile the status bar says "Your coach asks to look", and a click on it offers the same two
 * choices. The answer goes to the control plane (`POST .cp/api/looks/<id>/accept` or `/decline`, the
 * same answer as the workspace page's); once let, the status bar says "Your coach is looking"; once
 * declined, the item goes.
 *
 * The coach's name is their own text: it goes only into the tooltip and the quick pick's
 * placeholder, plain strings VS Code shows as text. Not into a notification, whose message VS Code
 * turns `[text](command:...)` into a link.
 */
import * as vscode from 'vscode';
import { ApiError, type Classroom, type LookedAt } from './classroom.ts';

/** The choice that lets the coach look. */
const LET = 'Let them look';
/** The choice that says no. */
const NOT_NOW = 'Not now';

/**
 * The status bar's "Your coach is looking" (or "Your coach asks to look"), the notification of a look
 * begun or asking, and the command the item runs while a look asks (`classroom.answerLook`). Made
 * before the extension awaits anything; `start` gives it the student API and registers the command.
 */
export class CoachLook implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private classroom: Classroom | undefined;
  /** The look shown (null: none live). */
  private look: LookedAt | null = null;
  /** The look told last (its id): each look is told once. */
  private told: string | null = null;
  /** The student's answer given here, shown over a read begun before it (which still says asking). */
  private answered: { lookId: string; accept: boolean } | null = null;

  constructor() {
    this.item = vscode.window.createStatusBarItem('classroom.look', vscode.StatusBarAlignment.Left, 996);
    this.item.name = 'Your coach is looking';
  }

  /** Starts with the student API: the status bar's answer to a look asking. */
  start(classroom: Classroom): vscode.Disposable[] {
    this.classroom = classroom;
    return [vscode.commands.registerCommand('classroom.answerLook', () => this.offerAnswer())];
  }

  /** Shows the look read with the workspace (null: none live, the item goes), telling a new one once. */
  show(read: LookedAt | null): void {
    const answered = this.answered;
    const lookedAt = read?.asking && answered?.lookId === read.lookId ? (answered.accept ? { ...read, asking: false } : null) : read;
    this.look = lookedAt;
    if (!lookedAt) {
      this.item.hide();
      return;
    }
    if (lookedAt.asking) {
      this.item.text = '$(eye) Your coach asks to look';
      this.item.tooltip = `${lookedAt.by} asks to look at your workspace (read only). Click to answer.`;
      this.item.command = 'classroom.answerLook';
    } else {
      this.item.text = '$(eye) Your coach is looking';
      this.item.tooltip = `${lookedAt.by} is looking at your workspace (read only)`;
      this.item.command = undefined;
    }
    this.item.show();
    if (this.told === lookedAt.lookId) return;
    this.told = lookedAt.lookId;
    if (!lookedAt.asking) {
      void vscode.window.showInformationMessage('Your coach is looking at your workspace (read only).');
      return;
    }
    void this.ask(lookedAt.lookId);
  }

  /** The notification asking about look `lookId` (once per look): its two actions answer; dismissed, the status bar still asks. */
  private async ask(lookId: string): Promise<void> {
    const choice = await vscode.window.showInformationMessage('Your coach asks to look at your workspace (read only).', LET, NOT_NOW);
    if (choice) await this.answer(lookId, choice === LET);
  }

  /** The status bar's click while a look asks: the same two choices, in a quick pick. */
  private async offerAnswer(): Promise<void> {
    const look = this.look;
    if (!look?.asking) return;
    const choice = await vscode.window.showQuickPick(
      [
        { label: LET, detail: 'Your coach reads your files and sees your run, read only; they never type here.' },
        { label: NOT_NOW, detail: 'Your coach sees nothing of your workspace.' },
      ],
      // The placeholder is the input's own placeholder: the coach's name is shown as text.
      { title: 'Your coach asks to look', placeHolder: `${look.by} asks to look at your workspace (read only).` },
    );
    if (choice) await this.answer(look.lookId, choice.label === LET);
  }

  /** Sends the answer to look `lookId` and shows it at once (let: "is looking"; no: the item goes). */
  private async answer(lookId: string, accept: boolean): Promise<void> {
    if (!this.classroom) return;
    try {
      await this.classroom.answerLook(lookId, accept);
      this.answered = { lookId, accept };
      if (this.look?.lookId === lookId) this.show(this.look);
    } catch (error) {
      // Answered already the other way (on the workspace page): said in the server's words. Ended: nothing to answer.
      if (error instanceof ApiError && error.code === 'look_answered') void vscode.window.showInformationMessage(error.message);
      else if (error instanceof ApiError && error.code === 'look_not_found')
        void vscode.window.showInformationMessage("Your coach's look has ended: there is nothing to answer.");
      else void vscode.window.showErrorMessage(error instanceof Error ? error.message : String(error));
    }
  }

  dispose(): void {
    this.item.dispose();
  }
}
