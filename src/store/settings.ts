import type { DataSource } from 'typeorm';
import type { Queryable } from '../db/sql.ts';
import type { Actor } from './audit.ts';
import type { Mutate } from './mutation.ts';
import { col, rowCodec } from './row-codec.ts';

/** The largest cap an operator may set; far above what one Docker host runs. */
export const MAX_CAP = 10000;

/** The settings key of the container cap override; its row is also the admission lock. */
const CAP_KEY = 'max_active_containers';

/** The cap override's value in the settings table (jsonb: a whole number, or null when none is stored). */
const CAP_VALUES = rowCodec('settings', { value: col.nullable(col.integer) });

/** The cap in force and where it comes from. */
export interface EffectiveCap {
  value: number;
  source: 'override' | 'environment';
}

/**
 * The effective container cap: the runtime override when one is stored, else MAX_ACTIVE_CONTAINERS.
 * With `lock`, the cap row is locked until the transaction ends: admissions and cap changes queue on it.
 */
export async function readCap(db: Queryable, environmentCap: number, lock = false): Promise<EffectiveCap> {
  const override = (await CAP_VALUES.first(db, `SELECT value FROM settings WHERE key = $1${lock ? ' FOR UPDATE' : ''}`, [CAP_KEY]))?.value;
  return typeof override === 'number' ? { value: override, source: 'override' } : { value: environmentCap, source: 'environment' };
}

/** Runtime settings: the container cap. */
export class SettingsStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;
  /** MAX_ACTIVE_CONTAINERS, in force while no override is stored. */
  readonly environmentCap: number;

  constructor(db: DataSource, mutate: Mutate, environmentCap: number) {
    this.db = db;
    this.mutate = mutate;
    this.environmentCap = environmentCap;
  }

  /** The effective container cap. */
  cap(): Promise<EffectiveCap> {
    return readCap(this.db, this.environmentCap);
  }

  /**
   * Stores a runtime cap override and audits `config.max-active-containers` with from/to, locked on
   * the cap row. Lowering the cap stops nothing; it only limits new opens.
   */
  setCap(actor: Actor, value: number): Promise<{ from: number; to: number }> {
    return this.mutate(async (tx) => {
      const from = (await readCap(tx, this.environmentCap, true)).value;
      await tx.query('UPDATE settings SET value = $2, updated_at = now() WHERE key = $1', [CAP_KEY, JSON.stringify(value)]);
      return {
        value: { from, to: value },
        changed: [{ kind: 'settings', id: CAP_KEY }],
        audit: { actor, action: 'config.max-active-containers', target: { kind: 'config', id: CAP_KEY }, metadata: { from, to: value } },
      };
    });
  }
}
