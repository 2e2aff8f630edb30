/**
 * The control plane's words, once: every state a workspace or a run can be in, who can stop one,
 * the roles of users, the phases of an import and the states of a help request, each as one
 * `as const` list with its type derived from it. The store's records, the wire's TypeBox schemas
 * (schemas.ts), the request schemas that ajv checks (a query's `status`, `observed`, `desired`
 * filters) and the metrics' label values take their lists from here;
 * the panel (browser code, which may only `import type` from the server) keys its labels by these
 * types, so tsc names a word added here and missing there. The database's CHECK constraints hold the
 * same lists in the migrations that made them (test/integration/vocabulary.test.ts compares them).
 *
 * No imports: every layer, the store included, may take its words from here.
 */

/** What is wanted of a workspace (its spec). `deleted` is the finalizer's mark: the row goes once Docker is clean. */
export const DESIRED_STATES = ['running', 'stopped', 'deleted'] as const;
/** What is wanted of a workspace: one of DESIRED_STATES. */
export type DesiredState = (typeof DESIRED_STATES)[number];

/**
 * What the workspace controller last saw of a workspace's code container: `unknown` (not seen yet),
 * `starting` (runs, its editor does not answer yet), `running` (the editor answered), `stopped`,
 * `waiting` (for capacity, or for its node) or `failed` (with the engine's message).
 */
export const OBSERVED_STATES = ['unknown', 'starting', 'running', 'stopped', 'waiting', 'failed'] as const;
/** What was seen of a workspace: one of OBSERVED_STATES. */
export type ObservedState = (typeof OBSERVED_STATES)[number];

/** What is wanted of a run: running until someone asks it to stop (a run is never deleted on its own). */
export const RUN_DESIRED_STATES = ['running', 'stopped'] as const satisfies readonly DesiredState[];
/** What is wanted of a run: one of RUN_DESIRED_STATES. */
export type RunDesiredState = (typeof RUN_DESIRED_STATES)[number];

/** A run in progress: `queued` through compile and boot until its simulator first answers, then `running`. */
export const ACTIVE_RUN_STATUSES = ['queued', 'running'] as const;
/** A run in progress: one of ACTIVE_RUN_STATUSES. */
export type ActiveRunStatus = (typeof ACTIVE_RUN_STATUSES)[number];

/** How a run ended: `stopped` (after ready), `failed` (with its reason) or `canceled` (stopped before ready). */
export const TERMINAL_RUN_STATUSES = ['stopped', 'failed', 'canceled'] as const;
/** How a run ended: one of TERMINAL_RUN_STATUSES. */
export type TerminalRunStatus = (typeof TERMINAL_RUN_STATUSES)[number];

/** Every status of a run: in progress, then ended. */
export const RUN_STATUSES = [...ACTIVE_RUN_STATUSES, ...TERMINAL_RUN_STATUSES] as const;
/** A run's status: one of RUN_STATUSES. */
export type RunStatus = (typeof RUN_STATUSES)[number];

/**
 * Who stops a workspace or a run: its student, a coach (the panel or the admin API, whoever the
 * admin is), the operator (the CLI) or the idle sweep. One word for one actor, whatever they stop.
 */
export const STOPPED_BY = ['student', 'coach', 'operator', 'idle'] as const;
/** Who stopped something: one of STOPPED_BY. */
export type StoppedBy = (typeof STOPPED_BY)[number];

/** Who can ask a run to stop: its student (the workspace page, the editor) or a coach (the panel, the admin API); the CLI stops no run. */
export const RUN_STOPPED_BY = ['student', 'coach'] as const satisfies readonly StoppedBy[];
/** Who asked a run to stop: one of RUN_STOPPED_BY. */
export type RunStoppedBy = (typeof RUN_STOPPED_BY)[number];

/** A user's role: `admin` (a coach: the panel and the admin API) or `user` (a student). */
export const ROLES = ['user', 'admin'] as const;
/** A user's role: one of ROLES. */
export type Role = (typeof ROLES)[number];

/**
 * How far an import got, in order: `checking` the address (and its redirects), `cloning` (bytes: the
 * clone's size on disk), `backing-up` the home (bytes backed up), `copying` into the home (bytes of
 * the project copied), then `done` or `failed`.
 */
export const IMPORT_PHASES = ['checking', 'cloning', 'backing-up', 'copying', 'done', 'failed'] as const;
/** How far an import got: one of IMPORT_PHASES. */
export type ImportPhase = (typeof IMPORT_PHASES)[number];

/**
 * Where a student's help request is: `waiting` in the queue, `taken` by a coach ("coming"), then
 * `resolved` by a coach, or `withdrawn` by the student. The first two are open: a student has at
 * most one open request.
 */
export const HELP_STATES = ['waiting', 'taken', 'resolved', 'withdrawn'] as const;
/** Where a help request is: one of HELP_STATES. */
export type HelpState = (typeof HELP_STATES)[number];

/**
 * How a run ended, as a coach reads it: `built` (it compiled and booted, then was stopped or ended
 * on its own), `compile_errors` (it failed before ready and the compiler reported errors),
 * `build_failed` (it failed before ready otherwise: out of memory, the build time up, a failure
 * with no compiler error), `crashed` (the robot program failed after it was ready), `canceled`
 * (stopped before it was ready). runOutcome (src/store/class-view.ts) is the rule.
 */
export const RUN_OUTCOMES = ['built', 'compile_errors', 'build_failed', 'crashed', 'canceled'] as const;
/** How a run ended: one of RUN_OUTCOMES. */
export type RunOutcome = (typeof RUN_OUTCOMES)[number];

/** How a Driver Station drives an enabled robot (WPILib's modes): `teleop`, `autonomous` or `test`. */
export const ROBOT_MODES = ['teleop', 'autonomous', 'test'] as const;
/** A robot's mode: one of ROBOT_MODES. */
export type RobotMode = (typeof ROBOT_MODES)[number];
