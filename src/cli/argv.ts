/**
 * What a command line asks for, read from its words before oclif has loaded anything: whether the
 * command it names opens the database. `bin/cli` starts the embedded database in a thread when it
 * does, so that PGlite starts while the command loads. (test/unit/cli-argv.test.ts keeps this list
 * to the commands: every one but those declaring `opensDatabase = false`.)
 */
export const DATABASE_COMMANDS: ReadonlySet<string> = new Set([
  'allowlist add',
  'allowlist remove',
  'users list',
  'users promote',
  'users demote',
  'users delete',
  'users sign-in-link',
  'setup-link',
  'status',
  'workspaces stop',
  'workspaces restart',
  'cap get',
  'cap set',
  'audit list',
  'audit-prune',
  'backup',
  'restore',
  'backups list',
  'nodes list',
  'nodes drain',
  'nodes undrain',
  'help list',
  'join-codes list',
  'join-codes open',
  'join-codes close',
  'lessons list',
  'lessons create',
  'lessons update',
  'lessons show',
  'lessons handout',
  'lessons reset',
  'lessons collect',
  'lessons download',
  'usage',
]);

/** The command the command line runs when it is one that opens the database (not its help: `--help` and a topic alone print only), e.g. `users list`. */
export function databaseCommand(argv: readonly string[]): string | undefined {
  if (argv.some((word) => word === '--help' || word === '-h')) return undefined;
  const words = argv.filter((word) => !word.startsWith('-'));
  return [words.slice(0, 2).join(' '), words[0] ?? ''].find((command) => DATABASE_COMMANDS.has(command));
}
