import { CliCommand } from '../../command.ts';

const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;

/** `nodes list`: the nodes workspaces run on, as the leader last saw them, with drains and workspaces. */
export default class NodesList extends CliCommand {
  static override description =
    'List the nodes workspaces run on, as the running control plane last saw them: state, availability, a drain asked for, workspaces there, and memory left unreserved. One Docker Engine is one node.';
  static override examples = ['<%= config.bin %> nodes list', '<%= config.bin %> nodes list --json'];

  async run(): Promise<{
    nodes: {
      name: string;
      state: string;
      availability: string;
      drainRequestedAt: string | null;
      runningWorkspaces: number;
      workspaces: number;
      memoryBytes: number;
      freeMemoryBytes: number;
      seenAt: string;
    }[];
  }> {
    await this.parse(NodesList);
    const nodes = (await (await this.controlPlane()).store.nodes.list()).map((node) => ({
      name: node.name,
      state: node.reachable || node.state !== 'ready' ? node.state : 'ready, engine not answering',
      availability: node.availability,
      drainRequestedAt: node.drainRequestedAt?.toISOString() ?? null,
      runningWorkspaces: node.runningWorkspaces,
      workspaces: node.workspaces,
      memoryBytes: node.memoryBytes,
      freeMemoryBytes: Math.max(0, node.memoryBytes - node.reservedMemoryBytes),
      seenAt: node.seenAt.toISOString(),
    }));
    this.table(
      nodes,
      {
        node: (n) => n.name,
        state: (n) => n.state,
        availability: (n) => (n.drainRequestedAt ? `${n.availability} (drain asked ${n.drainRequestedAt})` : n.availability),
        running: (n) => String(n.runningWorkspaces),
        workspaces: (n) => String(n.workspaces),
        'memory free': (n) => `${gib(n.freeMemoryBytes)} of ${gib(n.memoryBytes)}`,
        seen: (n) => n.seenAt,
      },
      'No node recorded yet: the control plane records the nodes once it runs (its leader looks every few seconds).',
    );
    return { nodes };
  }
}
