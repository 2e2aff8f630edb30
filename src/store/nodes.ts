import type { DataSource } from 'typeorm';
import { queryRows } from '../db/sql.ts';
import type { Actor } from './audit.ts';
import type { Mutate } from './mutation.ts';

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

  constructor(db: DataSource, mutate: Mutate) {
    this.db = db;
    this.mutate = mutate;
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
