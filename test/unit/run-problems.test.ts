/**
 * The classroom extension's reading of compile errors in a run's output
 * (images/workspace/extension/src/problems.ts): javac's and Gradle's `<path>:<line>: error: ...`
 * with the caret line for the column, relative and absolute paths.
 */
import { parseProblems, projectPath } from '../../images/workspace/extension/src/problems.ts';

describe('parseProblems', () => {
  it("reads javac's errors with their line and, from the caret, their column", () => {
    const output = [
      '> Task :compileJava',
      "src/main/java/frc/robot/Robot.java:25: error: ';' expected",
      '    m_speed = AUTO_SPEED',
      '                        ^',
      'src/main/java/frc/robot/Robot.java:40: error: cannot find symbol',
      '    drive();',
      '    ^',
      '  symbol:   method drive()',
      '2 errors',
      '',
      'FAILURE: Execution failed for task :compileJava: compilation failed, see the errors above.',
    ].join('\n');
    expect(parseProblems(output)).toEqual([
      { file: 'src/main/java/frc/robot/Robot.java', line: 25, column: 25, severity: 'error', message: "';' expected" },
      { file: 'src/main/java/frc/robot/Robot.java', line: 40, column: 5, severity: 'error', message: 'cannot find symbol' },
    ]);
  });

  it("reads warnings, Gradle's absolute paths, Windows line ends, and a message without a caret line", () => {
    const output = '/home/student/src/main/java/frc/robot/Main.java:7: warning: [deprecation] old() in Robot has been deprecated\r\nBUILD SUCCESSFUL\r\n';
    expect(parseProblems(output)).toEqual([
      {
        file: '/home/student/src/main/java/frc/robot/Main.java',
        line: 7,
        column: 1,
        severity: 'warning',
        message: '[deprecation] old() in Robot has been deprecated',
      },
    ]);
  });

  it('takes no caret of the next error as its own, and finds nothing in output without errors', () => {
    const output = ['A.java:1: error: first', 'B.java:2: error: second', '  ^'].join('\n');
    expect(parseProblems(output).map((problem) => [problem.file, problem.column])).toEqual([
      ['A.java', 1],
      ['B.java', 3],
    ]);
    expect(parseProblems('compiling... 1/3\nRobot program started.\nerror: compilation failed\n')).toEqual([]);
  });
});

describe('projectPath', () => {
  it.each([
    ['src/main/java/frc/robot/Robot.java', 'src/main/java/frc/robot/Robot.java'],
    ['./src/A.java', 'src/A.java'],
    ['/home/student/src/A.java', 'src/A.java'],
    ['/usr/local/share/classroom/wpilib-standin/edu/X.java', undefined],
  ])('maps %s into the project at /home/student as %s', (file, expected) => {
    expect(projectPath(file, '/home/student')).toBe(expected);
  });
});
