import { duUsage } from '../../src/docker/docker-runtime.ts';
import { homeDiskRefusal, homeDiskStatus } from '../../src/home-disk.ts';

const MiB = 1024 * 1024;
const bound = { limitBytes: 100 * MiB, checkMs: 60_000 };
const measure = (usedBytes: number, problem: string | null = null) => ({ usedBytes, problem, measuredAt: new Date('2026-11-30T10:00:00Z') });

describe('a home against its bound', () => {
  it('is ok below 90 %, with nothing to say and nothing refused', () => {
    const status = homeDiskStatus(measure(89 * MiB), bound)!;
    expect(status).toMatchObject({ level: 'ok', message: null, usedBytes: 89 * MiB, limitBytes: 100 * MiB });
    expect(homeDiskRefusal(status)).toBeUndefined();
  });

  it('is nearly full from 90 %: the student is told how much is used and how to free it, and runs still start', () => {
    const status = homeDiskStatus(measure(90 * MiB), bound)!;
    expect(status.level).toBe('near');
    expect(status.message).toBe(
      'Your home folder is nearly full: it uses 90 MiB of the 100 MiB it may use. Delete files you no longer need (in the terminal, ./gradlew clean removes build outputs): at 100 MiB, Run is refused until you do.',
    );
    expect(homeDiskRefusal(status)).toBeUndefined();
  });

  it('is full at the limit: a run is refused with 409 home_disk_full, saying how much is used, how to free it and when it is measured again', () => {
    const status = homeDiskStatus(measure(5.5 * 1024 * MiB), { limitBytes: 5 * 1024 * MiB, checkMs: 30_000 })!;
    expect(status.level).toBe('full');
    expect(homeDiskRefusal(status)).toMatchObject({
      status: 409,
      code: 'home_disk_full',
      message:
        'Your home folder is full: it uses 5.5 GiB of the 5.0 GiB it may use, so Run is refused until you free space. Delete files you no longer need (in the terminal, ./gradlew clean removes build outputs), then press Run again: it is measured again every 30 seconds.',
    });
  });

  it('refuses a run while part of it cannot be measured (a folder made unreadable), saying which', () => {
    const status = homeDiskStatus(measure(10 * MiB, 'the folder build/x cannot be read'), bound)!;
    expect(status.level).toBe('unmeasured');
    expect(homeDiskRefusal(status)?.message).toBe(
      'Your home folder could not be measured in full: the folder build/x cannot be read. Run is refused until it can be; press Run again once that is fixed: it is measured again every minute.',
    );
  });

  it('says nothing without a bound or before the first measure', () => {
    expect(homeDiskStatus(measure(10 * MiB), { limitBytes: 0, checkMs: 60_000 })).toBeNull();
    expect(homeDiskStatus(undefined, bound)).toBeNull();
    expect(homeDiskRefusal(null)).toBeUndefined();
  });
});

describe("reading du's answer", () => {
  it('takes the total in KiB', () => {
    expect(duUsage('2048\t/home/student\n', '', 0)).toEqual({ bytes: 2 * MiB });
  });

  it('names a folder it could not read, as GNU du and busybox say it, under the home', () => {
    expect(duUsage('12\t/home/student\n', "du: cannot read directory '/home/student/x/y': Permission denied\n", 1)).toEqual({
      bytes: 12 * 1024,
      problem: 'the folder x/y cannot be read',
    });
    expect(duUsage('8\t/home/student\n', "du: can't open '/home/student/hidden': Permission denied\n", 1).problem).toBe('the folder hidden cannot be read');
  });

  it('shows no control character of a folder name', () => {
    expect(duUsage('8\t/home/student\n', "du: can't open '/home/student/a\u001b[2Jb\rc': Permission denied\n", 1).problem).toBe(
      'the folder a?[2Jb?c cannot be read',
    );
  });

  it('counts files that vanished while it walked (a build cleaning up) as no problem', () => {
    expect(duUsage('40\t/home/student\n', "du: cannot access '/home/student/build/tmp/x': No such file or directory\n", 1)).toEqual({ bytes: 40 * 1024 });
  });

  it('says a measure without a total was cut short, and throws when the image has no du', () => {
    expect(duUsage('', 'Terminated\n', 143)).toEqual({
      bytes: 0,
      problem: 'measuring it was cut short (exit code 143): it may hold too many files to count within 45 s',
    });
    expect(() => duUsage('', 'exec: "timeout": executable file not found in $PATH', 127)).toThrow(/the workspace image has no du or timeout/);
  });

  it('does not blame the image for a du that could not be started for another reason (a busy machine)', () => {
    expect(() => duUsage('', '', 126)).toThrow("du could not be started in the editor's container (exit code 126); the next measure tries again");
    expect(() => duUsage('', 'timeout: failed to run command ‘du’: Resource temporarily unavailable\n', 126)).toThrow(
      /^du could not be started in the editor's container \(exit code 126: timeout: failed to run command/,
    );
  });
});
