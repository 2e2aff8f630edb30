import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { CliCommand } from '../../command.ts';

/** `allowlist remove <email-or-domain>` (audited `allowlist.remove`); not there → exit 3. */
export default class AllowlistRemove extends CliCommand {
  static override description = 'Remove an email or a domain from the allowlist. Students it admitted lose access at once (admins excepted).';
  static override examples = ['<%= config.bin %> allowlist remove ana@school.org', '<%= config.bin %> allowlist remove school.org'];
  static override args = { entry: Args.string({ description: 'the email or domain, as listed', required: true }) };

  async run(): Promise<{ entry: string; removed: boolean }> {
    const { args } = await this.parse(AllowlistRemove);
    const result = await (await this.controlPlane()).store.allowlist.remove(CLI_ACTOR, args.entry);
    this.say(`Removed ${result.entry} from the allowlist.`);
    return result;
  }
}
