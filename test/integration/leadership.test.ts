/**
 * Issue 23, one fenced leader: the lease in PostgreSQL (taken, renewed, expired, released, taken
 * from a dead holder), the fence on a leader's writes (refused under a later term, and holding the
 * lease row while a write commits), and the elector (Leadership) with real electors on the real
 * database: one leads, the other takes over when it stops, and a leader whose renewals hang steps
 * down by its renew deadline before its lease expires.
 */
import { Leadership, type LeadershipOptions } from '../../controllers/leadership.ts';
import { ChangeFeed } from '../../src/db/changes.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { AllowlistFile } from '../../src/allowlist/allowlist-file.ts';
import { createStore } from '../../src/store/index.ts';
import { LeaderCounterStore } from '../../src/store/leader-counters.ts';
import { checkFence, FencedOutError, LeaseStore, RECONCILER_LEASE, type Fence } from '../../src/store/leases.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const db = useTestDatabase();
const MINUTE = 60_000;
let leases: LeaseStore;
beforeEach(() => {
  leases = new LeaseStore(db.dataSource);
});

/** Makes the stored lease expire now (the database's clock decides expiry; nothing waits for it). */
const expire = () => db.dataSource.query("UPDATE leader_lease SET expires_at = now() - interval '1 second'");

/** A fence that is current by its own clock, recording whether the database refused it. */
function fenceOf(holder: string, term: number): Fence & { wasRefused: boolean } {
  const fence = { holder, term, holdMs: undefined, wasRefused: false, assertCurrent: () => undefined, refused: () => void (fence.wasRefused = true) };
  return fence;
}

describe('the lease', () => {
  it('is taken under term 1 when no one ever held it, and refused to another while it is live', async () => {
    expect(await leases.acquire(RECONCILER_LEASE, 'a', MINUTE)).toEqual(expect.objectContaining({ holder: 'a', term: 1 }));
    expect(await leases.acquire(RECONCILER_LEASE, 'b', MINUTE)).toBeUndefined();
    // Not even its holder takes it again (a holder renews).
    expect(await leases.acquire(RECONCILER_LEASE, 'a', MINUTE)).toBeUndefined();
    expect((await leases.get(RECONCILER_LEASE))?.holder).toBe('a');
  });

  it('once expired, is taken by another under the next term; the old holder can no longer renew it', async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    expect(await leases.renew(RECONCILER_LEASE, 'a', 1, MINUTE)).toBe(true);
    await expire();
    expect(await leases.acquire(RECONCILER_LEASE, 'b', MINUTE)).toEqual(expect.objectContaining({ holder: 'b', term: 2 }));
    expect(await leases.renew(RECONCILER_LEASE, 'a', 1, MINUTE)).toBe(false);
    expect(await leases.renew(RECONCILER_LEASE, 'b', 2, MINUTE)).toBe(true);
  });

  it('released, is taken at once', async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    // A release under a term that is not the holder's changes nothing.
    await leases.release(RECONCILER_LEASE, 'a', 7);
    expect(await leases.acquire(RECONCILER_LEASE, 'b', MINUTE)).toBeUndefined();
    await leases.release(RECONCILER_LEASE, 'a', 1);
    expect(await leases.acquire(RECONCILER_LEASE, 'b', MINUTE)).toEqual(expect.objectContaining({ holder: 'b', term: 2 }));
  });

  it('is taken from a holder named gone before it expires, and only from that holder', async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    expect(await leases.acquire(RECONCILER_LEASE, 'b', MINUTE, 'someone-else')).toBeUndefined();
    expect(await leases.acquire(RECONCILER_LEASE, 'b', MINUTE, 'a')).toEqual(expect.objectContaining({ holder: 'b', term: 2 }));
  });
});

describe('the fence', () => {
  /** A store writing under `fence`, and a workspace of it. */
  async function fencedStore(fence: Fence) {
    const store = createStore({
      db: db.dataSource,
      changes: new ChangeFeed(),
      environmentCap: 10,
      allowlistFile: AllowlistFile.in(mkdtempSync(path.join(os.tmpdir(), 'cp-lease-'))),
      fence,
    });
    const { workspace } = await store.users.create({ email: `fenced-${Math.random().toString(36).slice(2)}@school.test` });
    return { store, workspaceId: workspace.id };
  }
  /** A running run of the workspace, as the store writes one (nothing converges on it here). */
  const runOf = async (workspaceId: string) =>
    (
      (await db.dataSource.query("INSERT INTO runs (workspace_id, status, desired_state) VALUES ($1, 'running', 'running') RETURNING id", [workspaceId])) as {
        id: string;
      }[]
    )[0]!.id;

  it("lets the leader's writes through, and refuses them once another leads under a later term, changing nothing", async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    const fence = fenceOf('a', 1);
    const { store, workspaceId } = await fencedStore(fence);
    await store.workspaces.writeStatus(workspaceId, { observedState: 'running', observedGeneration: 1, statusMessage: '', editorEndpoint: null });
    expect((await store.workspaces.get(workspaceId))?.status.observedState).toBe('running');

    await expire();
    await leases.acquire(RECONCILER_LEASE, 'b', MINUTE);
    // An observed-state write and a desired-state mutation (the idle sweep's) are both refused.
    await expect(
      store.workspaces.writeStatus(workspaceId, { observedState: 'stopped', observedGeneration: 1, statusMessage: '', editorEndpoint: null }),
    ).rejects.toBeInstanceOf(FencedOutError);
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() - interval '1 day', desired_state = 'running'");
    await expect(store.workspaces.stopIdle(1)).rejects.toThrow(/not the leader any more \(term 1\)/);
    expect(fence.wasRefused).toBe(true);
    const after = (await store.workspaces.get(workspaceId))!;
    expect([after.status.observedState, after.spec.desiredState]).toEqual(['running', 'running']);
  });

  const status = (observedState: 'running' | 'stopped') => ({ observedState, observedGeneration: 1, statusMessage: '', editorEndpoint: null });
  const piece = (runId: string, offset: number, text: string) => ({ runId, offset, text, sourceBytes: offset + text.length, truncated: false });
  /** The backends waiting on a lock that backend `pid` holds. */
  const waitingOn = async (pid: number) =>
    ((await db.dataSource.query('SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])) as unknown[]).length;

  it("writes a run's output under the fence in its one statement, and refuses it once another leads, keeping nothing", async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    const fence = fenceOf('a', 1);
    const { store, workspaceId } = await fencedStore(fence);
    const runId = await runOf(workspaceId);
    expect(await store.runs.appendOutput([piece(runId, 0, 'tick 1\n')])).toEqual(new Set([runId]));
    await expire();
    await leases.acquire(RECONCILER_LEASE, 'b', MINUTE);
    await expect(store.runs.appendOutput([piece(runId, 7, 'tick 2\n')])).rejects.toBeInstanceOf(FencedOutError);
    expect(fence.wasRefused).toBe(true);
    expect(await store.runs.outputText(runId)).toBe('tick 1\n');
  });

  it('refuses a one-statement write that waited on the lease row for a takeover, once the takeover commits', async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    const fence = fenceOf('a', 1);
    const { store, workspaceId } = await fencedStore(fence);
    const runner = db.dataSource.createQueryRunner();
    await runner.connect();
    try {
      // Another takes the lease and has not committed yet: the write's check waits for it.
      await runner.startTransaction();
      await runner.query("UPDATE leader_lease SET holder = 'b', term = term + 1 WHERE name = $1", [RECONCILER_LEASE]);
      const pid = ((await runner.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[])[0]!.pid;
      const write = store.workspaces.writeStatus(workspaceId, status('running')).then(
        () => 'made',
        (error: unknown) => (error instanceof FencedOutError ? 'refused' : error),
      );
      await eventually('the write to wait on the takeover', async () => (await waitingOn(pid)) > 0);
      await runner.commitTransaction();
      expect(await write).toBe('refused');
    } finally {
      await runner.release();
    }
    expect((await store.workspaces.get(workspaceId))?.status.observedState).not.toBe('running');
  });

  it('holds the lease row while a one-statement write commits: a takeover waits for it, and the write is made', async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    await expire();
    const { store, workspaceId } = await fencedStore(fenceOf('a', 1));
    const runner = db.dataSource.createQueryRunner();
    await runner.connect();
    let takeover: Promise<unknown> | undefined;
    try {
      // The workspace's row locked elsewhere: the write checks its fence, then waits for the row.
      await runner.startTransaction();
      await runner.query('SELECT id FROM workspaces WHERE id = $1 FOR UPDATE', [workspaceId]);
      const locker = ((await runner.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[])[0]!.pid;
      const write = store.workspaces.writeStatus(workspaceId, status('running'));
      await eventually('the write to wait on the row', async () => (await waitingOn(locker)) > 0);
      const writer = ((await db.dataSource.query('SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [locker])) as { pid: number }[])[0]!
        .pid;
      takeover = leases.acquire(RECONCILER_LEASE, 'b', MINUTE);
      await eventually('the takeover to wait on the write', async () => (await waitingOn(writer)) > 0);
      await runner.commitTransaction();
      await write;
    } finally {
      await runner.release();
    }
    expect((await store.workspaces.get(workspaceId))?.status.observedState).toBe('running');
    expect(await takeover).toEqual(expect.objectContaining({ holder: 'b', term: 2 }));
  });

  it("counts the leader's finds per term: a new leader starts from zero, and an old one's late count is refused", async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    const first = new LeaderCounterStore(db.dataSource, fenceOf('a', 1));
    await first.add('orphan_containers', 2);
    await first.add('orphan_containers', 1);
    expect(await first.current()).toEqual({ orphan_containers: 3, orphan_volumes: 0 });
    await expire();
    await leases.acquire(RECONCILER_LEASE, 'b', MINUTE);
    expect(await first.current()).toEqual({ orphan_containers: 0, orphan_volumes: 0 });
    await expect(first.add('orphan_containers', 5)).rejects.toBeInstanceOf(FencedOutError);
    await new LeaderCounterStore(db.dataSource, fenceOf('b', 2)).add('orphan_containers', 1);
    expect(await first.current()).toEqual({ orphan_containers: 1, orphan_volumes: 0 });
  });

  it("refuses by the leader's own clock without asking the database", async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    const fence = {
      ...fenceOf('a', 1),
      assertCurrent: () => {
        throw new FencedOutError(1, 'no renewal of the lease within the renew deadline');
      },
    };
    await expect(db.dataSource.transaction((tx) => checkFence(tx, fence))).rejects.toThrow(/renew deadline/);
  });

  it('holds the lease row while a fenced write commits: a takeover waits for it', async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    await expire();
    let takeover: Promise<unknown> | undefined;
    let pid = 0;
    await db.dataSource.transaction(async (tx) => {
      await checkFence(tx, fenceOf('a', 1));
      pid = ((await tx.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[])[0]!.pid;
      takeover = leases.acquire(RECONCILER_LEASE, 'b', MINUTE);
      // The takeover's statement waits on this transaction's lock (the event, not a sleep).
      await eventually('the takeover to wait on the fence', async () => {
        const rows = (await db.dataSource.query('SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])) as unknown[];
        return rows.length > 0;
      });
    });
    expect(await takeover).toEqual(expect.objectContaining({ holder: 'b', term: 2 }));
  });

  it('ends a fenced write left open by a paused leader after its hold time: the takeover goes on, the write is not made', async () => {
    await leases.acquire(RECONCILER_LEASE, 'a', MINUTE);
    await expire();
    let wake = () => undefined as void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    let pid = 0;
    // The leader checks its fence and then stops (paused) with its transaction open.
    const write = db.dataSource.transaction(async (tx) => {
      await checkFence(tx, { ...fenceOf('a', 1), holdMs: 300 });
      pid = ((await tx.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[])[0]!.pid;
      await woken;
      await tx.query("UPDATE leader_lease SET holder = 'a' WHERE name = $1", [RECONCILER_LEASE]);
    });
    const settled = write.then(
      () => 'made',
      () => 'refused',
    );
    await eventually('the write to hold the lease row', async () => pid !== 0);
    // Without the bound the takeover waits for as long as the paused leader's connection lives.
    expect(await leases.acquire(RECONCILER_LEASE, 'b', MINUTE)).toEqual(expect.objectContaining({ holder: 'b', term: 2 }));
    // Woken, the old leader's write finds its transaction ended by the database.
    wake();
    expect(await settled).toBe('refused');
    expect(await leases.get(RECONCILER_LEASE)).toEqual(expect.objectContaining({ holder: 'b', term: 2 }));
  });
});

/** fenced_writes_total by who refused. */
async function fencedWrites(metrics: Metrics): Promise<Record<string, number>> {
  const { values } = await metrics.fencedWrites.get();
  return Object.fromEntries(values.map((value) => [String(value.labels.refused_by), value.value]));
}

describe('the elector', () => {
  const LEASE = { durationMs: 3000, renewDeadlineMs: 2000, retryMs: 100 };
  const electors: Leadership[] = [];
  afterEach(async () => {
    for (const elector of electors.splice(0)) await elector.stop();
  });

  /** An elector on the real lease, recording the terms it led and when it stopped leading. */
  function newElector(holder: string, overrides: Partial<LeadershipOptions> = {}) {
    const log = captureLogger();
    const metrics: Metrics = createMetrics();
    const led: Fence[] = [];
    let followed = 0;
    const leadership = new Leadership({
      leases,
      holder,
      lease: LEASE,
      metrics,
      log: categoryLogger(log.root, 'leader'),
      lead: async (fence) => void led.push(fence),
      follow: async () => void followed++,
      boundWrites: true,
      ...overrides,
    });
    electors.push(leadership);
    return { leadership, led, followed: () => followed, metrics, records: log.records };
  }

  it('one leads and the other follows; when the leader stops, the follower takes over under the next term', async () => {
    const a = newElector('a');
    const b = newElector('b');
    await a.leadership.start();
    await b.leadership.start();
    expect([a.leadership.term, b.leadership.term]).toEqual([1, undefined]);
    expect(a.led.map((fence) => fence.term)).toEqual([1]);
    expect(b.records.map((record) => record.message)).toContain('another replica leads: following (serving requests; taking over if the leader goes)');
    expect((await a.metrics.registry.getSingleMetric('leader')!.get()).values[0]!.value).toBe(1);

    await a.leadership.stop();
    expect(a.followed()).toBe(1);
    expect(a.records.map((record) => record.message)).toContain('released the reconciler lease (term 1)');
    await eventually('b to lead', async () => b.leadership.term === 2);
    expect(b.led.map((fence) => fence.term)).toEqual([2]);
    // a's fence is void now: by its own clock at once, and in the database.
    expect(() => a.led[0]!.assertCurrent()).toThrow(FencedOutError);
  });

  it("bounds its writes' idle time by the renew deadline on PostgreSQL, not on the embedded database", async () => {
    const a = newElector('a');
    await a.leadership.start();
    expect(a.led[0]!.holdMs).toBe(LEASE.renewDeadlineMs);
    await a.leadership.stop();
    const b = newElector('b', { boundWrites: false });
    await b.leadership.start();
    expect(b.led[0]!.holdMs).toBeUndefined();
  });

  it('stopping, stops its leader-only parts while its fence still holds, then refuses writes', async () => {
    let fencedAtStop: unknown;
    const a = newElector('a', {
      follow: async () => {
        try {
          a.led[0]!.assertCurrent();
        } catch (error) {
          fencedAtStop = error;
        }
      },
    });
    await a.leadership.start();
    await a.leadership.stop();
    // The parts' last writes on the way down were allowed; after the stop, none is.
    expect(fencedAtStop).toBeUndefined();
    expect(() => a.led[0]!.assertCurrent()).toThrow(FencedOutError);
  });

  it('steps down by its renew deadline when renewals hang, before the lease expires', async () => {
    let hang = false;
    const a = newElector('a', {
      leases: {
        acquire: (...args) => leases.acquire(...args),
        release: (...args) => leases.release(...args),
        renew: (...args) => (hang ? new Promise<boolean>(() => undefined) : leases.renew(...args)),
      },
    });
    await a.leadership.start();
    expect(a.leadership.term).toBe(1);
    hang = true;
    await eventually('a to step down', async () => a.followed() === 1, 10_000);
    expect(a.records.map((record) => record.message)).toContain('stopped leading (term 1): no renewal within the renew deadline');
    expect(() => a.led[0]!.assertCurrent()).toThrow(/renew deadline|stepped down/);
    // A write it still tries is refused by its own clock, before the database is asked, and counted so (issue 44 item 8).
    await expect(db.dataSource.transaction((tx) => checkFence(tx, a.led[0]!))).rejects.toBeInstanceOf(FencedOutError);
    expect(await fencedWrites(a.metrics)).toEqual({ database: 0, self: 1 });
    // Stepped down while its lease still stood in the database: no one could have led meanwhile.
    expect((await leases.get(RECONCILER_LEASE))!.expiresAt.getTime()).toBeGreaterThan(
      Date.parse(String(a.records.find((record) => String(record.message).startsWith('stopped leading'))!.timestamp)),
    );
  });

  it('steps down at once when the database refuses a write under its term', async () => {
    const a = newElector('a');
    await a.leadership.start();
    a.led[0]!.refused('database');
    await eventually('a to step down', async () => a.followed() === 1);
    expect(a.records.map((record) => record.message)).toContain('stopped leading (term 1): a write was refused: another replica leads under a later term');
    expect(await fencedWrites(a.metrics)).toEqual({ database: 1, self: 0 });
  });

  it('takes the lease of a holder known to be gone without waiting for it to expire', async () => {
    await leases.acquire(RECONCILER_LEASE, 'crashed', MINUTE);
    const b = newElector('b', { holderGone: async () => 'crashed' });
    await b.leadership.start();
    expect(b.leadership.term).toBe(2);
  });
});
