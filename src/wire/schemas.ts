/**
 * The wire contract, once: every JSON body the control plane answers or takes, as a JSON Schema
 * (TypeBox) with its TypeScript type derived from it (`Static`). The presenters (presenters.ts)
 * produce these types and nothing else produces wire JSON; the handlers, the panel, the CLI's
 * `--json` output and the tests import the types from here; and the OpenAPI document
 * (api/openapi.ts) is built from them, with the request bodies' and query strings' ajv schemas
 * (beside their routes, each bound to its type by ajv's JSONSchemaType or declared with it). Schema
 * first, type derived: a schema says what a type cannot (formats, enums, descriptions), and the
 * document and the contract test need the schema at run time anyway.
 *
 * Response objects allow no property beyond those named (`additionalProperties: false`), so a field
 * a handler adds or renames is a contract change the tests catch (test/helpers/contract.ts).
 */
import Type, { type Static, type TProperties, type TSchema } from 'typebox';
import {
  ACTIVE_RUN_STATUSES,
  DESIRED_STATES,
  HELP_STATES,
  IMPORT_PHASES,
  OBSERVED_STATES,
  ROLES,
  ROBOT_MODES,
  RUN_DESIRED_STATES,
  RUN_OUTCOMES,
  RUN_STATUSES,
  RUN_STOPPED_BY,
  STOPPED_BY,
} from './vocabulary.ts';

/** An object of exactly these properties (no others). */
const Strict = <P extends TProperties>(properties: P, options: { description?: string } = {}) =>
  Type.Object(properties, { additionalProperties: false, ...options });
const Nullable = <S extends TSchema>(schema: S) => Type.Union([schema, Type.Null()]);
const Uuid = Type.String({ format: 'uuid' });
const Time = Type.String({ format: 'date-time', description: 'ISO 8601, UTC' });

// --- Enumerations -------------------------------------------------------------------------------

// The words are vocabulary.ts's: each list is written there once, and these schemas are built from it.
export const DesiredState = Type.Enum(DESIRED_STATES);
export const ObservedState = Type.Enum(OBSERVED_STATES);
export const RunDesiredState = Type.Enum(RUN_DESIRED_STATES);
export const RunStatus = Type.Enum(RUN_STATUSES);
export const ActiveRunStatus = Type.Enum(ACTIVE_RUN_STATUSES);
export const Role = Type.Enum(ROLES);
export const StoppedBy = Type.Enum(STOPPED_BY);
export const CapSource = Type.Enum(['override', 'environment']);
export const HelpState = Type.Enum(HELP_STATES, {
  description: 'waiting in the queue, taken by a coach (coming), resolved by a coach, or withdrawn by the student.',
});

// --- Errors ---------------------------------------------------------------------------------------

/** Every error answer: a stable snake_case code and a message safe to show. */
export const ErrorBody = Strict({ error: Strict({ code: Type.String(), message: Type.String() }) });
export type ErrorBody = Static<typeof ErrorBody>;

// --- Health ---------------------------------------------------------------------------------------

export const CheckResult = Type.Enum(['ok', 'unreachable', 'timeout']);
export const Health = Strict({
  ok: Type.Boolean(),
  service: Type.String(),
  version: Type.String(),
  checks: Strict({ database: CheckResult }),
  failed: Type.Optional(Type.Array(Type.String())),
});
export type Health = Static<typeof Health>;

/** GET /readyz: whether a balancer should send this replica new connections. */
export const Readiness = Strict({
  ready: Type.Boolean(),
  /** True while another replica stops and a newer one runs: keep this one's connections, send it no new ones. */
  draining: Type.Boolean(),
  checks: Strict({ database: CheckResult }),
});
export type Readiness = Static<typeof Readiness>;

// --- Users ----------------------------------------------------------------------------------------

export const User = Strict({
  id: Uuid,
  name: Type.String(),
  email: Type.String(),
  role: Role,
  workspaceId: Nullable(Uuid),
  workspaceSlug: Nullable(Type.String()),
});
export type User = Static<typeof User>;
export const UserList = Strict({ users: Type.Array(User) });
export type UserList = Static<typeof UserList>;
export const UserChange = Strict({ user: User, changed: Type.Boolean() });
export type UserChange = Static<typeof UserChange>;
export const UserAnswer = Strict({ user: User });
export type UserAnswer = Static<typeof UserAnswer>;

// --- Runs -----------------------------------------------------------------------------------------

/** A run as its student sees it. */
export const Run = Strict({
  id: Uuid,
  status: RunStatus,
  desiredState: RunDesiredState,
  stoppedBy: Nullable(
    Type.Enum(RUN_STOPPED_BY, {
      description: 'Who asked it to stop: its student or a coach; null while nobody did (a run that ends on its own or with its workspace).',
    }),
  ),
  queuedAt: Time,
  readyAt: Nullable(Time),
  endedAt: Nullable(Time),
  exitCode: Nullable(Type.Integer()),
  reason: Nullable(Type.String()),
  output: Nullable(Type.String({ description: 'Its last lines, kept when it ended.' })),
  outputLength: Type.Integer({ description: 'How much of its whole output is kept (characters).' }),
  outputTruncated: Type.Boolean({ description: 'Whether the output was cut at the limit.' }),
});
export type Run = Static<typeof Run>;
export const RunAnswer = Strict({ run: Run });
export type RunAnswer = Static<typeof RunAnswer>;
export const RunList = Strict({ runs: Type.Array(Run) });
export type RunList = Static<typeof RunList>;

/** A run in the class's list: the run, and whose it is. */
export const ClassRun = Strict({ ...Run.properties, workspace: Strict({ id: Uuid, slug: Type.String() }), ownerEmail: Nullable(Type.String()) });
export type ClassRun = Static<typeof ClassRun>;
export const ClassRunAnswer = Strict({ run: ClassRun });
export type ClassRunAnswer = Static<typeof ClassRunAnswer>;
export const ClassRunList = Strict({ runs: Type.Array(ClassRun) });
export type ClassRunList = Static<typeof ClassRunList>;

/** The `end` event of a run's output stream: how it ended. */
export const RunEnd = Strict({
  id: Uuid,
  status: RunStatus,
  reason: Nullable(Type.String()),
  exitCode: Nullable(Type.Integer()),
  endedAt: Nullable(Time),
  outputLength: Type.Integer(),
});
export type RunEnd = Static<typeof RunEnd>;

// --- Workspaces -----------------------------------------------------------------------------------

/** A home against its bound (HOME_DISK_LIMIT), as last measured (src/home-disk.ts). */
export const HomeDisk = Strict(
  {
    usedBytes: Type.Integer({ description: 'The space its files take on disk.' }),
    limitBytes: Type.Integer({ description: 'HOME_DISK_LIMIT.' }),
    measuredAt: Time,
    level: Type.Enum(['ok', 'near', 'full', 'unmeasured'], {
      description:
        'near: at 90 % of the limit or more; full: at the limit (runs are refused); unmeasured: part of it could not be measured (runs are refused).',
    }),
    message: Nullable(Type.String({ description: 'What its student is told (how much is used, what is refused, how to free space); null when ok.' })),
  },
  { description: 'The home against its bound; null when homes are not bounded or it was never measured.' },
);
export type HomeDisk = Static<typeof HomeDisk>;

/** A lesson that reached a student's home, as their page and editor say it. */
export const StudentLesson = Strict({
  name: Type.String(),
  version: Type.Integer({ minimum: 1 }),
  folder: Type.String({ description: 'Under `lessons/` of the home.' }),
  deliveredAt: Time,
  beside: Type.Boolean({ description: 'It landed beside an earlier folder of the same name, which is as the student left it.' }),
});

/** A workspace as its student sees it. */
export const StudentWorkspace = Strict({
  id: Uuid,
  slug: Type.String(),
  desiredState: DesiredState,
  observedState: ObservedState,
  statusMessage: Type.String(),
  ready: Type.Boolean({ description: 'The editor answers through the proxy.' }),
  stopped: Nullable(
    Strict(
      { by: StoppedBy, at: Time, afterIdleMinutes: Type.Optional(Type.Number()) },
      { description: 'Who stopped it and when; null while it is wanted running or was never stopped.' },
    ),
  ),
  idle: Type.Optional(
    Strict({ stopsAt: Nullable(Time), warnFrom: Nullable(Time) }, { description: 'When the idle sweep stops it unless the student does something.' }),
  ),
  run: Type.Optional(Nullable(Run)),
  disk: Type.Optional(Nullable(HomeDisk)),
  pageUrl: Type.Optional(Type.String({ description: 'The workspace page, on the control plane.' })),
  editorUrl: Type.Optional(Type.String({ description: "Host mode: the workspace's own origin." })),
  lookedAt: Type.Optional(
    Nullable(
      Strict(
        {
          by: Type.String({ description: 'The coach: their name, else their email.' }),
          since: Time,
          lookId: Uuid,
          asking: Type.Boolean({
            description: 'The coach asks first (LOOK_CONSENT=ask): the student lets it happen or says no (POST .../api/looks/{lookId}/accept or /decline).',
          }),
        },
        { description: 'A coach looking at this workspace now, read only (its files, its run, its robot), or asking to; null: no one.' },
      ),
    ),
  ),
  lessons: Type.Optional(
    Type.Array(StudentLesson, { description: 'The lessons handed out that reached the home (under `lessons/`), newest first, at most 20.' }),
  ),
  guest: Type.Optional(
    Nullable(
      Strict(
        { endsAt: Time },
        {
          description: 'A guest of a join code: when the code ends, and with it this workspace (backed up for the coach, then removed); null for anyone else.',
        },
      ),
    ),
  ),
});
export type StudentWorkspace = Static<typeof StudentWorkspace>;
export const StudentWorkspaceAnswer = Strict({ workspace: StudentWorkspace });
export type StudentWorkspaceAnswer = Static<typeof StudentWorkspaceAnswer>;
export const OpenAnswer = Strict({ workspace: StudentWorkspace, alreadyRunning: Type.Boolean() });
export type OpenAnswer = Static<typeof OpenAnswer>;

/** A run started again (POST .../runs/restart): the new run, and the run it stopped first (null: none was active). */
export const RestartAnswer = Strict({ run: Run, stopped: Nullable(Uuid) });
export type RestartAnswer = Static<typeof RestartAnswer>;

/** A home whose project was put back to the image's starter (POST .../workspace/reset). */
export const ResetAnswer = Strict({
  workspace: StudentWorkspace,
  backup: Nullable(Type.String({ description: "The stored backup of the whole home made first (listed in the panel's Backups); null when the home was new." })),
});
export type ResetAnswer = Static<typeof ResetAnswer>;

/** An import of a team's project into a workspace, as its student follows it. */
export const WorkspaceImport = Strict({
  id: Uuid,
  url: Type.String(),
  branch: Nullable(Type.String({ description: "null: the repository's default branch." })),
  subfolder: Nullable(Type.String({ description: 'null: the whole repository.' })),
  phase: Type.Enum(IMPORT_PHASES, {
    description: 'checking the address, cloning, backing up the home, copying into the home; then done or failed.',
  }),
  bytes: Type.Integer({ description: 'How far the phase got: the clone on disk, the home backed up, the project copied (bytes).' }),
  commit: Nullable(Type.String({ description: 'The commit imported, once cloned.' })),
  backup: Nullable(Type.String({ description: 'The stored backup of the home made before it was replaced, once made.' })),
  error: Nullable(Strict({ code: Type.String(), message: Type.String() }, { description: 'Why it failed (the home is then as it was).' })),
  startedAt: Time,
  endedAt: Nullable(Time),
});
export type WorkspaceImport = Static<typeof WorkspaceImport>;
export const ImportAnswer = Strict({ import: Nullable(WorkspaceImport) });
export type ImportAnswer = Static<typeof ImportAnswer>;

/** The simulator's alive probe. */
export const SimStatus = Strict({
  alive: Type.Boolean(),
  runId: Type.Optional(Uuid),
  latencyMs: Type.Optional(Type.Integer()),
  status: Type.Optional(Type.Integer({ description: "The simulator's HTTP status." })),
  reason: Type.Optional(Type.Enum(['no_active_run', 'not_started', 'timeout', 'unreachable'])),
});
export type SimStatus = Static<typeof SimStatus>;

/** A workspace after an admin changed its spec: the new spec beside the last observed status. */
export const WorkspaceChange = Strict({
  id: Uuid,
  slug: Type.String(),
  desiredState: DesiredState,
  generation: Type.Integer(),
  restartGeneration: Type.Integer(),
  observedState: ObservedState,
  observedGeneration: Type.Integer(),
});
export type WorkspaceChange = Static<typeof WorkspaceChange>;
export const WorkspaceChangeAnswer = Strict({ workspace: WorkspaceChange });
export type WorkspaceChangeAnswer = Static<typeof WorkspaceChangeAnswer>;

/** The capacity: the effective cap, where it comes from, and how many workspaces run and are wanted running. */
export const Capacity = Strict({ cap: Type.Integer(), source: CapSource, wantedRunning: Type.Integer(), running: Type.Integer() });
export type Capacity = Static<typeof Capacity>;

/** `GET /admin/status`: every workspace with its containers, the active build count and the capacity. */
export const Status = Strict({
  workspaces: Type.Array(
    Strict({
      ...WorkspaceChange.properties,
      userId: Nullable(Uuid),
      statusMessage: Type.String(),
      lastTransitionAt: Nullable(Time),
      lastActivityAt: Nullable(Time),
      node: Nullable(Type.String({ description: 'The swarm node its editor runs on (last seen there); null on one Docker Engine.' })),
      containers: Type.Array(
        Strict({
          role: Type.Enum(['code', 'sim']),
          runId: Type.Optional(Uuid),
          desiredState: Type.String({ description: 'code: running, stopped or removed; sim: running or stopped' }),
          observedState: Type.String({ description: "code: the workspace's observed state; sim: the run's status" }),
        }),
      ),
    }),
  ),
  activeBuilds: Type.Integer({ description: 'Runs still compiling or booting.' }),
  capacity: Capacity,
});
export type Status = Static<typeof Status>;

/** One workspace as the panel lists it. */
export const WorkspaceRow = Strict({
  id: Uuid,
  slug: Type.String(),
  owner: Nullable(Type.String()),
  desiredState: DesiredState,
  observedState: ObservedState,
  statusMessage: Type.String(),
  lastActivityAt: Nullable(Time),
  lastTransitionAt: Nullable(Time),
  cpuPercent: Nullable(Type.Number()),
  memoryPercent: Nullable(Type.Number()),
  disk: Nullable(HomeDisk),
  activeRun: Nullable(Strict({ id: Uuid, status: ActiveRunStatus })),
});
export type WorkspaceRow = Static<typeof WorkspaceRow>;
export const WorkspacePage = Strict({
  workspaces: Type.Array(WorkspaceRow),
  total: Type.Integer({ description: 'How many match the search and filters.' }),
  counts: Strict({
    all: Type.Integer(),
    observed: Type.Record(Type.String(), Type.Integer()),
    desired: Type.Record(Type.String(), Type.Integer()),
  }),
});
export type WorkspacePage = Static<typeof WorkspacePage>;
export const BulkStop = Strict({
  stopped: Type.Array(Strict({ id: Type.String(), slug: Type.String() })),
  skipped: Type.Array(Strict({ id: Type.String(), slug: Nullable(Type.String()), reason: Type.Enum(['not found', 'already stopped']) })),
});
export type BulkStop = Static<typeof BulkStop>;

/** A student refused at the cap: the coach's notification. A student's repeats within a minute of `at` fold into it. */
export const Refusal = Strict({
  at: Time,
  lastAt: Type.String({ format: 'date-time', description: 'The latest repeat folded into this refusal (`at` when none).' }),
  count: Type.Integer({ minimum: 1, description: 'How many opens were refused: 1, and one more for each repeat folded in.' }),
  workspaceId: Uuid,
  slug: Type.String(),
  email: Nullable(Type.String()),
  cap: Type.Integer(),
  running: Type.Integer(),
});
export type Refusal = Static<typeof Refusal>;
export const RefusalList = Strict({ refusals: Type.Array(Refusal) });
export type RefusalList = Static<typeof RefusalList>;

/** What the panel's Overview shows. */
/** A node workspaces run on, as the leader last recorded it. */
export const Node = Strict({
  name: Type.String(),
  state: Type.String({ description: 'ready, down or unknown (a swarm node; one Docker Engine is one ready node)' }),
  availability: Type.String({ description: 'active, pause or drain' }),
  drainRequested: Type.Boolean(),
  runningWorkspaces: Type.Integer(),
  workspaces: Type.Integer({ description: 'Workspaces last seen there, running or not (their homes are there).' }),
  memoryBytes: Type.Number(),
  freeMemoryBytes: Type.Number({ description: "Memory not reserved by this control plane's running editors." }),
  seenAt: Time,
});
export type Node = Static<typeof Node>;

export const Overview = Strict({
  capacity: Strict({ ...Capacity.properties, waiting: Type.Integer() }),
  activeBuilds: Type.Integer(),
  refusals: Type.Array(Refusal),
  failed: Type.Array(Strict({ id: Uuid, slug: Type.String(), statusMessage: Type.String(), since: Nullable(Time) })),
  orphansSeen: Type.Number(),
  orphanVolumesSeen: Type.Number(),
  signInProviders: Type.Array(Type.String(), { description: 'The identity providers configured (none: sign-in by links only).' }),
  nodes: Type.Array(Node, { description: 'The nodes workspaces run on, as the leader last recorded them.' }),
});
export type Overview = Static<typeof Overview>;

/** `cli nodes list --json`: the nodes as the Overview lists them. */
export const NodeList = Strict({ nodes: Type.Array(Node) });
export type NodeList = Static<typeof NodeList>;

/** `cli status --json`: the capacity with the builds in progress, every workspace as the admin lists it, and the servers that run. */
export const CliStatus = Strict({
  capacity: Strict({ ...Capacity.properties, activeBuilds: Type.Integer() }),
  workspaces: Type.Array(WorkspaceRow),
  servers: Type.Array(
    Strict({
      publicUrl: Type.String(),
      hostname: Type.String(),
      pid: Type.Integer(),
      startedAt: Time,
      /** Whether this server holds the reconciler lease now (runs the controllers). */
      leader: Type.Boolean(),
    }),
  ),
  /** The reconciler lease's term while a server holds it, else null. */
  leaseTerm: Type.Union([Type.Integer(), Type.Null()]),
});
export type CliStatus = Static<typeof CliStatus>;

// --- Help queue -----------------------------------------------------------------------------------

/** A student's help request, as their workspace page and editor show it. */
export const StudentHelp = Strict({
  id: Uuid,
  state: HelpState,
  message: Nullable(Type.String({ description: 'What the student wrote, as plain text (never markup); null: nothing.' })),
  createdAt: Time,
  place: Nullable(Type.Integer({ minimum: 1, description: 'Its place among the waiting requests, oldest first (1: next); null unless waiting.' })),
  takenBy: Nullable(
    Strict({ name: Type.String({ description: "'' when the coach's account has no name." }), email: Type.String() }, { description: 'The coach coming.' }),
  ),
  takenAt: Nullable(Time),
});
export type StudentHelp = Static<typeof StudentHelp>;
/** GET .../help: the open request, or null. */
export const StudentHelpStatus = Strict({ help: Nullable(StudentHelp) });
export type StudentHelpStatus = Static<typeof StudentHelpStatus>;
/** A request raised or withdrawn. */
export const StudentHelpAnswer = Strict({ help: StudentHelp });
export type StudentHelpAnswer = Static<typeof StudentHelpAnswer>;

/** A help request as the coach's queue shows it: whose it is, how old, and who took it. */
export const HelpRequest = Strict({
  ...StudentHelp.properties,
  ageSeconds: Type.Integer({ minimum: 0, description: 'Seconds since it was raised.' }),
  student: Strict({ id: Nullable(Uuid), name: Type.String(), email: Nullable(Type.String()) }),
  workspace: Strict({ id: Uuid, slug: Type.String() }),
  endedBy: Nullable(Type.String({ description: 'Who resolved it (a coach) or withdrew it (the student), by email.' })),
  endedAt: Nullable(Time),
});
export type HelpRequest = Static<typeof HelpRequest>;
/** GET /admin/help: the queue, waiting and taken, oldest first. */
export const HelpQueue = Strict({ requests: Type.Array(HelpRequest) });
export type HelpQueue = Static<typeof HelpQueue>;
export const HelpRequestAnswer = Strict({ request: HelpRequest });
export type HelpRequestAnswer = Static<typeof HelpRequestAnswer>;

// --- The class view -------------------------------------------------------------------------------

/** One student as the class view shows them: what they are doing now, how their last run went, and whether they wait for help. */
export const ClassStudent = Strict({
  student: Strict({ id: Uuid, name: Type.String({ description: "'' when their account has no name." }), email: Type.String() }),
  workspace: Nullable(
    Strict(
      { id: Uuid, slug: Type.String(), desiredState: DesiredState, observedState: ObservedState, statusMessage: Type.String() },
      { description: 'Null: they have no workspace yet.' },
    ),
  ),
  online: Type.Boolean({ description: 'Their editor or their workspace page is open now (on any replica).' }),
  lastActivityAt: Nullable(Time),
  run: Nullable(
    Strict(
      {
        id: Uuid,
        phase: ActiveRunStatus,
        queuedAt: Time,
        readyAt: Nullable(Time),
      },
      { description: 'The run in progress: `queued` (compiling and booting since queuedAt) or `running` (since readyAt).' },
    ),
  ),
  lastResult: Nullable(
    Strict(
      {
        runId: Uuid,
        outcome: Type.Enum(RUN_OUTCOMES, {
          description:
            '`built` (compiled, booted, then stopped), `compile_errors`, `build_failed` (before ready, no compiler error: out of memory, time up), `crashed` (after ready), `canceled` (stopped before ready).',
        }),
        endedAt: Nullable(Time),
        exitCode: Nullable(Type.Integer()),
        reason: Nullable(Type.String()),
        errors: Type.Integer({ minimum: 0, description: 'How many compile errors its output held.' }),
        firstError: Nullable(Type.String({ description: "The first compile error, as `Robot.java:12: ';' expected`." })),
      },
      { description: 'How their last run that ended went.' },
    ),
  ),
  robot: Nullable(
    Strict(
      { enabled: Type.Boolean(), mode: Type.Enum(ROBOT_MODES) },
      { description: 'The robot as a Driver Station drives it now; null when no Driver Station is connected.' },
    ),
  ),
  ntConnected: Type.Boolean({ description: "A NetworkTables client is connected to their run's robot." }),
  help: Nullable(
    Strict(
      {
        id: Uuid,
        state: HelpState,
        message: Nullable(Type.String({ description: 'What the student wrote, as plain text.' })),
        createdAt: Time,
        takenBy: Nullable(Type.String({ description: 'The coach who took it: their name, else their email.' })),
      },
      { description: 'Their open help request (waiting or taken).' },
    ),
  ),
});
export type ClassStudent = Static<typeof ClassStudent>;
/** GET /admin/class: every student, by name, and the server's time when it was read (the ages shown count on from it). */
export const ClassView = Strict({ students: Type.Array(ClassStudent), readAt: Time });
export type ClassView = Static<typeof ClassView>;

/** One student's usage over a span (GET /admin/usage); `lastSeenAt` is the last thing they did in their workspace, whenever it was (null: never). */
export const StudentUsage = Strict({
  student: Strict({ id: Uuid, name: Type.String({ description: "'' when their account has no name." }), email: Type.String() }),
  workspaceSeconds: Type.Integer({ minimum: 0, description: 'How long their workspace was observed running within the span, in seconds.' }),
  runs: Type.Integer({ minimum: 0, description: 'Runs they started within the span.' }),
  failedBuilds: Type.Integer({
    minimum: 0,
    description: 'Of those, how many failed before the robot was ready (compile errors or another failure of the build).',
  }),
  lastSeenAt: Nullable(Time),
});
export type StudentUsage = Static<typeof StudentUsage>;
/** GET /admin/usage: every student's usage from `since` to `until`, by name. */
export const UsageReport = Strict({ since: Time, until: Time, students: Type.Array(StudentUsage) });
export type UsageReport = Static<typeof UsageReport>;

// --- A coach's look at a workspace ----------------------------------------------------------------

/** A coach's read-only look at a workspace: live while its page keeps it. */
export const Look = Strict({
  id: Uuid,
  state: Type.Enum(['asking', 'accepted', 'declined'], {
    description: '`asking` the student (LOOK_CONSENT=ask) until they answer; `accepted` (or not asked); `declined`.',
  }),
  workspaceId: Uuid,
  coach: Strict({ name: Type.String(), email: Type.String() }),
  startedAt: Time,
  endsAt: Time,
  live: Type.Boolean(),
});
export type Look = Static<typeof Look>;
export const LookAnswer = Strict({ look: Look });
export type LookAnswer = Static<typeof LookAnswer>;

/** One folder of a student's home, as a look lists it: folders first, then by name; links are shown, never followed. */
export const HomeListing = Strict({
  path: Type.String({ description: "Relative to the home; '' for the home itself." }),
  entries: Type.Array(
    Strict({
      name: Type.String(),
      kind: Type.Enum(['file', 'dir', 'link', 'other'], { description: '`link`: a symbolic link (never followed); `other`: a FIFO, socket or device.' }),
      size: Type.Integer({ minimum: 0, description: 'Bytes (0 for a folder).' }),
    }),
  ),
  truncated: Type.Boolean({ description: 'The folder holds more entries than a listing gives (2,000).' }),
});
export type HomeListing = Static<typeof HomeListing>;

/** One file of a student's home, as a look shows it: text, its start only; a binary file is named, not shown. */
export const HomeFile = Strict({
  path: Type.String(),
  size: Type.Integer({ minimum: 0 }),
  shownBytes: Type.Integer({ minimum: 0, description: 'How many bytes `text` holds (at most 256 KiB).' }),
  truncated: Type.Boolean({ description: 'The file is longer than what is shown.' }),
  binary: Type.Boolean({ description: 'A NUL in its start, or not UTF-8: `text` is null.' }),
  text: Nullable(Type.String({ description: 'Shown as text, never as markup.' })),
});
export type HomeFile = Static<typeof HomeFile>;

/** The robot's field during a look, as the control plane reads it from the run's NetworkTables (Field2d tables). */
export const LookField = Strict({
  runId: Nullable(Uuid),
  state: Type.Enum(['no_run', 'starting', 'connecting', 'live', 'unreachable', 'too_much'], {
    description:
      '`no_run`: none in progress; `starting`: building, no simulator yet; `live`: read now; `unreachable`: its simulator could not be reached; `too_much`: it sent more than a look reads (over 512 KiB of values or 1,000 frames a second, over 2 MiB of names in 10 s, or a frame over 1 MiB).',
  }),
  fields: Type.Array(
    Strict({
      table: Type.String({ description: "The Field2d's table, e.g. `/SmartDashboard/Field`." }),
      name: Type.String(),
      objects: Type.Array(
        Strict({
          name: Type.String(),
          poses: Type.Array(Strict({ x: Type.Number({ description: 'Metres.' }), y: Type.Number({ description: 'Metres.' }), degrees: Type.Number() })),
          drawn: Type.Enum(['robot', 'boxes', 'line']),
        }),
      ),
    }),
    { description: 'At most 4 tables, the robot first in each.' },
  ),
});
export type LookField = Static<typeof LookField>;

// --- Join codes -----------------------------------------------------------------------------------

/** A guest of a join code: a user made by joining with it, and their workspace. */
export const JoinGuest = Strict({
  userId: Uuid,
  name: Type.String({ description: 'The display name they typed.' }),
  workspaceId: Nullable(Uuid),
  workspaceSlug: Nullable(Type.String()),
});
export type JoinGuest = Static<typeof JoinGuest>;
/** A join code, with its guests now. */
export const JoinCode = Strict({
  id: Uuid,
  code: Type.String({ pattern: '^[A-Z2-9]{4}-[A-Z2-9]{4}$', description: 'As shown and typed: `ABCD-EFGH` (typed in any case, with or without the dash).' }),
  label: Type.String({ description: "The coach's label (`Outreach day`), or empty." }),
  openedBy: Strict({ id: Nullable(Uuid), email: Type.String() }),
  openedAt: Time,
  expiresAt: Time,
  closedAt: Nullable(Time),
  closedBy: Nullable(Type.String({ description: 'Who closed it early (an email, `cli`, `admin-token`).' })),
  state: Type.Enum(['open', 'expired', 'closed'], { description: '`open`: guests may join; `expired`: its hours passed; `closed`: a coach closed it early.' }),
  joined: Type.Integer({ minimum: 0, description: 'How many guests ever joined with it.' }),
  guests: Type.Array(JoinGuest, { description: 'Its guests still here: none once its expiry is handled.' }),
  handledAt: Nullable(Type.String({ format: 'date-time', description: 'When every guest was backed up and removed; null until then.' })),
  backups: Type.Array(Type.String(), { description: "The backups its expiry made of its guests' homes." }),
});
export type JoinCode = Static<typeof JoinCode>;
/** GET /admin/join-codes: the 50 newest codes, open and past, newest first. */
export const JoinCodeList = Strict({ codes: Type.Array(JoinCode) });
export type JoinCodeList = Static<typeof JoinCodeList>;
export const JoinCodeAnswer = Strict({ code: JoinCode });
export type JoinCodeAnswer = Static<typeof JoinCodeAnswer>;
/** GET /admin/config/join-codes: whether JOIN_CODES is on. */
export const JoinCodesSetting = Strict({ enabled: Type.Boolean({ description: 'JOIN_CODES=on: coaches may open join codes.' }) });
export type JoinCodesSetting = Static<typeof JoinCodesSetting>;

// --- Cap, allowlist, audit, links, backups --------------------------------------------------------

export const Cap = Strict({ value: Type.Integer(), source: CapSource });
export type Cap = Static<typeof Cap>;
export const CapChange = Strict({ value: Type.Integer(), source: Type.Literal('override'), previous: Type.Integer() });
export type CapChange = Static<typeof CapChange>;

export const Allowlist = Strict({
  entries: Type.Array(Type.String()),
  implicit: Type.Array(Type.String(), { description: "SERVICE_ADMIN_EMAIL's emails, admitted whatever the file says." }),
});
export type Allowlist = Static<typeof Allowlist>;
export const AllowlistAdded = Strict({ entry: Type.String(), added: Type.Boolean() });
export type AllowlistAdded = Static<typeof AllowlistAdded>;
export const AllowlistRemoved = Strict({ entry: Type.String(), removed: Type.Boolean() });
export type AllowlistRemoved = Static<typeof AllowlistRemoved>;

export const AuditEntry = Strict({
  id: Type.Integer({ description: 'The cursor: pass the smallest of a page as `before`.' }),
  timestamp: Time,
  actor: Strict({
    id: Nullable(Type.String({ description: "The acting user's id; null for a named actor (system, cli, admin-token)." })),
    email: Type.String(),
  }),
  action: Type.String(),
  target: Strict({ kind: Type.String(), id: Type.String() }),
  metadata: Nullable(Type.Record(Type.String(), Type.Unknown())),
});
export type AuditEntry = Static<typeof AuditEntry>;
export const AuditPage = Strict({ entries: Type.Array(AuditEntry), nextCursor: Nullable(Type.Integer()) });
export type AuditPage = Static<typeof AuditPage>;

export const SignInLink = Strict({ id: Uuid, email: Type.String(), url: Type.String(), expiresAt: Time });
export type SignInLink = Static<typeof SignInLink>;
export const SignInLinkAnswer = Strict({ link: SignInLink });
export type SignInLinkAnswer = Static<typeof SignInLinkAnswer>;

/** A stored backup: its file, and what its manifest says (nulls for a file without one). */
export const Backup = Strict({
  name: Type.String(),
  sizeBytes: Type.Integer({ description: 'The file (compressed).' }),
  modified: Time,
  slug: Nullable(Type.String()),
  workspaceId: Nullable(Type.String()),
  ownerEmail: Nullable(Type.String()),
  created: Nullable(Type.String()),
  files: Nullable(Type.Integer()),
  bytes: Nullable(Type.Integer({ description: 'The data it holds (uncompressed).' })),
  sha256: Nullable(Type.String()),
});
export type Backup = Static<typeof Backup>;
export const BackupList = Strict({ backups: Type.Array(Backup) });
export type BackupList = Static<typeof BackupList>;
export const BackupAnswer = Strict({ backup: Backup });
export type BackupAnswer = Static<typeof BackupAnswer>;
export const RestoreAnswer = Strict({
  workspace: WorkspaceChange,
  from: Type.String({ description: 'The slug the backup was made of.' }),
  handedOver: Type.Boolean({ description: "Into another workspace: the first student's credentials and editor state were left out." }),
  kept: Nullable(Type.String({ description: 'The backup that keeps the files the restore replaced.' })),
});
export type RestoreAnswer = Static<typeof RestoreAnswer>;

/** One version of a lesson's files. */
export const LessonVersion = Strict({
  version: Type.Integer({ minimum: 1 }),
  files: Type.Integer({ minimum: 0 }),
  sizeBytes: Type.Integer({ minimum: 0, description: 'Bytes of its files, unpacked.' }),
  sha256: Type.String({ description: 'SHA-256 of the version as kept (a tar of its files).' }),
  createdBy: Type.String(),
  createdAt: Time,
});

/** A lesson: a folder handed out to students' homes under `lessons/<name>/`. */
export const Lesson = Strict({
  id: Uuid,
  name: Type.String({ description: 'The folder it lands in, under `lessons/` of each home.' }),
  createdBy: Type.String(),
  createdAt: Time,
  latest: LessonVersion,
  deliveries: Strict(
    { pending: Type.Integer({ minimum: 0 }), delivered: Type.Integer({ minimum: 0 }), failed: Type.Integer({ minimum: 0 }) },
    { description: 'How its handouts stand, every version counted.' },
  ),
});
export type Lesson = Static<typeof Lesson>;
export const LessonAnswer = Strict({ lesson: Lesson });
export type LessonAnswer = Static<typeof LessonAnswer>;
export const LessonList = Strict({ lessons: Type.Array(Lesson) });
export type LessonList = Static<typeof LessonList>;

/** One student's delivery of one version of a lesson. */
export const LessonDelivery = Strict({
  workspaceId: Uuid,
  slug: Type.String(),
  version: Type.Integer({ minimum: 1 }),
  state: Type.Enum(['pending', 'delivered', 'failed'], { description: '`pending`: on its way; `failed`: given up after 5 attempts (`message` says why).' }),
  folder: Nullable(Type.String({ description: 'Where it landed, under `lessons/`: the lesson\'s name, or beside an earlier version ("Intro (v2)").' })),
  message: Type.String({ description: 'Why the last attempt failed; empty when none did.' }),
  attempts: Type.Integer({ minimum: 0 }),
  requestedAt: Time,
  deliveredAt: Nullable(Time),
  resetRequestedAt: Nullable(Time),
  resetBackup: Nullable(Type.String({ description: 'The stored backup made before the last reset of the folder.' })),
  resetAt: Nullable(Time),
});
export const LessonResetAnswer = Strict({ delivery: LessonDelivery });
export type LessonResetAnswer = Static<typeof LessonResetAnswer>;
export const HandoutAnswer = Strict({
  version: Type.Integer({ minimum: 1, description: 'The version handed out (the latest).' }),
  students: Type.Integer({ minimum: 0, description: 'How many students it is now on its way to (those who have it already are not counted).' }),
});
export type HandoutAnswer = Static<typeof HandoutAnswer>;

/** One student's snapshot in a collection. */
export const LessonSnapshot = Strict({
  workspaceId: Uuid,
  slug: Type.String(),
  state: Type.Enum(['pending', 'taken', 'missing', 'failed'], { description: '`missing`: no folder of the lesson was in their home.' }),
  folders: Type.Array(Type.String(), { description: 'The lesson folders collected, under `lessons/`.' }),
  files: Type.Integer({ minimum: 0 }),
  sizeBytes: Type.Integer({ minimum: 0 }),
  message: Type.String(),
  takenAt: Nullable(Time),
});

/** A collection of a lesson: a snapshot of each student's lesson folders, taken when it is due. */
export const LessonCollection = Strict({
  id: Uuid,
  lessonId: Uuid,
  requestedBy: Type.String(),
  requestedAt: Time,
  dueAt: Time,
  doneAt: Nullable(Time),
  snapshots: Type.Array(LessonSnapshot),
});
export const CollectionAnswer = Strict({ collection: LessonCollection });
export type CollectionAnswer = Static<typeof CollectionAnswer>;

/** A lesson with its versions (newest first), every student's deliveries and its collections (newest first). */
export const LessonDetail = Strict({
  lesson: Lesson,
  versions: Type.Array(LessonVersion),
  students: Type.Array(LessonDelivery),
  collections: Type.Array(LessonCollection),
});
export type LessonDetail = Static<typeof LessonDetail>;
