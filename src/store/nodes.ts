import type { DataSource } from 'typeorm';
import { col, rowCodec } from './row-codec.ts';
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

/** The node_drains table: its rows as the store reads them. */
const NODE_DRAINS = rowCodec('node_drains', { node: col.text, requested_at: col.timestamp, requested_by: col.text }, (row): NodeDrain => ({
  node: row.node,
  requestedAt: row.requested_at,
  requestedBy: row.requested_by,
}));
const DRAINED = NODE_DRAINS.pick('node');

/** The nodes table's names. */
const NODE_NAMES = rowCodec('nodes', { name: col.text });

/** The nodes table joined with node_drains and counted workspaces (list): a drain of a node not recorded has no node's columns. */
const NODE_VIEWS = rowCodec(
  'nodes',
  {
    name: col.text,
    state: col.nullable(col.text),
    availability: col.nullable(col.text),
    address: col.nullable(col.text),
    memory_bytes: col.nullable(col.bigint),
    reserved_memory_bytes: col.nullable(col.bigint),
    nano_cpus: col.nullable(col.bigint),
    reachable: col.nullable(col.boolean),
    seen_at: col.nullable(col.timestamp),
    requested_at: col.nullable(col.timestamp),
    running: col.bigint,
    total: col.bigint,
  },
  (row): NodeView => ({
    name: row.name,
    state: row.state ?? 'unknown',
    availability: row.availability ?? 'unknown',
    address: row.address ?? '',
    memoryBytes: row.memory_bytes ?? 0,
    reservedMemoryBytes: row.reserved_memory_bytes ?? 0,
    nanoCpus: row.nano_cpus ?? 0,
    reachable: row.reachable ?? false,
    seenAt: row.seen_at ?? new Date(0),
    drainRequestedAt: row.requested_at,
    runningWorkspaces: row.running,
    workspaces: row.total,
  }),
);

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
  list(): Promise<NodeView[]> {
    return NODE_VIEWS.all(
      this.db,
      `SELECT coalesce(n.name, d.node) AS name, n.state, n.availability, n.address, n.memory_bytes, n.reserved_memory_bytes, n.nano_cpus,
              n.reachable, n.seen_at, d.requested_at,
              (SELECT count(*) FROM workspaces w WHERE w.node = coalesce(n.name, d.node) AND w.observed_state = 'running') AS running,
              (SELECT count(*) FROM workspaces w WHERE w.node = coalesce(n.name, d.node) AND w.desired_state <> 'deleted') AS total
       FROM nodes n FULL JOIN node_drains d ON d.node = n.name ORDER BY 1`,
    );
  }

  /** Whether a node of this name was recorded (the leader saw it). */
  async known(name: string): Promise<boolean> {
    return (await NODE_NAMES.all(this.db, 'SELECT name FROM nodes WHERE name = $1', [name])).length > 0;
  }

  /** Every drain asked for, by node name. */
  drains(): Promise<NodeDrain[]> {
    return NODE_DRAINS.all(this.db, `SELECT ${NODE_DRAINS.columns} FROM node_drains ORDER BY node`);
  }

  /** Asks for a node to be drained (already asked: nothing changes, not audited again); answers whether it was new. */
  drain(actor: Actor, node: string): Promise<boolean> {
    return this.mutate(async (tx) => {
      const rows = await DRAINED.all(tx, 'INSERT INTO node_drains (node, requested_by) VALUES ($1, $2) ON CONFLICT (node) DO NOTHING RETURNING node', [
        node,
        actor.email,
      ]);
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
      const rows = await DRAINED.all(tx, 'DELETE FROM node_drains WHERE node = $1 RETURNING node', [node]);
      const removed = rows.length > 0;
      return {
        value: removed,
        changed: removed ? [{ kind: 'nodes' as const, id: node }] : [],
        audit: removed ? { actor, action: 'node.undrain', target: { kind: 'node', id: node } } : null,
      };
    });
  }
}
