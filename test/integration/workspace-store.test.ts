import { CallerGoneError, currentCaller, forCaller } from '../../src/caller.ts';
import { AT_CAPACITY_MESSAGE, AtCapacityError } from '../../src/errors.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { ActivityRecorder } from '../../src/store/activity.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import { slugFromEmail } from '../../src/store/workspaces.ts';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IdleSweep } from '../../controllers/idle-sweep.ts';
import { AllowlistFile } from '../../src/allowlist/allowlist-file.ts';
import { ChangeFeed } from '../../src/db/changes.ts';
import { createStore } from '../../src/store/index.ts';
import { FencedOutError, type Fence } from '../../src/store/leases.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
let store: Store;

beforeEach(async () => {
  store = testStore(db.dataSource);
});

async function workspaces(count: number) {
  const made = [];
  for (let i = 0; i < count; i++) made.push((await store.users.create({ email: `s${i}@school.test` })).workspace);
  return made;
}

/** An activity recorder that is flushed by hand (no timer). */
const recorder = () => new ActivityRecorder(store.workspaces, 60_000, () => undefined);

describe('slugs', () => {
  it.each([
    ['Ada.Lovelace@school.org', 'ada-lovelace'],
    ['x__y+tag@school.org', 'x-y-tag'],
    ['---@school.org', 'user'],
    [`${'a'.repeat(60)}@school.org`, 'a'.repeat(32)],
  ])('derives %s → %s', (email, slug) => {
    expect(slugFromEmail(email)).toBe(slug);
  });

  it('de-duplicates with a numeric suffix', async () => {
    const a = await store.users.create({ email: 'ada@one.test' });
    const b = await store.users.create({ email: 'ada@two.test' });
    const c = await store.users.create({ email: 'Ada@three.test' });
    expect([a.workspace.slug, b.workspace.slug, c.workspace.slug]).toEqual(['ada', 'ada-2', 'ada-3']);
    expect(a.workspace.spec.desiredState).toBe('stopped');
  });
});

describe('admission (workspaces.open)', () => {
  it('admits exactly the cap out of 50 concurrent opens', async () => {
    const all = await workspaces(50);
    const results = await Promise.allSettled(all.map((workspace) => store.workspaces.open(workspace.id)));
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(10);
    const refused = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
    expect(refused).toHaveLength(40);
    for (const { reason } of refused)
      expect(reason).toMatchObject({ status: 503, code: 'at_capacity', message: AT_CAPACITY_MESSAGE, headers: { 'Retry-After': '60' } });
    const counts: { n: string }[] = await db.dataSource.query("SELECT count(*) AS n FROM workspaces WHERE desired_state = 'running'");
    expect(Number(counts[0]!.n)).toBe(10);
    // Each refusal says what it was about, for the API to log and count (see student-api.test.ts).
    const slugs = new Set(all.map((workspace) => workspace.slug));
    for (const { reason } of refused) {
      expect(reason).toBeInstanceOf(AtCapacityError);
      expect(reason).toMatchObject({ cap: 10, running: 10 });
      expect(slugs.has((reason as AtCapacityError).slug)).toBe(true);
    }
  });

  it('never refuses a workspace that is already running, even over the cap', async () => {
    const [a, b] = await workspaces(2);
    await store.workspaces.open(a!.id);
    await store.workspaces.open(b!.id);
    await store.settings.setCap(SYSTEM_ACTOR, 1);
    await expect(store.workspaces.open(a!.id)).resolves.toMatchObject({ alreadyRunning: true });
    expect((await store.workspaces.get(b!.id))!.spec.desiredState).toBe('running');
  });

  it('uses the runtime override over the environment cap', async () => {
    const [a, b] = await workspaces(2);
    await store.settings.setCap(SYSTEM_ACTOR, 1);
    await store.workspaces.open(a!.id);
    await expect(store.workspaces.open(b!.id)).rejects.toMatchObject({ code: 'at_capacity' });
  });

  it('admits again once a running workspace stops', async () => {
    const [a, b] = await workspaces(2);
    store = testStore(db.dataSource, { environmentCap: 1 });
    await store.workspaces.open(a!.id);
    await expect(store.workspaces.open(b!.id)).rejects.toMatchObject({ code: 'at_capacity' });
    await store.workspaces.stop(SYSTEM_ACTOR, a!.id, 'coach');
    await expect(store.workspaces.open(b!.id)).resolves.toMatchObject({ alreadyRunning: false });
  });

  it('refuses an unknown or malformed workspace id with 404', async () => {
    await expect(store.workspaces.open('00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({ status: 404, code: 'workspace_not_found' });
    await expect(store.workspaces.open('not-a-uuid')).rejects.toMatchObject({ status: 404 });
  });

  it('bumps the generation and announces the change after commit', async () => {
    const [a] = await workspaces(1);
    const seen: string[] = [];
    store.changes.subscribe((change) => seen.push(change.id));
    const { workspace } = await store.workspaces.open(a!.id);
    expect(workspace.spec.generation).toBe(a!.spec.generation + 1);
    expect(seen).toEqual([a!.id]);
  });
});

describe('admin changes', () => {
  it('audits container.stop in the same transaction', async () => {
    const [a] = await workspaces(1);
    await store.workspaces.open(a!.id);
    await store.workspaces.stop({ id: null, email: 'coach@school.test' }, a!.id, 'coach');
    const audit: Record<string, unknown>[] = await db.dataSource.query('SELECT actor_email, action, target_kind, target_id, metadata FROM audit_log');
    expect(audit).toEqual([
      { actor_email: 'coach@school.test', action: 'container.stop', target_kind: 'workspace', target_id: a!.id, metadata: { slug: a!.slug, from: 'running' } },
    ]);
  });

  it('refuses restart-code of a stopped workspace with 409 and audits nothing', async () => {
    const [a] = await workspaces(1);
    await expect(store.workspaces.restartCode(SYSTEM_ACTOR, a!.id)).rejects.toMatchObject({ status: 409, code: 'workspace_not_running' });
    expect(await db.dataSource.query('SELECT * FROM audit_log')).toEqual([]);
  });
});

describe('a change made for an API request (src/caller.ts)', () => {
  /** Stops `a` for an admin, for a caller whose state is `caller`, right before the commit. */
  const stopFor = async (caller: { gone: () => boolean; deadlineAt: () => number }) => {
    const [a] = await workspaces(1);
    await store.workspaces.open(a!.id);
    const made = forCaller({ gone: caller.gone, deadlineAt: Number.POSITIVE_INFINITY, released: false }, async () => {
      const current = currentCaller()!;
      // The request's time runs out, or its client leaves, while the change is under way.
      await db.dataSource.query('SELECT 1');
      current.deadlineAt = caller.deadlineAt();
      return store.workspaces.stop({ id: null, email: 'coach@school.test' }, a!.id, 'coach');
    });
    return { a: a!, made };
  };

  it('is rolled back, audit and all, once the deadline has passed', async () => {
    const { a, made } = await stopFor({ gone: () => false, deadlineAt: () => performance.now() - 1 });
    await expect(made).rejects.toMatchObject({ status: 503, code: 'deadline_passed' });
    expect((await store.workspaces.get(a.id))!.spec.desiredState).toBe('running');
    expect(await db.dataSource.query('SELECT * FROM audit_log')).toEqual([]);
  });

  it('is rolled back once its client is gone', async () => {
    const { a, made } = await stopFor({ gone: () => true, deadlineAt: () => performance.now() + 60_000 });
    await expect(made).rejects.toBeInstanceOf(CallerGoneError);
    expect((await store.workspaces.get(a.id))!.spec.desiredState).toBe('running');
  });

  it('is committed when made by work the request started and that outlived it (an import, a timer), whatever became of the request', async () => {
    const [a] = await workspaces(1);
    await store.workspaces.open(a!.id);
    const caller = { gone: () => true, deadlineAt: performance.now() - 1, released: false };
    let later: Promise<unknown> | undefined;
    await forCaller(caller, async () => {
      later = new Promise((resolve) => setImmediate(resolve)).then(() => store.workspaces.stop({ id: null, email: 'coach@school.test' }, a!.id, 'coach'));
    });
    caller.released = true;
    await later;
    expect((await store.workspaces.get(a!.id))!.spec.desiredState).toBe('stopped');
  });

  it('is committed while its client waits within its deadline', async () => {
    const { a, made } = await stopFor({ gone: () => false, deadlineAt: () => performance.now() + 60_000 });
    await made;
    expect((await store.workspaces.get(a.id))!.spec.desiredState).toBe('stopped');
  });
});

describe('activity and the idle sweep', () => {
  it('stops workspaces idle for longer than the limit, counts and logs each, and keeps active ones', async () => {
    const [idle, active, stopped] = await workspaces(3);
    for (const workspace of [idle!, active!]) await store.workspaces.open(workspace.id);
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() - interval '45 minutes' WHERE id = ANY($1)", [
      [idle!.id, active!.id, stopped!.id],
    ]);
    const activity = recorder();
    activity.touch(active!.id);
    const logger = captureLogger();
    const metrics = createMetrics();
    const sweeper = new IdleSweep({ workspaces: store.workspaces, activity, metrics, log: categoryLogger(logger.root, 'idle'), idleMinutes: 30 });
    expect(await sweeper.sweep()).toEqual([idle!.id]);
    expect((await store.workspaces.get(idle!.id))!.spec.desiredState).toBe('stopped');
    expect((await store.workspaces.get(active!.id))!.spec.desiredState).toBe('running');
    expect((await metrics.idleSweepStops.get()).values[0]?.value).toBe(1);
    expect(logger.records).toEqual([
      expect.objectContaining({ level: 'info', category: 'control.idle', workspaceId: idle!.id, message: 'stopping idle workspace' }),
    ]);
  });

  it('says at info, with no stack, that a pass was cut short because the replica stopped leading (an ordinary step-down), and at error any other failure', async () => {
    const [idle] = await workspaces(1);
    await store.workspaces.open(idle!.id);
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() - interval '45 minutes' WHERE id = $1", [idle!.id]);
    // The store of a replica that has just stepped down: its fence refuses every write by its own clock.
    const fence: Fence = {
      holder: 'a',
      term: 1,
      holdMs: undefined,
      assertCurrent: () => {
        throw new FencedOutError(1, 'this replica stepped down');
      },
      refused: () => undefined,
    };
    const fenced = createStore({
      db: db.dataSource,
      changes: new ChangeFeed(),
      environmentCap: 10,
      allowlistFile: AllowlistFile.in(mkdtempSync(path.join(os.tmpdir(), 'cp-fenced-'))),
      fence,
    });
    const logger = captureLogger();
    const sweeper = new IdleSweep({
      workspaces: fenced.workspaces,
      activity: recorder(),
      metrics: createMetrics(),
      log: categoryLogger(logger.root, 'idle'),
      idleMinutes: 30,
      intervalMs: 20,
    });
    sweeper.start();
    try {
      const said = await eventually('the pass cut short said', async () => logger.records.find((record) => String(record['message']).startsWith('idle sweep')));
      expect(said).toMatchObject({ level: 'info', message: 'idle sweep stopped: this replica no longer leads', term: 1 });
      expect(JSON.stringify(said)).not.toContain('stack');
    } finally {
      await sweeper.stop();
    }
    expect(logger.records.filter((record) => record['level'] === 'error')).toEqual([]);
    expect((await store.workspaces.get(idle!.id))!.spec.desiredState).toBe('running');
  });

  it('writes a batch of activity in one statement and never moves it backwards', async () => {
    const [a, b] = await workspaces(2);
    const activity = recorder();
    activity.touch(a!.id);
    activity.touch(b!.id);
    await activity.flush();
    const first = (await store.workspaces.get(a!.id))!.status.lastActivityAt!;
    expect(first).toBeInstanceOf(Date);
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() + interval '1 hour' WHERE id = $1", [a!.id]);
    activity.touch(a!.id);
    await activity.flush();
    expect((await store.workspaces.get(a!.id))!.status.lastActivityAt!.getTime()).toBeGreaterThan(Date.now() + 30 * 60_000);
  });
});

describe('the change listener (src/db/changes.ts)', () => {
  it('has its subscribers resync when it first listens (what was committed while it connected went unheard), then delivers what others commit', async () => {
    const [a] = await workspaces(1);
    const feed = new ChangeFeed();
    const logger = captureLogger();
    let resyncs = 0;
    feed.onListening(() => resyncs++);
    const heard: string[] = [];
    feed.subscribe((change) => heard.push(`${change.kind} ${change.id}`));
    feed.listen(db.url, categoryLogger(logger.root, 'db'));
    try {
      await eventually('told to resync once listening', async () => resyncs === 1);
      expect(logger.records).toContainEqual(expect.objectContaining({ message: 'change listener connected' }));
      await store.workspaces.open(a!.id);
      await eventually('the open heard', async () => heard.includes(`workspaces ${a!.id}`));
      expect(resyncs).toBe(1);
    } finally {
      await feed.close();
    }
  });
});
