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
import { createApp, type AllowlistView, type AppDeps, type AppHandlers } from '../api/app.ts';
import { promoteConfiguredAdmins } from '../controllers/admin-bootstrap.ts';
import { AllowlistWatcher } from '../controllers/allowlist-watcher.ts';
import { BackupSchedule } from '../controllers/backup-schedule.ts';
import { JoinCodeExpiry } from '../controllers/join-code-expiry.ts';
import { IdleSweep } from '../controllers/idle-sweep.ts';
import { LessonController, type LessonControllerOptions } from '../controllers/lessons.ts';
import { LessonFiles } from '../src/lessons/lessons.ts';
import { Leadership } from '../controllers/leadership.ts';
import { Manager, type Runnable } from '../controllers/manager.ts';
import { Periodic } from '../controllers/periodic.ts';
import { PresenceTracker } from '../api/proxy/presence.ts';
import { RunController, type RunControllerOptions } from '../controllers/runs.ts';
import { StatsSampler } from '../controllers/stats-sampler.ts';
import { WorkspaceController, type WorkspaceControllerOptions } from '../controllers/workspaces.ts';
import { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import { Backups } from '../src/backup/backups.ts';
import { urlHost, type Config } from '../src/config.ts';
import { ChangeFeed } from '../src/db/changes.ts';
import { openMigrated, type Database, type OpenOptions } from '../src/db/database.ts';
import { InformedRuntime, runtimeFor } from '../src/docker/runtimes.ts';
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
 * How long a stopping replica that has others waits at least, once its row says it stops, before it
 * lets its editors go: two of a balancer's checks a second apart (deploy/haproxy.cfg), so that it
 * sees the older replicas draining (GET /readyz) and sends the editors to the newest.
 */
const BALANCER_NOTICE_MS = 2500;
/**
 * How long it waits at most for itself and every replica it drains to have answered a check with
 * "draining" (ServerStore.drainSaid): a check answered late on a busy machine; a replica no
 * balancer checks never answers. With SHUTDOWN_GRACE_MS it stays within compose's stop period (15 s).
 */
const BALANCER_NOTICE_MAX_MS = 5000;
/** After the last of them answered: the balancer reads the answer before the editors come back. */
const BALANCER_READ_MS = 250;
/**
 * How long a stopping replica that has others keeps its row (saying it stops) after it lets its
 * editors go, at least: while the row is there the older replicas still drain, so an editor that
 * reconnects late lands on the newest; once it goes, a balancer's next check sends them requests
 * again. Counted from the editors' release, so it overlaps the wait for in-flight requests.
 */
const EDITORS_RETURN_MS = 2500;

/** How often activity gathered in memory is written to the database. */
const ACTIVITY_FLUSH_MS = 10_000;

/** How often expired sessions are deleted. */
const SESSION_PRUNE_MS = 60 * 60_000;

/**
 * The long-running parts of a control plane, in the order they are added to its manager and so
 * start (they stop in reverse; controllers/manager.ts). `setup` prints the first-run setup link
 * while no admin exists (it needs `http`'s address). With `leadership`, the leader-only parts
 * (`workspaces` to `lessons`: the controllers, the idle sweep, the stats sampler, the backup
 * schedule, the join codes' expiry and the lesson controller) run only while this process holds the reconciler lease, made anew for each term on a
 * store that writes under its fence; without it (a test or benchmark driving a controller
 * directly) they run from start to stop, unfenced.
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
  'joins',
  'lessons',
  'sessions',
] as const;
export type PartName = (typeof PARTS)[number];

/**
 * What a leader's parts work through (the composition root's term of the Manager): for a term won,
 * a store that writes under its fence, a runtime that asks the fence before every change, and
 * backups over both; without `leadership`, the plain store and runtime, unfenced.
 */
interface Term {
  store: Store;
  fence: Fence | undefined;
  runtime: WorkspaceRuntime;
  backups: Backups;
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
  tuning?: {
    workspaces?: Partial<WorkspaceControllerOptions>;
    runs?: Partial<RunControllerOptions>;
    lessons?: Partial<LessonControllerOptions>;
    idleIntervalMs?: number;
    /** The HALSim relay's watchdog (api/proxy/halsim.ts), for a page test whose browser may stall longer. */
    driverWatchdogMs?: number;
  };
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
  readonly lessons: LessonController | undefined;
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
 * parts, added to its manager in the order of PARTS, wired but not started.
 */
export function createControlPlane(options: ControlPlaneOptions & { database: Database }): ControlPlane {
  const { config, log, database } = options;
  const chosen = new Set<PartName>(options.parts ?? PARTS.filter((name) => name !== 'http' || options.listen !== undefined));
  const changes = options.changes ?? new ChangeFeed();
  const metrics = createMetrics();
  const allowlistFile = AllowlistFile.in(config.dataDir);
  const storeUnder = (fence?: Fence) => createStore({ db: database.dataSource, changes, environmentCap: config.maxActiveContainers, allowlistFile, fence });
  const store = storeUnder();
  // Reconciles read observed state from one shared cache fed by the engine's events (src/docker/informer.ts).
  const engine = options.runtime ?? runtimeFor(config);
  const runtime = options.observedStateCache === false ? engine : new InformedRuntime(engine);
  const termOf = (termStore: Store, termRuntime: WorkspaceRuntime, fence?: Fence): Term => ({
    store: termStore,
    fence,
    runtime: termRuntime,
    backups: new Backups({ store: termStore, runtime: termRuntime, dataDir: config.dataDir, image: config.workspaceImage }),
  });
  const unfenced = termOf(store, runtime);
  const serverLog = categoryLogger(log, 'server');
  const authLog = categoryLogger(log, 'auth');
  const containersLog = categoryLogger(log, 'containers');
  const leadershipLog = categoryLogger(log, 'leader');
  const led = chosen.has('leadership');
  const manager = new Manager<Term>({
    log: serverLog,
    // A leader's parts ask its fence before each engine call that may change something, not only
    // before each reconcile: a leader paused between two calls makes the second only if it still leads.
    term: (fence) => (fence ? termOf(storeUnder(fence), runtime.scoped({ beforeChange: () => assertLeads(fence) }), fence) : unfenced),
    election: led ? { log: leadershipLog } : undefined,
  });
  const activity = new ActivityRecorder(store.workspaces, ACTIVITY_FLUSH_MS, (error) => serverLog.error({ error }, 'writing workspace activity failed'));
  const watcher = options.allowlist ? undefined : new AllowlistWatcher({ file: allowlistFile, log: authLog, implicit: config.serviceAdminEmails, changes });
  const volumeTemplate = { image: config.workspaceImage, network: config.workspaceNetwork, pidsLimit: config.containerPidsLimit };
  // Every minute, or more often when the idle limit is short (a demo), so a workspace never overstays by much.
  const sweepEveryMs = options.tuning?.idleIntervalMs ?? Math.min(60_000, Math.max(1000, (config.idleStopMinutes * 60_000) / 4));
  /** This process in the `servers` table and on the lease. */
  const self: ServerSelf = { id: randomUUID(), publicUrl: '', hostname: os.hostname(), pid: process.pid, pidNamespace: pidNamespace() };
  metrics.replicaInfo.set({ replica: self.id, hostname: self.hostname, pid: String(self.pid), version: SERVICE.version }, 1);

  if (chosen.has('changes')) manager.add('changes', changeListener(changes, options.changes !== undefined, database, config, categoryLogger(log, 'db')));
  if (chosen.has('allowlist') && watcher) manager.add('allowlist', watcher);
  if (chosen.has('admins'))
    manager.add(
      'admins',
      atStart(async () => void (await promoteConfiguredAdmins(store.users, config.serviceAdminEmails, authLog))),
    );
  if (chosen.has('activity')) manager.add('activity', activity);
  // Who is at each workspace, written under this server's row (`presence` writes it): added before
  // `http`, it stops once the tunnels have closed, and then clears this server's rows.
  const present = chosen.has('presence') && chosen.has('http') ? workspacePresence(store, self.id, serverLog) : undefined;
  if (present) manager.add('workspace presence', present);
  const web = chosen.has('http')
    ? new HttpPart({
        config,
        log,
        listen: options.listen ?? { port: config.port, host: config.host },
        sessionSecret: options.sessionSecret,
        startedAt: options.startedAt ?? performance.now(),
        app: {
          store,
          metrics,
          allowlist: options.allowlist ?? watcher!,
          activity,
          backups: unfenced.backups,
          runtime,
          serverId: chosen.has('presence') ? self.id : undefined,
          presence: present,
          driverWatchdogMs: options.tuning?.driverWatchdogMs,
        },
      })
    : undefined;
  if (web) manager.add('http', web);
  if (chosen.has('setup'))
    manager.add(
      'setup',
      atStart(() => (web?.serving ? printSetupLink(store, web.serving.origin, serverLog) : undefined)),
    );
  const presence = chosen.has('presence')
    ? new Presence({ store, metrics, self, origin: () => web?.serving?.origin, log: serverLog, rowLost: () => present?.rewrite() })
    : undefined;
  if (presence) manager.add('presence', presence);
  const leadership = led
    ? new Leadership({
        leases: store.leases,
        holder: self.id,
        lease: config.lease,
        boundWrites: !database.embedded,
        metrics,
        log: leadershipLog,
        lead: (fence) => manager.lead(fence),
        follow: () => manager.follow(),
        holderGone: () => holderGone(store, self),
      })
    : undefined;
  if (leadership) manager.add('leadership', leadership);
  // The leader-only parts, made anew on each term's fenced store and runtime (once, unfenced, without `leadership`).
  const workspaces = chosen.has('workspaces')
    ? manager.add(
        'workspaces',
        ({ store: termStore, fence, runtime: termRuntime, backups }) =>
          new WorkspaceController({
            store: termStore,
            fence,
            runtime: termRuntime,
            metrics,
            log: containersLog,
            template: { ...volumeTemplate, memoryBytes: config.codeMemoryLimitBytes, nanoCpus: config.codeNanoCpus, editorPort: config.editorPort },
            // Homes move off drained and lost nodes through the leader's backups (a fenced store audits them).
            homes: backups,
            nodeLostMs: config.nodeLostMs,
            ...options.tuning?.workspaces,
          }),
        { leaderOnly: true },
      )
    : undefined;
  const runs = chosen.has('runs')
    ? manager.add(
        'runs',
        ({ store: termStore, fence, runtime: termRuntime }) =>
          new RunController({
            store: termStore,
            fence,
            runtime: termRuntime,
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
          }),
        { leaderOnly: true },
      )
    : undefined;
  const idle = chosen.has('idle')
    ? manager.add(
        'idle',
        ({ store: termStore }) =>
          new IdleSweep({
            workspaces: termStore.workspaces,
            activity,
            metrics,
            log: categoryLogger(log, 'idle'),
            idleMinutes: config.idleStopMinutes,
            intervalMs: sweepEveryMs,
          }),
        { leaderOnly: true },
      )
    : undefined;
  const stats = chosen.has('stats')
    ? manager.add(
        'stats',
        ({ store: termStore, runtime: termRuntime }) =>
          new StatsSampler({ runtime: termRuntime, store: termStore, metrics, log: containersLog, homeDisk: config.homeDisk }),
        { leaderOnly: true },
      )
    : undefined;
  const { backupSchedule } = config;
  if (chosen.has('backups') && backupSchedule)
    manager.add(
      'backups',
      ({ store: termStore, runtime: termRuntime, backups }) =>
        new BackupSchedule({ store: termStore, backups, runtime: termRuntime, metrics, log: categoryLogger(log, 'backups'), ...backupSchedule }),
      { leaderOnly: true },
    );
  // Whatever JOIN_CODES says now: guests of codes opened while it was on are still backed up and removed when their code expires.
  if (chosen.has('joins'))
    manager.add(
      'joins',
      ({ store: termStore, runtime: termRuntime, backups }) =>
        new JoinCodeExpiry({ store: termStore, backups, runtime: termRuntime, metrics, log: categoryLogger(log, 'joins') }),
      { leaderOnly: true },
    );
  const lessons = chosen.has('lessons')
    ? manager.add(
        'lessons',
        ({ store: termStore, fence, runtime: termRuntime, backups }) =>
          new LessonController({
            store: termStore,
            fence,
            runtime: termRuntime,
            backups,
            files: new LessonFiles(config.dataDir),
            image: config.workspaceImage,
            maxBytes: config.lessonMaxBytes,
            metrics,
            log: categoryLogger(log, 'lessons'),
            ...options.tuning?.lessons,
          }),
        { leaderOnly: true },
      )
    : undefined;
  if (chosen.has('sessions'))
    manager.add(
      'sessions',
      new Periodic(
        () => store.sessions.prune(),
        SESSION_PRUNE_MS,
        (error) => authLog.error({ error }, 'pruning expired sessions failed'),
      ),
    );

  let stopping: Promise<void> | undefined;
  return {
    config,
    store,
    metrics,
    runtime,
    activity,
    backups: unfenced.backups,
    changes,
    get workspaces() {
      return workspaces?.current;
    },
    get runs() {
      return runs?.current;
    },
    get lessons() {
      return lessons?.current;
    },
    get idleSweep() {
      return idle?.current;
    },
    get stats() {
      return stats?.current;
    },
    leadership,
    get http() {
      return web?.serving;
    },
    start: () => manager.start(),
    stop: () =>
      (stopping ??= (async () => {
        await manager.stop();
        // The server's row goes last, once the editors have gone (see Presence).
        await presence?.unregister();
        await database.close().catch((error: unknown) => serverLog.error({ error }, 'closing the database failed'));
      })()),
  };
}

/** The proxy's presence tracker of server `serverId` (api/proxy/presence.ts); a failed write is logged once a minute at most (the next write retries it). */
function workspacePresence(store: Store, serverId: string, log: Logger): PresenceTracker {
  const failures = new Fold();
  return new PresenceTracker({
    store: store.presence,
    serverId,
    onError: (error) => {
      const repeats = failures.take('write');
      if (repeats !== undefined) log.error({ error, repeats }, "writing who is at each workspace (the class view's presence) failed");
    },
  });
}

/** A part that does something once at start and nothing at stop. */
const atStart = (start: () => Promise<void> | void): Runnable => ({ start, stop: () => undefined });

/** This process as the `servers` table and the lease know it (`publicUrl` once `http` listens). */
interface ServerSelf {
  id: string;
  publicUrl: string;
  hostname: string;
  pid: number;
  pidNamespace: string;
}

/**
 * The `changes` part: other processes' changes (the CLI's), heard through LISTEN on PostgreSQL (on
 * DATABASE_DIRECT_URL: LISTEN holds a session, which a pooler in transaction mode would not keep),
 * or by the embedded database's owner itself; nothing is listened for when the feed was `given`.
 * Stopping closes the feed.
 */
function changeListener(changes: ChangeFeed, given: boolean, database: Database, config: Config, dbLog: Logger): Runnable {
  let unsubscribe: (() => void) | undefined;
  return {
    start: () => {
      if (given) return;
      if (database.onNotification) unsubscribe = database.onNotification((channel, payload) => changes.deliver(channel, payload));
      else if (config.databaseDirectUrl !== undefined) changes.listen(config.databaseDirectUrl, dbLog);
    },
    stop: async () => {
      unsubscribe?.();
      await changes.close();
    },
  };
}

/**
 * The `http` part: listens, serves the app (`serving` once it listens: its base URL and handlers),
 * and at stop closes gracefully.
 */
class HttpPart implements Runnable {
  /** Set once it listens. */
  serving: ControlPlane['http'];
  private readonly options: {
    config: Config;
    log: Logger;
    listen: { port: number; host: string };
    sessionSecret: string | undefined;
    startedAt: number;
    app: Pick<AppDeps, 'store' | 'metrics' | 'allowlist' | 'activity' | 'backups' | 'runtime' | 'serverId' | 'presence' | 'driverWatchdogMs'>;
  };

  constructor(options: HttpPart['options']) {
    this.options = options;
  }

  async start(): Promise<void> {
    const {
      config,
      log,
      listen: { port, host },
      app,
      startedAt,
    } = this.options;
    const serverLog = categoryLogger(log, 'server');
    const authLog = categoryLogger(log, 'auth');
    const secret = this.options.sessionSecret ?? (await sessionSecret(config, authLog));
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
      app.metrics.httpConnectionsDropped.inc();
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
    const handlers = createApp({ ...app, config, log, publicOrigin: origin, sessionSecret: secret, tunnelLimits });
    server.on('request', handlers.request);
    server.on('upgrade', handlers.upgrade);
    server.on('clientError', handlers.clientError);
    this.serving = { url, origin, server, handlers };
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
  }

  async stop(): Promise<void> {
    if (this.serving) await closeGracefully(this.serving.server, this.serving.handlers, categoryLogger(this.options.log, 'server'));
  }
}

/**
 * The `presence` part: this server's row in `servers` (the CLI asks whether a server will act, and
 * at which address), written at start once `http` listens and refreshed every SERVER_HEARTBEAT_MS;
 * its success or failure is also `database_up`. Stopping says so in the row; `unregister` removes
 * the row, once everything else has stopped.
 */
class Presence implements Runnable {
  private readonly options: {
    store: Store;
    metrics: Metrics;
    self: ServerSelf;
    origin: () => string | undefined;
    log: Logger;
    /** Called when a heartbeat found the row gone (cleared by another server while this one was paused), with what was kept under it. */
    rowLost: () => void;
  };
  private readonly beat: Periodic;
  /** Whether the row says this server stops (and so is to be removed). */
  private marked = false;
  /** When the editors were let go, as far as this part knows (its stop ended), when other replicas run. */
  private releasedAt: number | undefined;

  constructor(options: Presence['options']) {
    this.options = options;
    const { store, metrics, self, log } = options;
    this.beat = new Periodic(
      async () => {
        if (await store.servers.heartbeat(self)) options.rowLost();
        metrics.databaseUp.set(1);
      },
      SERVER_HEARTBEAT_MS,
      (error) => {
        metrics.databaseUp.set(0);
        log.warning({ error }, "refreshing this server's row in the database failed");
      },
    );
  }

  async start(): Promise<void> {
    const origin = this.options.origin();
    if (!origin) return;
    this.options.self.publicUrl = origin;
    await this.options.store.servers.heartbeat(this.options.self);
    this.options.metrics.databaseUp.set(1);
    this.beat.start();
  }

  async stop(): Promise<void> {
    const { store, self, log } = this.options;
    await this.beat.stop();
    if (!self.publicUrl) return;
    // Stopping, said before anything is let go: while this row says so, this one and the replicas
    // older than the newest take no new connections (GET /readyz), so that no request is in flight
    // here when the balancer marks this one down, and the editors it lets go land on the newest.
    // The row goes last (unregister), once the editors have gone.
    this.marked = true;
    try {
      await store.servers.markStopping(self.id);
      // The balancer's next checks see this one and the others draining before it closes.
      if ((await store.servers.live()).length > 1) {
        await this.balancerNotices();
        // The editors go next (the http part stops after this one).
        this.releasedAt = Date.now();
      }
    } catch (error) {
      log.warning({ error }, 'saying that this server stops failed');
    }
  }

  /**
   * Waits BALANCER_NOTICE_MS, and then until this one and every replica its stop drains have
   * answered a check with "draining" (and BALANCER_READ_MS more when one answered late),
   * BALANCER_NOTICE_MAX_MS at most.
   */
  private async balancerNotices(): Promise<void> {
    const { store, self } = this.options;
    const deadline = Date.now() + BALANCER_NOTICE_MAX_MS;
    await sleep(BALANCER_NOTICE_MS);
    if (await store.servers.drainSaid(self.id)) return;
    while (Date.now() < deadline) {
      await sleep(100);
      if (await store.servers.drainSaid(self.id)) {
        await sleep(BALANCER_READ_MS);
        return;
      }
    }
    this.options.log.warning(
      `a replica that drains has not answered a balancer's check in ${BALANCER_NOTICE_MAX_MS / 1000} s; letting the editors go (some may land on it and move again)`,
    );
  }

  /** Removes this server's row, when stopping said it stops: EDITORS_RETURN_MS after the editors were let go, at the earliest. */
  async unregister(): Promise<void> {
    if (!this.marked) return;
    const left = this.releasedAt === undefined ? 0 : this.releasedAt + EDITORS_RETURN_MS - Date.now();
    if (left > 0) await sleep(left);
    await this.options.store.servers
      .unregister(this.options.self.id)
      .catch((error: unknown) => this.options.log.warning({ error }, "removing this server's row failed"));
  }
}

/**
 * The lease's holder when it is known to be dead, else undefined. Only a process of this host and
 * PID namespace can be known dead (replicas in containers on one host may share its name and their
 * pid; a process restarted in the same namespace may reuse the pid: then it is this one).
 */
async function holderGone(store: Store, self: ServerSelf): Promise<string | undefined> {
  const lease = await store.leases.get(RECONCILER_LEASE);
  if (!lease || lease.holder === self.id) return undefined;
  const holder = await store.servers.get(lease.holder);
  if (!holder || holder.hostname !== self.hostname || holder.pidNamespace !== self.pidNamespace) return undefined;
  return holder.pid === process.pid || !processRuns(holder.pid) ? lease.holder : undefined;
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
