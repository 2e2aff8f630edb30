import type { ManagedContainer, RuntimeEnvironment } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import { FencedOutError } from '../src/store/leases.ts';

/** The last failure seen of a workspace's editor task, and what its page says of it. */
interface Seen {
  task: string;
  message: string;
  /** For the student's page and the panel while the editor does not run. */
  text: string;
  /** Why the last repair of its network failed, if it did. */
  repairError?: string;
}

/**
 * What the workspace controller does with an editor's task that its swarm node refused or ended
 * with an error (ManagedContainer.failure): counts each task once in
 * `swarm_task_rejections_total{reason}`; says it in the operator's log once per workspace and
 * error (Swarm makes a new task every 5 s: the next ones with the same error are counted, not
 * said again, until the editor runs); has the runtime repair the workspace network when that is
 * what the node refused (a node back from an unclean death, moby#37087), once per task; and words
 * it for the student's page and the panel. A repair that fails is said at error level and on the
 * page, and tried again with the next task.
 */
export class TaskFailures {
  private readonly runtime: Pick<RuntimeEnvironment, 'repairNetwork'>;
  private readonly metrics: Metrics;
  private readonly log: Logger;
  private readonly network: string;
  private readonly signal: AbortSignal | undefined;
  private readonly seen = new Map<string, Seen>();

  constructor(options: { runtime: Pick<RuntimeEnvironment, 'repairNetwork'>; metrics: Metrics; log: Logger; network: string; signal?: AbortSignal }) {
    this.runtime = options.runtime;
    this.metrics = options.metrics;
    this.log = options.log;
    this.network = options.network;
    this.signal = options.signal;
  }

  /** Takes in the editor's failed task, if it has one not seen yet (see the class's comment). */
  async saw(workspace: { id: string; slug: string }, code: ManagedContainer): Promise<void> {
    const failure = code.failure;
    const before = this.seen.get(workspace.id);
    if (!failure || before?.task === failure.task) return;
    const node = code.node ?? 'its node';
    const entry: Seen = {
      task: failure.task,
      message: failure.message,
      text: `The server ${node} could not start your editor (${failure.message}); it tries again every few seconds.`,
      repairError: before?.repairError,
    };
    this.seen.set(workspace.id, entry);
    this.metrics.swarmTaskRejections.inc({ reason: failure.reason });
    const context = { workspaceId: workspace.id, slug: workspace.slug, node: code.node, task: failure.task, reason: failure.reason, error: failure.message };
    if (before?.message !== failure.message) this.log.warning(context, `the editor of ${workspace.slug} could not run on node ${node}: ${failure.message}`);
    if (failure.reason !== 'network' || !this.runtime.repairNetwork) return;
    try {
      const repaired = await this.runtime.repairNetwork(code.id, this.network);
      entry.repairError = undefined;
      if (!repaired) return;
      entry.text = `The server ${node} had stopped without shutting down, which left its network for editors broken; it was repaired, and your editor is starting again.`;
      if (repaired.renewed)
        this.log.info(
          { node: repaired.node, network: repaired.network },
          `repaired the workspace network on node ${repaired.node}: its engine had died without stopping and kept a dead bridge of the network (moby#37087); its workspaces now join ${repaired.network}`,
        );
    } catch (error) {
      if (this.signal?.aborted || error instanceof FencedOutError) throw error;
      const message = (error as Error).message;
      entry.text = `The server ${node} cannot start your editor: its network for editors was left broken when it stopped without shutting down, and repairing it failed (${message}). Your files are kept there; the operator has been told.`;
      if (before?.repairError !== message)
        this.log.error(
          { ...context, repairError: message },
          `the workspace network on node ${node} could not be repaired, so no editor starts there: ${message} (docs/swarm.md, "A node back from an unclean death")`,
        );
      entry.repairError = message;
    }
  }

  /** What the student's page and the panel say while the workspace's editor does not run after a failed task; undefined when none was seen. */
  text(workspaceId: string): string | undefined {
    return this.seen.get(workspaceId)?.text;
  }

  /** Forgets a workspace's failures (its editor runs, or it is gone). */
  forget(workspaceId: string): void {
    this.seen.delete(workspaceId);
  }
}
