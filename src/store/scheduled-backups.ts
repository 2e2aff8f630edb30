import type { DataSource } from 'typeorm';
import { col, rowCodec } from './row-codec.ts';
import { fencedWrite, type Fence } from './leases.ts';

/** The scheduled_backups table: its rows as the store reads them. */
const SCHEDULED_BACKUPS = rowCodec('scheduled_backups', { name: col.text, workspace_id: col.text, created_at: col.timestamp });
const NAMES = SCHEDULED_BACKUPS.pick('name');
/** Each workspace's newest (latest). */
const LATEST = rowCodec('scheduled_backups', { workspace_id: col.text, at: col.timestamp });

/**
 * The stored backups the schedule made (table `scheduled_backups`): which workspace's each is and
 * when it was made. The schedule reads each home's last one here and prunes its oldest past
 * BACKUP_KEEP; a backup made by an operator or kept by a restore is not here and never pruned.
 * Written by the leader under its fence.
 */
export class ScheduledBackupStore {
  private readonly db: DataSource;
  private readonly fence: Fence | undefined;

  constructor(db: DataSource, fence?: Fence) {
    this.db = db;
    this.fence = fence;
  }

  /** When each workspace's newest scheduled backup was made, by workspace id. */
  async latest(): Promise<Map<string, Date>> {
    const rows = await LATEST.all(this.db, 'SELECT workspace_id, max(created_at) AS at FROM scheduled_backups GROUP BY workspace_id');
    return new Map(rows.map((row) => [row.workspace_id, row.at]));
  }

  /** Records a scheduled backup of a workspace, stored as `name`, begun `at` (what it holds is the home as it was then). */
  async record(workspaceId: string, name: string, at: Date): Promise<void> {
    await fencedWrite(this.db, this.fence, (db) =>
      db.query('INSERT INTO scheduled_backups (name, workspace_id, created_at) VALUES ($1, $2, $3)', [name, workspaceId, at]),
    );
  }

  /** The names of a workspace's scheduled backups past its newest `keep`, oldest last. */
  async beyond(workspaceId: string, keep: number): Promise<string[]> {
    const rows = await NAMES.all(this.db, 'SELECT name FROM scheduled_backups WHERE workspace_id = $1 ORDER BY created_at DESC, name DESC OFFSET $2', [
      workspaceId,
      keep,
    ]);
    return rows.map((row) => row.name);
  }

  /** Forgets a scheduled backup (its file was removed). */
  async forget(name: string): Promise<void> {
    await fencedWrite(this.db, this.fence, (db) => db.query('DELETE FROM scheduled_backups WHERE name = $1', [name]));
  }
}
