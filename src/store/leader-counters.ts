import type { DataSource } from 'typeorm';
import { col, rowCodec } from './row-codec.ts';
import { fencedWrite, RECONCILER_LEASE, type Fence } from './leases.ts';

const LEADER_COUNTER_NAMES = ['orphan_containers', 'orphan_volumes'] as const;

/** What the leader counts for the panels of every replica. */
export type LeaderCounter = (typeof LEADER_COUNTER_NAMES)[number];

/** The leader_counters table's columns the panels read. */
const LEADER_COUNTERS = rowCodec('leader_counters', { name: col.oneOf(LEADER_COUNTER_NAMES), value: col.bigint });

/**
 * Counts kept by the leader in the database (table `leader_counters`), so that every replica's
 * panel shows what the one replica that looks at the engine found: each counter is of the current
 * lease term (a new leader starts from zero: "found since the leader took over"). Written under the
 * leader's fence; without one (a controller driven directly) under term 0.
 */
export class LeaderCounterStore {
  private readonly db: DataSource;
  private readonly fence: Fence | undefined;

  constructor(db: DataSource, fence?: Fence) {
    this.db = db;
    this.fence = fence;
  }

  /** Adds `by` to a counter of this leader's term (starting it at `by` when it was of another term). */
  async add(name: LeaderCounter, by: number): Promise<void> {
    if (by === 0) return;
    await fencedWrite(this.db, this.fence, (db) =>
      db.query(
        `INSERT INTO leader_counters (name, term, value) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET
           value = CASE WHEN leader_counters.term = EXCLUDED.term THEN leader_counters.value + EXCLUDED.value ELSE EXCLUDED.value END,
           term = EXCLUDED.term`,
        [name, this.fence?.term ?? 0, by],
      ),
    );
  }

  /** Every counter of the current term (the lease's; 0 when no one ever led), missing ones at 0. */
  async current(): Promise<Record<LeaderCounter, number>> {
    const rows = await LEADER_COUNTERS.all(
      this.db,
      `SELECT name, value FROM leader_counters
       WHERE term = coalesce((SELECT term FROM leader_lease WHERE name = $1), 0)`,
      [RECONCILER_LEASE],
    );
    const counts: Record<LeaderCounter, number> = { orphan_containers: 0, orphan_volumes: 0 };
    for (const row of rows) counts[row.name] = row.value;
    return counts;
  }
}
