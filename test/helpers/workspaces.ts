import type { Store } from '../../src/store/index.ts';
import type { ObservedState, WorkspaceRecord } from '../../src/store/workspaces.ts';
import { eventually } from './controllers.ts';
import { sessionFor } from './session.ts';

/** A student (or admin) with a workspace and a signed-in session cookie. */
export interface Student {
  userId: string;
  email: string;
  workspace: WorkspaceRecord;
  cookie: string;
}

/** Creates a user with a workspace and a session; `tag` keeps slugs unique on a shared engine. */
export async function newStudent(store: Store, local: string, tag: string, role: 'user' | 'admin' = 'user'): Promise<Student> {
  const email = `${local}-${tag}@school.test`;
  const { user, workspace } = await store.users.create({ email, role });
  const { cookie } = await sessionFor(store.sessions, user.id);
  return { userId: user.id, email, workspace, cookie };
}

/**
 * The time a workspace of the real editor image (code-server) is given to start: its container and
 * code-server's start-up took over 20 s on a 2-core machine beside the suite's heaviest files.
 */
export const EDITOR_START_MS = 90_000;

/** Opens a workspace and waits until the controller reports its editor running at an endpoint. */
export async function openAndWait(store: Store, workspace: WorkspaceRecord, timeoutMs?: number): Promise<WorkspaceRecord> {
  await store.workspaces.open(workspace.id);
  return waitForState(store, workspace.id, 'running', timeoutMs);
}

/**
 * Waits until a workspace's observed state is `state` for its current spec (and, for running, its
 * endpoint is known). A timeout says the status last seen. The test image's container starts in
 * about a second alone; 30 s leave room for a loaded machine (the suite's heaviest files beside it).
 */
export async function waitForState(store: Store, id: string, state: ObservedState, timeoutMs = 30_000): Promise<WorkspaceRecord> {
  return eventually(
    `workspace ${state}`,
    async () => {
      const current = await store.workspaces.get(id);
      // Observed for the current spec: a status written by a reconcile that began before the last change does not count.
      const converged = current?.status.observedState === state && current.status.observedGeneration === current.spec.generation;
      if (converged && (state !== 'running' || current.status.editorEndpoint)) return current;
      throw new Error(current ? `last seen ${JSON.stringify({ generation: current.spec.generation, ...current.status })}` : 'no such workspace');
    },
    timeoutMs,
  );
}
