import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { presentUser } from '../../../wire/presenters.ts';
import type { UserChange } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `users promote <email>`: grants admin (audited `user.promote`); the user must exist (else exit 3). */
export default class UsersPromote extends CliCommand {
  static override description = 'Grant admin to a user who has signed in at least once.';
  static override examples = ['<%= config.bin %> users promote coach@school.org'];
  static override args = { email: Args.string({ description: "the user's email (or id)", required: true }) };

  async run(): Promise<UserChange> {
    const { args } = await this.parse(UsersPromote);
    const { user, changed } = await (await this.controlPlane()).store.users.promote(CLI_ACTOR, args.email);
    this.say(changed ? `${user.email} is now an admin.` : `${user.email} is already an admin.`);
    return { user: presentUser(user), changed };
  }
}
