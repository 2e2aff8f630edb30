import type { DataSource } from 'typeorm';
import { channelOf, type ChangeFeed } from '../db/changes.ts';
import { ROBOT_MODES, type RobotMode } from '../wire/vocabulary.ts';
import { col, rowCodec } from './row-codec.ts';
import { SERVER_GONE_AFTER_MS } from './servers.ts';

/** What one replica sees of one workspace now (a row of `workspace_presence`; all zero and false: nothing, and no row). */
export interface PresenceEntry {
  workspaceId: string;
  /** The owner's editor WebSockets open through this replica. */
  editors: number;
  /** The owner's workspace pages open (see api/proxy/presence.ts: a page that polled lately). */
  pages: number;
  /** NetworkTables tunnels open to the run's simulator. */
  ntClients: number;
  /** A Driver Station connected through this replica's HALSim relay. */
  driver: boolean;
  /** The robot enabled by that driver (false without a driver). */
  robotEnabled: boolean;
  /** The robot's mode as that driver set it; null without a driver. */
  robotMode: RobotMode | null;
}

/** A workspace's presence summed over the live replicas. */
export interface Presence {
  /** An editor or the workspace page of its owner open now. */
  online: boolean;
  /** A NetworkTables client connected to its run's simulator. */
  ntConnected: boolean;
  /** The robot as its Driver Station drives it; null when no Driver Station is connected. */
  robot: { enabled: boolean; mode: 'teleop' | 'autonomous' | 'test' } | null;
}

/** Whether an entry says nothing (its row is removed rather than written). */
export const isAbsent = (entry: Omit<PresenceEntry, 'workspaceId'>): boolean =>
  entry.editors === 0 && entry.pages === 0 && entry.ntClients === 0 && !entry.driver;

/** The workspaces a write changed. */
const CHANGED = rowCodec('workspace_presence', { workspace_id: col.text });

/** A workspace's presence over the live replicas, as ofLiveServers reads it. */
const SUMMED = rowCodec(
  'workspace_presence',
  {
    workspace_id: col.text,
    online: col.boolean,
    nt_connected: col.boolean,
    driver: col.boolean,
    robot_enabled: col.nullable(col.boolean),
    robot_mode: col.nullable(col.oneOf(ROBOT_MODES)),
  },
  (row): [string, Presence] => [
    row.workspace_id,
    {
      online: row.online,
      ntConnected: row.nt_connected,
      robot: row.driver ? { enabled: row.robot_enabled ?? false, mode: row.robot_mode ?? 'teleop' } : null,
    },
  ],
);

/**
 * Who is at each workspace now, as the replicas' proxies see it (`workspace_presence`): each replica
 * writes its own rows (`write`, coalesced by api/proxy/presence.ts) and removes them when it stops
 * (`clear`); its rows also go with its `servers` row, and are not read once that row is stale (a
 * replica that died). Observed state, not audited; every change is announced as a `status` change
 * of its workspace (the admin panel's live view refreshes on it).
 */
export class PresenceStore {
  private readonly db: DataSource;
  private readonly changes: ChangeFeed;

  constructor(db: DataSource, changes: ChangeFeed) {
    this.db = db;
    this.changes = changes;
  }

  /**
   * Writes replica `serverId`'s presence of the workspaces in `entries` (those whose presence
   * changed), in one statement: a row upserted for each entry that says something, removed for
   * each that says nothing; a workspace deleted meanwhile is skipped. Each workspace whose row
   * changed is NOTIFYed (in the statement) and published (after it) as a `status` change.
   */
  async write(serverId: string, entries: readonly PresenceEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const changed = await CHANGED.all(
      this.db,
      `WITH input AS (
         SELECT * FROM unnest($2::uuid[], $3::integer[], $4::integer[], $5::integer[], $6::boolean[], $7::boolean[], $8::text[])
           AS i (workspace_id, editors, pages, nt_clients, driver, robot_enabled, robot_mode)
       ), removed AS (
         DELETE FROM workspace_presence p USING input i
         WHERE p.server_id = $1 AND p.workspace_id = i.workspace_id
           AND i.editors = 0 AND i.pages = 0 AND i.nt_clients = 0 AND NOT i.driver
         RETURNING p.workspace_id
       ), written AS (
         INSERT INTO workspace_presence AS p (workspace_id, server_id, editors, pages, nt_clients, driver, robot_enabled, robot_mode)
         SELECT i.workspace_id, $1, i.editors, i.pages, i.nt_clients, i.driver, i.robot_enabled, i.robot_mode
         FROM input i JOIN workspaces w ON w.id = i.workspace_id
         WHERE i.editors <> 0 OR i.pages <> 0 OR i.nt_clients <> 0 OR i.driver
         ON CONFLICT (workspace_id, server_id) DO UPDATE SET
           editors = EXCLUDED.editors, pages = EXCLUDED.pages, nt_clients = EXCLUDED.nt_clients, driver = EXCLUDED.driver,
           robot_enabled = EXCLUDED.robot_enabled, robot_mode = EXCLUDED.robot_mode, updated_at = now()
         WHERE (p.editors, p.pages, p.nt_clients, p.driver, p.robot_enabled, p.robot_mode)
           IS DISTINCT FROM (EXCLUDED.editors, EXCLUDED.pages, EXCLUDED.nt_clients, EXCLUDED.driver, EXCLUDED.robot_enabled, EXCLUDED.robot_mode)
         RETURNING p.workspace_id
       ), changed AS (SELECT workspace_id FROM removed UNION SELECT workspace_id FROM written)
       SELECT workspace_id::text AS workspace_id FROM changed, LATERAL (SELECT pg_notify($9, workspace_id::text)) announced`,
      [
        serverId,
        entries.map((entry) => entry.workspaceId),
        entries.map((entry) => entry.editors),
        entries.map((entry) => entry.pages),
        entries.map((entry) => entry.ntClients),
        entries.map((entry) => entry.driver),
        entries.map((entry) => entry.driver && entry.robotEnabled),
        entries.map((entry) => (entry.driver ? entry.robotMode : null)),
        channelOf('status'),
      ],
    );
    for (const { workspace_id: id } of changed) this.changes.publish({ kind: 'status', id });
  }

  /** Removes replica `serverId`'s presence (it stops), announcing each workspace it was at as a `status` change. */
  async clear(serverId: string): Promise<void> {
    const cleared = await CHANGED.all(
      this.db,
      `WITH removed AS (DELETE FROM workspace_presence WHERE server_id = $1 RETURNING workspace_id)
       SELECT workspace_id::text AS workspace_id FROM removed, LATERAL (SELECT pg_notify($2, workspace_id::text)) announced`,
      [serverId, channelOf('status')],
    );
    for (const { workspace_id: id } of cleared) this.changes.publish({ kind: 'status', id });
  }

  /**
   * Every workspace with any presence on a live replica (absent: offline, no NT, no driver),
   * summed over those replicas; the robot is the one of the driver whose row changed last (a robot
   * takes one driver at a time: another replica's is refused by it and soon gone).
   */
  async ofLiveServers(): Promise<Map<string, Presence>> {
    const rows = await SUMMED.all(
      this.db,
      `SELECT p.workspace_id::text AS workspace_id,
              bool_or(p.editors > 0 OR p.pages > 0) AS online,
              bool_or(p.nt_clients > 0) AS nt_connected,
              bool_or(p.driver) AS driver,
              (array_agg(p.robot_enabled ORDER BY p.updated_at DESC) FILTER (WHERE p.driver))[1] AS robot_enabled,
              (array_agg(p.robot_mode ORDER BY p.updated_at DESC) FILTER (WHERE p.driver))[1] AS robot_mode
       FROM workspace_presence p JOIN servers s ON s.id = p.server_id
       WHERE s.seen_at >= now() - make_interval(secs => $1)
       GROUP BY p.workspace_id`,
      [SERVER_GONE_AFTER_MS / 1000],
    );
    return new Map(rows);
  }
}
