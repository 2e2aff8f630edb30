import type { DataSource } from 'typeorm';
import { queryRows } from '../db/sql.ts';
import type { Actor } from './audit.ts';
import { fencedWrite, type Fence } from './leases.ts';
import type { Mutate } from './mutation.ts';

/** A node as the leader last recorded it (what the runtime reported). */
export interface ObservedNode {
  name: string;
  /** ready, down, unknown (Swarm's words). */
  state: string;
  /** active, pause, drain. */
  availability: string;
  address: string;
  memoryBytes: number;
  /** Memory this control plane's running editors reserve there. */
  reservedMemoryBytes: number;
  nanoCpus: number;
  reachable: boolean;
  seenAt: Date;
}

/** A node as the operator sees it: observed, the drain asked for, and its workspaces. */
export interface NodeView extends ObservedNode {
  /** When a drain was asked for; null: none. */
  drainRequestedAt: Date | null;
  /** Workspaces whose editor runs there now. */
  runningWorkspaces: number;
  /** Workspaces last seen there (running or not: their homes are there). */
  workspaces: number;
}

/** A node an operator asked to drain: its workspaces move off it (docs/swarm.md). */
export interface NodeDrain {
  node: string;
  requestedAt: Date;
  requestedBy: string;
}

/**
 * The nodes an operator asked to drain (`cli nodes drain <node>`, table `node_drains`): desired
 * state like any other, announced (`nodes`) and audited (`node.drain`, `node.undrain`); the leader
 * pauses such a node (nothing new is placed there) and moves its workspaces' homes off it, each with
 * a fresh backup.
 */
export class NodeStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;

  private readonly fence: Fence | undefined;

  constructor(db: DataSource, mutate: Mutate, fence?: Fence) {
    this.db = db;
    this.mutate = mutate;
    this.fence = fence;
  }

  /** Records the nodes as the leader sees them now (those no longer reported are forgotten). The workspace controller's write. */
  async record(nodes: readonly Omit<ObservedNode, 'seenAt'>[]): Promise<void> {
    await fencedWrite(this.db, this.fence, async (db) => {
      await db.query('DELETE FROM nodes WHERE NOT (name = ANY($1::text[]))', [nodes.map((node) => node.name)]);
      for (const node of nodes) {
        await db.query(
          `INSERT INTO nodes (name, state, availability, address, memory_bytes, reserved_memory_bytes, nano_cpus, reachable, seen_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now())
           ON CONFLICT (name) DO UPDATE SET state = $2, availability = $3, address = $4, memory_bytes = $5, reserved_memory_bytes = $6,
             nano_cpus = $7, reachable = $8, seen_at = now()`,
          [node.name, node.state, node.availability, node.address, node.memoryBytes, node.reservedMemoryBytes, node.nanoCpus, node.reachable],
        );
      }
    });
  }

  /** Every node recorded, with the drain asked for and its workspaces, by name; a drain of a node not (or no longer) recorded is listed too. */
  async list(): Promise<NodeView[]> {
    const rows = await queryRows<{
      name: string;
      state: string | null;
      availability: string | null;
      address: string | null;
      memory_bytes: string | null;
      reserved_memory_bytes: string | null;
      nano_cpus: string | null;
      reachable: boolean | null;
      seen_at: Date | null;
      requested_at: Date | null;
      running: string;
      total: string;
    }>(
      this.db,
      `SELECT coalesce(n.name, d.node) AS name, n.state, n.availability, n.address, n.memory_bytes, n.reserved_memory_bytes, n.nano_cpus,
              n.reachable, n.seen_at, d.requested_at,
              (SELECT count(*) FROM workspaces w WHERE w.node = coalesce(n.name, d.node) AND w.observed_state = 'running') AS running,
              (SELECT count(*) FROM workspaces w WHERE w.node = coalesce(n.name, d.node) AND w.desired_state <> 'deleted') AS total
       FROM nodes n FULL JOIN node_drains d ON d.node = n.name ORDER BY 1`,
    );
    return rows.map((row) => ({
      name: row.name,
      state: row.state ?? 'unknown',
      availability: row.availability ?? 'unknown',
      address: row.address ?? '',
      memoryBytes: Number(row.memory_bytes ?? 0),
      reservedMemoryBytes: Number(row.reserved_memory_bytes ?? 0),
      nanoCpus: Number(row.nano_cpus ?? 0),
      reachable: row.reachable ?? false,
      seenAt: row.seen_at ?? new Date(0),
      drainRequestedAt: row.requested_at,
      runningWorkspaces: Number(row.running),
      workspaces: Number(row.total),
    }));
  }

  /** Whether a node of this name was recorded (the leader saw it). */
  async known(name: string): Promise<boolean> {
    return (await queryRows(this.db, 'SELECT 1 FROM nodes WHERE name = $1', [name])).length > 0;
  }

  /** Every drain asked for, by node name. */
  async drains(): Promise<NodeDrain[]> {
    const rows = await queryRows<{ node: string; requested_at: Date; requested_by: string }>(
      this.db,
      'SELECT node, requested_at, requested_by FROM node_drains ORDER BY node',
    );
    return rows.map((row) => ({ node: row.node, requestedAt: row.requested_at, requestedBy: row.requested_by }));
  }

  /** Asks for a node to be drained (already asked: nothing changes, not audited again); answers whether it was new. */
  drain(actor: Actor, node: string): Promise<boolean> {
    return this.mutate(async (tx) => {
      const rows = await queryRows<{ node: string }>(
        tx,
        'INSERT INTO node_drains (node, requested_by) VALUES ($1, $2) ON CONFLICT (node) DO NOTHING RETURNING node',
        [node, actor.email],
      );
      const added = rows.length > 0;
      return {
        value: added,
        changed: added ? [{ kind: 'nodes' as const, id: node }] : [],
        audit: added ? { actor, action: 'node.drain', target: { kind: 'node', id: node } } : null,
      };
    });
  }

  /** Takes a node back (new workspaces may be placed there again); answers whether it was drained. */
  undrain(actor: Actor, node: string): Promise<boolean> {
    return this.mutate(async (tx) => {
      const rows = await queryRows<{ node: string }>(tx, 'DELETE FROM node_drains WHERE node = $1 RETURNING node', [node]);
      const removed = rows.length > 0;
      return {
        value: removed,
        changed: removed ? [{ kind: 'nodes' as const, id: node }] : [],
        audit: removed ? { actor, action: 'node.undrain', target: { kind: 'node', id: node } } : null,
      };
    });
  }
}
