import type { DataSource, EntityManager } from 'typeorm';
import { ConflictError, NotFoundError } from '../errors.ts';
import { recordAudit, type Actor } from './audit.ts';
import type { ChangeFeed } from '../db/changes.ts';
import { createUserWithWorkspace, markDeletedIn, type StoreContext } from './workspaces.ts';

export type Role = 'user' | 'admin';

/** A user as the admin API and the CLI list them. */
export interface UserRecord {
  id: string;
  name: string;
  email: string;
  role: Role;
  workspaceId: string | null;
  workspaceSlug: string | null;
}

const SELECT_USERS = `SELECT u.id, u.name, u.email, u.role, w.id AS workspace_id, w.slug AS workspace_slug
  FROM users u LEFT JOIN workspaces w ON w.user_id = u.id`;

interface UserRow {
  id: string;
  name: string;
  email: string;
  role: Role;
  workspace_id: string | null;
  workspace_slug: string | null;
}

const toUser = (row: UserRow): UserRecord => ({
  id: row.id,
  name: row.name,
  email: row.email,
  role: row.role,
  workspaceId: row.workspace_id,
  workspaceSlug: row.workspace_slug,
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Every user, by email. */
export async function listUsers(db: DataSource): Promise<UserRecord[]> {
  const rows: UserRow[] = await db.query(`${SELECT_USERS} ORDER BY u.email`);
  return rows.map(toUser);
}

/** The user with this id, or undefined (also for ids that are not UUIDs). */
export async function getUserById(db: DataSource | EntityManager, id: string): Promise<UserRecord | undefined> {
  if (!UUID.test(id)) return undefined;
  const rows: UserRow[] = await db.query(`${SELECT_USERS} WHERE u.id = $1`, [id]);
  return rows[0] && toUser(rows[0]);
}

/** The user with this email (case-insensitive), or undefined. */
export async function getUserByEmail(db: DataSource | EntityManager, email: string): Promise<UserRecord | undefined> {
  const rows: UserRow[] = await db.query(`${SELECT_USERS} WHERE u.email = $1`, [email.trim().toLowerCase()]);
  return rows[0] && toUser(rows[0]);
}

/**
 * The user signing in with this (verified, allowlisted) email: the existing account, or a new one
 * with a stopped workspace, made admin when `admin` (the email is in SERVICE_ADMIN_EMAIL). A
 * concurrent first sign-in of the same email yields the one account.
 */
export async function signInUser(ctx: StoreContext, input: { email: string; name: string; admin: boolean }): Promise<{ user: UserRecord; created: boolean }> {
  const existing = await getUserByEmail(ctx.db, input.email);
  if (existing) return { user: existing, created: false };
  try {
    const { userId } = await createUserWithWorkspace(ctx, { email: input.email, name: input.name, role: input.admin ? 'admin' : 'user' });
    return { user: (await getUserById(ctx.db, userId))!, created: true };
  } catch (error) {
    // The unique email index: someone else's request created it first.
    const again = await getUserByEmail(ctx.db, input.email);
    if (again) return { user: again, created: false };
    throw error;
  }
}

/** Finds the user named by id or email inside a transaction and locks the row; 404 when there is none. */
async function lockUser(manager: EntityManager, idOrEmail: string): Promise<UserRecord> {
  const byId = UUID.test(idOrEmail);
  const rows: { id: string }[] = await manager.query(`SELECT id FROM users WHERE ${byId ? 'id = $1' : 'email = $1'} FOR UPDATE`, [
    byId ? idOrEmail : idOrEmail.trim().toLowerCase(),
  ]);
  const user = rows[0] && (await getUserById(manager, rows[0].id));
  if (!user) throw NotFoundError(`No user ${JSON.stringify(idOrEmail)}; a user exists once they have signed in.`, 'user_not_found');
  return user;
}

/** Locks every admin row (in id order, so concurrent callers queue) and returns how many there are. */
async function lockAdmins(manager: EntityManager): Promise<number> {
  const rows: unknown[] = await manager.query("SELECT id FROM users WHERE role = 'admin' ORDER BY id FOR UPDATE");
  return rows.length;
}

/** Grants admin to an existing user (by id or email) and audits `user.promote`; already admin is a no-op, not audited. */
export async function promoteUser(db: DataSource, actor: Actor, idOrEmail: string, changes?: ChangeFeed): Promise<{ user: UserRecord; changed: boolean }> {
  return announceUser(changes, await db.transaction(async (manager) => {
    const user = await lockUser(manager, idOrEmail);
    if (user.role === 'admin') return { user, changed: false };
    await manager.query("UPDATE users SET role = 'admin', updated_at = now() WHERE id = $1", [user.id]);
    await recordAudit(manager, { actor, action: 'user.promote', target: { kind: 'user', id: user.id }, metadata: { email: user.email } });
    await changes?.notify(manager, { kind: 'users', id: user.id });
    return { user: { ...user, role: 'admin' as const }, changed: true };
  }));
}

/**
 * Removes admin from a user and audits `user.demote`; refused (409 `last_admin`) when they are the
 * last admin. The admin rows are locked first, so two concurrent demotions of the last two admins
 * cannot both pass. Their sessions end, so the change is felt at once.
 */
export async function demoteUser(db: DataSource, actor: Actor, idOrEmail: string, changes?: ChangeFeed): Promise<{ user: UserRecord; changed: boolean }> {
  return announceUser(changes, await db.transaction(async (manager) => {
    const admins = await lockAdmins(manager);
    const user = await lockUser(manager, idOrEmail);
    if (user.role !== 'admin') return { user, changed: false };
    if (admins <= 1) throw ConflictError('last_admin', `${user.email} is the last admin and cannot be demoted; promote someone else first.`);
    await manager.query("UPDATE users SET role = 'user', updated_at = now() WHERE id = $1", [user.id]);
    await manager.query('DELETE FROM sessions WHERE user_id = $1', [user.id]);
    await recordAudit(manager, { actor, action: 'user.demote', target: { kind: 'user', id: user.id }, metadata: { email: user.email } });
    await changes?.notify(manager, { kind: 'users', id: user.id });
    return { user: { ...user, role: 'user' as const }, changed: true };
  }));
}

/** Publishes a changed user in process after commit (caches of roles drop it). */
function announceUser<T extends { user: UserRecord; changed: boolean }>(changes: ChangeFeed | undefined, result: T): T {
  if (result.changed) changes?.publish({ kind: 'users', id: result.user.id });
  return result;
}

/**
 * Deletes a user and audits `user.delete`: their sessions go with the row, and their workspace is
 * marked deleted so that the reconciler removes its containers and volume. The last admin cannot
 * be deleted (409 `last_admin`).
 */
export async function deleteUser(ctx: StoreContext, actor: Actor, idOrEmail: string): Promise<UserRecord> {
  const user = await ctx.db.transaction(async (manager) => {
    const admins = await lockAdmins(manager);
    const found = await lockUser(manager, idOrEmail);
    if (found.role === 'admin' && admins <= 1) throw ConflictError('last_admin', `${found.email} is the last admin and cannot be deleted.`);
    if (found.workspaceId) {
      await markDeletedIn(manager, found.workspaceId);
      await ctx.changes.notify(manager, { kind: 'workspaces', id: found.workspaceId });
    }
    await manager.query('DELETE FROM users WHERE id = $1', [found.id]);
    await recordAudit(manager, {
      actor,
      action: 'user.delete',
      target: { kind: 'user', id: found.id },
      metadata: { email: found.email, workspaceSlug: found.workspaceSlug },
    });
    await ctx.changes.notify(manager, { kind: 'users', id: found.id });
    return found;
  });
  if (user.workspaceId) ctx.changes.publish({ kind: 'workspaces', id: user.workspaceId });
  ctx.changes.publish({ kind: 'users', id: user.id });
  return user;
}
