import type { DataSource } from 'typeorm';
import { recordAudit, type Actor } from './audit.ts';

/** The settings key of the container cap override; its row is also the admission lock. */
export const CAP_KEY = 'max_active_containers';

/** The cap in force and where it comes from. */
export interface EffectiveCap {
  value: number;
  source: 'override' | 'environment';
}

/** The effective container cap: the runtime override when one is stored, else MAX_ACTIVE_CONTAINERS. */
export async function getEffectiveCap(db: DataSource, environmentCap: number): Promise<EffectiveCap> {
  const rows: { value: number | null }[] = await db.query('SELECT value FROM settings WHERE key = $1', [CAP_KEY]);
  const override = rows[0]?.value;
  return typeof override === 'number' ? { value: override, source: 'override' } : { value: environmentCap, source: 'environment' };
}

/**
 * Stores a runtime cap override and audits `config.max-active-containers` with from/to, in one
 * transaction locked on the cap row. Lowering the cap stops nothing; it only limits new opens.
 */
export async function setCapOverride(db: DataSource, actor: Actor, value: number, environmentCap: number): Promise<{ from: number; to: number }> {
  return db.transaction(async (manager) => {
    const rows: { value: number | null }[] = await manager.query('SELECT value FROM settings WHERE key = $1 FOR UPDATE', [CAP_KEY]);
    const current = rows[0]?.value;
    const from = typeof current === 'number' ? current : environmentCap;
    await manager.query('UPDATE settings SET value = $2, updated_at = now() WHERE key = $1', [CAP_KEY, JSON.stringify(value)]);
    await recordAudit(manager, { actor, action: 'config.max-active-containers', target: { kind: 'config', id: CAP_KEY }, metadata: { from, to: value } });
    return { from, to: value };
  });
}
