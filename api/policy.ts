/**
 * Who may do what: each rule once, used by every surface that enforces it (the Koa routes and the
 * proxy).
 */
import type { Role } from '../src/store/users.ts';
import type { WorkspaceRecord } from '../src/store/workspaces.ts';

/** The signed-in person a rule is about. */
export interface Person {
  id: string;
  email: string;
  role: Role;
  /** A guest of a join code: until when they may act; null: not a guest. */
  guestUntil: Date | null;
}

/**
 * Whether a signed-in user may still act: admins always; a guest of a join code (who signed in with
 * no provider and is on no allowlist) until their code expires or is closed; others while the
 * allowlist admits their email.
 */
export function stillAllowed(person: Pick<Person, 'role' | 'email' | 'guestUntil'>, isAllowed: (email: string) => boolean, now = Date.now()): boolean {
  if (person.role === 'admin') return true;
  if (person.guestUntil !== null) return person.guestUntil.getTime() > now;
  return isAllowed(person.email);
}

/**
 * Whether `person` may use a workspace's student API (`/u/<slug>/api/`, where no student code
 * runs): its owner or an admin, while it is not deleted. Opening its editor is `mayOpenEditor`.
 * Callers answer "not yours" alike whether the workspace exists or not, so slugs cannot be probed.
 */
export function mayUseWorkspace(person: Pick<Person, 'id' | 'role'>, workspace: WorkspaceRecord | null | undefined): workspace is WorkspaceRecord {
  if (!workspace || workspace.spec.desiredState === 'deleted') return false;
  return person.role === 'admin' || workspace.userId === person.id;
}

/**
 * How editors are served: `path` (every workspace under `/u/<slug>/` on the control plane's own
 * origin) or `host` (WORKSPACE_HOST: each workspace on an origin of its own, `<slug>.<base>`).
 */
export type EditorMode = 'path' | 'host';

/**
 * Whether `person` may open a workspace's editor through the proxy (HTTP and WebSocket), while it
 * is not deleted. Whatever the editor serves is the student's code, and it runs in the browser of
 * whoever opens it:
 * - `path` mode: only its owner. The editor's pages run on the control plane's own origin, with
 *   the visitor's session; an admin who opened one would hand that code the admin API.
 * - `host` mode: its owner or an admin. The editor's pages run on the workspace's own origin, where
 *   the browser holds no control-plane cookie, only that workspace's, which carries no admin power.
 */
export function mayOpenEditor(
  person: Pick<Person, 'id' | 'role'>,
  workspace: WorkspaceRecord | null | undefined,
  mode: EditorMode,
): workspace is WorkspaceRecord {
  if (!mayUseWorkspace(person, workspace)) return false;
  return mode === 'host' || workspace.userId === person.id;
}
