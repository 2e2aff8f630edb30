/**
 * The expiry of join codes (controllers/join-code-expiry.ts), one test per branch of its reconcile,
 * over the real store on the test PostgreSQL and the in-memory runtime (which homes exist); the
 * backups are a recorder standing in for Backups.create (the real one, on the real engine, is
 * test/integration/join-code-expiry.test.ts).
 */
import { JoinCodeExpiry } from '../../controllers/join-code-expiry.ts';
import { names } from '../../src/docker/runtime.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import type { Actor } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import type { JoinedGuest } from '../../src/store/join-codes.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { captureLogger } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { MemoryRuntime } from '../helpers/memory-runtime.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
const coach: Actor = { id: null, email: 'coach@school.test' };
let store: Store;
let runtime: MemoryRuntime;
let metrics: Metrics;
/** The homes backed up, by slug, in order; `failing` slugs' backups fail. */
let backedUp: string[];
let failing: Set<string>;
let addresses = 0;

const backups = {
  create: async (_actor: Actor, workspace: WorkspaceRecord) => {
    if (failing.has(workspace.slug)) throw new Error('a file changed as it was read');
    backedUp.push(workspace.slug);
    return { name: `${workspace.slug}-${backedUp.length}.tar.gz`, sizeBytes: 1, manifest: {} as never };
  },
};

beforeEach(() => {
  store = testStore(db.dataSource);
  runtime = new MemoryRuntime();
  metrics = createMetrics();
  backedUp = [];
  failing = new Set();
});

const expiry = () => new JoinCodeExpiry({ store, backups, runtime, metrics, log: categoryLogger(captureLogger().root, 'joins') });
/** A code open for an hour. */
const openCode = () => store.joinCodes.open(coach, { hours: 1 });
/** A guest of `code`; with `home`, their workspace's home volume exists (they opened it once). */
async function guest(code: { code: string }, name: string, home = true): Promise<JoinedGuest> {
  const joined = await store.joinCodes.join({ code: code.code, name, address: `10.0.0.${++addresses}` });
  if (home) runtime.volumes.add(names.home(joined.workspace));
  return joined;
}
/** Its hours passed (as an hour would). */
const expire = (id: string) => db.dataSource.query("UPDATE join_codes SET expires_at = now() - interval '1 second' WHERE id = $1", [id]);
const userExists = async (id: string) => (await store.users.get(id)) !== undefined;
const audited = async (action: string) =>
  (await db.dataSource.query('SELECT metadata FROM audit_log WHERE action = $1 ORDER BY id', [action])) as { metadata: Record<string, unknown> }[];
const counted = async (outcome: string) => (await metrics.joinCodeGuests.get()).values.find((value) => value.labels.outcome === outcome)?.value ?? 0;

it('does nothing while no code is due: an open code and its guests are left alone', async () => {
  const code = await openCode();
  const ada = await guest(code, 'Ada');
  expect(await expiry().pass()).toEqual([]);
  expect(await userExists(ada.userId)).toBe(true);
  expect(backedUp).toEqual([]);
});

it('backs up the home of each guest of an expired code, then deletes the guest (workspace marked deleted), then marks the code handled naming the backups', async () => {
  const code = await openCode();
  const ada = await guest(code, 'Ada');
  const bob = await guest(code, 'Bob');
  await expire(code.id);
  const [outcome] = await expiry().pass();
  expect(outcome).toEqual({
    codeId: code.id,
    handled: true,
    guests: [
      { userId: ada.userId, outcome: 'removed', backup: `${ada.workspace.slug}-1.tar.gz` },
      { userId: bob.userId, outcome: 'removed', backup: `${bob.workspace.slug}-2.tar.gz` },
    ],
  });
  expect(await userExists(ada.userId)).toBe(false);
  expect((await store.workspaces.get(ada.workspace.id))?.spec.desiredState).toBe('deleted');
  const after = (await store.joinCodes.get(code.id))!;
  expect(after).toMatchObject({ state: 'expired', guests: [], backups: [`${ada.workspace.slug}-1.tar.gz`, `${bob.workspace.slug}-2.tar.gz`] });
  expect(after.handledAt).toBeInstanceOf(Date);
  expect((await audited('join_code.expire')).map((entry) => entry.metadata)).toEqual([
    expect.objectContaining({ code: code.code, closed: false, guests: 2, backups: after.backups }),
  ]);
  expect(await audited('user.delete')).toHaveLength(2);
  expect(await counted('removed')).toBe(2);
});

it('treats a code closed early as expired', async () => {
  const code = await openCode();
  const ada = await guest(code, 'Ada');
  await store.joinCodes.close(coach, code.id);
  expect((await expiry().pass()).map((each) => each.handled)).toEqual([true]);
  expect(await userExists(ada.userId)).toBe(false);
  expect((await audited('join_code.expire'))[0]!.metadata).toMatchObject({ closed: true });
});

it('deletes a guest whose workspace never had a home without a backup: there is nothing to keep', async () => {
  const code = await openCode();
  const cy = await guest(code, 'Cy', false);
  await expire(code.id);
  const [outcome] = await expiry().pass();
  expect(outcome!.guests).toEqual([{ userId: cy.userId, outcome: 'removed-without-home' }]);
  expect(backedUp).toEqual([]);
  expect(await userExists(cy.userId)).toBe(false);
  expect((await store.joinCodes.get(code.id))!.backups).toEqual([]);
});

it('keeps a guest whose backup failed (never deleted without one), leaves the code due, and removes them at a later pass once the backup works', async () => {
  const code = await openCode();
  const ada = await guest(code, 'Ada');
  const bob = await guest(code, 'Bob');
  await expire(code.id);
  failing.add(ada.workspace.slug);
  const subject = expiry();
  const [first] = await subject.pass();
  expect(first).toMatchObject({
    handled: false,
    guests: [
      { userId: ada.userId, outcome: 'backup-failed' },
      { userId: bob.userId, outcome: 'removed' },
    ],
  });
  expect(await userExists(ada.userId)).toBe(true);
  expect(await userExists(bob.userId)).toBe(false);
  expect((await store.joinCodes.get(code.id))!.handledAt).toBeNull();
  expect(await audited('join_code.expire')).toEqual([]);
  expect(await counted('backup_failed')).toBe(1);

  failing.clear();
  const [second] = await subject.pass();
  expect(second).toMatchObject({ handled: true, guests: [{ userId: ada.userId, outcome: 'removed' }] });
  expect(await userExists(ada.userId)).toBe(false);
  expect((await store.joinCodes.get(code.id))!.backups).toHaveLength(2);
});

it('resumes after a restart mid-way: a guest backed up but not deleted is backed up again and removed, and both backups are named', async () => {
  const code = await openCode();
  const ada = await guest(code, 'Ada');
  await expire(code.id);
  // The last leader made and recorded Ada's backup, then stopped before deleting her.
  await store.joinCodes.recordBackup(code.id, 'ada-before-restart.tar.gz');
  const [outcome] = await expiry().pass();
  expect(outcome).toMatchObject({ handled: true, guests: [{ userId: ada.userId, outcome: 'removed' }] });
  expect((await store.joinCodes.get(code.id))!.backups).toEqual(['ada-before-restart.tar.gz', `${ada.workspace.slug}-1.tar.gz`]);
});

it('marks a code handled when its guests were deleted by hand meanwhile, and a handled code is never due again', async () => {
  const code = await openCode();
  const ada = await guest(code, 'Ada', false);
  await expire(code.id);
  await store.users.delete(coach, ada.userId);
  expect(await expiry().pass()).toEqual([{ codeId: code.id, guests: [], handled: true }]);
  expect(await expiry().pass()).toEqual([]);
  expect(await audited('join_code.expire')).toHaveLength(1);
});
