import { Args } from '@oclif/core';
import { CLI_ACTOR } from '../../../store/audit.ts';
import { presentUser } from '../../../wire/presenters.ts';
import type { UserAnswer } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `users delete <email>`: deletes a user and their workspace and files (audited `user.delete`), after a confirmation. */
export default class UsersDelete extends CliCommand {
  static override description =
    'Delete a user, their sessions, and their workspace with its containers and files (the home volume). Asks first on a terminal; --yes for scripts. The last admin cannot be deleted. Back the workspace up first if its files matter (`backup`).';
  static override examples = ['<%= config.bin %> users delete ana@school.org', '<%= config.bin %> users delete ana@school.org --yes'];
  static override args = { email: Args.string({ description: "the user's email (or id)", required: true }) };
  static override flags = { yes: CliCommand.yesFlag };

  async run(): Promise<UserAnswer> {
    const { args, flags } = await this.parse(UsersDelete);
    const { store } = await this.controlPlane();
    const user = (await store.users.getByEmail(args.email)) ?? (await store.users.get(args.email));
    const what = user?.workspaceSlug ? ` and their workspace ${user.workspaceSlug} with all its files` : '';
    if (user) await this.confirm(`Delete ${user.email}${what}?`, flags.yes);
    const deleted = await store.users.delete(CLI_ACTOR, args.email);
    this.say(
      `Deleted ${deleted.email}${deleted.workspaceSlug ? `; workspace ${deleted.workspaceSlug} and its files are being removed` : ''}.${deleted.workspaceSlug ? await this.unattended() : ''}`,
    );
    return { user: presentUser(deleted) };
  }
}
