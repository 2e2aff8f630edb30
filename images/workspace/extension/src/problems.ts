/**
 * Compile errors in a run's output, as the editor shows them in its Problems: javac's and Gradle's
 * `<path>:<line>: error: <message>` (or `warning:`), followed by the source line and a caret under
 * the column. Paths are as the compiler printed them: relative to the project (the classroom's
 * stand-in prints `src/main/java/...`) or absolute (real Gradle prints `/home/student/...`).
 */

/** One problem the compiler reported. */
export interface Problem {
  /** The file as printed. */
  file: string;
  /** 1-based. */
  line: number;
  /** 1-based; 1 when the compiler gave no caret line. */
  column: number;
  severity: 'error' | 'warning';
  message: string;
}

const HEADLINE = /^(.+\.java):(\d+): (error|warning): (.*)$/;
const CARET = /^(\s*)\^\s*$/;

/** The problems in `text` (whole lines of compiler output), in the order printed. */
export function parseProblems(text: string): Problem[] {
  const lines = text.split(/\r?\n/);
  const problems: Problem[] = [];
  for (let i = 0; i < lines.length; i++) {
    const match = HEADLINE.exec(lines[i]!);
    if (!match) continue;
    const problem: Problem = { file: match[1]!, line: Number(match[2]), column: 1, severity: match[3] as Problem['severity'], message: match[4]! };
    // The source line, then a caret under the column (within the next few lines: some messages have a detail line first).
    for (let j = i + 1; j < Math.min(lines.length, i + 6); j++) {
      if (HEADLINE.test(lines[j]!)) break;
      const caret = CARET.exec(lines[j]!);
      if (caret) {
        problem.column = caret[1]!.length + 1;
        break;
      }
    }
    problems.push(problem);
  }
  return problems;
}

/**
 * The path of `file` relative to the project at `root` (an absolute path such as /home/student), or
 * undefined when it is outside it.
 */
export function projectPath(file: string, root: string): string | undefined {
  if (!file.startsWith('/')) return file.replace(/^\.\//, '');
  const prefix = root.endsWith('/') ? root : `${root}/`;
  return file.startsWith(prefix) ? file.slice(prefix.length) : undefined;
}
