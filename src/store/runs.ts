import type { DataSource } from 'typeorm';

/** The run a workspace has in progress (queued or running): its id, status and simulator endpoint. */
export interface ActiveRun {
  id: string;
  status: 'queued' | 'running';
  simEndpoint: string | null;
}

/** The workspace's active run, or undefined. */
export async function getActiveRun(db: DataSource, workspaceId: string): Promise<ActiveRun | undefined> {
  const rows: { id: string; status: 'queued' | 'running'; sim_endpoint: string | null }[] = await db.query(
    "SELECT id, status, sim_endpoint FROM runs WHERE workspace_id = $1 AND status IN ('queued', 'running') ORDER BY queued_at DESC LIMIT 1",
    [workspaceId],
  );
  const row = rows[0];
  return row && { id: row.id, status: row.status, simEndpoint: row.sim_endpoint };
}
