/**
 * The operator CLI's entry point (`bin/cli`): oclif reads the commands from package.json's `oclif`
 * section; they open the control plane through bin/cli-plane.ts (cliHost), loaded only by a
 * command that opens it (`--help` and a command that reads only a file load none of it). Node's
 * compile cache keeps the compiled modules between runs (in the system's temporary directory).
 *
 * On the embedded database, a command that opens it (src/cli/argv.ts) starts it in a worker
 * thread first of all, so that PGlite starts on the other core while oclif, the command and the
 * database driver load; the command then joins it, or the server that holds it.
 */
import module from 'node:module';

module.enableCompileCache?.();
const argv = process.argv.slice(2);
const thread = await embeddedEarly(argv);
const { cliHost } = await import('../src/cli/command.ts');
const { runCli } = await import('../src/cli/run.ts');
cliHost.open = async (options) => (await import('./cli-plane.ts')).openForCli({ ...options, thread });
await runCli(argv, import.meta.url);
await thread?.close();

/**
 * The embedded database begun in a thread, for a command that opens it when no DATABASE_URL is
 * set (a configuration error is left to the command to report). Begun before the logger loads:
 * the thread's lines wait for it.
 */
async function embeddedEarly(words: string[]) {
  const [{ databaseCommand }, { loadConfig }, { ownInThread, ONE_COMMAND }] = await Promise.all([
    import('../src/cli/argv.ts'),
    import('../src/config.ts'),
    import('../src/db/owner-thread.ts'),
  ]);
  const command = databaseCommand(words);
  if (command === undefined) return undefined;
  let config;
  try {
    config = loadConfig();
  } catch {
    return undefined;
  }
  if (config.databaseUrl !== undefined) return undefined;
  // As the command's own log: warnings and worse, one line each on stderr.
  const log = import('../src/log.ts').then(({ categoryLogger, createRootLogger }) => {
    const err = { write: (line: string) => process.stderr.write(line) };
    return categoryLogger(createRootLogger({ level: 'warning', format: 'human', colour: false, sinks: { out: err, err } }), 'db');
  });
  return ownInThread({ dataDir: config.dataDir, describe: { role: 'cli', command: `cli ${command}` }, channels: [], settings: ONE_COMMAND, log });
}
