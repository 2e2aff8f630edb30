/**
 * Users in the store (src/store/users.ts) and the start-up promotion of SERVICE_ADMIN_EMAIL
 * (controllers/admin-bootstrap.ts), on a real PostgreSQL database.
 */
import { randomBytes } from 'node:crypto';
import { promoteConfiguredAdmins } from '../../controllers/admin-bootstrap.ts';
import type { Change } from '../../src/db/changes.ts';
import { categoryLogger } from '../../src/log.ts';
import { SYSTEM_ACTOR, type Actor } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import type { UserRecord } from '../../src/store/users.ts';
import { captureLogger } from '../helpers/controllers.ts';
import { truncateAll, useTestDatabase } from '../helpers/db.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
let store: Store;

beforeEach(() => {
  store = testStore(db.dataSource);
});

interface AuditRow {
  actor_id: string | null;
  actor_email: string;
  action: string;
  target_kind: string;
  target_id: string;
  metadata: Record<string, unknown> | null;
}

const audit = (): Promise<AuditRow[]> =>
  db.dataSource.query('SELECT actor_id, actor_email, action, target_kind, target_id, metadata FROM audit_log ORDER BY id');

const count = async (sql: string, params: unknown[] = []): Promise<number> => {
  const rows: { n: string }[] = await db.dataSource.query(sql, params);
  return Number(rows[0]!.n);
};

const adminCount = () => count("SELECT count(*) AS n FROM users WHERE role = 'admin'");

async function user(email: string, admin = false): Promise<UserRecord> {
  return (await store.users.signIn({ email, name: email.split('@')[0]!, admin })).user;
}

const actorOf = (someone: UserRecord): Actor => ({ id: someone.id, email: someone.email });

async function addSession(userId: string): Promise<string> {
  const id = randomBytes(12).toString('hex');
  await db.dataSource.query("INSERT INTO sessions (id, user_id, data, expires_at) VALUES ($1, $2, $3, now() + interval '1 hour')", [
    id,
    userId,
    JSON.stringify({ userId }),
  ]);
  return id;
}

const sessionsOf = (userId: string) => count('SELECT count(*) AS n FROM sessions WHERE user_id = $1', [userId]);

describe('signInUser', () => {
  it('creates a regular user with a stopped workspace named after the email, then finds the same user', async () => {
    const first = await store.users.signIn({ email: 'Ada.Lovelace@School.test', name: 'Ada Lovelace', admin: false });
    expect(first.created).toBe(true);
    expect(first.user).toMatchObject({ email: 'ada.lovelace@school.test', name: 'Ada Lovelace', role: 'user', workspaceSlug: 'ada-lovelace' });
    expect(first.user.workspaceId).toEqual(expect.any(String));
    const workspaces: { user_id: string; desired_state: string }[] = await db.dataSource.query('SELECT user_id, desired_state FROM workspaces');
    expect(workspaces).toEqual([{ user_id: first.user.id, desired_state: 'stopped' }]);

    const second = await store.users.signIn({ email: 'ada.lovelace@school.test', name: 'Someone Else', admin: true });
    expect(second).toEqual({ user: first.user, created: false });
    expect(await store.users.list()).toEqual([first.user]);
  });

  it('creates an admin when asked to', async () => {
    const { user: made, created } = await store.users.signIn({ email: 'coach@school.test', name: 'Coach', admin: true });
    expect(created).toBe(true);
    expect(made.role).toBe('admin');
    expect(await adminCount()).toBe(1);
  });

  it('makes exactly one user out of 10 concurrent first sign-ins of one email', async () => {
    const results = await Promise.all(Array.from({ length: 10 }, () => store.users.signIn({ email: 'race@school.test', name: 'Race', admin: false })));
    expect(results.filter((result) => result.created)).toHaveLength(1);
    expect(new Set(results.map((result) => result.user.id)).size).toBe(1);
    expect(new Set(results.map((result) => result.user.workspaceId)).size).toBe(1);
    expect(await count('SELECT count(*) AS n FROM users')).toBe(1);
    expect(await count('SELECT count(*) AS n FROM workspaces')).toBe(1);
  });
});

describe('the email rule of the store', () => {
  it('never reads an email with surrounding spaces or control characters as an existing user, and stores none', async () => {
    const bob = await user('bob@school.test');
    for (const email of [' bob@school.test', 'bob@school.test ', 'bob@school.test\n', '\tbob@school.test']) {
      await expect(store.users.signIn({ email, name: 'Mallory', admin: true })).rejects.toMatchObject({ status: 400, code: 'invalid_email' });
      expect(await store.users.getByEmail(email)).toBeUndefined();
    }
    await expect(store.users.create({ email: 'eve\u0000@school.test' })).rejects.toMatchObject({ status: 400, code: 'invalid_email' });
    expect(await store.users.list()).toEqual([bob]);
  });

  it('stores an internationalised domain in its ASCII form and finds the user by either form', async () => {
    const ana = await user('Ana@Bücher.example');
    expect(ana.email).toBe('ana@xn--bcher-kva.example');
    expect((await store.users.getByEmail('ana@bücher.example'))?.id).toBe(ana.id);
    expect((await store.users.signIn({ email: 'ana@xn--bcher-kva.example', name: 'Ana', admin: false })).created).toBe(false);
  });

  it.each(['promote', 'demote', 'delete'] as const)('answers %s of a name holding a NUL or control character with 400 validation_error', async (verb) => {
    await user('head@school.test', true);
    for (const name of ['ada\u0000@school.test', 'ada@school.test\r\n']) {
      await expect(store.users[verb](SYSTEM_ACTOR, name)).rejects.toMatchObject({ status: 400, code: 'validation_error' });
    }
    expect(await audit()).toEqual([]);
  });
});

describe('promoteUser', () => {
  it.each([
    ['email', (target: UserRecord) => target.email.toUpperCase()],
    ['id', (target: UserRecord) => target.id],
  ])('promotes by %s and audits user.promote with the actor', async (_by, name) => {
    const coach = await user('coach@school.test', true);
    const ada = await user('ada@school.test');
    const result = await store.users.promote(actorOf(coach), name(ada));
    expect(result).toEqual({ user: { ...ada, role: 'admin' }, changed: true });
    expect((await store.users.list()).find((listed) => listed.id === ada.id)?.role).toBe('admin');
    expect(await audit()).toEqual([
      {
        actor_id: coach.id,
        actor_email: 'coach@school.test',
        action: 'user.promote',
        target_kind: 'user',
        target_id: ada.id,
        metadata: { email: 'ada@school.test' },
      },
    ]);
  });

  it.each([
    ['an unknown email', 'nobody@school.test'],
    ['an unknown id', '00000000-0000-4000-8000-000000000000'],
  ])('refuses %s with 404 user_not_found and audits nothing', async (_what, name) => {
    const coach = await user('coach@school.test', true);
    await expect(store.users.promote(actorOf(coach), name)).rejects.toMatchObject({ status: 404, code: 'user_not_found' });
    expect(await audit()).toEqual([]);
  });

  it('leaves an admin as it is, unaudited', async () => {
    const coach = await user('coach@school.test', true);
    const other = await user('other@school.test', true);
    await expect(store.users.promote(actorOf(coach), other.email)).resolves.toEqual({ user: other, changed: false });
    expect(await audit()).toEqual([]);
  });
});

describe('demoteUser', () => {
  it('demotes an admin, audits user.demote and keeps them signed in', async () => {
    const coach = await user('coach@school.test', true);
    const other = await user('other@school.test', true);
    await addSession(other.id);
    await addSession(other.id);
    const kept = await addSession(coach.id);
    const result = await store.users.demote(actorOf(coach), other.email);
    expect(result).toEqual({ user: { ...other, role: 'user' }, changed: true });
    expect(await adminCount()).toBe(1);
    expect(await sessionsOf(other.id)).toBe(2);
    expect(await count('SELECT count(*) AS n FROM sessions WHERE id = $1', [kept])).toBe(1);
    expect(await audit()).toEqual([
      {
        actor_id: coach.id,
        actor_email: 'coach@school.test',
        action: 'user.demote',
        target_kind: 'user',
        target_id: other.id,
        metadata: { email: 'other@school.test' },
      },
    ]);
  });

  it('refuses to demote the last admin (409 last_admin) and keeps them admin', async () => {
    const coach = await user('coach@school.test', true);
    await addSession(coach.id);
    await expect(store.users.demote(actorOf(coach), coach.id)).rejects.toMatchObject({ status: 409, code: 'last_admin' });
    expect(await adminCount()).toBe(1);
    expect(await sessionsOf(coach.id)).toBe(1);
    expect(await audit()).toEqual([]);
  });

  it('lets exactly one of two concurrent demotions of the last two admins pass (10 rounds)', async () => {
    for (let round = 0; round < 10; round++) {
      await truncateAll(db.dataSource);
      const a = await user('a@school.test', true);
      const b = await user('b@school.test', true);
      const results = await Promise.allSettled([store.users.demote(actorOf(b), a.id), store.users.demote(actorOf(a), b.id)]);
      const fulfilled = results.filter((result) => result.status === 'fulfilled');
      const rejected = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
      expect({ round, fulfilled: fulfilled.length, rejected: rejected.length }).toEqual({ round, fulfilled: 1, rejected: 1 });
      expect(rejected[0]!.reason).toMatchObject({ status: 409, code: 'last_admin' });
      expect({ round, admins: await adminCount() }).toEqual({ round, admins: 1 });
      expect(await count("SELECT count(*) AS n FROM audit_log WHERE action = 'user.demote'")).toBe(1);
    }
  });
});

describe('deleteUser', () => {
  it('deletes the user and their sessions, marks their workspace deleted, publishes the change and audits user.delete', async () => {
    const coach = await user('coach@school.test', true);
    const ada = await user('ada@school.test');
    const session = await addSession(ada.id);
    const changes: Change[] = [];
    store.changes.subscribe((change) => changes.push(change));

    const deleted = await store.users.delete(actorOf(coach), 'ada@school.test');
    expect(deleted).toEqual(ada);
    expect(await count('SELECT count(*) AS n FROM users WHERE id = $1', [ada.id])).toBe(0);
    expect(await count('SELECT count(*) AS n FROM sessions WHERE id = $1', [session])).toBe(0);
    const workspaces: { user_id: string | null; desired_state: string; generation: string }[] = await db.dataSource.query(
      'SELECT user_id, desired_state, generation FROM workspaces WHERE id = $1',
      [ada.workspaceId],
    );
    expect(workspaces).toEqual([{ user_id: null, desired_state: 'deleted', generation: '2' }]);
    expect(changes).toEqual([
      { kind: 'workspaces', id: ada.workspaceId },
      { kind: 'users', id: ada.id },
    ]);
    expect(await audit()).toEqual([
      {
        actor_id: coach.id,
        actor_email: 'coach@school.test',
        action: 'user.delete',
        target_kind: 'user',
        target_id: ada.id,
        metadata: { email: 'ada@school.test', workspaceSlug: 'ada' },
      },
    ]);
  });

  it('refuses to delete the last admin (409 last_admin) and changes nothing', async () => {
    const coach = await user('coach@school.test', true);
    const changes: Change[] = [];
    store.changes.subscribe((change) => changes.push(change));
    await expect(store.users.delete(actorOf(coach), coach.id)).rejects.toMatchObject({ status: 409, code: 'last_admin' });
    expect(await store.users.list()).toEqual([coach]);
    expect(await count("SELECT count(*) AS n FROM workspaces WHERE desired_state = 'deleted'")).toBe(0);
    expect(changes).toEqual([]);
    expect(await audit()).toEqual([]);
  });
});

describe('promoteConfiguredAdmins', () => {
  it('promotes listed existing users (actor system), skips unknown emails and existing admins, and returns the promoted emails', async () => {
    const ada = await user('ada@school.test');
    await user('coach@school.test', true);
    await user('bystander@school.test');
    const logger = captureLogger();
    const promoted = await promoteConfiguredAdmins(
      store.users,
      ['ada@school.test', 'unknown@school.test', 'coach@school.test'],
      categoryLogger(logger.root, 'auth'),
    );
    expect(promoted).toEqual(['ada@school.test']);
    const roles = Object.fromEntries((await store.users.list()).map((listed) => [listed.email, listed.role]));
    expect(roles).toEqual({ 'ada@school.test': 'admin', 'bystander@school.test': 'user', 'coach@school.test': 'admin' });
    expect(await count('SELECT count(*) AS n FROM users WHERE email = $1', ['unknown@school.test'])).toBe(0);
    expect(await audit()).toEqual([
      { actor_id: null, actor_email: 'system', action: 'user.promote', target_kind: 'user', target_id: ada.id, metadata: { email: 'ada@school.test' } },
    ]);
  });

  it('announces each promotion on the change feed, so a running server drops the cached role at once', async () => {
    const ada = await user('ada@school.test');
    const changes: Change[] = [];
    store.changes.subscribe((change) => changes.push(change));
    await promoteConfiguredAdmins(store.users, ['ada@school.test'], categoryLogger(captureLogger().root, 'auth'));
    expect(changes).toEqual([{ kind: 'users', id: ada.id }]);
  });

  it('does nothing when nobody listed needs promoting', async () => {
    await user('coach@school.test', true);
    const logger = captureLogger();
    expect(await promoteConfiguredAdmins(store.users, ['coach@school.test', 'unknown@school.test'], categoryLogger(logger.root, 'auth'))).toEqual([]);
    expect(await audit()).toEqual([]);
    expect(await adminCount()).toBe(1);
  });
});
