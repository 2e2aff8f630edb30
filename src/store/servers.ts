import type { DataSource } from 'typeorm';
import { col, rowCodec } from './row-codec.ts';

/** How often a server refreshes its row. */
export const SERVER_HEARTBEAT_MS = 10_000;
/** A row not refreshed for this long is a server that is gone (crashed, or its host lost). */
export const SERVER_GONE_AFTER_MS = 3 * SERVER_HEARTBEAT_MS;

/** A server whose readiness (GET /readyz) was asked within this long is one a balancer checks (deploy/haproxy.cfg: every second). */
export const BALANCER_CHECKED_MS = 10_000;

/** A control-plane process, as it registered itself. */
export interface ServerRecord {
  id: string;
  /** The address its users open (PUBLIC_URL, else where it listens). */
  publicUrl: string;
  hostname: string;
  pid: number;
  /** Its PID namespace (see the migration AddServerPidNamespace): a pid means a process only within one. */
  pidNamespace: string;
  startedAt: Date;
  seenAt: Date;
}

/** The servers table: its rows as the store reads them. */
const SERVERS = rowCodec(
  'servers',
  { id: col.text, public_url: col.text, hostname: col.text, pid: col.integer, pid_namespace: col.text, started_at: col.timestamp, seen_at: col.timestamp },
  (row): ServerRecord => ({
    id: row.id,
    publicUrl: row.public_url,
    hostname: row.hostname,
    pid: row.pid,
    pidNamespace: row.pid_namespace,
    startedAt: row.started_at,
    seenAt: row.seen_at,
  }),
);

/** Whether a heartbeat wrote its server's row anew (none was there). */
const WRITTEN = rowCodec('servers', { inserted: col.boolean });

/** Whether a server should take no new connections (draining). */
const DRAINING = rowCodec('servers', { draining: col.boolean });
/** Whether every server that drains has said so (drainSaid). */
const DRAIN_SAID = rowCodec('servers', { said: col.boolean });

/**
 * The servers that run now: each writes its row at start, refreshes it every SERVER_HEARTBEAT_MS
 * (heartbeat) and removes it when it stops (unregister); one not seen for SERVER_GONE_AFTER_MS is
 * taken as gone, and its row cleared by the next heartbeat of any server. Observed state, not audited.
 */
export class ServerStore {
  private readonly db: DataSource;

  constructor(db: DataSource) {
    this.db = db;
  }

  /**
   * Records that a server runs (at start, and every SERVER_HEARTBEAT_MS after): its row is written
   * again if it went missing meanwhile (a server paused for longer than SERVER_GONE_AFTER_MS whose
   * row another server cleared, and with it what was kept under it: see PresenceStore). Rows of
   * servers gone that long are cleared. Resolves true when the row was written anew.
   */
  async heartbeat(server: { id: string; publicUrl: string; hostname: string; pid: number; pidNamespace: string }): Promise<boolean> {
    // xmax is 0 on a row this statement inserted, and set on one it updated.
    const { inserted } = await WRITTEN.one(
      this.db,
      `INSERT INTO servers (id, public_url, hostname, pid, pid_namespace) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (id) DO UPDATE SET seen_at = now(), public_url = EXCLUDED.public_url
       RETURNING (xmax = 0) AS inserted`,
      [server.id, server.publicUrl, server.hostname, server.pid, server.pidNamespace],
    );
    await this.db.query(`DELETE FROM servers WHERE seen_at < now() - make_interval(secs => $1)`, [SERVER_GONE_AFTER_MS / 1000]);
    return inserted;
  }

  /** The server has begun to stop (see draining); its row stays until it has stopped (unregister). */
  async markStopping(id: string): Promise<void> {
    await this.db.query('UPDATE servers SET stopping_since = now() WHERE id = $1', [id]);
  }

  /**
   * Whether server `id` should take no new connections now: it is stopping itself (it finishes what
   * it has, and a balancer sends it nothing more before it closes: a request in flight when the
   * balancer marks it down would be cut), or another server is stopping while one that started after
   * `id` runs and is not stopping. In a rolling upgrade (a new replica started before each old one
   * stops) the editors a stopping replica lets go then land on the newest replicas, never on an old
   * one that goes next: each moves once. Asked by a balancer's check (GET /readyz): the row notes
   * when it was asked (`checked_at`) and when it answered yes (`drain_said_at`), for `drainSaid`.
   */
  async draining(id: string): Promise<boolean> {
    const { draining } = await DRAINING.one(
      this.db,
      `WITH live AS (SELECT id, started_at, stopping_since FROM servers WHERE seen_at >= now() - make_interval(secs => $2)),
            answer AS (
              SELECT EXISTS (SELECT 1 FROM live WHERE id = $1 AND stopping_since IS NOT NULL)
                  OR (EXISTS (SELECT 1 FROM live WHERE id <> $1 AND stopping_since IS NOT NULL)
                      AND EXISTS (SELECT 1 FROM live newer, live me WHERE me.id = $1 AND newer.id <> $1
                                    AND newer.stopping_since IS NULL AND newer.started_at > me.started_at)) AS draining),
            noted AS (UPDATE servers SET checked_at = now(), drain_said_at = CASE WHEN answer.draining THEN now() ELSE drain_said_at END
                        FROM answer WHERE servers.id = $1)
       SELECT draining FROM answer`,
      [id, SERVER_GONE_AFTER_MS / 1000],
    );
    return draining;
  }

  /**
   * Whether server `id`, stopping, and every replica that drains because it stops (a live one, not
   * stopping, with a newer one that is not stopping), each of them that a balancer checks (asked
   * within BALANCER_CHECKED_MS), has answered a check with "draining" since `id` began to stop: its
   * balancer has then stopped sending it new connections. True when none is checked.
   */
  async drainSaid(id: string): Promise<boolean> {
    const { said } = await DRAIN_SAID.one(
      this.db,
      `WITH live AS (SELECT id, started_at, stopping_since, checked_at, drain_said_at FROM servers WHERE seen_at >= now() - make_interval(secs => $2))
       SELECT NOT EXISTS (
         SELECT 1 FROM live drains, servers me
          WHERE me.id = $1 AND drains.checked_at >= now() - make_interval(secs => $3)
            AND (drains.id = $1
                 OR (drains.stopping_since IS NULL
                     AND EXISTS (SELECT 1 FROM live newer WHERE newer.id NOT IN ($1, drains.id) AND newer.stopping_since IS NULL AND newer.started_at > drains.started_at)))
            AND (drains.drain_said_at IS NULL OR me.stopping_since IS NULL OR drains.drain_said_at < me.stopping_since)) AS said`,
      [id, SERVER_GONE_AFTER_MS / 1000, BALANCER_CHECKED_MS / 1000],
    );
    return said;
  }

  /** The server has stopped. */
  async unregister(id: string): Promise<void> {
    await this.db.query('DELETE FROM servers WHERE id = $1', [id]);
  }

  /** The server with this id, as it last registered (gone or not), or undefined. */
  get(id: string): Promise<ServerRecord | undefined> {
    return SERVERS.first(this.db, `SELECT ${SERVERS.columns} FROM servers WHERE id = $1`, [id]);
  }

  /** The servers running now, the most recently started first. */
  live(): Promise<ServerRecord[]> {
    return SERVERS.all(
      this.db,
      `SELECT ${SERVERS.columns} FROM servers
       WHERE seen_at >= now() - make_interval(secs => $1) ORDER BY started_at DESC`,
      [SERVER_GONE_AFTER_MS / 1000],
    );
  }
}
