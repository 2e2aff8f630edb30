/**
 * The composition root: the one place that wires the control plane's parts together. The server
 * (bin/server.ts), the tests and the benchmarks open the control plane through `openControlPlane`,
 * each choosing which long-running parts run; an operator command opens only the database, the
 * store and the backups (bin/cli-plane.ts). Only bin/ imports `api/` and `controllers/`.
 */
import { randomUUID } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createApp, type AllowlistView, type AppHandlers } from '../api/app.ts';
import { promoteConfiguredAdmins } from '../controllers/admin-bootstrap.ts';
import { AllowlistWatcher } from '../controllers/allowlist-watcher.ts';
import { BackupSchedule } from '../controllers/backup-schedule.ts';
import { IdleSweep } from '../controllers/idle-sweep.ts';
import { Leadership } from '../controllers/leadership.ts';
import { Periodic } from '../controllers/periodic.ts';
import { RunController, type RunControllerOptions } from '../controllers/runs.ts';
import { StatsSampler } from '../controllers/stats-sampler.ts';
import { WorkspaceController, type WorkspaceControllerOptions } from '../controllers/workspaces.ts';
import { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import { Backups } from '../src/backup/backups.ts';
import { urlHost, type Config } from '../src/config.ts';
import { ChangeFeed } from '../src/db/changes.ts';
import { openMigrated, type Database, type OpenOptions } from '../src/db/database.ts';
import { InformedRuntime } from '../src/docker/informer.ts';
import { runtimeFor } from '../src/docker/runtimes.ts';
import { descriptorBudget, descriptorLimit } from '../src/descriptors.ts';
import { Fold } from '../src/fold.ts';
import type { WorkspaceRuntime } from '../src/docker/runtime.ts';
import { categoryLogger, type Logger } from '../src/log.ts';
import { createMetrics, type Metrics } from '../src/metrics.ts';
import { SERVICE } from '../src/package-info.ts';
import { loadSessionSecret } from '../src/session-secret.ts';
import { ActivityRecorder } from '../src/store/activity.ts';
import { createStore, type Store } from '../src/store/index.ts';
import { assertLeads, RECONCILER_LEASE, type Fence } from '../src/store/leases.ts';
import { SERVER_HEARTBEAT_MS } from '../src/store/servers.ts';
import { linkPath } from '../src/store/sign-in-links.ts';

/** How long in-flight requests may take to finish after a stop began before their sockets are closed. */
const SHUTDOWN_GRACE_MS = 10_000;
/**
 * How long a stopping replica that has others waits, once its row says it stops, before it lets its
 * editors go: two of a balancer's checks a second apart (deploy/haproxy.cfg), so that it sees the
 * older replicas draining (GET /readyz) and sends the editors to the newest.
 */
const BALANCER_NOTICE_MS = 2500;

/** How often activity gathered in memory is written to the database. */
const ACTIVITY_FLUSH_MS = 10_000;

/** How often expired sessions are deleted. */
const SESSION_PRUNE_MS = 60 * 60_000;

/**
 * The long-running parts of a control plane, in the order they start (they stop in reverse).
 * `setup` prints the first-run setup link while no admin exists (it needs `http`'s address).
 * With `leadership`, the leader-only parts (LEADER_PARTS) run only while this process holds the
 * reconciler lease, built afresh for each term with a store that writes under its fence; without
 * it (a test or benchmark driving a controller directly) they run from start to stop, unfenced.
 */
export const PARTS = [
  'changes',
  'allowlist',
  'admins',
  'activity',
  'http',
  'setup',
  'presence',
  'leadership',
  'workspaces',
  'runs',
  'idle',
  'stats',
  'backups',
  'sessions',
] as const;
export type PartName = (typeof PARTS)[number];

/**
 * The parts one replica at a time runs: the controllers, the idle sweep, the stats sampler and the
 * backup schedule (the orphan sweep is the workspace controller's).
 */
export const LEADER_PARTS = ['workspaces', 'runs', 'idle', 'stats', 'backups'] as const satisfies readonly PartName[];
type LeaderPartName = (typeof LEADER_PARTS)[number];
const isLeaderPart = (name: PartName): name is LeaderPartName => (LEADER_PARTS as readonly PartName[]).includes(name);

/** The one lifecycle shape of every long-running part. */
export interface Part {
  start(): Promise<void> | void;
  stop(): Promise<void> | void;
}

export interface ControlPlaneOptions {
  config: Config;
  /** The root logger; each part logs under its own `control.<subsystem>` category. */
  log: Logger;
  /** Which parts run (default: all but `http` unless `listen` is given, i.e. the whole server). */
  parts?: readonly PartName[];
  /** Where `http` listens (port 0: any free one). */
  listen?: { port: number; host: string };
  /** An open, migrated database to use (its `close` is called by stop); default: the one of `config`, opened and migrated by openControlPlane. */
  database?: Database;
  /** Aborts opening the database (a signal during start-up). */
  signal?: AbortSignal;
  /** How to open the embedded database (default: own it, as the server does; the CLI shares it). */
  embedded?: OpenOptions['embedded'];
  /** Whether an unreachable database server is retried (default: yes, the server waits for it). */
  retry?: boolean;
  /** Default: Docker through the local engine, scoped by CONTROL_PLANE_ID. */
  runtime?: WorkspaceRuntime;
  /** Default: a new feed (with LISTEN when `config.databaseUrl` is set and `changes` runs). */
  changes?: ChangeFeed;
  /** Who may sign in. Default: the allowlist watcher on DATA_DIR/allowlist.json plus SERVICE_ADMIN_EMAIL. */
  allowlist?: AllowlistView;
  /** Default: SESSION_SECRET, or the one generated once in DATA_DIR. */
  sessionSecret?: string;
  /** Timings and hooks of the controllers beyond what configuration sets (tests, benchmarks). */
  tuning?: { workspaces?: Partial<WorkspaceControllerOptions>; runs?: Partial<RunControllerOptions>; idleIntervalMs?: number };
  /** false: every reconcile asks the engine for its containers, as before the shared cache (bench/resync.ts's baseline). Default true. */
  observedStateCache?: boolean;
  /** When start-up began, for the listening line's `startupMs` (default: when this was called). */
  startedAt?: number;
}

/** An open control plane: its shared pieces, its parts, and one start and one stop. */
export interface ControlPlane {
  config: Config;
  store: Store;
  metrics: Metrics;
  runtime: WorkspaceRuntime;
  activity: ActivityRecorder;
  /** Workspace backups (DATA_DIR/backups/), for the admin API and the CLI. */
  backups: Backups;
  changes: ChangeFeed;
  /** Present when its part was asked for (and, with `leadership`, while this process leads). */
  readonly workspaces: WorkspaceController | undefined;
  readonly runs: RunController | undefined;
  readonly idleSweep: IdleSweep | undefined;
  readonly stats: StatsSampler | undefined;
  /** Present when `leadership` was asked for. */
  leadership: Leadership | undefined;
  /** Set once `http` listens: its base URL and handlers. */
  http: { url: string; origin: string; server: http.Server; handlers: AppHandlers } | undefined;
  /** Starts the chosen parts in order; a failure stops those already started and is thrown. */
  start(): Promise<void>;
  /**
   * Stops the started parts in reverse order (HTTP lets in-flight requests finish, bounded), then
   * closes the database. Containers are never touched. Safe to call more than once, and during start.
   */
  stop(): Promise<void>;
}

/**
 * Opens a control plane from its configuration: the database (opened and migrated unless given),
 * then everything `createControlPlane` builds.
 */
export async function openControlPlane(options: ControlPlaneOptions): Promise<ControlPlane> {
  const startedAt = options.startedAt ?? performance.now();
  return createControlPlane({
    ...options,
    startedAt,
    database:
      options.database ??
      (await openMigrated({
        url: options.config.databaseUrl,
        directUrl: options.config.databaseDirectUrl,
        dataDir: options.config.dataDir,
        log: categoryLogger(options.log, 'db'),
        signal: options.signal,
        embedded: options.embedded,
        retry: options.retry,
      })),
  });
}

/**
 * Builds a control plane on an open database: change feed, store, runtime, metrics, and the chosen
 * parts, wired but not started.
 */
export function createControlPlane(options: ControlPlaneOptions & { database: Database }): ControlPlane {
  const { config, log, database } = options;
  const startedAt = options.startedAt ?? performance.now();
  const chosen = new Set<PartName>(options.parts ?? PARTS.filter((name) => name !== 'http' || options.listen !== undefined));
  const changes = options.changes ?? new ChangeFeed();
  const metrics = createMetrics();
  const allowlistFile = AllowlistFile.in(config.dataDir);
  const store = createStore({ db: database.dataSource, changes, environmentCap: config.maxActiveContainers, allowlistFile });
  // Reconciles read observed state from one shared cache fed by the engine's events (src/docker/informer.ts).
  const engine = options.runtime ?? runtimeFor(config);
  const runtime = options.observedStateCache === false ? engine : new InformedRuntime(engine);
  const serverLog = categoryLogger(log, 'server');
  const authLog = categoryLogger(log, 'auth');
  const containersLog = categoryLogger(log, 'containers');
  const activity = new ActivityRecorder(store.workspaces, ACTIVITY_FLUSH_MS, (error) => serverLog.error({ error }, 'writing workspace activity failed'));
  const watcher = options.allowlist ? undefined : new AllowlistWatcher({ file: allowlistFile, log: authLog, implicit: config.serviceAdminEmails, changes });
  const allowlist: AllowlistView = options.allowlist ?? watcher!;
  const backups = new Backups({ store, runtime, dataDir: config.dataDir, image: config.workspaceImage });
  const volumeTemplate = { image: config.workspaceImage, network: config.workspaceNetwork, pidsLimit: config.containerPidsLimit };
  // Every minute, or more often when the idle limit is short (a demo), so a workspace never overstays by much.
  const sweepEveryMs = options.tuning?.idleIntervalMs ?? Math.min(60_000, Math.max(1000, (config.idleStopMinutes * 60_000) / 4));

  /** The leader-only parts chosen, built on `partStore` (a leader's fenced store, or the plain one). */
  const buildLeaderParts = (partStore: Store, fence?: Fence) => {
    // A leader's parts ask its fence before each engine call that may change something, not only
    // before each reconcile: a leader paused between two calls makes the second only if it still leads.
    const leaderRuntime = fence ? runtime.scoped({ beforeChange: () => assertLeads(fence) }) : runtime;
    return {
      workspaces: chosen.has('workspaces')
        ? new WorkspaceController({
            store: partStore,
            fence,
            runtime: leaderRuntime,
            metrics,
            log: containersLog,
            template: { ...volumeTemplate, memoryBytes: config.codeMemoryLimitBytes, nanoCpus: config.codeNanoCpus, editorPort: config.editorPort },
            // Homes move off drained and lost nodes through the leader's backups (a fenced store audits them).
            homes: new Backups({ store: partStore, runtime: leaderRuntime, dataDir: config.dataDir, image: config.workspaceImage }),
            nodeLostMs: config.nodeLostMs,
            ...options.tuning?.workspaces,
          })
        : undefined,
      runs: chosen.has('runs')
        ? new RunController({
            store: partStore,
            fence,
            runtime: leaderRuntime,
            metrics,
            log: categoryLogger(log, 'runs'),
            buildTimeoutMs: config.runBuildTimeoutMs,
            maxRunMs: config.runMaxMs,
            template: {
              ...volumeTemplate,
              memoryBytes: config.runMemoryLimitBytes,
              nanoCpus: config.runNanoCpus,
              nt4Port: config.nt4Port,
              halsimPort: config.halsimPort,
              command: config.simCommand,
            },
            ...options.tuning?.runs,
          })
        : undefined,
      idle: chosen.has('idle')
        ? new IdleSweep({
            workspaces: partStore.workspaces,
            activity,
            metrics,
            log: categoryLogger(log, 'idle'),
            idleMinutes: config.idleStopMinutes,
            intervalMs: sweepEveryMs,
          })
        : undefined,
      stats: chosen.has('stats')
        ? new StatsSampler({ runtime: leaderRuntime, store: partStore, metrics, log: containersLog, homeDisk: config.homeDisk })
        : undefined,
      backups:
        chosen.has('backups') && config.backupSchedule
          ? new BackupSchedule({
              store: partStore,
              backups: new Backups({ store: partStore, runtime: leaderRuntime, dataDir: config.dataDir, image: config.workspaceImage }),
              runtime: leaderRuntime,
              metrics,
              log: categoryLogger(log, 'backups'),
              ...config.backupSchedule,
            })
          : undefined,
    };
  };
  type LeaderParts = ReturnType<typeof buildLeaderParts>;
  const led = chosen.has('leadership');
  /** The leader-only parts now: built once without `leadership`, per term with it (none while following). */
  let leaderParts: LeaderParts | undefined = led ? undefined : buildLeaderParts(store);
  /** This process in the `servers` table and on the lease. */
  const self = { id: randomUUID(), publicUrl: '', hostname: os.hostname(), pid: process.pid, pidNamespace: pidNamespace() };
  metrics.replicaInfo.set({ replica: self.id, hostname: self.hostname, pid: String(self.pid), version: SERVICE.version }, 1);
  const leadershipLog = categoryLogger(log, 'leader');
  const runningLeaderParts: { name: LeaderPartName; part: Part }[] = [];
  const leadership = led
    ? new Leadership({
        leases: store.leases,
        holder: self.id,
        lease: config.lease,
        boundWrites: !database.embedded,
        metrics,
        log: leadershipLog,
        lead: async (fence) => {
          const parts = buildLeaderParts(
            createStore({ db: database.dataSource, changes, environmentCap: config.maxActiveContainers, allowlistFile, fence }),
            fence,
          );
          leaderParts = parts;
          for (const name of LEADER_PARTS) {
            const part = parts[name];
            if (!part) continue;
            await part.start();
            runningLeaderParts.push({ name, part });
          }
        },
        holderGone: async () => {
          const lease = await store.leases.get(RECONCILER_LEASE);
          if (!lease || lease.holder === self.id) return undefined;
          const holder = await store.servers.get(lease.holder);
          // Only a process of this host and PID namespace can be known dead (replicas in containers on
          // one host may share its name and their pid; a process restarted in the same namespace may
          // reuse the pid: then it is this one).
          if (!holder || holder.hostname !== self.hostname || holder.pidNamespace !== self.pidNamespace) return undefined;
          return holder.pid === process.pid || !processRuns(holder.pid) ? lease.holder : undefined;
        },
        follow: async () => {
          leaderParts = undefined;
          for (const { name, part } of runningLeaderParts.splice(0).toReversed()) {
            try {
              await part.stop();
            } catch (error) {
              leadershipLog.error({ part: name, error }, `stopping ${name} failed`);
            }
          }
        },
      })
    : undefined;

  const plane: ControlPlane = {
    config,
    store,
    metrics,
    runtime,
    activity,
    backups,
    changes,
    get workspaces() {
      return leaderParts?.workspaces;
    },
    get runs() {
      return leaderParts?.runs;
    },
    get idleSweep() {
      return leaderParts?.idle;
    },
    get stats() {
      return leaderParts?.stats;
    },
    leadership,
    http: undefined,
    start: async () => undefined,
    stop: async () => undefined,
  };

  const httpPart: Part = {
    start: async () => {
      const { port, host } = options.listen ?? { port: config.port, host: config.host };
      const secret = options.sessionSecret ?? (await sessionSecret(config, authLog));
      if (config.providers.length === 0) {
        authLog.info(
          'no sign-in provider configured: users sign in by links only (cli users sign-in-link, or the panel); set GITHUB_CLIENT_ID, GOOGLE_CLIENT_ID or OIDC_CLIENT_ID for sign-in with an account',
        );
      }
      const server = http.createServer();
      // Clients never take the descriptors the control plane needs for itself (src/descriptors.ts).
      const budget = descriptorBudget(descriptorLimit(), config.proxyTunnels.total);
      server.maxConnections = budget.maxConnections;
      const dropped = new Fold();
      server.on('drop', () => {
        metrics.httpConnectionsDropped.inc();
        const repeats = dropped.take('drop');
        if (repeats !== undefined)
          serverLog.warning(
            { maxConnections: budget.maxConnections, reserve: budget.reserve, repeats },
            `closed a new connection on arrival: ${budget.maxConnections} client connections are open, the most this server holds (descriptors kept in reserve: ${budget.reserve})`,
          );
      });
      await listen(server, port, host, config.reusePort);
      const bound = (server.address() as AddressInfo).port;
      const url = `http://${urlHost(host)}:${bound}`;
      const origin = config.publicUrl ?? url;
      const tunnelLimits = { perWorkspace: config.proxyTunnels.perWorkspace, total: budget.maxTunnels };
      // Attached before this tick ends, so before any connection is handled.
      const handlers = createApp({
        config,
        store,
        metrics,
        log,
        publicOrigin: origin,
        sessionSecret: secret,
        allowlist,
        activity,
        backups,
        runtime,
        tunnelLimits,
        serverId: chosen.has('presence') ? self.id : undefined,
      });
      server.on('request', handlers.request);
      server.on('upgrade', handlers.upgrade);
      server.on('clientError', handlers.clientError);
      plane.http = { url, origin, server, handlers };
      serverLog.info(
        {
          descriptors: budget.limit,
          descriptorReserve: budget.reserve,
          maxConnections: budget.maxConnections,
          maxTunnels: tunnelLimits.total,
          maxTunnelsPerWorkspace: tunnelLimits.perWorkspace,
        },
        `descriptors: ${budget.limit ?? 'no limit known'}, of which ${budget.reserve} kept for the control plane's own use; at most ${budget.maxConnections} client connections and ${tunnelLimits.total} WebSocket tunnels (${tunnelLimits.perWorkspace} per workspace)`,
      );
      serverLog.info(
        { host, port: bound, publicUrl: origin, version: SERVICE.version, startupMs: Math.round(performance.now() - startedAt) },
        `listening on http://${host}:${bound}`,
      );
    },
    stop: async () => {
      if (plane.http) await closeGracefully(plane.http.server, plane.http.handlers, serverLog);
    },
  };

  /** Removes this server's row once everything else has stopped (set when presence stops). */
  let unregister: (() => Promise<void>) | undefined;
  const factories: Record<PartName, () => Part> = {
    changes: () => {
      let unsubscribe: (() => void) | undefined;
      return {
        // Other processes' changes (the CLI's): LISTEN on PostgreSQL; the embedded database's owner hears them itself.
        start: () => {
          if (options.changes !== undefined) return;
          if (database.onNotification) unsubscribe = database.onNotification((channel, payload) => changes.deliver(channel, payload));
          // LISTEN holds a session: on DATABASE_DIRECT_URL, which bypasses a pooler in transaction mode.
          else if (config.databaseDirectUrl !== undefined) changes.listen(config.databaseDirectUrl, categoryLogger(log, 'db'));
        },
        stop: async () => {
          unsubscribe?.();
          await changes.close();
        },
      };
    },
    allowlist: () => watcher ?? { start: () => undefined, stop: () => undefined },
    admins: () => ({ start: async () => void (await promoteConfiguredAdmins(store.users, config.serviceAdminEmails, authLog)), stop: () => undefined }),
    activity: () => activity,
    http: () => httpPart,
    setup: () => ({ start: () => (plane.http ? printSetupLink(store, plane.http.origin, serverLog) : undefined), stop: () => undefined }),
    presence: () => {
      // This server's row in `servers`: the CLI asks whether a server will act, and at which address.
      const server = self;
      // Its success or failure is also `database_up`.
      const beat = new Periodic(
        async () => {
          await store.servers.heartbeat(server);
          metrics.databaseUp.set(1);
        },
        SERVER_HEARTBEAT_MS,
        (error) => {
          metrics.databaseUp.set(0);
          serverLog.warning({ error }, "refreshing this server's row in the database failed");
        },
      );
      return {
        start: async () => {
          if (!plane.http) return;
          server.publicUrl = plane.http.origin;
          await store.servers.heartbeat(server);
          metrics.databaseUp.set(1);
          beat.start();
        },
        stop: async () => {
          await beat.stop();
          if (!server.publicUrl) return;
          // Stopping, said before anything is let go: while this row says so, the replicas older than
          // the newest take no new connections (GET /readyz), so that the editors this one lets go
          // land on the newest. The row goes last (plane.stop), once the editors have gone.
          unregister = () => store.servers.unregister(server.id).catch((error: unknown) => serverLog.warning({ error }, "removing this server's row failed"));
          try {
            await store.servers.markStopping(server.id);
            // The balancer's next checks see the others draining before this one closes its editors.
            if ((await store.servers.live()).length > 1) await sleep(BALANCER_NOTICE_MS);
          } catch (error) {
            serverLog.warning({ error }, 'saying that this server stops failed');
          }
        },
      };
    },
    leadership: () => leadership!,
    workspaces: () => leaderParts!.workspaces!,
    runs: () => leaderParts!.runs!,
    idle: () => leaderParts!.idle!,
    stats: () => leaderParts!.stats!,
    backups: () => leaderParts!.backups ?? { start: () => undefined, stop: () => undefined },
    sessions: () =>
      new Periodic(
        () => store.sessions.prune(),
        SESSION_PRUNE_MS,
        (error) => authLog.error({ error }, 'pruning expired sessions failed'),
      ),
  };

  const started: { name: PartName; part: Part }[] = [];
  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  plane.start = () =>
    (starting ??= (async () => {
      for (const name of PARTS) {
        if (!chosen.has(name) || stopping || (led && isLeaderPart(name))) continue;
        const part = factories[name]();
        await part.start();
        started.push({ name, part });
      }
    })());
  plane.stop = () =>
    (stopping ??= (async () => {
      await starting?.catch(() => undefined);
      for (const { name, part } of started.toReversed()) {
        try {
          await part.stop();
        } catch (error) {
          serverLog.error({ part: name, error }, `stopping ${name} failed`);
        }
      }
      await unregister?.();
      await database.close().catch((error: unknown) => serverLog.error({ error }, 'closing the database failed'));
    })());
  return plane;
}

/**
 * With no admin yet, makes the one-time setup link and prints it to the server's own output (the
 * token URL of Jupyter): whoever opens it first, within 15 minutes, becomes the first admin.
 */
async function printSetupLink(store: Store, origin: string, log: Logger): Promise<void> {
  const link = await store.links.createSetup();
  if (!link) return;
  log.info(
    { expiresAt: link.expiresAt.toISOString() },
    `no admin yet: open ${origin}${linkPath('setup', link.token)} within 15 minutes to become the first admin (it works once; "cli setup-link" prints a new one)`,
  );
}

/** The session-signing key, saying so when one was generated. */
async function sessionSecret(config: Config, authLog: Logger): Promise<string> {
  const { secret, generated } = await loadSessionSecret(config.sessionSecret, config.dataDir);
  if (generated) authLog.info({ file: path.join(config.dataDir, 'session-secret') }, 'no SESSION_SECRET set: generated one and kept it in the data directory');
  return secret;
}

/**
 * Stops accepting connections, ends proxied WebSockets (browsers reconnect to the next process) and
 * event streams, lets in-flight requests finish (proxied ones too: the editor's answer is still
 * passed on), closes keep-alive sockets as they become idle, and after the grace period closes
 * whatever is left; then releases the proxy's upstream connections.
 */
async function closeGracefully(server: http.Server, handlers: AppHandlers, log: Logger): Promise<void> {
  log.info('shutting down: no new connections, waiting for in-flight requests');
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  handlers.endStreams();
  const reaper = setInterval(() => server.closeIdleConnections(), 50);
  const grace = setTimeout(() => {
    log.warning({ graceMs: SHUTDOWN_GRACE_MS }, 'in-flight requests still open after the grace period, closing them');
    // Upgraded sockets are not the server's connections any more: those that came meanwhile go too.
    handlers.endStreams();
    server.closeAllConnections();
  }, SHUTDOWN_GRACE_MS);
  await closed;
  clearInterval(reaper);
  clearTimeout(grace);
  handlers.close();
}

/** This process's PID namespace (`pid:[4026531836]`), or '' where there is none to read (not Linux). */
function pidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return '';
  }
}

/** Whether a process with this pid runs on this host (one of another user's still counts). */
function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Listens on host:port, turning a failure into a clear error: the port in use, or privileges
 * missing. With `reusePort` (SO_REUSEPORT), other processes of this host's user may listen there
 * too, and the kernel spreads connections among them.
 */
function listen(server: http.Server, port: number, host: string, reusePort: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const reason =
        error.code === 'EADDRINUSE'
          ? 'is already in use'
          : error.code === 'EACCES'
            ? 'needs privileges this process lacks'
            : `failed (${error.code ?? 'unknown'})`;
      reject(new ListenError(`cannot listen: ${host}:${port} ${reason}`, host, port, error.code));
    });
    server.listen({ port, host, reusePort }, () => {
      server.removeAllListeners('error');
      resolve();
    });
  });
}

/** Listening failed; the message says why in the operator's words. */
export class ListenError extends Error {
  readonly host: string;
  readonly port: number;
  readonly code: string | undefined;
  constructor(message: string, host: string, port: number, code: string | undefined) {
    super(message);
    this.name = 'ListenError';
    this.host = host;
    this.port = port;
    this.code = code;
  }
}
