import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { InFlightGauge, RequestHistogram } from './request-histogram.ts';
import { TASK_FAILURE_REASONS } from './docker/runtime.ts';
import { TERMINAL_RUN_STATUSES } from './wire/vocabulary.ts';

/** Buckets for request-scale latencies (seconds). */
const FAST = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Buckets for build and container-start latencies (seconds). */
const SLOW = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];
/** Buckets for how long a run stays running (seconds). */
const LONG = [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200];

/**
 * Creates a registry holding the default process and Node metrics and every metric of the spec
 * (plus the reconciler's own), so that the rest of the code only observes them.
 */
export function createMetrics(): Metrics {
  return initialise(buildMetrics());
}

function buildMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const leaderRenewal: { at: number | undefined } = { at: undefined };
  return {
    registry,
    // Observed by every request (twice by a proxied one): see RequestHistogram.
    httpRequestDuration: new RequestHistogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request latency by method, templated route and status class.',
      labelNames: ['method', 'route', 'status_class'] as const,
      buckets: FAST,
      registers,
    }),
    // Moved twice by every request: see InFlightGauge.
    httpRequestsInFlight: new InFlightGauge({ name: 'http_requests_in_flight', help: 'HTTP requests being dispatched.', registers }),
    proxyUpstreamDuration: new RequestHistogram({
      name: 'proxy_upstream_duration_seconds',
      help: 'Latency of upstream fetches (vscode, nt4, halsim) by outcome.',
      labelNames: ['upstream', 'outcome'] as const,
      buckets: FAST,
      registers,
    }),
    proxyUpstreamUnverified: new Counter({
      name: 'proxy_upstream_unverified_total',
      help: "Connections to an editor or simulator refused because the recorded address was not where the workspace's or run's live container serves.",
      labelNames: ['upstream'] as const,
      registers,
    }),
    proxyTunnelsOpen: new Gauge({ name: 'proxy_tunnels_open', help: 'WebSocket tunnels open to editors and simulators.', registers }),
    proxyTunnelRefusals: new Counter({
      name: 'proxy_tunnel_refusals_total',
      help: "WebSocket upgrades refused at a bound on open tunnels: a workspace's (workspace) or the server's (server).",
      labelNames: ['bound'] as const,
      registers,
    }),
    halsimMessages: new Counter({
      name: 'halsim_messages_total',
      help: "HALSim messages the proxy's relay handled, by direction (to_robot, to_browser) and outcome (relayed, dropped_rate, dropped_robot, rejected).",
      labelNames: ['direction', 'outcome'] as const,
      registers,
    }),
    halsimDrivers: new Gauge({ name: 'halsim_drivers', help: "Driver Stations connected to a robot through this replica's HALSim relay.", registers }),
    halsimDisables: new Counter({
      name: 'halsim_robot_disables_total',
      help: 'Disable messages the HALSim relay sent a robot of its own accord, by reason (connected, silence, ended).',
      labelNames: ['reason'] as const,
      registers,
    }),
    httpConnectionsDropped: new Counter({
      name: 'http_connections_dropped_total',
      help: 'Client connections closed on arrival because the server held its most (descriptors kept in reserve).',
      registers,
    }),
    runBuildDuration: new Histogram({
      name: 'run_build_duration_seconds',
      help: 'Time from run queue to the first sim-ready signal.',
      buckets: SLOW,
      registers,
    }),
    runActiveDuration: new Histogram({
      name: 'run_active_duration_seconds',
      help: 'Time a run spent running before it ended, by terminal status.',
      labelNames: ['terminal_status'] as const,
      buckets: LONG,
      registers,
    }),
    runsTotal: new Counter({ name: 'runs_total', help: 'Completed runs by terminal status.', labelNames: ['terminal_status'] as const, registers }),
    containerStartDuration: new Histogram({
      name: 'container_start_duration_seconds',
      help: 'Cold-start time of a workspace code container.',
      buckets: SLOW,
      registers,
    }),
    containerCpuPercent: new Gauge({
      name: 'container_cpu_percent',
      help: 'CPU of a workspace code container, sampled every 15 s.',
      labelNames: ['workspace_id'] as const,
      registers,
    }),
    containerMemoryPercent: new Gauge({
      name: 'container_memory_percent',
      help: 'Memory of a workspace code container as a percentage of its limit, sampled every 15 s.',
      labelNames: ['workspace_id'] as const,
      registers,
    }),
    activeWorkspaces: new Gauge({ name: 'active_workspaces', help: 'Workspaces with a running container at the last poll.', registers }),
    idleSweepStops: new Counter({ name: 'idle_sweep_stops_total', help: 'Workspaces stopped by the idle sweep.', registers }),
    lessonDeliveries: new Counter({
      name: 'lesson_deliveries_total',
      help: "Lessons written into students' homes by the lesson controller, by outcome (delivered, failed: given up after its attempts).",
      labelNames: ['outcome'] as const,
      registers,
    }),
    scheduledBackups: new Counter({
      name: 'scheduled_backups_total',
      help: 'Scheduled backups of homes, by outcome (ok, failed).',
      labelNames: ['outcome'] as const,
      registers,
    }),
    joinCodeGuests: new Counter({
      name: 'join_code_guests_removed_total',
      help: 'Guests of expired or closed join codes handled by the expiry, by outcome (removed: backed up, or without a home, then deleted; backup_failed: kept, tried again).',
      labelNames: ['outcome'] as const,
      registers,
    }),
    scheduledBackupsPruned: new Counter({
      name: 'scheduled_backups_pruned_total',
      help: 'Scheduled backups removed because more than BACKUP_KEEP of their home were kept.',
      registers,
    }),
    capacityRejections: new Counter({ name: 'capacity_rejections_total', help: 'Workspace opens refused at the container cap.', registers }),
    projectReplacements: new Counter({
      name: 'workspace_project_replacements_total',
      help: "Homes whose project was replaced, by kind (reset: the image's starter; import: a team's repository) and outcome (done, failed).",
      labelNames: ['kind', 'outcome'] as const,
      registers,
    }),
    // Runs' output streams (api/streams/run-output.ts): open on this replica, refused past a bound, cut for a reader that took nothing.
    runOutputStreams: new Gauge({ name: 'run_output_streams', help: "Runs' output streams open on this replica.", registers }),
    runOutputStreamRefusals: new Counter({
      name: 'run_output_stream_refusals_total',
      help: 'Output streams refused (429) because their user, or their run, had as many open as allowed, by bound (user, run).',
      labelNames: ['bound'] as const,
      registers,
    }),
    runOutputStreamCuts: new Counter({
      name: 'run_output_stream_cuts_total',
      help: 'Output streams cut because their reader took nothing of a full buffer for OUTPUT_STREAM_STALL_SECONDS.',
      registers,
    }),
    orphanContainers: new Counter({ name: 'orphan_containers_total', help: 'Managed containers found matching no workspace.', registers }),
    swarmTaskRejections: new Counter({
      name: 'swarm_task_rejections_total',
      help: "Editors' swarm tasks a node refused or ended with an error, each counted once, by reason (network, image, exit, other).",
      labelNames: ['reason'] as const,
      registers,
    }),
    orphanVolumes: new Counter({
      name: 'orphan_volumes_total',
      help: "Managed volumes found that are no workspace's home nor one a restore replaced (kept: they hold files).",
      registers,
    }),
    reconcileTotal: new Counter({
      name: 'reconcile_total',
      help: 'Reconciles by controller and result.',
      labelNames: ['controller', 'result'] as const,
      registers,
    }),
    reconcileDuration: new Histogram({
      name: 'reconcile_duration_seconds',
      help: 'Reconcile latency by controller.',
      labelNames: ['controller'] as const,
      buckets: FAST,
      registers,
    }),
    workqueueDepth: new Gauge({ name: 'workqueue_depth', help: 'Keys waiting in a controller work queue.', labelNames: ['controller'] as const, registers }),
    // Leadership (controllers/leadership.ts): one replica at a time runs the reconciler.
    leader: new Gauge({ name: 'leader', help: 'Whether this replica holds the reconciler lease (1) or follows (0).', registers }),
    leaderTerm: new Gauge({ name: 'leader_term', help: 'The lease term this replica last led under (0 before it ever led).', registers }),
    leaderTransitions: new Counter({
      name: 'leader_transitions_total',
      help: 'Times this replica took the lease (acquired), lost it (lost) or gave it up on stopping (released).',
      labelNames: ['transition'] as const,
      registers,
    }),
    /** When this replica last renewed the lease (performance.now() ms), undefined while following; read at each scrape. */
    leaderRenewal,
    leaderRenewalAge: new Gauge({
      name: 'leader_renewal_age_seconds',
      help: 'Seconds since this replica last renewed the lease while leading (0 while following).',
      registers,
      collect() {
        this.set(leaderRenewal.at === undefined ? 0 : (performance.now() - leaderRenewal.at) / 1000);
      },
    }),
    fencedWrites: new Counter({
      name: 'fenced_writes_total',
      help: "Writes refused because their writer no longer held the lease under its term, by who refused them: the database (another leads under a later term) or the writer's own clock (no renewal within the renew deadline).",
      labelNames: ['refused_by'] as const,
      registers,
    }),
    idleSweepLastRun: new Gauge({
      name: 'idle_sweep_last_run_timestamp_seconds',
      help: 'When the idle sweep last finished a pass, or started (Unix time; 0 on a replica whose sweep never ran: followers).',
      registers,
    }),
    replicaInfo: new Gauge({
      name: 'replica_info',
      help: 'Always 1: which replica this is (its id on the lease and in the servers table), on which host and pid, at which version.',
      labelNames: ['replica', 'hostname', 'pid', 'version'] as const,
      registers,
    }),
    databaseUp: new Gauge({ name: 'database_up', help: "Whether this replica's last check of its database (every 10 s) succeeded (1) or not (0).", registers }),
  };
}

export type Metrics = ReturnType<typeof buildMetrics>;

/** The label values known in advance: each of their series exists from the first scrape, at 0 (rate() and alerts see a rise from 0). */
export const KNOWN_LABELS = {
  controllers: ['workspaces', 'runs'],
  reconcileResults: ['success', 'requeue', 'error', 'terminal', 'aborted'],
  terminalStatuses: TERMINAL_RUN_STATUSES,
  transitions: ['acquired', 'lost', 'released'],
  backupOutcomes: ['ok', 'failed'],
  outputStreamBounds: ['user', 'run'],
  upstreams: ['vscode', 'nt4', 'halsim'],
  tunnelBounds: ['workspace', 'server'],
  halsimToRobot: ['relayed', 'dropped_rate', 'dropped_robot', 'rejected'],
  halsimDisables: ['connected', 'silence', 'ended'],
  replacementKinds: ['reset', 'import'],
  replacementOutcomes: ['done', 'failed'],
  fencedWriteRefusers: ['database', 'self'],
  taskFailureReasons: TASK_FAILURE_REASONS,
} as const;

/** Sets every series of KNOWN_LABELS to 0 (counters: present, not increased). */
function initialise(metrics: Metrics): Metrics {
  for (const controller of KNOWN_LABELS.controllers) {
    for (const result of KNOWN_LABELS.reconcileResults) metrics.reconcileTotal.inc({ controller, result }, 0);
    metrics.workqueueDepth.set({ controller }, 0);
  }
  for (const status of KNOWN_LABELS.terminalStatuses) metrics.runsTotal.inc({ terminal_status: status }, 0);
  for (const transition of KNOWN_LABELS.transitions) metrics.leaderTransitions.inc({ transition }, 0);
  for (const outcome of KNOWN_LABELS.backupOutcomes) metrics.scheduledBackups.inc({ outcome }, 0);
  for (const outcome of ['delivered', 'failed'] as const) metrics.lessonDeliveries.inc({ outcome }, 0);
  for (const bound of KNOWN_LABELS.outputStreamBounds) metrics.runOutputStreamRefusals.inc({ bound }, 0);
  for (const upstream of KNOWN_LABELS.upstreams) metrics.proxyUpstreamUnverified.inc({ upstream }, 0);
  for (const bound of KNOWN_LABELS.tunnelBounds) metrics.proxyTunnelRefusals.inc({ bound }, 0);
  for (const outcome of KNOWN_LABELS.halsimToRobot) metrics.halsimMessages.inc({ direction: 'to_robot', outcome }, 0);
  metrics.halsimMessages.inc({ direction: 'to_browser', outcome: 'relayed' }, 0);
  for (const reason of KNOWN_LABELS.halsimDisables) metrics.halsimDisables.inc({ reason }, 0);
  for (const by of KNOWN_LABELS.fencedWriteRefusers) metrics.fencedWrites.inc({ refused_by: by }, 0);
  for (const reason of KNOWN_LABELS.taskFailureReasons) metrics.swarmTaskRejections.inc({ reason }, 0);
  for (const kind of KNOWN_LABELS.replacementKinds)
    for (const outcome of KNOWN_LABELS.replacementOutcomes) metrics.projectReplacements.inc({ kind, outcome }, 0);
  return metrics;
}
