import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DataSource } from 'typeorm';
import { createApp } from '../../api/app.ts';
import { loadConfig } from '../../src/config.ts';
import { categoryLogger, createRootLogger } from '../../src/log.ts';
import { ChangeFeed } from '../../src/db/changes.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import type { StoreContext } from '../../src/store/workspaces.ts';

/** The app served in-process on a loopback port, with its metrics and captured JSON log lines. */
export interface TestApp {
  url: string;
  metrics: Metrics;
  store: StoreContext;
  logs: Record<string, unknown>[];
  close(): Promise<void>;
}

/** Serves createApp over `dataSource` with the config made from `env` (as the environment would be). */
export async function startApp(dataSource: DataSource, env: Record<string, string> = {}): Promise<TestApp> {
  const config = loadConfig(env);
  const logs: Record<string, unknown>[] = [];
  const sink = { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) };
  const root = createRootLogger({ level: 'debug', format: 'json', colour: false, sinks: { out: sink, err: sink } });
  const metrics = createMetrics();
  const store: StoreContext = { db: dataSource, changes: new ChangeFeed(), environmentCap: config.maxActiveContainers, metrics, log: categoryLogger(root, 'containers') };
  const app = createApp({ config, store, metrics, log: categoryLogger(root, 'http') });
  const server = http.createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    metrics,
    store,
    logs,
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}
