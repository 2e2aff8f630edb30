import type { DataSource } from 'typeorm';
import type { Change } from '../db/changes.ts';
import type { Queryable } from '../db/sql.ts';
import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import { checkEmail, normalEmail, textProblem } from '../identity/email.ts';
import type { Actor } from './audit.ts';
import { isUuid } from './ids.ts';
import type { Mutate, Tx } from './mutation.ts';
import { insertWorkspace, markDeleted, workspaceChange, type WorkspaceRecord } from './workspaces.ts';
import { ROLES, type Role } from '../wire/vocabulary.ts';
import { col, rowCodec } from './row-codec.ts';

/** A user's role: the word of src/wire/vocabulary.ts, where it is defined. */
export type { Role } from '../wire/vocabulary.ts';

/** A user with the id and slug of their workspace. */
export interface UserRecord {
  id: string;
  name: string;
  email: string;
  role: Role;
  workspaceId: string | null;
  workspaceSlug: string | null;
  /** A guest of a join code (src/store/join-codes.ts): until when they may act (the code's expiry, or its early close); null: not a guest. */
  guestUntil: Date | null;
}

/** Until when a guest of a join code may act (`c` the code joined to `u`): its expiry, or its close when that came first; NULL for anyone else. */
export const GUEST_UNTIL = 'CASE WHEN u.join_code_id IS NULL THEN NULL ELSE LEAST(c.expires_at, COALESCE(c.closed_at, c.expires_at)) END AS guest_until';

const SELECT_USERS = `SELECT u.id, u.name, u.email, u.role, w.id AS workspace_id, w.slug AS workspace_slug, ${GUEST_UNTIL}
  FROM users u LEFT JOIN workspaces w ON w.user_id = u.id LEFT JOIN join_codes c ON c.id = u.join_code_id`;

/** The users table's columns and their workspace's id and slug (SELECT_USERS), as the store reads them; its picks serve the other stores' reads of users. */
export const USERS = rowCodec(
  'users',
  {
    id: col.text,
    name: col.text,
    email: col.text,
    role: col.oneOf(ROLES),
    workspace_id: col.nullable(col.text),
    workspace_slug: col.nullable(col.text),
    guest_until: col.nullable(col.timestamp),
  },
  (row): UserRecord => ({
    id: row.id,
    name: row.name,
    email: row.email,
    role: row.role,
    workspaceId: row.workspace_id,
    workspaceSlug: row.workspace_slug,
    guestUntil: row.guest_until,
  }),
);
const IDS = USERS.pick('id');

const userChange = (id: string): Change => ({ kind: 'users', id });

/** A role change: the user as they are now, and whether anything changed. */
export interface RoleChange {
  user: UserRecord;
  changed: boolean;
}

async function getUser(db: Queryable, id: string): Promise<UserRecord | undefined> {
  if (!isUuid(id)) return undefined;
  return USERS.first(db, `${SELECT_USERS} WHERE u.id = $1`, [id]);
}

async function getUserByEmail(db: Queryable, email: string): Promise<UserRecord | undefined> {
  // No user's email holds a NUL or a control character, and PostgreSQL could not compare a NUL.
  if (textProblem(email) !== undefined) return undefined;
  return USERS.first(db, `${SELECT_USERS} WHERE u.email = $1`, [normalEmail(email)]);
}

/**
 * Finds the user named by id or email inside a transaction and locks the row; 404 when there is
 * none, 400 `validation_error` when the name holds what no email may (a NUL, a control character,
 * whitespace, a lone surrogate).
 */
async function lockUser(tx: Tx, idOrEmail: string): Promise<UserRecord> {
  const byId = isUuid(idOrEmail);
  const problem = byId ? undefined : textProblem(idOrEmail);
  if (problem !== undefined) throw ValidationError('validation_error', `The user must be a user id or an email: ${problem}.`);
  const locked = await IDS.first(tx, `SELECT id FROM users WHERE ${byId ? 'id = $1' : 'email = $1'} FOR UPDATE`, [byId ? idOrEmail : normalEmail(idOrEmail)]);
  const user = locked && (await getUser(tx, locked.id));
  if (!user) throw NotFoundError('user_not_found', `No user ${JSON.stringify(idOrEmail)}; a user exists once they have signed in.`);
  return user;
}

/** Locks every admin row (in id order, so concurrent callers queue) and returns how many there are. */
async function lockAdmins(tx: Tx): Promise<number> {
  return (await IDS.all(tx, "SELECT id FROM users WHERE role = 'admin' ORDER BY id FOR UPDATE")).length;
}

/** Users and their roles; every user has one workspace, made with them and deleted with them. */
export class UserStore {
  private readonly db: DataSource;
  private readonly mutate: Mutate;

  constructor(db: DataSource, mutate: Mutate) {
    this.db = db;
    this.mutate = mutate;
  }

  /** Every user, by email. */
  list(): Promise<UserRecord[]> {
    return USERS.all(this.db, `${SELECT_USERS} ORDER BY u.email`);
  }

  /** The user with this id, or undefined (also for ids that are not UUIDs). */
  get(id: string): Promise<UserRecord | undefined> {
    return getUser(this.db, id);
  }

  /** The user with this email (case-insensitive), or undefined. */
  getByEmail(email: string): Promise<UserRecord | undefined> {
    return getUserByEmail(this.db, email);
  }

  /**
   * Creates a user and their workspace (stopped) in one transaction. The slug comes from the email's
   * local part, made unique with a numeric suffix (`ada`, `ada-2`, ...). The email is stored in the
   * form of src/identity/email.ts; one that rule refuses (surrounding spaces included) is a 400
   * `invalid_email`.
   */
  create(input: { email: string; name?: string; role?: Role }): Promise<{ user: UserRecord; workspace: WorkspaceRecord }> {
    const checked = checkEmail(input.email);
    if ('problem' in checked) return Promise.reject(ValidationError('invalid_email', `Invalid email: ${checked.problem}.`));
    const email = checked.value;
    return this.mutate(async (tx) => {
      const { id: userId } = await IDS.one(tx, 'INSERT INTO users (email, name, role) VALUES ($1, $2, $3) RETURNING id', [
        email,
        input.name ?? '',
        input.role ?? 'user',
      ]);
      const workspace = await insertWorkspace(tx, userId, email);
      const user = await USERS.one(tx, `${SELECT_USERS} WHERE u.id = $1`, [userId]);
      return { value: { user, workspace }, changed: [userChange(userId), workspaceChange(workspace.id)], audit: null };
    });
  }

  /**
   * The user signing in with this (verified, allowlisted) email: the existing account, or a new one
   * with a stopped workspace, made admin when `admin` (the email is in SERVICE_ADMIN_EMAIL). An
   * account without a name (made by a sign-in link, which carries none) takes the provider's. A
   * concurrent first sign-in of the same email yields the one account.
   */
  async signIn(input: { email: string; name: string; admin: boolean }): Promise<{ user: UserRecord; created: boolean }> {
    const existing = await this.getByEmail(input.email);
    if (existing && !existing.name && input.name) {
      await this.db.query("UPDATE users SET name = $2, updated_at = now() WHERE id = $1 AND name = ''", [existing.id, input.name]);
      return { user: { ...existing, name: input.name }, created: false };
    }
    if (existing) return { user: existing, created: false };
    try {
      const { user } = await this.create({ email: input.email, name: input.name, role: input.admin ? 'admin' : 'user' });
      return { user, created: true };
    } catch (error) {
      // The unique email index: someone else's request created it first.
      const again = await this.getByEmail(input.email);
      if (again) return { user: again, created: false };
      throw error;
    }
  }

  /** Grants admin to an existing user (by id or email) and audits `user.promote`; already admin is a no-op, not audited. */
  promote(actor: Actor, idOrEmail: string): Promise<RoleChange> {
    return this.mutate<RoleChange>(async (tx) => {
      const user = await lockUser(tx, idOrEmail);
      if (user.role === 'admin') return { value: { user, changed: false }, changed: [], audit: null };
      await tx.query("UPDATE users SET role = 'admin', updated_at = now() WHERE id = $1", [user.id]);
      return {
        value: { user: { ...user, role: 'admin' as const }, changed: true },
        changed: [userChange(user.id)],
        audit: { actor, action: 'user.promote', target: { kind: 'user', id: user.id }, metadata: { email: user.email } },
      };
    });
  }

  /**
   * Removes admin from a user and audits `user.demote`; refused (409 `last_admin`) when they are the
   * last admin. The admin rows are locked first, so two concurrent demotions of the last two admins
   * cannot both pass. Their sessions stay (undoing a mistaken promotion must not sign a person
   * out): the role is read on every request, and the change of the user makes the proxy check their
   * open WebSockets again, so what they may reach changes at once.
   */
  demote(actor: Actor, idOrEmail: string): Promise<RoleChange> {
    return this.mutate<RoleChange>(async (tx) => {
      const admins = await lockAdmins(tx);
      const user = await lockUser(tx, idOrEmail);
      if (user.role !== 'admin') return { value: { user, changed: false }, changed: [], audit: null };
      if (admins <= 1) throw ConflictError('last_admin', `${user.email} is the last admin and cannot be demoted; promote someone else first.`);
      await tx.query("UPDATE users SET role = 'user', updated_at = now() WHERE id = $1", [user.id]);
      return {
        value: { user: { ...user, role: 'user' as const }, changed: true },
        changed: [userChange(user.id)],
        audit: { actor, action: 'user.demote', target: { kind: 'user', id: user.id }, metadata: { email: user.email } },
      };
    });
  }

  /**
   * Deletes a user and audits `user.delete`: their sessions go with the row, and their workspace is
   * marked deleted so that the reconciler removes its containers and volume. The last admin cannot
   * be deleted (409 `last_admin`).
   */
  delete(actor: Actor, idOrEmail: string): Promise<UserRecord> {
    return this.mutate(async (tx) => {
      const admins = await lockAdmins(tx);
      const user = await lockUser(tx, idOrEmail);
      if (user.role === 'admin' && admins <= 1) throw ConflictError('last_admin', `${user.email} is the last admin and cannot be deleted.`);
      if (user.workspaceId) await markDeleted(tx, user.workspaceId);
      await tx.query('DELETE FROM users WHERE id = $1', [user.id]);
      return {
        value: user,
        changed: [...(user.workspaceId ? [workspaceChange(user.workspaceId)] : []), userChange(user.id)],
        audit: { actor, action: 'user.delete', target: { kind: 'user', id: user.id }, metadata: { email: user.email, workspaceSlug: user.workspaceSlug } },
      };
    });
  }
}
