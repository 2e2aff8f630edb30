import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import type { AllowlistView } from '../../api/app.ts';
import type { AllowlistFile } from '../../src/allowlist/allowlist-file.ts';
import { loadConfig } from '../../src/config.ts';
import { createControlPlane, type ControlPlaneOptions, type PartName } from '../../bin/control-plane.ts';
import type { ChangeFeed } from '../../src/db/changes.ts';
import { createRootLogger } from '../../src/log.ts';
import type { Metrics } from '../../src/metrics.ts';
import type { ActivityRecorder } from '../../src/store/activity.ts';
import type { Store } from '../../src/store/index.ts';
import { watchControlPlane } from './contract.ts';

/** The session-signing key of in-process test apps. */
export const TEST_SESSION_SECRET = 'test-session-secret-0123456789abcdef';

/** The app served in-process on a loopback port, with its metrics and captured JSON log lines. */
export interface TestApp {
  url: string;
  metrics: Metrics;
  store: Store;
  activity: ActivityRecorder;
  logs: Record<string, unknown>[];
  /** The app's data directory (its allowlist file is `allowlist.json` there). */
  dataDir: string;
  close(): Promise<void>;
}

/**
 * Serves the control plane's HTTP part alone (no controllers) over `dataSource`, with the config
 * made from `env` (as the environment would be), on a free loopback port that is also its public
 * origin unless PUBLIC_URL is given. Everyone is on the allowlist unless `allowlist` says
 * otherwise; the data directory (and so the allowlist file the admin API edits) is `allowlistFile`'s
 * directory, else a fresh one under the temp directory. Pass the controllers' `changes` to share
 * their feed (edits through the app reach them at once). `parts` adds others beside `http` (e.g.
 * `setup`, which prints the first-run link).
 */
export async function startApp(
  dataSource: DataSource,
  env: Record<string, string> = {},
  options: {
    allowlist?: AllowlistView;
    allowlistFile?: AllowlistFile;
    port?: number;
    changes?: ChangeFeed;
    parts?: PartName[];
    tuning?: ControlPlaneOptions['tuning'];
  } = {},
): Promise<TestApp> {
  const dataDir = options.allowlistFile ? path.dirname(options.allowlistFile.path) : mkdtempSync(path.join(os.tmpdir(), 'cp-test-app-'));
  const config = loadConfig({ DATA_DIR: dataDir, ...env });
  const logs: Record<string, unknown>[] = [];
  const sink = { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) };
  const plane = createControlPlane({
    config,
    log: createRootLogger({ level: 'debug', format: 'json', colour: false, sinks: { out: sink, err: sink } }),
    // The test owns its data source: the plane leaves it open.
    database: { dataSource, embedded: false, close: async () => undefined },
    parts: options.parts ?? ['http'],
    listen: { port: options.port ?? 0, host: '127.0.0.1' },
    changes: options.changes,
    allowlist: options.allowlist ?? { isAllowed: () => true },
    sessionSecret: TEST_SESSION_SECRET,
    tuning: options.tuning,
  });
  await plane.start();
  const { server } = plane.http!;
  const unwatch = watchControlPlane(plane.http!.url);
  return {
    url: plane.http!.url,
    metrics: plane.metrics,
    store: plane.store,
    activity: plane.activity,
    logs,
    dataDir,
    // Tests end their connections at once rather than waiting out the grace period.
    close: async () => {
      unwatch();
      server.closeAllConnections();
      await plane.stop();
    },
  };
}
