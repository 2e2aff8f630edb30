import { untilAborted } from '../src/caller.ts';
import type { Change } from '../src/db/changes.ts';
import { engineAway, type RuntimeEnvironment, type RuntimeNodes, type RuntimeWorkloads } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Store } from '../src/store/index.ts';
import { Periodic } from './periodic.ts';

export interface NodeLifecycleOptions {
  store: Pick<Store, 'nodes'>;
  /** The nodes, and the editors on them (a controller's runtime: its calls end with its signal). */
  runtime: RuntimeNodes & Pick<RuntimeWorkloads, 'listContainers'> & Pick<RuntimeEnvironment, 'reachability'>;
  /** Logger of `control.containers`. */
  log: Logger;
  /** How long a node is down before its workspaces' homes are brought back elsewhere from their latest backup (NODE_LOST_SECONDS). */
  nodeLostMs: number;
  /** How often the nodes are looked at (drains asked for, nodes down). */
  nodeCheckMs: number;
  /** Where the workspaces a look finds are sent: the workspace controller's queue. */
  enqueue(workspaceId: string): void;
  /** Aborted when the workspace controller stops: a look under way ends quietly, and its store calls with it. */
  signal: AbortSignal;
}

/**
 * The node lifecycle of a swarm, one job of the workspace controller: it looks at the nodes every
 * NODE_CHECK interval (its timer) and on every drain asked for or taken back (the change feed's
 * `nodes` kind), records them for the operator's views, pauses a drained node and makes one whose
 * drain was taken back active again, and notes since when each node is down. It sends to the
 * workspace queue the workspaces whose editor is on a node they must leave (drained, or down past
 * NODE_LOST_SECONDS: their homes move, controllers/home-moves.ts) or on a node Swarm marked down or
 * ready again since the last look (their pages say so). The workspace reconcile asks it where a
 * node stands (`leaving`, `isDown`, `notReady`).
 */
export class NodeLifecycle {
  private readonly options: NodeLifecycleOptions;
  /** Nodes an operator asked to drain, by name (as last read). */
  private drained = new Set<string>();
  /** When each node not ready was first seen so, by name. */
  private readonly downSince = new Map<string, number>();
  /** Each node's state (Swarm's words) at the last look, by name. */
  private nodeStates = new Map<string, string>();
  private readonly timer: Periodic;

  constructor(options: NodeLifecycleOptions) {
    this.options = options;
    const { runtime, log, signal } = options;
    this.timer = new Periodic(
      () => this.check().then((keys) => keys.forEach((key) => options.enqueue(key))),
      options.nodeCheckMs,
      (error) => {
        // Stopping aborts the look under way, and an engine that cannot be reached is said by its reachability: nothing to say.
        if (!signal.aborted && !engineAway(runtime, error))
          log.warning({ error: (error as Error).message }, 'looking at the nodes failed; the next look tries again');
      },
    );
  }

  /** Its timer: a look now, then one every NODE_CHECK interval. */
  start(): void {
    this.timer.start({ immediately: true });
  }

  /** Stops its timer, after the look under way (aborted by the workspace controller's stop). */
  async stop(): Promise<void> {
    await this.timer.stop();
  }

  /** Its change trigger: a drain asked for or taken back (`nodes`) asks for a look now; the workspaces it finds are answered for the queue. */
  keysOfChange(change: Change): string[] | Promise<string[]> {
    return change.kind === 'nodes' ? this.check() : [];
  }

  /**
   * Looks at the nodes: records them (what the operator's views show), reads the drains asked for, pauses each drained node (nothing new is
   * placed there) and makes active again one no longer drained, and notes since when each node is
   * down. Answers the workspaces whose editor is on a node they must leave (drained, or down past
   * NODE_LOST_SECONDS), or on a node Swarm marked down or ready again since the last look (their
   * pages say so), for the queue. (Run every few seconds and on every drain asked for.)
   */
  check(): Promise<string[]> {
    return untilAborted(this.options.signal, () => this.look());
  }

  /** Why a workspace on this node must leave it: drained by an operator, or lost (down past NODE_LOST_SECONDS); undefined: it stays. */
  leaving(node: string | undefined): 'drained' | 'lost' | undefined {
    if (node === undefined) return undefined;
    const downSince = this.downSince.get(node);
    if (downSince !== undefined && Date.now() - downSince >= this.options.nodeLostMs) return 'lost';
    return this.drained.has(node) ? 'drained' : undefined;
  }

  /** Whether Swarm had the node down at the last look (its editors' tasks replaced there: nothing starts until it is back). */
  isDown(node: string): boolean {
    return this.nodeStates.get(node) === 'down';
  }

  /** Whether the runtime reports the node as not ready now; false when it cannot tell. */
  async notReady(node: string): Promise<boolean> {
    const state = (await this.options.runtime.nodes().catch(() => [])).find((candidate) => candidate.name === node)?.state;
    return state !== undefined && state !== 'ready';
  }

  private async look(): Promise<string[]> {
    const { store, runtime, log } = this.options;
    const [nodes, drains] = await Promise.all([runtime.nodes(), store.nodes.drains()]);
    await store.nodes.record(nodes);
    const before = this.drained;
    this.drained = new Set(drains.map((drain) => drain.node));
    const now = Date.now();
    // Marked down or back since the last look (a node first seen down is looked at by the start's full look).
    const turned = new Set(
      nodes
        .filter((node) => this.nodeStates.has(node.name) && (this.nodeStates.get(node.name) === 'down') !== (node.state === 'down'))
        .map((node) => node.name),
    );
    this.nodeStates = new Map(nodes.map((node) => [node.name, node.state]));
    for (const node of nodes) {
      if (node.state === 'ready') this.downSince.delete(node.name);
      else if (!this.downSince.has(node.name)) {
        this.downSince.set(node.name, now);
        log.warning(
          { node: node.name, state: node.state },
          `node ${node.name} is ${node.state}; its workspaces move if it is not back within ${Math.round(this.options.nodeLostMs / 1000)} s`,
        );
      }
      if (this.drained.has(node.name) && node.availability === 'active') {
        await runtime.setNodeAvailability(node.name, 'pause');
        log.info({ node: node.name }, `node ${node.name} drained: nothing new is placed there, and its workspaces move off it`);
      } else if (!this.drained.has(node.name) && before.has(node.name) && node.availability === 'pause') {
        await runtime.setNodeAvailability(node.name, 'active');
        log.info({ node: node.name }, `node ${node.name} taken back: workspaces may be placed there again`);
      }
    }
    const wanted = new Set(nodes.map((node) => node.name).filter((name) => turned.has(name) || this.leaving(name) !== undefined));
    if (wanted.size === 0) return [];
    const containers = await runtime.listContainers();
    return [
      ...new Set(
        containers.filter((container) => container.role === 'code' && container.node && wanted.has(container.node)).map((container) => container.workspaceId),
      ),
    ];
  }
}
