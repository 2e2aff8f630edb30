import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { MAX_CAP } from '../../../store/settings.ts';
import { CliCommand } from '../../command.ts';

/** `cap set <n>`: stores the runtime cap override (audited `config.max-active-containers`); effective at once, stops nothing. */
export default class CapSet extends CliCommand {
  static override description =
    'Set the cap on running workspace containers (0 to 10000), in force at once and kept across restarts. Lowering it stops nothing.';
  static override examples = ['<%= config.bin %> cap set 25'];
  static override args = { value: Args.integer({ description: 'the new cap', required: true, min: 0, max: MAX_CAP }) };

  async run(): Promise<{ value: number; source: 'override'; previous: number }> {
    const { args } = await this.parse(CapSet);
    const change = await (await this.controlPlane()).store.settings.setCap(CLI_ACTOR, args.value);
    this.say(`The cap is ${change.to} (was ${change.from}).`);
    return { value: change.to, source: 'override', previous: change.from };
  }
}
