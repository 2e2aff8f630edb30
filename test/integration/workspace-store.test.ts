import { ChangeFeed } from '../../src/db/changes.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { ActivityRecorder } from '../../src/store/activity.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { setCapOverride } from '../../src/store/settings.ts';
import {
  AT_CAPACITY_MESSAGE,
  createUserWithWorkspace,
  getWorkspace,
  openWorkspace,
  restartCode,
  slugFromEmail,
  stopWorkspace,
  type StoreContext,
} from '../../src/store/workspaces.ts';
import { IdleSweep } from '../../controllers/idle-sweep.ts';
import { captureLogger } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';

const db = useTestDatabase();
let store: StoreContext;
let records: Record<string, unknown>[];

beforeEach(async () => {
  const logger = captureLogger();
  records = logger.records;
  store = { db: db.dataSource, changes: new ChangeFeed(), environmentCap: 10, metrics: createMetrics(), log: categoryLogger(logger.root, 'containers') };
});

async function workspaces(count: number) {
  const made = [];
  for (let i = 0; i < count; i++) made.push((await createUserWithWorkspace(store, { email: `s${i}@school.test` })).workspace);
  return made;
}

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
    const a = await createUserWithWorkspace(store, { email: 'ada@one.test' });
    const b = await createUserWithWorkspace(store, { email: 'ada@two.test' });
    const c = await createUserWithWorkspace(store, { email: 'Ada@three.test' });
    expect([a.workspace.slug, b.workspace.slug, c.workspace.slug]).toEqual(['ada', 'ada-2', 'ada-3']);
    expect(a.workspace.desiredState).toBe('stopped');
  });
});

describe('admission (openWorkspace)', () => {
  it('admits exactly the cap out of 50 concurrent opens', async () => {
    const all = await workspaces(50);
    const results = await Promise.allSettled(all.map((workspace) => openWorkspace(store, workspace.id)));
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(10);
    const refused = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
    expect(refused).toHaveLength(40);
    for (const { reason } of refused) expect(reason).toMatchObject({ status: 503, code: 'at_capacity', message: AT_CAPACITY_MESSAGE, headers: { 'Retry-After': '60' } });
    const counts: { n: string }[] = await db.dataSource.query("SELECT count(*) AS n FROM workspaces WHERE desired_state = 'running'");
    expect(Number(counts[0]!.n)).toBe(10);
    expect((await store.metrics.capacityRejections.get()).values[0]?.value).toBe(40);
    const warnings = records.filter((record) => record.level === 'warning' && record.category === 'control.containers');
    expect(warnings).toHaveLength(40);
    expect(warnings[0]).toEqual(expect.objectContaining({ message: 'workspace open refused: server at capacity', cap: 10, running: 10 }));
  });

  it('never refuses a workspace that is already running, even over the cap', async () => {
    const [a, b] = await workspaces(2);
    await openWorkspace(store, a!.id);
    await openWorkspace(store, b!.id);
    await setCapOverride(db.dataSource, SYSTEM_ACTOR, 1, 10);
    await expect(openWorkspace(store, a!.id)).resolves.toMatchObject({ alreadyRunning: true });
    expect((await getWorkspace(db.dataSource, b!.id))!.desiredState).toBe('running');
  });

  it('uses the runtime override over the environment cap', async () => {
    const [a, b] = await workspaces(2);
    await setCapOverride(db.dataSource, SYSTEM_ACTOR, 1, 10);
    await openWorkspace(store, a!.id);
    await expect(openWorkspace(store, b!.id)).rejects.toMatchObject({ code: 'at_capacity' });
  });

  it('admits again once a running workspace stops', async () => {
    const [a, b] = await workspaces(2);
    store.environmentCap = 1;
    await openWorkspace(store, a!.id);
    await expect(openWorkspace(store, b!.id)).rejects.toMatchObject({ code: 'at_capacity' });
    await stopWorkspace(store, SYSTEM_ACTOR, a!.id);
    await expect(openWorkspace(store, b!.id)).resolves.toMatchObject({ alreadyRunning: false });
  });

  it('refuses an unknown or malformed workspace id with 404', async () => {
    await expect(openWorkspace(store, '00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({ status: 404, code: 'workspace_not_found' });
    await expect(openWorkspace(store, 'not-a-uuid')).rejects.toMatchObject({ status: 404 });
  });

  it('bumps the generation and announces the change after commit', async () => {
    const [a] = await workspaces(1);
    const seen: string[] = [];
    store.changes.subscribe((change) => seen.push(change.id));
    const { workspace } = await openWorkspace(store, a!.id);
    expect(workspace.generation).toBe(a!.generation + 1);
    expect(seen).toEqual([a!.id]);
  });
});

describe('admin changes', () => {
  it('audits container.stop in the same transaction', async () => {
    const [a] = await workspaces(1);
    await openWorkspace(store, a!.id);
    await stopWorkspace(store, { id: null, email: 'coach@school.test' }, a!.id);
    const audit: Record<string, unknown>[] = await db.dataSource.query('SELECT actor_email, action, target_kind, target_id, metadata FROM audit_log');
    expect(audit).toEqual([{ actor_email: 'coach@school.test', action: 'container.stop', target_kind: 'workspace', target_id: a!.id, metadata: { slug: a!.slug, from: 'running' } }]);
  });

  it('refuses restart-code of a stopped workspace with 409 and audits nothing', async () => {
    const [a] = await workspaces(1);
    await expect(restartCode(store, SYSTEM_ACTOR, a!.id)).rejects.toMatchObject({ status: 409, code: 'workspace_not_running' });
    expect(await db.dataSource.query('SELECT * FROM audit_log')).toEqual([]);
  });
});

describe('activity and the idle sweep', () => {
  it('stops workspaces idle for longer than the limit, counts and logs each, and keeps active ones', async () => {
    const [idle, active, stopped] = await workspaces(3);
    for (const workspace of [idle!, active!]) await openWorkspace(store, workspace.id);
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() - interval '45 minutes' WHERE id = ANY($1)", [[idle!.id, active!.id, stopped!.id]]);
    const activity = new ActivityRecorder(db.dataSource);
    activity.touch(active!.id);
    const logger = captureLogger();
    const sweeper = new IdleSweep({ store: { ...store, log: categoryLogger(logger.root, 'idle') }, activity, idleMinutes: 30 });
    expect(await sweeper.sweep()).toEqual([idle!.id]);
    expect((await getWorkspace(db.dataSource, idle!.id))!.desiredState).toBe('stopped');
    expect((await getWorkspace(db.dataSource, active!.id))!.desiredState).toBe('running');
    expect((await store.metrics.idleSweepStops.get()).values[0]?.value).toBe(1);
    expect(logger.records).toEqual([expect.objectContaining({ level: 'info', category: 'control.idle', workspaceId: idle!.id, message: 'stopping idle workspace' })]);
  });

  it('writes a batch of activity in one statement and never moves it backwards', async () => {
    const [a, b] = await workspaces(2);
    const activity = new ActivityRecorder(db.dataSource);
    activity.touch(a!.id);
    activity.touch(b!.id);
    await activity.flush();
    const first = (await getWorkspace(db.dataSource, a!.id))!.lastActivityAt!;
    expect(first).toBeInstanceOf(Date);
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() + interval '1 hour' WHERE id = $1", [a!.id]);
    activity.touch(a!.id);
    await activity.flush();
    expect((await getWorkspace(db.dataSource, a!.id))!.lastActivityAt!.getTime()).toBeGreaterThan(Date.now() + 30 * 60_000);
  });
});
