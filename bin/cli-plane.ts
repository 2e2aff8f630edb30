/**
 * The control plane as an operator command opens it (src/cli/command.ts, cliHost): the database
 * (migrated) and the store over it, and the backups; nothing runs in the background, and an
 * unreachable database is reported at once, not retried. The embedded database is shared with a
 * running server (its changes reach the server at once). It loads nothing of api/ or controllers/,
 * and Docker's client only for a command that reaches the engine (a backup or a restore): a
 * command is a process of its own, which pays for every module it loads.
 */
import type { CliPlane } from '../src/cli/command.ts';
import { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import { Backups } from '../src/backup/backups.ts';
import type { Config } from '../src/config.ts';
import { ChangeFeed } from '../src/db/changes.ts';
import { openMigrated } from '../src/db/database.ts';
import type { OwnerThread } from '../src/db/owner-thread.ts';
import type { VolumeArchives } from '../src/docker/runtime.ts';
import { categoryLogger, type Logger } from '../src/log.ts';
import { createStore } from '../src/store/index.ts';

export async function openForCli(options: { config: Config; log: Logger; command: string; thread?: OwnerThread }): Promise<CliPlane> {
  const { config } = options;
  const database = await openMigrated({
    url: config.databaseUrl,
    directUrl: config.databaseDirectUrl,
    dataDir: config.dataDir,
    log: categoryLogger(options.log, 'db'),
    retry: false,
    embedded: { mode: 'shared', describe: { role: 'cli', command: options.command }, thread: options.thread },
  });
  const allowlistFile = AllowlistFile.in(config.dataDir);
  const store = createStore({ db: database.dataSource, changes: new ChangeFeed(), environmentCap: config.maxActiveContainers, allowlistFile });
  const engine = engineWhenUsed(config);
  const backups = new Backups({ store, runtime: engine, dataDir: config.dataDir, image: config.workspaceImage });
  return { config, store, backups, stop: () => database.close() };
}

/** The volume archives of the configured runtime, whose client (dockerode) is loaded at the first call. */
function engineWhenUsed(config: Config): VolumeArchives {
  let made: Promise<VolumeArchives> | undefined;
  const runtime = () => (made ??= import('../src/docker/runtimes.ts').then(({ runtimeFor }) => runtimeFor(config)));
  return {
    exportVolume: async (...args) => (await runtime()).exportVolume(...args),
    importVolume: async (...args) => (await runtime()).importVolume(...args),
    volumeExists: async (...args) => (await runtime()).volumeExists(...args),
    removeVolumeNamed: async (...args) => (await runtime()).removeVolumeNamed(...args),
  };
}
