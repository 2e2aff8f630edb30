/**
 * Lessons a coach handed out, told in the editor: the control plane writes each into the home under
 * `lessons/<folder>/` (the explorer shows it by itself), and `lessons` on `GET .cp/api/workspace`
 * (which extension.ts reads every 2 s) says which reached the home and where. Each lesson version is
 * told once, in a notification that says where it is (and, for a later version that landed beside
 * the student's folder, that their own is as they left it), with "Show in Explorer". Told lessons
 * are remembered in the extension's global state, so that a reload or another window does not tell
 * them again; one that arrived more than a day before the editor first saw it is not told at all.
 * Lesson names are letters, digits, spaces, dots, dashes and underscores (src/store/lessons.ts
 * LESSON_NAME): nothing VS Code would make into a link.
 */
import * as vscode from 'vscode';
import type { StudentLesson } from './classroom.ts';

/** The global state's key of the lesson versions told (`<name> v<version>`). */
const TOLD = 'classroom.lessonsTold';
/** How many are remembered (the oldest forgotten first). */
const REMEMBERED = 200;
/** A lesson that arrived longer ago than this when first seen is not told (the workspace page lists it). */
const FRESH_MS = 24 * 60 * 60 * 1000;
/** The notification's button. */
const SHOW = 'Show in Explorer';

/** What a student is told of a lesson that reached their home. */
export function lessonMessage(lesson: StudentLesson): string {
  const where = `lessons/${lesson.folder}`;
  return lesson.beside
    ? `Your coach handed out ${lesson.name}, version ${lesson.version}: it is in ${where}, beside your lessons/${lesson.name}, which is as you left it.`
    : `Your coach handed out ${lesson.name}: it is in ${where}.`;
}

/** The notifications of lessons that reached the home (see the file comment). */
export class LessonNotices {
  private readonly state: vscode.Memento;
  private readonly home: vscode.Uri | undefined;

  /** `state`: the extension's global state; `home`: the workspace folder (the home), where `lessons/` is. */
  constructor(state: vscode.Memento, home: vscode.Uri | undefined) {
    this.state = state;
    this.home = home;
  }

  /** Tells each lesson of `lessons` (newest first, as the API gives them) not told yet, oldest first. */
  show(lessons: readonly StudentLesson[]): void {
    const told = this.state.get<string[]>(TOLD, []);
    const fresh = lessons.filter((lesson) => !told.includes(keyOf(lesson)) && Date.now() - Date.parse(lesson.deliveredAt) < FRESH_MS);
    if (fresh.length === 0) return;
    void this.state.update(TOLD, [...told, ...fresh.map(keyOf)].slice(-REMEMBERED));
    for (const lesson of fresh.toReversed()) void this.tell(lesson);
  }

  private async tell(lesson: StudentLesson): Promise<void> {
    const choice = await vscode.window.showInformationMessage(lessonMessage(lesson), SHOW);
    if (choice === SHOW && this.home) await vscode.commands.executeCommand('revealInExplorer', vscode.Uri.joinPath(this.home, 'lessons', lesson.folder));
  }
}

const keyOf = (lesson: StudentLesson) => `${lesson.name} v${lesson.version}`;
