/**
 * Who may pass the proxy: a credential → the control-plane session behind it → the session's user
 * → the access rule for the workspace's editor (`mayOpenEditor` in the mode served: path mode, its
 * owner only; host mode, its owner or an admin), with the user and the workspace cached for a
 * second and forgotten at once when the change feed says they changed. The credential is the
 * session cookie (checked as koa-session signs it) on the control plane's origin, and a workspace
 * cookie (handoff.ts: signed, naming the user, the workspace and the session) on a workspace's own
 * host.
 */
import Keygrip from 'keygrip';
import { AuthenticationError, AuthorizationError, NotFoundError, type AppError } from '../../src/errors.ts';
import type { Change } from '../../src/db/changes.ts';
import type { SessionStore, SessionUser } from '../../src/store/sessions.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { mayOpenEditor, mayUseWorkspace, stillAllowed, type EditorMode } from '../policy.ts';
import type { GrantSigner, WorkspaceGrant } from './handoff.ts';
import { TtlCache } from './ttl-cache.ts';

/** The session cookie pair of a request, and its other cookies (the Cookie header the editor gets). */
export interface SessionCookies {
  id: string | undefined;
  signature: string | undefined;
  others: string | undefined;
}

/**
 * Splits a Cookie header in one pass into the session cookie (`names[0]`, first one wins), its
 * signature (`names[1]`) and the other cookies, joined again with `; `.
 */
export function sessionCookies(header: string | undefined, names: readonly string[]): SessionCookies {
  const result: SessionCookies = { id: undefined, signature: undefined, others: undefined };
  if (!header) return result;
  let others = '';
  for (let start = 0; start < header.length;) {
    let end = header.indexOf(';', start);
    if (end === -1) end = header.length;
    const part = header.slice(start, end).trim();
    start = end + 1;
    if (!part) continue;
    const at = part.indexOf('=');
    const name = at === -1 ? part : part.slice(0, at).trim();
    if (name === names[0]) {
      if (at !== -1) result.id ??= part.slice(at + 1).trim();
    } else if (name === names[1]) {
      if (at !== -1) result.signature ??= part.slice(at + 1).trim();
    } else others = others ? `${others}; ${part}` : part;
  }
  if (others) result.others = others;
  return result;
}

/** A verdict that refuses: the error to answer (the one vocabulary of src/errors.ts), and for a browser's page its title. */
export type Refusal = AppError & { readonly title?: string };

/**
 * Whether a request may pass: the workspace it may use and who uses it, or the refusal to answer
 * instead (`title` heads the page a browser gets for a 403).
 */
export type Verdict = { workspace: WorkspaceRecord; user: SessionUser; sessionId: string } | Refusal;

/** A refusal whose browser page has `title`. */
const titled = (error: AppError, title: string): Refusal => Object.assign(error, { title });

/** What an admin who is not the owner is told (path mode: see mayOpenEditor). */
export const OWNER_ONLY_MESSAGE =
  'Only the student who owns this workspace opens its editor on this site: its pages would run with your admin session. Manage it from the admin panel or through the student API, or ask the student; an operator who sets WORKSPACE_HOST (host mode, each workspace on a site of its own) lets admins open it safely.';

const UNAUTHENTICATED: Refusal = AuthenticationError('Sign in to use this workspace.');

/** A workspace host that names no workspace (host mode). */
export const NO_SUCH_WORKSPACE: Refusal = titled(NotFoundError('not_found', 'There is no workspace at this address.'), 'No such workspace');

export interface AdmissionDeps {
  sessions: SessionStore;
  workspaces: SurfaceStore['workspaces'];
  /** The session cookie's name; its signature is `<name>.sig`. */
  sessionCookie: string;
  sessionSecret: string;
  /** Whether an email may still sign in (allowlist and SERVICE_ADMIN_EMAIL). */
  isAllowed: (email: string) => boolean;
  /** How editors are served, which decides who may open one (mayOpenEditor). */
  mode: EditorMode;
  /** Host mode: reads workspace cookies. */
  grants?: GrantSigner;
}

/** Authorises proxied requests (see the file comment). */
export class Admission {
  /** The control plane's own session cookies, never passed on either way. */
  readonly cookieNames: readonly string[];
  private readonly deps: AdmissionDeps;
  private readonly keys: Keygrip;
  private readonly users = new TtlCache<SessionUser | null>();
  private readonly workspaces = new TtlCache<WorkspaceRecord | null>();

  constructor(deps: AdmissionDeps) {
    this.deps = deps;
    this.keys = new Keygrip([deps.sessionSecret]);
    this.cookieNames = [deps.sessionCookie, `${deps.sessionCookie}.sig`];
  }

  /**
   * Forgets what a change made stale: a demoted or deleted user, a stopped or deleted workspace, an
   * editor that stopped or moved (its observed status) is never served from cache.
   */
  changed(change: Change): void {
    if (change.kind === 'users') this.users.clear();
    if (change.kind === 'workspaces' || change.kind === 'status') this.workspaces.clear();
  }

  /** Forgets cached sessions: one has ended (signed out), and no credential naming it may pass from now on. */
  sessionEnded(): void {
    this.users.clear();
  }

  /**
   * Whether a request with these session cookies may use the workspace `slug`. Answered without a
   * promise when both the session user and the workspace are cached (the common case), and without
   * any lookup when there is no session cookie.
   */
  admit(cookies: SessionCookies, slug: string): Verdict | Promise<Verdict> {
    const user = this.userOf(cookies);
    if (user === null) return UNAUTHENTICATED;
    const sessionId = cookies.id!;
    const workspace = this.workspaceOf(slug);
    if (user instanceof Promise || workspace instanceof Promise) return Promise.all([user, workspace]).then(([u, w]) => this.decide(u, w, sessionId));
    return this.decide(user, workspace, sessionId);
  }

  /**
   * Host mode: whether a request on the host of workspace `slug` with these workspace cookie values
   * may pass. Several may arrive (a page of another workspace's host can set one for the whole
   * workspace domain): the first whose signature is right, that has not ended, and that names this
   * workspace is taken, the others ignored. 404 when no workspace has that name.
   */
  admitGrant(values: readonly string[], slug: string): Verdict | Promise<Verdict> {
    const workspace = this.workspaceOf(slug);
    if (workspace instanceof Promise) return workspace.then((found) => this.grantVerdict(values, found));
    return this.grantVerdict(values, workspace);
  }

  /**
   * Host mode: whether a grant (a workspace cookie's, or a hand-over's) still admits to `workspace`:
   * its session lives and is still its user's, and that user may open the workspace.
   */
  admitWith(grant: Pick<WorkspaceGrant, 'userId' | 'workspaceId' | 'sessionId'>, workspace: WorkspaceRecord | null): Verdict | Promise<Verdict> {
    if (!workspace || workspace.spec.desiredState === 'deleted') return NO_SUCH_WORKSPACE;
    if (grant.workspaceId !== workspace.id) return UNAUTHENTICATED;
    const user = this.users.get(`session:${grant.sessionId}`, async () => (await this.deps.sessions.userOf(grant.sessionId)) ?? null);
    const decide = (found: SessionUser | null) => this.decide(found?.id === grant.userId ? found : null, workspace, grant.sessionId);
    return user instanceof Promise ? user.then(decide) : decide(user);
  }

  /** The workspace of a slug, cached for a second (null: none). */
  workspaceOf(slug: string): WorkspaceRecord | null | Promise<WorkspaceRecord | null> {
    return this.workspaces.get(slug, async () => (await this.deps.workspaces.getBySlug(slug)) ?? null);
  }

  private grantVerdict(values: readonly string[], workspace: WorkspaceRecord | null): Verdict | Promise<Verdict> {
    if (!workspace || workspace.spec.desiredState === 'deleted') return NO_SUCH_WORKSPACE;
    const now = Date.now();
    for (const value of values) {
      const grant = this.deps.grants?.verify(value, now);
      if (grant?.workspaceId === workspace.id) return this.admitWith(grant, workspace);
    }
    return UNAUTHENTICATED;
  }

  /** The signed-in user of a request (cookie signature → session row → user); verified pairs are cached for a second. */
  private userOf(cookies: SessionCookies): SessionUser | null | Promise<SessionUser | null> {
    const { id, signature } = cookies;
    if (!id || !signature) return null;
    // Keyed by the pair, so a cache hit is a pair verified within the last second: no HMAC per request.
    return this.users.get(`cookie:${id}.${signature}`, async () =>
      this.keys.verify(`${this.deps.sessionCookie}=${id}`, signature) ? ((await this.deps.sessions.userOf(id)) ?? null) : null,
    );
  }

  private decide(user: SessionUser | null, workspace: WorkspaceRecord | null, sessionId: string): Verdict {
    if (!user || !stillAllowed(user, this.deps.isAllowed)) return UNAUTHENTICATED;
    if (!mayOpenEditor(user, workspace, this.deps.mode)) {
      // Path mode: an admin may manage the workspace (its student API, the admin API), not run its pages as themselves.
      if (mayUseWorkspace(user, workspace)) return titled(AuthorizationError(OWNER_ONLY_MESSAGE), 'Not opened for admins here');
      return titled(AuthorizationError('This workspace is not yours.'), 'Not your workspace');
    }
    return { workspace, user, sessionId };
  }
}
