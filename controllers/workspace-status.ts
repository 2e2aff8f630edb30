import type { Store } from '../src/store/index.ts';
import type { ObservedState, WorkspaceRecord } from '../src/store/workspaces.ts';

/** Container states in which a code container counts as up (stopped before its home moves, or when its workspace is wanted stopped). */
export const LIVE = new Set(['running', 'restarting', 'paused']);

/**
 * Writes a workspace's observed status for its spec's generation (the workspace controller's and its
 * home moves' last step), unless `workspace`, as read at the start of the reconcile, holds it
 * already: a starting editor is probed every quarter second, and each write is a fenced transaction
 * of four statements. A status someone else wrote since that read is a change, which brings the
 * workspace back to a reconcile that reads it anew.
 */
export async function writeStatus(
  store: Pick<Store, 'workspaces'>,
  workspace: WorkspaceRecord,
  state: ObservedState,
  message: string,
  editorEndpoint: string | null = null,
  node?: string,
): Promise<void> {
  const recorded = workspace.status;
  if (
    recorded.observedState === state &&
    recorded.observedGeneration === workspace.spec.generation &&
    recorded.statusMessage === message &&
    recorded.editorEndpoint === editorEndpoint &&
    (node === undefined || recorded.node === node)
  )
    return;
  await store.workspaces.writeStatus(workspace.id, {
    observedState: state,
    observedGeneration: workspace.spec.generation,
    statusMessage: message,
    editorEndpoint,
    ...(node !== undefined && { node }),
  });
}
