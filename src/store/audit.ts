import type { EntityManager } from 'typeorm';

/** Who did something: a user (id and email), or a named actor such as `system` or `cli` (id null). */
export interface Actor {
  id: string | null;
  email: string;
}

/** The actor of background work (bootstrap, idle sweep). */
export const SYSTEM_ACTOR: Actor = { id: null, email: 'system' };

/** The action names of the spec. */
export type AuditAction =
  | 'user.promote'
  | 'user.demote'
  | 'user.delete'
  | 'container.stop'
  | 'container.restart-code'
  | 'workspace.backup'
  | 'workspace.restore'
  | 'allowlist.add'
  | 'allowlist.remove'
  | 'config.max-active-containers';

export interface AuditInput {
  actor: Actor;
  action: AuditAction;
  target: { kind: string; id: string };
  metadata?: Record<string, unknown>;
}

/** Appends one audit entry; call it inside the transaction of the change it records. */
export async function recordAudit(manager: EntityManager, entry: AuditInput): Promise<void> {
  await manager.query(
    'INSERT INTO audit_log (actor_id, actor_email, action, target_kind, target_id, metadata) VALUES ($1, $2, $3, $4, $5, $6)',
    [entry.actor.id, entry.actor.email, entry.action, entry.target.kind, entry.target.id, entry.metadata ?? null],
  );
}
