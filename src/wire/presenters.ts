/**
 * How records look on the wire: the one place that turns the store's records into the JSON of the
 * API (and of the CLI's --json), each presenter producing a type of the contract (schemas.ts).
 * Dates become ISO 8601 strings; a student never sees where their editor or simulator runs.
 */
import type { Static } from 'typebox';
import type { StoredBackup } from '../backup/backups.ts';
import { homeDiskStatus, type HomeDiskLimit, type HomeDiskStatus } from '../home-disk.ts';
import type { AuditPage as AuditRecords } from '../store/audit.ts';
import { runOutcome, type ClassStudentRecord } from '../store/class-view.ts';
import type { HelpRequestRecord } from '../store/help.ts';
import type { ImportRecord } from '../store/imports.ts';
import type { JoinCodeRecord } from '../store/join-codes.ts';
import type { CollectionRecord, DeliveryRecord, LessonDetail, LessonRecord, LessonVersion as LessonVersionRecord } from '../store/lessons.ts';
import type { LookRecord } from '../store/looks.ts';
import type { NodeView } from '../store/nodes.ts';
import type { Presence } from '../store/presence.ts';
import type { ClassRun as ClassRunRecord, RunRecord } from '../store/runs.ts';
import { linkPath, type NewLink } from '../store/sign-in-links.ts';
import type { UsageRecord } from '../store/usage.ts';
import type { UserRecord } from '../store/users.ts';
import type * as Schemas from './schemas.ts';
import type { ClassSummary, WorkspaceListPage, WorkspaceListRow } from '../store/workspace-list.ts';
import type { DesiredState, Overview as OverviewRecords, WorkspaceRecord } from '../store/workspaces.ts';
import type {
  AuditPage,
  Backup,
  Capacity,
  ClassRun,
  ClassStudent,
  ClassView,
  HelpRequest,
  HomeDisk,
  JoinCode,
  Look,
  Overview,
  Refusal,
  Run,
  RunEnd,
  SignInLink,
  Status,
  StudentHelp,
  StudentWorkspace,
  UsageReport,
  User,
  WorkspaceChange,
  WorkspaceImport,
  WorkspacePage,
  WorkspaceRow,
} from './schemas.ts';

const iso = (date: Date | null): string | null => date?.toISOString() ?? null;

/** A user: id, name, email, role and their workspace's id and slug. */
export function presentUser(user: UserRecord): User {
  return { id: user.id, name: user.name, email: user.email, role: user.role, workspaceId: user.workspaceId, workspaceSlug: user.workspaceSlug };
}

/** When an idle workspace will be stopped, and from when its student is warned; nulls when it will not be (stopped, or a run in progress). */
export interface IdleForecast {
  stopsAt: Date | null;
  warnFrom: Date | null;
}

/**
 * A workspace as its student sees it; `ready` means the editor answers through the proxy. With
 * `idle`, when the idle sweep will stop it unless the student does something (and from when to
 * warn them); with `run`, its newest run.
 */
export function presentStudentWorkspace(
  workspace: WorkspaceRecord,
  extra: { idle?: IdleForecast; run?: RunRecord | null; idleStopMinutes?: number; disk?: HomeDiskStatus | null } = {},
): StudentWorkspace {
  const stopped = workspace.spec.desiredState === 'stopped' && workspace.spec.stoppedBy && workspace.spec.stoppedAt;
  return {
    id: workspace.id,
    slug: workspace.slug,
    desiredState: workspace.spec.desiredState,
    observedState: workspace.status.observedState,
    statusMessage: workspace.status.statusMessage,
    ready: workspace.status.observedState === 'running' && workspace.status.editorEndpoint !== null,
    // Why a stopped workspace stopped, for its student's page: by whom, when (and, for the idle sweep, after how long).
    stopped: stopped
      ? {
          by: workspace.spec.stoppedBy!,
          at: workspace.spec.stoppedAt!.toISOString(),
          ...(workspace.spec.stoppedBy === 'idle' && extra.idleStopMinutes !== undefined && { afterIdleMinutes: extra.idleStopMinutes }),
        }
      : null,
    ...(extra.idle && { idle: { stopsAt: iso(extra.idle.stopsAt), warnFrom: iso(extra.idle.warnFrom) } }),
    ...(extra.run !== undefined && { run: extra.run && presentRun(extra.run) }),
    ...(extra.disk !== undefined && { disk: extra.disk && presentHomeDisk(extra.disk) }),
  };
}

/** A home against its bound (see HomeDiskStatus). */
export function presentHomeDisk(status: HomeDiskStatus): HomeDisk {
  return {
    usedBytes: status.usedBytes,
    limitBytes: status.limitBytes,
    measuredAt: status.measuredAt.toISOString(),
    level: status.level,
    message: status.message,
  };
}

/** A workspace after an admin changed its spec: the new spec beside the last observed status. */
export function presentWorkspaceChange(workspace: WorkspaceRecord): WorkspaceChange {
  return {
    id: workspace.id,
    slug: workspace.slug,
    desiredState: workspace.spec.desiredState,
    generation: workspace.spec.generation,
    restartGeneration: workspace.spec.restartGeneration,
    observedState: workspace.status.observedState,
    observedGeneration: workspace.status.observedGeneration,
  };
}

/** Whether what is observed of a workspace already matches its spec (the answer is then 200, else 202). */
export const converged = (workspace: WorkspaceRecord): boolean =>
  workspace.status.observedGeneration === workspace.spec.generation && workspace.status.observedState === workspace.spec.desiredState;

/** A run as its student sees it. */
export function presentRun(run: RunRecord): Run {
  return {
    id: run.id,
    status: run.status.phase,
    desiredState: run.spec.desiredState,
    stoppedBy: run.spec.stoppedBy,
    queuedAt: run.status.queuedAt.toISOString(),
    readyAt: iso(run.status.readyAt),
    endedAt: iso(run.status.endedAt),
    exitCode: run.status.exitCode,
    reason: run.status.reason,
    output: run.status.output,
    outputLength: run.status.outputLength,
    outputTruncated: run.status.outputTruncated,
  };
}

/** An import of a team's project, as its student follows it. */
export function presentImport(record: ImportRecord): WorkspaceImport {
  return {
    id: record.id,
    url: record.url,
    branch: record.branch,
    subfolder: record.subfolder,
    phase: record.phase,
    bytes: record.bytes,
    commit: record.commit,
    backup: record.backup,
    error: record.error,
    startedAt: record.startedAt.toISOString(),
    endedAt: iso(record.endedAt),
  };
}

/** A run in the class's list (the panel, the admin API): the run, and whose it is. */
export function presentClassRun(run: ClassRunRecord): ClassRun {
  return { ...presentRun(run), workspace: { id: run.workspaceId, slug: run.slug }, ownerEmail: run.ownerEmail };
}

/** The `end` event of a run's output stream: how it ended. */
export function presentRunEnd(run: RunRecord): RunEnd {
  return {
    id: run.id,
    status: run.status.phase,
    reason: run.status.reason,
    exitCode: run.status.exitCode,
    endedAt: iso(run.status.endedAt),
    outputLength: run.status.outputLength,
  };
}

/** What a code container is wanted to be, in the overview's words (a deleted workspace's container is to be `removed`). */
const CODE_DESIRED: Record<DesiredState, string> = { running: 'running', stopped: 'stopped', deleted: 'removed' };

/**
 * The admin overview (`GET /admin/status`): every workspace with its containers (the code
 * container and the simulator of a run in progress, each wanted and observed), the active build
 * count (runs still compiling or booting) and the capacity.
 */
export function presentOverview(overview: OverviewRecords): Status {
  const runsByWorkspace = Map.groupBy(overview.activeRuns, (run) => run.workspaceId);
  const { workspaces } = overview;
  return {
    workspaces: workspaces.map((workspace) => ({
      ...presentWorkspaceChange(workspace),
      userId: workspace.userId,
      statusMessage: workspace.status.statusMessage,
      lastTransitionAt: iso(workspace.status.lastTransitionAt),
      lastActivityAt: iso(workspace.status.lastActivityAt),
      node: workspace.status.node,
      containers: [
        { role: 'code', desiredState: CODE_DESIRED[workspace.spec.desiredState], observedState: workspace.status.observedState },
        ...(runsByWorkspace.get(workspace.id) ?? []).map((run) => ({
          role: 'sim' as const,
          runId: run.id,
          desiredState: run.desiredState,
          observedState: run.status,
        })),
      ],
    })),
    activeBuilds: overview.activeRuns.filter((run) => run.status === 'queued').length,
    capacity: presentCapacity(overview),
  };
}

/** A node as the Overview lists it. */
export function presentNode(node: NodeView): Overview['nodes'][number] {
  return {
    name: node.name,
    state: node.state,
    availability: node.availability,
    drainRequested: node.drainRequestedAt !== null,
    runningWorkspaces: node.runningWorkspaces,
    workspaces: node.workspaces,
    memoryBytes: node.memoryBytes,
    freeMemoryBytes: Math.max(0, node.memoryBytes - node.reservedMemoryBytes),
    seenAt: node.seenAt.toISOString(),
  };
}

/** The capacity: the effective cap and its source, how many workspaces are wanted running and how many run. */
export function presentCapacity(overview: OverviewRecords): Capacity {
  const { workspaces } = overview;
  return {
    cap: overview.cap.value,
    source: overview.cap.source,
    wantedRunning: workspaces.filter((workspace) => workspace.spec.desiredState === 'running').length,
    running: workspaces.filter((workspace) => workspace.status.observedState === 'running').length,
  };
}

/** A page of audit entries (id, the cursor; ISO timestamp; actor, action, target, metadata), newest first, and the cursor of the next page (null on the last). */
export function presentAuditPage(page: AuditRecords): AuditPage {
  return {
    entries: page.entries.map((entry) => ({
      id: entry.id,
      timestamp: entry.timestamp.toISOString(),
      actor: { id: entry.actor.id, email: entry.actor.email },
      action: entry.action,
      target: { kind: entry.target.kind, id: entry.target.id },
      metadata: entry.metadata,
    })),
    nextCursor: page.nextCursor,
  };
}

/** A sign-in link just made: the one time its URL is shown (only its hash is stored). */
export function presentLink(link: NewLink & { email: string }, origin: string): SignInLink {
  return { id: link.id, email: link.email, url: `${origin}${linkPath('sign-in', link.token)}`, expiresAt: link.expiresAt.toISOString() };
}

/** A stored backup: its file, and what its manifest says (null fields for a file without one). */
export function presentBackup(backup: StoredBackup): Backup {
  const manifest = backup.manifest;
  return {
    name: backup.name,
    sizeBytes: backup.sizeBytes,
    modified: backup.modified.toISOString(),
    slug: manifest?.slug ?? null,
    workspaceId: manifest?.workspaceId ?? null,
    ownerEmail: manifest?.ownerEmail ?? null,
    created: manifest?.created ?? null,
    files: manifest?.files ?? null,
    bytes: manifest?.bytes ?? null,
    sha256: manifest?.sha256 ?? null,
  };
}

/** A student refused at the cap, as the panel shows it. */
export function presentRefusal(refusal: Omit<Refusal, 'at' | 'lastAt'> & { at: Date; lastAt: Date }): Refusal {
  return {
    at: refusal.at.toISOString(),
    lastAt: refusal.lastAt.toISOString(),
    count: refusal.count,
    workspaceId: refusal.workspaceId,
    slug: refusal.slug,
    email: refusal.email,
    cap: refusal.cap,
    running: refusal.running,
  };
}

/** One workspace as the admin lists it. */
export function presentWorkspaceRow(row: WorkspaceListRow, homeDisk: HomeDiskLimit): WorkspaceRow {
  return {
    id: row.id,
    slug: row.slug,
    owner: row.owner,
    desiredState: row.desiredState,
    observedState: row.observedState,
    statusMessage: row.statusMessage,
    lastActivityAt: iso(row.lastActivityAt),
    lastTransitionAt: iso(row.lastTransitionAt),
    cpuPercent: row.cpuPercent,
    memoryPercent: row.memoryPercent,
    disk: row.disk && presentHomeDisk(homeDiskStatus(row.disk, homeDisk)!),
    activeRun: row.activeRun,
  };
}

/** A page of workspaces, how many match, and the class counted by state. */
export function presentWorkspacePage(page: WorkspaceListPage, homeDisk: HomeDiskLimit): WorkspacePage {
  return { workspaces: page.rows.map((row) => presentWorkspaceRow(row, homeDisk)), total: page.total, counts: page.counts };
}

/** The overview's figures: the capacity (with those waiting for a slot), builds in progress, and the failed workspaces. */
export function presentSummary(summary: ClassSummary): Pick<Overview, 'capacity' | 'activeBuilds' | 'failed'> {
  return {
    capacity: { cap: summary.cap.value, source: summary.cap.source, running: summary.running, wantedRunning: summary.wantedRunning, waiting: summary.waiting },
    activeBuilds: summary.activeBuilds,
    failed: summary.failed.map((failure) => ({ id: failure.id, slug: failure.slug, statusMessage: failure.statusMessage, since: iso(failure.since) })),
  };
}

/** A help request as its student sees it: its state, message, place in the queue and the coach coming. */
export function presentStudentHelp(request: HelpRequestRecord): StudentHelp {
  return {
    id: request.id,
    state: request.state,
    message: request.message,
    createdAt: request.createdAt.toISOString(),
    place: request.place,
    takenBy: request.takenBy && { name: request.takenBy.name, email: request.takenBy.email },
    takenAt: iso(request.takenAt),
  };
}

/** A help request in the coach's queue: as its student sees it, with whose it is, its age and how it ended. */
export function presentHelpRequest(request: HelpRequestRecord): HelpRequest {
  return {
    ...presentStudentHelp(request),
    ageSeconds: request.ageSeconds,
    student: request.student,
    workspace: request.workspace,
    endedBy: request.endedBy,
    endedAt: iso(request.endedAt),
  };
}

/** The class view: each student's record with what the proxy sees of them now (their presence; none: offline, no NetworkTables, no Driver Station), and when it was read. */
export function presentClassView(students: ClassStudentRecord[], seen: ReadonlyMap<string, Presence>, readAt: Date): ClassView {
  return {
    readAt: readAt.toISOString(),
    students: students.map((record): ClassStudent => {
      const now = record.workspace ? seen.get(record.workspace.id) : undefined;
      const last = record.lastRun;
      return {
        student: record.student,
        workspace: record.workspace,
        online: now?.online ?? false,
        lastActivityAt: iso(record.lastActivityAt),
        run: record.run && { id: record.run.id, phase: record.run.phase, queuedAt: record.run.queuedAt.toISOString(), readyAt: iso(record.run.readyAt) },
        lastResult: last && {
          runId: last.id,
          outcome: runOutcome(last),
          endedAt: iso(last.endedAt),
          exitCode: last.exitCode,
          reason: last.reason,
          errors: last.problemCount ?? 0,
          firstError: last.firstProblem,
        },
        robot: now?.robot ?? null,
        ntConnected: now?.ntConnected ?? false,
        help: record.help && { ...record.help, createdAt: record.help.createdAt.toISOString() },
      };
    }),
  };
}

/** The usage report on the wire. */
export function presentUsage(records: UsageRecord[], span: { since: Date; until: Date }): UsageReport {
  return {
    since: span.since.toISOString(),
    until: span.until.toISOString(),
    students: records.map((record) => ({ ...record, lastSeenAt: iso(record.lastSeenAt) })),
  };
}

/**
 * A field of a CSV file (RFC 4180): quoted when it holds a comma, a quote or a line end (its quotes
 * doubled); a text that a spreadsheet would read as a formula (starting with `=`, `+`, `-`, `@`, a
 * tab or a carriage return: a student's own name may) is given a leading `'`, so that it is shown
 * as the text it is (OWASP's advice for CSV injection). Numbers are written as they are.
 */
export function csvField(value: string | number): string {
  if (typeof value === 'number') return String(value);
  const text = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The usage report as a CSV file: a header line, then one line per student (hours to two decimals), CRLF line ends. */
export function usageCsv(report: UsageReport): string {
  const lines = [['email', 'name', 'workspace_hours', 'runs', 'failed_builds', 'last_seen'].join(',')];
  for (const row of report.students) {
    lines.push(
      [
        csvField(row.student.email),
        csvField(row.student.name),
        (row.workspaceSeconds / 3600).toFixed(2),
        csvField(row.runs),
        csvField(row.failedBuilds),
        csvField(row.lastSeenAt ?? ''),
      ].join(','),
    );
  }
  return `${lines.join('\r\n')}\r\n`;
}

/** A coach's look on the wire (the coach's id stays in the store). */
export function presentLook(look: LookRecord): Look {
  return {
    id: look.id,
    state: look.state,
    workspaceId: look.workspaceId,
    coach: { name: look.coach.name, email: look.coach.email },
    startedAt: look.startedAt.toISOString(),
    endsAt: look.endsAt.toISOString(),
    live: look.live,
  };
}

/** A join code and its guests, as the admin API and `cli join-codes` show it. */
export function presentJoinCode(code: JoinCodeRecord): JoinCode {
  return {
    id: code.id,
    code: code.code,
    label: code.label,
    openedBy: code.openedBy,
    openedAt: code.openedAt.toISOString(),
    expiresAt: code.expiresAt.toISOString(),
    closedAt: iso(code.closedAt),
    closedBy: code.closedBy,
    state: code.state,
    joined: code.joined,
    guests: code.guests,
    handledAt: iso(code.handledAt),
    backups: code.backups,
  };
}

/** A lesson as the admin API shows it. */
export function presentLesson(lesson: LessonRecord): Static<typeof Schemas.Lesson> {
  return {
    id: lesson.id,
    name: lesson.name,
    createdBy: lesson.createdBy,
    createdAt: lesson.createdAt.toISOString(),
    latest: presentLessonVersion(lesson.latest),
    deliveries: lesson.deliveries,
  };
}

/** A version of a lesson's files. */
export function presentLessonVersion(version: LessonVersionRecord): Static<typeof Schemas.LessonVersion> {
  return { ...version, createdAt: version.createdAt.toISOString() };
}

/** One student's delivery of a lesson. */
export function presentDelivery(delivery: DeliveryRecord): Static<typeof Schemas.LessonDelivery> {
  return {
    workspaceId: delivery.workspaceId,
    slug: delivery.slug,
    version: delivery.version,
    state: delivery.state,
    folder: delivery.folder,
    message: delivery.message,
    attempts: delivery.attempts,
    requestedAt: delivery.requestedAt.toISOString(),
    deliveredAt: iso(delivery.deliveredAt),
    resetRequestedAt: iso(delivery.resetRequestedAt),
    resetBackup: delivery.resetBackup,
    resetAt: iso(delivery.resetAt),
  };
}

/** A collection of a lesson and its snapshots. */
export function presentCollection(collection: CollectionRecord): Static<typeof Schemas.LessonCollection> {
  return {
    id: collection.id,
    lessonId: collection.lessonId,
    requestedBy: collection.requestedBy,
    requestedAt: collection.requestedAt.toISOString(),
    dueAt: collection.dueAt.toISOString(),
    doneAt: iso(collection.doneAt),
    snapshots: collection.snapshots.map((snapshot) => ({
      workspaceId: snapshot.workspaceId,
      slug: snapshot.slug,
      state: snapshot.state,
      folders: snapshot.folders,
      files: snapshot.files,
      sizeBytes: snapshot.sizeBytes,
      message: snapshot.message,
      takenAt: iso(snapshot.takenAt),
    })),
  };
}

/** A lesson with its versions, deliveries and collections. */
export function presentLessonDetail(detail: LessonDetail): Static<typeof Schemas.LessonDetail> {
  return {
    lesson: presentLesson(detail),
    versions: detail.versions.map(presentLessonVersion),
    students: detail.students.map(presentDelivery),
    collections: detail.collections.map(presentCollection),
  };
}

/** The lessons that reached a student's home, newest first, as their page and editor say them. */
export function presentStudentLessons(deliveries: DeliveryRecord[]): Static<typeof Schemas.StudentLesson>[] {
  return deliveries
    .filter((delivery) => delivery.deliveredAt && delivery.folder)
    .map((delivery) => ({
      name: delivery.lessonName,
      version: delivery.version,
      folder: delivery.folder!,
      deliveredAt: delivery.deliveredAt!.toISOString(),
      beside: delivery.folder !== delivery.lessonName,
    }));
}
