import { Args } from '@oclif/core';
import { AppError } from '../../../errors.ts';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { CliCommand } from '../../command.ts';

/** `nodes drain <node>`: asks for a swarm node to be emptied (audited `node.drain`); the running control plane moves its workspaces. */
export default class NodesDrain extends CliCommand {
  static override description =
    'Drain a swarm node: nothing new is placed there, and each of its workspaces moves to another node with a fresh backup of its home (its editor stops for the move). The running control plane does the moving; `nodes list` shows it, `nodes undrain` takes the node back.';
  static override examples = ['<%= config.bin %> nodes drain worker-2'];
  static override args = { node: Args.string({ description: 'the node, by name (see nodes list)', required: true }) };

  async run(): Promise<{ node: string; drained: boolean }> {
    const { args } = await this.parse(NodesDrain);
    if (this.settings().runtime.kind !== 'swarm')
      throw new AppError(400, 'not_a_swarm', 'Draining is for workspaces on a swarm (RUNTIME=swarm): one Docker Engine has no nodes to drain.');
    const { store } = await this.controlPlane();
    if (!(await store.nodes.known(args.node))) {
      const names = (await store.nodes.list()).map((node) => node.name);
      throw new AppError(
        404,
        'node_not_found',
        `No node named ${args.node}${names.length > 0 ? ` (the nodes: ${names.join(', ')})` : ': no node is recorded yet (the control plane records them once it runs)'}.`,
      );
    }
    const drained = await store.nodes.drain(CLI_ACTOR, args.node);
    this.say(
      drained
        ? `Node ${args.node} is draining: its workspaces move to other nodes (see nodes list).${await this.unattended()}`
        : `Node ${args.node} was already draining.`,
    );
    return { node: args.node, drained };
  }
}
