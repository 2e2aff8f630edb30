/**
 * The usage report: per student (a user whose role is `user`), over a span of time, the hours their
 * workspace ran (its observed running stretches, `workspace_uptime`, cut to the span), the runs they
 * started and how many of them failed to build (failed before ready: compile errors or another
 * failure of the build, as runOutcome words it), and when they last did anything in it. One query,
 * per-student sums read through each table's index by workspace.
 */
import type { DataSource } from 'typeorm';
import { ValidationError } from '../errors.ts';
import { col, rowCodec } from './row-codec.ts';

/** The span a report covers when none is asked: the last this many days. */
export const DEFAULT_USAGE_DAYS = 30;

/** The span of a report: `until` (default now), `since` (default DEFAULT_USAGE_DAYS before it); 400 `invalid_span` when it is empty. */
export function usageSpan(since: Date | undefined, until: Date | undefined, now = new Date()): { since: Date; until: Date } {
  const end = until ?? now;
  const start = since ?? new Date(end.getTime() - DEFAULT_USAGE_DAYS * 86_400_000);
  if (start >= end) throw ValidationError('invalid_span', `since (${start.toISOString()}) must be before until (${end.toISOString()}).`);
  return { since: start, until: end };
}

/** One student's usage over the span asked. */
export interface UsageRecord {
  student: { id: string; name: string; email: string };
  /** Seconds their workspace was observed running within the span (whole seconds). */
  workspaceSeconds: number;
  runs: number;
  failedBuilds: number;
  /** Their workspace's last activity (whenever it was); null: never. */
  lastSeenAt: Date | null;
}

const USAGE = rowCodec(
  'users',
  {
    user_id: col.text,
    name: col.text,
    email: col.text,
    workspace_seconds: col.bigint,
    runs: col.bigint,
    failed_builds: col.bigint,
    last_seen_at: col.nullable(col.timestamp),
  },
  (row): UsageRecord => ({
    student: { id: row.user_id, name: row.name, email: row.email },
    workspaceSeconds: row.workspace_seconds,
    runs: row.runs,
    failedBuilds: row.failed_builds,
    lastSeenAt: row.last_seen_at,
  }),
);

/** The usage report's read (see the file comment). */
export class UsageStore {
  private readonly db: DataSource;

  constructor(db: DataSource) {
    this.db = db;
  }

  /** Every student's usage from `since` (inclusive) to `until` (exclusive), by name, else email. */
  async report(span: { since: Date; until: Date }): Promise<UsageRecord[]> {
    return USAGE.all(
      this.db,
      `SELECT u.id AS user_id, u.name, u.email,
              coalesce((SELECT round(sum(extract(epoch FROM least(coalesce(t.ended_at, now()), $2) - greatest(t.started_at, $1))))
                          FROM workspace_uptime t
                         WHERE t.workspace_id = w.id AND t.started_at < $2 AND coalesce(t.ended_at, now()) > $1), 0)::bigint AS workspace_seconds,
              (SELECT count(*) FROM runs r WHERE r.workspace_id = w.id AND r.queued_at >= $1 AND r.queued_at < $2) AS runs,
              (SELECT count(*) FROM runs r WHERE r.workspace_id = w.id AND r.queued_at >= $1 AND r.queued_at < $2
                  AND r.status = 'failed' AND r.ready_at IS NULL) AS failed_builds,
              w.last_activity_at AS last_seen_at
         FROM users u
         LEFT JOIN workspaces w ON w.user_id = u.id AND w.desired_state <> 'deleted'
        WHERE u.role = 'user'
        ORDER BY lower(coalesce(nullif(u.name, ''), u.email)), u.email`,
      [span.since, span.until],
    );
  }
}
