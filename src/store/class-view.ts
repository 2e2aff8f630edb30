/**
 * The class as a coach teaches it, computed by PostgreSQL in one query: every student (a user whose
 * role is `user`; a coach's own workspace is not in the class), with their workspace's state and
 * last activity, the run in progress, how their last run ended (runOutcome) and the help request
 * they have open. What only the proxy sees (whether they are online, their robot, NetworkTables)
 * is the presence store's, joined by the caller.
 */
import type { DataSource } from 'typeorm';
import { col, rowCodec } from './row-codec.ts';
import {
  ACTIVE_RUN_STATUSES,
  DESIRED_STATES,
  HELP_STATES,
  OBSERVED_STATES,
  TERMINAL_RUN_STATUSES,
  type ActiveRunStatus,
  type DesiredState,
  type HelpState,
  type ObservedState,
  type RunOutcome,
  type TerminalRunStatus,
} from '../wire/vocabulary.ts';

/** How a run ended, as the class view reads it: its terminal phase, whether it was ever ready, and what the compiler said. */
export interface EndedRun {
  id: string;
  phase: TerminalRunStatus;
  readyAt: Date | null;
  endedAt: Date | null;
  exitCode: number | null;
  reason: string | null;
  /** The compile errors found in its last output; null for a run recorded before they were counted. */
  problemCount: number | null;
  firstProblem: string | null;
}

/**
 * How a run ended in a coach's words (RUN_OUTCOMES): stopped before it was ready is `canceled`;
 * stopped after is `built`; failed after it was ready is `crashed`; failed before, `compile_errors`
 * when the compiler reported any, else `build_failed`.
 */
export function runOutcome(run: Pick<EndedRun, 'phase' | 'readyAt' | 'problemCount'>): RunOutcome {
  if (run.phase === 'canceled') return 'canceled';
  if (run.phase === 'stopped') return 'built';
  if (run.readyAt !== null) return 'crashed';
  return (run.problemCount ?? 0) > 0 ? 'compile_errors' : 'build_failed';
}

/** One student of the class as the store reads them (presence apart). */
export interface ClassStudentRecord {
  student: { id: string; name: string; email: string };
  /** Null: they have no workspace yet (never signed in to one). */
  workspace: { id: string; slug: string; desiredState: DesiredState; observedState: ObservedState; statusMessage: string } | null;
  lastActivityAt: Date | null;
  /** The run in progress: queued (compiling and booting) or running, since when. */
  run: { id: string; phase: ActiveRunStatus; queuedAt: Date; readyAt: Date | null } | null;
  /** The last run that ended. */
  lastRun: EndedRun | null;
  /** The open help request (waiting or taken). */
  help: { id: string; state: HelpState; message: string | null; createdAt: Date; takenBy: string | null } | null;
}

/** The class's rows as the query gives them. */
const CLASS_ROW = rowCodec(
  'users',
  {
    user_id: col.text,
    name: col.text,
    email: col.text,
    workspace_id: col.nullable(col.text),
    slug: col.nullable(col.text),
    desired_state: col.nullable(col.oneOf(DESIRED_STATES)),
    observed_state: col.nullable(col.oneOf(OBSERVED_STATES)),
    status_message: col.nullable(col.text),
    last_activity_at: col.nullable(col.timestamp),
    run_id: col.nullable(col.text),
    run_phase: col.nullable(col.oneOf(ACTIVE_RUN_STATUSES)),
    run_queued_at: col.nullable(col.timestamp),
    run_ready_at: col.nullable(col.timestamp),
    last_id: col.nullable(col.text),
    last_phase: col.nullable(col.oneOf(TERMINAL_RUN_STATUSES)),
    last_ready_at: col.nullable(col.timestamp),
    last_ended_at: col.nullable(col.timestamp),
    last_exit_code: col.nullable(col.integer),
    last_reason: col.nullable(col.text),
    last_problem_count: col.nullable(col.integer),
    last_first_problem: col.nullable(col.text),
    help_id: col.nullable(col.text),
    help_state: col.nullable(col.oneOf(HELP_STATES)),
    help_message: col.nullable(col.text),
    help_created_at: col.nullable(col.timestamp),
    help_taken_by: col.nullable(col.text),
  },
  (row): ClassStudentRecord => ({
    student: { id: row.user_id, name: row.name, email: row.email },
    workspace:
      row.workspace_id && row.slug && row.desired_state && row.observed_state
        ? { id: row.workspace_id, slug: row.slug, desiredState: row.desired_state, observedState: row.observed_state, statusMessage: row.status_message ?? '' }
        : null,
    lastActivityAt: row.last_activity_at,
    run:
      row.run_id && row.run_phase && row.run_queued_at
        ? { id: row.run_id, phase: row.run_phase, queuedAt: row.run_queued_at, readyAt: row.run_ready_at }
        : null,
    lastRun:
      row.last_id && row.last_phase
        ? {
            id: row.last_id,
            phase: row.last_phase,
            readyAt: row.last_ready_at,
            endedAt: row.last_ended_at,
            exitCode: row.last_exit_code,
            reason: row.last_reason,
            problemCount: row.last_problem_count,
            firstProblem: row.last_first_problem,
          }
        : null,
    help:
      row.help_id && row.help_state && row.help_created_at
        ? { id: row.help_id, state: row.help_state, message: row.help_message, createdAt: row.help_created_at, takenBy: row.help_taken_by }
        : null,
  }),
);

const ACTIVE = `status IN (${ACTIVE_RUN_STATUSES.map((status) => `'${status}'`).join(', ')})`;

/** The class view's reads (see the file comment). */
export class ClassViewStore {
  private readonly db: DataSource;

  constructor(db: DataSource) {
    this.db = db;
  }

  /**
   * Every student, by name (else email): one statement, each workspace's runs read through the
   * runs_recent index (its newest active run, its newest ended one) and its open help request through
   * help_requests_one_open, so that it costs the same per student at 200 as at 20.
   */
  async students(): Promise<ClassStudentRecord[]> {
    return CLASS_ROW.all(
      this.db,
      `SELECT u.id AS user_id, u.name, u.email,
              w.id AS workspace_id, w.slug, w.desired_state, w.observed_state, w.status_message, w.last_activity_at,
              a.id AS run_id, a.status AS run_phase, a.queued_at AS run_queued_at, a.ready_at AS run_ready_at,
              l.id AS last_id, l.status AS last_phase, l.ready_at AS last_ready_at, l.ended_at AS last_ended_at,
              l.exit_code AS last_exit_code, l.reason AS last_reason, l.problem_count AS last_problem_count, l.first_problem AS last_first_problem,
              h.id AS help_id, h.state AS help_state, h.message AS help_message, h.created_at AS help_created_at,
              coalesce(nullif(coach.name, ''), coach.email, h.taken_by_email) AS help_taken_by
         FROM users u
         LEFT JOIN workspaces w ON w.user_id = u.id AND w.desired_state <> 'deleted'
         LEFT JOIN LATERAL (SELECT id, status, queued_at, ready_at FROM runs
                             WHERE workspace_id = w.id AND ${ACTIVE} ORDER BY queued_at DESC LIMIT 1) a ON true
         LEFT JOIN LATERAL (SELECT id, status, ready_at, ended_at, exit_code, reason, problem_count, first_problem FROM runs
                             WHERE workspace_id = w.id AND NOT ${ACTIVE} ORDER BY queued_at DESC LIMIT 1) l ON true
         LEFT JOIN help_requests h ON h.workspace_id = w.id AND h.state IN ('waiting', 'taken')
         LEFT JOIN users coach ON coach.id = h.taken_by
        WHERE u.role = 'user'
        ORDER BY lower(coalesce(nullif(u.name, ''), u.email)), u.email`,
    );
  }
}
