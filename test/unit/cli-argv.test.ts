/**
 * bin/cli starts the embedded database early for a command line that opens it (src/cli/argv.ts):
 * its list is the commands', and help never starts it.
 */
import { DATABASE_COMMANDS, databaseCommand } from '../../src/cli/argv.ts';
import { COMMANDS } from '../../src/cli/commands.ts';

it('lists exactly the commands that open the database', () => {
  const opening = Object.entries(COMMANDS)
    .filter(([, command]) => command.opensDatabase)
    .map(([id]) => id.replaceAll(':', ' '));
  expect([...DATABASE_COMMANDS].toSorted()).toEqual(opening.toSorted());
  expect(opening).not.toContain('allowlist list');
});

it('reads the command from the words before and between flags', () => {
  expect(databaseCommand(['users', 'list'])).toBe('users list');
  expect(databaseCommand(['--json', 'users', 'list', '--limit', '5'])).toBe('users list');
  expect(databaseCommand(['backup', 'ada', '--output', '-'])).toBe('backup');
  expect(databaseCommand(['status'])).toBe('status');
});

it('does not for help, a topic alone, a command that reads only a file, or an unknown command', () => {
  expect(databaseCommand([])).toBeUndefined();
  expect(databaseCommand(['--help'])).toBeUndefined();
  expect(databaseCommand(['users', 'list', '--help'])).toBeUndefined();
  expect(databaseCommand(['users', 'list', '-h'])).toBeUndefined();
  expect(databaseCommand(['users'])).toBeUndefined();
  expect(databaseCommand(['allowlist', 'list'])).toBeUndefined();
  expect(databaseCommand(['userz', 'list'])).toBeUndefined();
});
