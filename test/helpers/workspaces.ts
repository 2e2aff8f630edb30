import type { DataSource } from 'typeorm';
import { getWorkspace, openWorkspace, type StoreContext, type WorkspaceRecord } from '../../src/store/workspaces.ts';
import { createUserWithWorkspace } from '../../src/store/workspaces.ts';
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
export async function newStudent(store: StoreContext, local: string, tag: string, role: 'user' | 'admin' = 'user'): Promise<Student> {
  const email = `${local}-${tag}@school.test`;
  const { userId, workspace } = await createUserWithWorkspace(store, { email, role });
  const { cookie } = await sessionFor(store.db, userId);
  return { userId, email, workspace, cookie };
}

/** Opens a workspace and waits until the controller reports its editor running at an endpoint. */
export async function openAndWait(store: StoreContext, workspace: WorkspaceRecord): Promise<WorkspaceRecord> {
  await openWorkspace(store, workspace.id);
  return waitForState(store.db, workspace.id, 'running');
}

/** Waits until a workspace's observed state is `state` (and, for running, its endpoint is known). */
export async function waitForState(db: DataSource, id: string, state: string): Promise<WorkspaceRecord> {
  return eventually(`workspace ${state}`, async () => {
    const current = await getWorkspace(db, id);
    return current?.observedState === state && (state !== 'running' || current.editorEndpoint) ? current : undefined;
  }, 20_000);
}
