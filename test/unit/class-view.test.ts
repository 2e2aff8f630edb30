/**
 * The class view's two rules, branch by branch: how a run ended in a coach's words (runOutcome) and
 * the compile errors counted in a run's last output (compileErrors, which RunStore.finish records).
 */
import { runOutcome } from '../../src/store/class-view.ts';
import { compileErrors } from '../../src/store/runs.ts';

const at = new Date('2026-11-29T10:00:00Z');

describe('runOutcome', () => {
  it('a run stopped before it was ready was canceled', () => {
    expect(runOutcome({ phase: 'canceled', readyAt: null, problemCount: 0 })).toBe('canceled');
  });
  it('a run stopped after it was ready was built', () => {
    expect(runOutcome({ phase: 'stopped', readyAt: at, problemCount: 0 })).toBe('built');
  });
  it('a run that failed after it was ready crashed (whatever its output held)', () => {
    expect(runOutcome({ phase: 'failed', readyAt: at, problemCount: 3 })).toBe('crashed');
  });
  it('a run that failed before it was ready with compiler errors has compile errors', () => {
    expect(runOutcome({ phase: 'failed', readyAt: null, problemCount: 2 })).toBe('compile_errors');
  });
  it('a run that failed before it was ready with none (or none counted: recorded before) is a failed build', () => {
    expect(runOutcome({ phase: 'failed', readyAt: null, problemCount: 0 })).toBe('build_failed');
    expect(runOutcome({ phase: 'failed', readyAt: null, problemCount: null })).toBe('build_failed');
  });
});

describe('compileErrors', () => {
  it("counts javac's errors (not its warnings) and names the first by its file's name and line", () => {
    const output = [
      '> Task :compileJava',
      '/home/student/src/main/java/frc/robot/Robot.java:7: warning: [removal] Timer in edu has been deprecated',
      "/home/student/src/main/java/frc/robot/Robot.java:12: error: ';' expected",
      '    int x = 1',
      '             ^',
      'src/main/java/frc/robot/Drive.java:3: error: cannot find symbol',
      '2 errors',
    ].join('\n');
    expect(compileErrors(output)).toEqual({ count: 2, first: "Robot.java:12: ';' expected" });
  });
  it('finds none in output without a compiler error', () => {
    expect(compileErrors('error: compilation failed\nBUILD FAILED')).toEqual({ count: 0, first: null });
  });
  it('cuts a pathological first error to 300 characters', () => {
    const first = compileErrors(`Robot.java:1: error: ${'x'.repeat(1000)}`).first;
    expect(first).toHaveLength(300);
    expect(first!.startsWith('Robot.java:1: xxx')).toBe(true);
  });
});
