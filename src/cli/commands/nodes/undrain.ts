import { Args } from '@oclif/core';
import { AppError } from '../../../errors.ts';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { CliCommand } from '../../command.ts';

/** `nodes undrain <node>`: takes a drained node back (audited `node.undrain`): workspaces may be placed there again. */
export default class NodesUndrain extends CliCommand {
  static override description = 'Take a drained node back: new workspaces may be placed there again (those moved off it stay where they are).';
  static override examples = ['<%= config.bin %> nodes undrain worker-2'];
  static override args = { node: Args.string({ description: 'the node, by name (see nodes list)', required: true }) };

  async run(): Promise<{ node: string; undrained: boolean }> {
    const { args } = await this.parse(NodesUndrain);
    const undrained = await (await this.controlPlane()).store.nodes.undrain(CLI_ACTOR, args.node);
    if (!undrained) throw new AppError(409, 'not_draining', `Node ${args.node} is not draining: nothing was changed.`);
    this.say(`Node ${args.node} is taken back: new workspaces may be placed there again.${await this.unattended()}`);
    return { node: args.node, undrained };
  }
}
