/**
 * A coach looking over the student's shoulder, told in the editor: while a coach's read-only look
 * at this workspace lasts (`lookedAt` on `GET .cp/api/workspace`, which extension.ts reads every
 * 2 s), the status bar says "Your coach is looking", with who in its tooltip, and a notification
 * says so once when a look begins. The coach reads the files through the control plane; they never
 * type here.
 *
 * The coach's name is their own text: it goes only into the tooltip, a plain string VS Code shows
 * as text. Not into the notification, whose message VS Code turns `[text](command:...)` into a link.
 */
import * as vscode from 'vscode';
import type { WorkspaceView } from './classroom.ts';

/** The status bar's "Your coach is looking" and the notification of a look begun. */
export class CoachLook implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  /** When the look told last began (its `since`), so that each look is told once; null: none live. */
  private told: string | null = null;

  constructor() {
    this.item = vscode.window.createStatusBarItem('classroom.look', vscode.StatusBarAlignment.Left, 996);
    this.item.name = 'Your coach is looking';
    this.item.text = '$(eye) Your coach is looking';
  }

  /** Shows the look read with the workspace (null: none live, the item goes), telling a new one once. */
  show(lookedAt: WorkspaceView['lookedAt']): void {
    if (!lookedAt) {
      this.told = null;
      this.item.hide();
      return;
    }
    this.item.tooltip = `${lookedAt.by} is looking at your workspace (read only)`;
    this.item.show();
    if (this.told === lookedAt.since) return;
    this.told = lookedAt.since;
    void vscode.window.showInformationMessage('Your coach is looking at your workspace (read only).');
  }

  dispose(): void {
    this.item.dispose();
  }
}
