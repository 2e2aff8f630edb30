import { presentNode } from '../../../wire/presenters.ts';
import type { NodeList } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;

/** `nodes list`: the nodes workspaces run on, as the leader last saw them, with drains and workspaces. */
export default class NodesList extends CliCommand {
  static override description =
    'List the nodes workspaces run on, as the running control plane last saw them: state, availability, a drain asked for, workspaces there, and memory left unreserved. One Docker Engine is one node.';
  static override examples = ['<%= config.bin %> nodes list', '<%= config.bin %> nodes list --json'];

  async run(): Promise<NodeList> {
    await this.parse(NodesList);
    const records = await (await this.controlPlane()).store.nodes.list();
    this.table(
      records,
      {
        node: (n) => n.name,
        state: (n) => (n.reachable || n.state !== 'ready' ? n.state : 'ready, engine not answering'),
        availability: (n) => (n.drainRequestedAt ? `${n.availability} (drain asked ${n.drainRequestedAt.toISOString()})` : n.availability),
        running: (n) => String(n.runningWorkspaces),
        workspaces: (n) => String(n.workspaces),
        'memory free': (n) => `${gib(Math.max(0, n.memoryBytes - n.reservedMemoryBytes))} of ${gib(n.memoryBytes)}`,
        seen: (n) => n.seenAt.toISOString(),
      },
      'No node recorded yet: the control plane records the nodes once it runs (its leader looks every few seconds).',
    );
    // As the panel's overview lists them (presentNode).
    return { nodes: records.map(presentNode) };
  }
}
