import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DataSource } from 'typeorm';
import os from 'node:os';
import path from 'node:path';
import { createApp, type AllowlistView } from '../../api/app.ts';
import { AllowlistFile } from '../../src/allowlist/allowlist-file.ts';
import { loadConfig } from '../../src/config.ts';
import { ChangeFeed } from '../../src/db/changes.ts';
import { categoryLogger, createRootLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { ActivityRecorder } from '../../src/store/activity.ts';
import type { StoreContext } from '../../src/store/workspaces.ts';

/** The session-signing key of in-process test apps. */
export const TEST_SESSION_SECRET = 'test-session-secret-0123456789abcdef';

/** The app served in-process on a loopback port, with its metrics and captured JSON log lines. */
export interface TestApp {
  url: string;
  metrics: Metrics;
  store: StoreContext;
  activity: ActivityRecorder;
  logs: Record<string, unknown>[];
  close(): Promise<void>;
}

/**
 * Serves createApp over `dataSource` with the config made from `env` (as the environment would be),
 * on a free loopback port that is also its public origin unless PUBLIC_URL is given. Everyone is on
 * the allowlist unless `allowlist` says otherwise; the allowlist file is a fresh path under the temp directory.
 * Pass the controllers' `changes` to wire them as main.ts does (edits through the app reach them at once).
 */
export async function startApp(
  dataSource: DataSource,
  env: Record<string, string> = {},
  options: { allowlist?: AllowlistView; allowlistFile?: AllowlistFile; port?: number; changes?: ChangeFeed } = {},
): Promise<TestApp> {
  const config = loadConfig(env);
  const logs: Record<string, unknown>[] = [];
  const sink = { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) };
  const root = createRootLogger({ level: 'debug', format: 'json', colour: false, sinks: { out: sink, err: sink } });
  const metrics = createMetrics();
  const store: StoreContext = { db: dataSource, changes: options.changes ?? new ChangeFeed(), environmentCap: config.maxActiveContainers, metrics, log: categoryLogger(root, 'containers') };
  const server = http.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  const activity = new ActivityRecorder(dataSource);
  const app = createApp({
    config,
    store,
    metrics,
    log: categoryLogger(root, 'http'),
    authLog: categoryLogger(root, 'auth'),
    publicOrigin: config.publicUrl ?? url,
    sessionSecret: TEST_SESSION_SECRET,
    allowlist: options.allowlist ?? { isAllowed: () => true },
    allowlistFile: options.allowlistFile ?? new AllowlistFile(path.join(os.tmpdir(), `cp-test-allowlist-${port}`, 'allowlist.json')),
    activity,
  });
  server.on('request', app.request);
  server.on('upgrade', app.upgrade);
  return {
    url,
    metrics,
    store,
    logs,
    activity,
    close: () => new Promise((resolve) => (app.close(), server.closeAllConnections(), server.close(() => resolve()))),
  };
}
