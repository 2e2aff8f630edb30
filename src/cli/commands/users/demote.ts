import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { presentUser } from '../../../wire/presenters.ts';
import type { UserChange } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `users demote <email>`: removes admin, keeping them signed in as a student (audited `user.demote`); never the last admin (exit 4). */
export default class UsersDemote extends CliCommand {
  static override description = 'Remove admin from a user; they stay signed in, as a student. The last admin cannot be demoted.';
  static override examples = ['<%= config.bin %> users demote coach@school.org'];
  static override args = { email: Args.string({ description: "the user's email (or id)", required: true }) };

  async run(): Promise<UserChange> {
    const { args } = await this.parse(UsersDemote);
    const { user, changed } = await (await this.controlPlane()).store.users.demote(CLI_ACTOR, args.email);
    this.say(changed ? `${user.email} is no longer an admin.` : `${user.email} is not an admin.`);
    return { user: presentUser(user), changed };
  }
}
