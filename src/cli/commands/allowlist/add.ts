import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { CliCommand } from '../../command.ts';

/** `allowlist add <email-or-domain>`: admits an email, or every email at a domain (audited `allowlist.add`). */
export default class AllowlistAdd extends CliCommand {
  static override description = 'Admit an email, or every email at a domain (an entry without @). A running server applies it at once.';
  static override examples = ['<%= config.bin %> allowlist add ana@school.org', '<%= config.bin %> allowlist add school.org'];
  static override args = { entry: Args.string({ description: 'an email (ana@school.org) or a domain (school.org)', required: true }) };

  async run(): Promise<{ entry: string; added: boolean }> {
    const { args } = await this.parse(AllowlistAdd);
    const result = await (await this.controlPlane()).store.allowlist.add(CLI_ACTOR, args.entry);
    this.say(result.added ? `Added ${result.entry} to the allowlist.` : `${result.entry} is already on the allowlist.`);
    return result;
  }
}
