/**
 * The server's entry point (`bin/server`, `npm start`). Node's compile cache keeps the compiled
 * modules (type-stripped) between starts, in the system's temporary directory: it is enabled
 * before anything else is loaded, so the modules are imported dynamically. The database is opened
 * (and migrated) while the rest of the control plane loads: the embedded one starts in a thread of
 * its own, begun before the database driver and the control plane load (as an operator command's,
 * bin/cli.ts), PostgreSQL is connected to.
 */
import module from 'node:module';
import type { Config } from '../src/config.ts';
import type { Database } from '../src/db/database.ts';
import type { ControlPlane } from './control-plane.ts';

module.enableCompileCache?.();
/** What this process is, to others who find the embedded database held. */
const SERVER = { role: 'server', command: 'server' };
const { ConfigError, loadConfig } = await import('../src/config.ts');
const { categoryLogger, createRootLogger } = await import('../src/log.ts');
const { ownInThread, SERVER_SETTINGS } = await import('../src/db/owner-thread.ts');

/**
 * Starts the control plane: config → database → migrations (under an advisory lock) → parts →
 * serve. SIGTERM/SIGINT stop every part in reverse (in-flight requests finish, bounded), close the
 * database and exit 0. Workspace containers are never touched on the way down.
 */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    for (const problem of error.problems) process.stderr.write(`config: ${problem}\n`);
    process.exit(2);
  }

  const root = createRootLogger({ level: config.logLevel, format: config.logFormat, colour: isTerminal(process.stdout) && !config.noColor });
  const log = categoryLogger(root, 'server');
  process.on('unhandledRejection', (error) => log.error({ error }, 'unhandled promise rejection'));
  process.on('uncaughtException', (error) => {
    log.fatal({ error }, 'uncaught exception, exiting');
    process.exit(1);
  });

  const startedAt = performance.now();
  const opening = new AbortController();
  let plane: ControlPlane | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (!plane) {
      log.info({ signal }, 'signal received during start-up, exiting');
      opening.abort();
      process.exit(0);
    }
    log.info({ signal }, 'signal received, stopping');
    void plane.stop().then(() => {
      log.info('stopped');
      process.exit(0);
    });
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const dbLog = categoryLogger(root, 'db');
  // The embedded database's thread first of all: PGlite starts on the other core while the rest loads.
  const thread = config.databaseUrl === undefined ? await beginEmbedded(config.dataDir, dbLog) : undefined;
  const { openMigrated } = await import('../src/db/database.ts');
  const database = openMigrated({
    url: config.databaseUrl,
    directUrl: config.databaseDirectUrl,
    dataDir: config.dataDir,
    log: dbLog,
    signal: opening.signal,
    embedded: { mode: 'owner', describe: SERVER, thread, settings: SERVER_SETTINGS },
  });
  // Settled here whatever happens, so that a failure is reported below, not as an unhandled rejection meanwhile.
  const opened = database.then(
    (open): { open: Database } => ({ open }),
    (error: unknown) => ({ error }),
  );
  const { ListenError, openControlPlane } = await import('./control-plane.ts');
  // The API's operations load while the database opens (TypeBox, their schemas' library, takes a
  // fifth of a second): the app finds them in the module cache at its first request (api/app.ts).
  import('../api/operations.ts').catch(() => undefined);
  try {
    const result = await opened;
    if ('error' in result) throw result.error;
    plane = await openControlPlane({
      config,
      log: root,
      listen: { port: config.port, host: config.host },
      signal: opening.signal,
      startedAt,
      database: result.open,
    });
  } catch (error) {
    log.fatal({ code: (error as { code?: string }).code }, `cannot open the database: ${(error as Error).message}`);
    process.exit(1);
  }
  try {
    await plane.start();
  } catch (error) {
    if (error instanceof ListenError) log.fatal({ host: error.host, port: error.port, code: error.code }, error.message);
    else log.fatal({ error }, 'start-up failed');
    await plane.stop();
    process.exit(1);
  }
  // The control plane's own data where students' homes are: one of them filling the disk fills it too.
  const { engineRootBeside } = await import('../src/docker/runtimes.ts');
  const dataRoot = await engineRootBeside(config.dataDir, config).catch(() => undefined);
  if (dataRoot)
    log.warning(
      { dataDir: config.dataDir, dockerRootDir: dataRoot },
      `DATA_DIR (${config.dataDir}) is on the same filesystem as the Docker Engine's data (${dataRoot}), which holds the students' homes: a student who fills the disk fills it for the control plane too; give Docker's data root a filesystem of its own (docs/operations.md, "Disk")`,
    );
}

/**
 * The embedded database begun in a thread of this process (owner-thread.ts), joined by
 * openMigrated once PGlite serves it there; when another process holds it, or it failed, openMigrated
 * waits or reports as it would have.
 */
async function beginEmbedded(dataDir: string, log: ReturnType<typeof categoryLogger>) {
  const { CHANNELS } = await import('../src/db/changes.ts');
  return ownInThread({ dataDir, describe: SERVER, channels: CHANNELS, settings: SERVER_SETTINGS, log });
}

/** Whether a stream is a terminal (Node leaves isTTY undefined on pipes and files, whatever its type says). */
function isTerminal(stream: { isTTY?: boolean }): boolean {
  return stream.isTTY === true;
}

await main();
