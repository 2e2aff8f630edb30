import type { Backups } from '../src/backup/backups.ts';
import { names, type ManagedContainer, type RuntimeWorkloads } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import { SYSTEM_ACTOR } from '../src/store/audit.ts';
import type { Store } from '../src/store/index.ts';
import type { WorkspaceRecord } from '../src/store/workspaces.ts';
import type { ReconcileResult } from './workqueue.ts';
import { LIVE, writeStatus } from './workspace-status.ts';

/** What moves homes between nodes (Backups): a fresh backup restored elsewhere, or the latest one. */
export type HomeMover = Pick<Backups, 'moveOff' | 'recoverLatest'>;

export interface HomeMovesOptions {
  store: Pick<Store, 'workspaces'>;
  runtime: Pick<RuntimeWorkloads, 'stop'>;
  /** Logger of `control.containers`. */
  log: Logger;
  homes: HomeMover;
  /** How long a node is down before it is lost (NODE_LOST_SECONDS): a home with no backup is looked at again after it. */
  nodeLostMs: number;
  /** Its editor no longer counts under the cap (the workspace controller's count). */
  stopped(workspaceId: string): void;
}

/**
 * Home moves, one job of the workspace controller (a swarm's): a workspace whose editor is on a
 * node it must leave has its home moved before anything else. Woken by the workspace queue: the
 * node lifecycle (controllers/node-lifecycle.ts) sends it the workspaces on drained and lost nodes,
 * and the workspace reconcile hands each here. The next reconcile finds the home replaced and makes
 * its editor where the new home is.
 */
export class HomeMoves {
  private readonly options: HomeMovesOptions;
  /** Workspaces whose lost home has no backup to come back from: said once each. */
  private readonly unrecoverable = new Set<string>();

  constructor(options: HomeMovesOptions) {
    this.options = options;
  }

  /**
   * Moves a workspace's home off the node its editor is on. Drained: the editor stops, a fresh
   * backup of the home is restored into a new volume on another node, and the old one is retired
   * (no file lost). Lost: the home is brought back from its newest stored backup on another node,
   * and its page tells the student from what time; without a backup it waits for the node, said
   * once. Either way the next reconcile finds the home replaced and makes its editor there.
   */
  async move(workspace: WorkspaceRecord, code: ManagedContainer, why: 'drained' | 'lost'): Promise<ReconcileResult> {
    const { store, runtime, log, homes } = this.options;
    const node = code.node!;
    const context = { workspaceId: workspace.id, slug: workspace.slug, node };
    if (why === 'drained') {
      await writeStatus(store, workspace, 'waiting', `Moving to another server: ${node} is being emptied by the operator. Your files come along.`);
      if (LIVE.has(code.state)) await runtime.stop(code.id);
      this.options.stopped(workspace.id);
      const moved = await homes.moveOff(SYSTEM_ACTOR, workspace);
      await store.workspaces.moveHome(
        SYSTEM_ACTOR,
        workspace.id,
        moved.volume,
        { retire: true, metadata: { node, reason: 'node drained', backup: moved.backup } },
        names.home,
      );
      log.info({ ...context, volume: moved.volume, backup: moved.backup }, `moved the home of ${workspace.slug} off drained node ${node}`);
      return { requeueAfterMs: 0 };
    }
    this.options.stopped(workspace.id);
    const recovered = await homes.recoverLatest(workspace);
    if (!recovered) {
      if (!this.unrecoverable.has(workspace.id)) {
        this.unrecoverable.add(workspace.id);
        log.error(context, `node ${node} is lost and no backup of the home of ${workspace.slug} exists: it waits for the node to come back`);
      }
      await writeStatus(
        store,
        workspace,
        'waiting',
        `Waiting for the server ${node}, which holds your files: it stopped answering, and no backup of them exists.`,
      );
      return { requeueAfterMs: this.options.nodeLostMs };
    }
    this.unrecoverable.delete(workspace.id);
    const reason = `the server ${node} that held your files stopped answering`;
    await store.workspaces.moveHome(
      SYSTEM_ACTOR,
      workspace.id,
      recovered.volume,
      { retire: false, recovered: { from: recovered.backupAt, reason }, metadata: { node, reason: 'node lost', backup: recovered.backup } },
      names.home,
    );
    log.warning(
      { ...context, volume: recovered.volume, backup: recovered.backup, backupAt: recovered.backupAt.toISOString() },
      `node ${node} is lost: the home of ${workspace.slug} was brought back from its backup of ${recovered.backupAt.toISOString()} on another node`,
    );
    return { requeueAfterMs: 0 };
  }
}
