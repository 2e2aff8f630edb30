import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createApp } from '../api/app.ts';
import { promoteConfiguredAdmins } from '../controllers/admin-bootstrap.ts';
import { AllowlistWatcher } from '../controllers/allowlist-watcher.ts';
import { Periodic } from '../controllers/periodic.ts';
import { IdleSweep } from '../controllers/idle-sweep.ts';
import { RunController } from '../controllers/runs.ts';
import { StatsSampler } from '../controllers/stats-sampler.ts';
import { WorkspaceController } from '../controllers/workspaces.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { AllowlistFile } from './allowlist/allowlist-file.ts';
import { ChangeFeed } from './db/changes.ts';
import { migrate, openDatabase, type Database } from './db/database.ts';
import { DockerRuntime } from './docker/docker-runtime.ts';
import { categoryLogger, createRootLogger, type Logger } from './log.ts';
import { createMetrics } from './metrics.ts';
import { SERVICE } from './package-info.ts';
import { loadSessionSecret } from './session-secret.ts';
import { pruneExpiredSessions } from './store/sessions.ts';
import { ActivityRecorder } from './store/activity.ts';
import type { StoreContext } from './store/workspaces.ts';

/** How long in-flight requests may take to finish after SIGTERM/SIGINT before their sockets are closed. */
const SHUTDOWN_GRACE_MS = 10_000;

/** How often activity gathered in memory is written to the database. */
const ACTIVITY_FLUSH_MS = 10_000;

/** How often expired sessions are deleted. */
const SESSION_PRUNE_MS = 60 * 60_000;

/** Everything started after the database, stopped in reverse on the way down. */
interface Running {
  server: http.Server;
  /** Ends proxied WebSockets, which an HTTP server's close leaves open. */
  closeTunnels(): void;
  db: Database;
  changes: ChangeFeed;
  activity: ActivityRecorder;
  /** The controllers' start, which a signal may interrupt: awaited before they are stopped. */
  starting: Promise<void>;
  controllers: { stop(): Promise<void> }[];
}

/**
 * Starts the control plane: config → database → migrations (under an advisory lock) → serve.
 * SIGTERM/SIGINT stop accepting, let in-flight requests finish (bounded), close the database and
 * exit 0. Workspace containers are never touched on the way down.
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

  const root = createRootLogger({
    level: config.logLevel,
    format: config.logFormat,
    colour: Boolean(process.stdout.isTTY) && !config.noColor,
  });
  const log = categoryLogger(root, 'server');
  process.on('unhandledRejection', (error) => log.error({ error }, 'unhandled promise rejection'));
  process.on('uncaughtException', (error) => {
    log.fatal({ error }, 'uncaught exception, exiting');
    process.exit(1);
  });

  const started = performance.now();
  const startup = new AbortController();
  let shutdown: (() => Promise<void>) | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (shutdown) return void shutdown();
    log.info({ signal }, 'signal received during start-up, exiting');
    startup.abort();
    process.exit(0);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  let db: Database;
  try {
    db = await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir, log: categoryLogger(root, 'db'), signal: startup.signal });
    const applied = await migrate(db.dataSource);
    categoryLogger(root, 'db').info({ applied: applied.length }, applied.length > 0 ? `applied migrations: ${applied.join(', ')}` : 'database schema is up to date');
  } catch (error) {
    log.fatal({ code: (error as { code?: string }).code }, `cannot open the database: ${(error as Error).message}`);
    process.exit(1);
  }

  const metrics = createMetrics();
  const changes = new ChangeFeed();
  if (config.databaseUrl !== undefined) changes.listen(config.databaseUrl, categoryLogger(root, 'db'));
  const store: StoreContext = { db: db.dataSource, changes, environmentCap: config.maxActiveContainers, metrics, log: categoryLogger(root, 'containers') };
  const activity = new ActivityRecorder(db.dataSource);
  const runtime = new DockerRuntime({ controlPlaneId: config.controlPlaneId });
  const workspaces = new WorkspaceController({
    db: db.dataSource,
    runtime,
    changes,
    metrics,
    log: store.log,
    environmentCap: config.maxActiveContainers,
    template: { image: config.workspaceImage, memoryBytes: config.codeMemoryLimitBytes, network: config.workspaceNetwork, editorPort: config.editorPort },
  });
  // Every minute, or more often when the idle limit is short (a demo), so a workspace never overstays by much.
  const sweepEveryMs = Math.min(60_000, Math.max(1000, (config.idleStopMinutes * 60_000) / 4));
  const idleSweep = new IdleSweep({ store: { ...store, log: categoryLogger(root, 'idle') }, activity, idleMinutes: config.idleStopMinutes, intervalMs: sweepEveryMs });
  const stats = new StatsSampler({ runtime, metrics, log: store.log });
  const runs = new RunController({
    db: db.dataSource,
    runtime,
    changes,
    metrics,
    log: categoryLogger(root, 'runs'),
    buildTimeoutMs: config.runBuildTimeoutMs,
    template: { image: config.workspaceImage, memoryBytes: config.codeMemoryLimitBytes, network: config.workspaceNetwork, nt4Port: config.nt4Port, command: config.simCommand },
  });

  const authLog = categoryLogger(root, 'auth');
  const { secret: sessionSecret, generated } = await loadSessionSecret(config.sessionSecret, config.dataDir);
  if (generated) authLog.info({ file: path.join(config.dataDir, 'session-secret') }, 'no SESSION_SECRET set: generated one and kept it in the data directory');
  const allowlistFile = new AllowlistFile(path.join(config.dataDir, 'allowlist.json'));
  const allowlist = new AllowlistWatcher({ file: allowlistFile, log: authLog, implicit: config.serviceAdminEmails });
  await allowlist.start();
  await promoteConfiguredAdmins(db.dataSource, config.serviceAdminEmails, authLog);
  const sessions = new Periodic(() => pruneExpiredSessions(db.dataSource), SESSION_PRUNE_MS, (error) => authLog.error({ error }, 'pruning expired sessions failed'));

  const server = http.createServer();
  try {
    await listen(server, config.port, config.host);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'EADDRINUSE' ? 'is already in use' : code === 'EACCES' ? 'needs privileges this process lacks' : `failed (${code ?? 'unknown'})`;
    log.fatal({ host: config.host, port: config.port, code }, `cannot listen: ${config.host}:${config.port} ${reason}`);
    await allowlist.stop();
    await changes.close();
    await db.close();
    process.exit(1);
  }
  const { port } = server.address() as AddressInfo;
  // Attached in the same tick as the listen callback, before any connection can be handled.
  const publicOrigin = config.publicUrl ?? `http://${urlHost(config.host)}:${port}`;
  const app = createApp({ config, store, metrics, log: categoryLogger(root, 'http'), authLog, publicOrigin, sessionSecret, allowlist, allowlistFile, activity });
  server.on('request', app.request);
  server.on('upgrade', app.upgrade);
  log.info(
    { host: config.host, port, publicUrl: publicOrigin, version: SERVICE.version, startupMs: Math.round(performance.now() - started) },
    `listening on http://${config.host}:${port}`,
  );
  const starting = (async () => {
    activity.start(ACTIVITY_FLUSH_MS, (error) => log.error({ error }, 'writing workspace activity failed'));
    await workspaces.start();
    await runs.start();
    idleSweep.start();
    stats.start();
    sessions.start();
  })();
  // Set in the same tick as the listening line: from then on a signal stops gracefully, even while the controllers are still starting.
  shutdown = once(() => stop({ server, closeTunnels: app.close, db, changes, activity, starting, controllers: [workspaces, runs, idleSweep, stats, sessions, allowlist] }, log));
  await starting;
}

/** The host part of a URL for a listening address (wildcards become loopback, IPv6 gets brackets). */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function stop(running: Running, log: Logger): Promise<void> {
  const { server } = running;
  log.info('shutting down: no new connections, waiting for in-flight requests');
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // Editor WebSockets are connections, not requests: end them now (browsers reconnect to the next process).
  running.closeTunnels();
  // Keep-alive sockets become idle as their last request ends; close each then, not after keepAliveTimeout.
  const reaper = setInterval(() => server.closeIdleConnections(), 50);
  const grace = setTimeout(() => {
    log.warning({ graceMs: SHUTDOWN_GRACE_MS }, 'in-flight requests still open after the grace period, closing them');
    server.closeAllConnections();
  }, SHUTDOWN_GRACE_MS);
  await closed;
  clearInterval(reaper);
  clearTimeout(grace);
  // Controllers stop taking work (those still starting first finish starting); containers are left exactly as they are.
  await running.starting.catch(() => undefined);
  await Promise.all(running.controllers.map((controller) => controller.stop()));
  await running.activity.stop().catch((error: unknown) => log.error({ error }, 'writing workspace activity failed'));
  await running.changes.close();
  await running.db.close().catch((error: unknown) => log.error({ error }, 'closing the database failed'));
  log.info('stopped');
  process.exit(0);
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}

await main();
