import { CliCommand } from '../../command.ts';

/** `cap get`: the effective cap on running workspace containers and where it comes from. */
export default class CapGet extends CliCommand {
  static override description = 'Show the cap on running workspace containers: the runtime override, or MAX_ACTIVE_CONTAINERS.';
  static override examples = ['<%= config.bin %> cap get'];

  async run(): Promise<{ value: number; source: 'override' | 'environment' }> {
    await this.parse(CapGet);
    const cap = await (await this.controlPlane()).store.settings.cap();
    this.say(`${cap.value} (${cap.source === 'override' ? 'set at runtime' : 'MAX_ACTIVE_CONTAINERS'})`);
    return cap;
  }
}
