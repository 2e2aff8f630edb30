import { presentUser } from '../../../wire/presenters.ts';
import type { UserList } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `users list`: ID, name, email, role and workspace slug of every user. */
export default class UsersList extends CliCommand {
  static override description = 'List users: ID, name, email, role and workspace slug. A user exists once they have signed in.';
  static override examples = ['<%= config.bin %> users list', '<%= config.bin %> users list --json'];

  async run(): Promise<UserList> {
    await this.parse(UsersList);
    const users = (await (await this.controlPlane()).store.users.list()).map(presentUser);
    this.table(
      users,
      { id: (u) => u.id, name: (u) => u.name || '—', email: (u) => u.email, role: (u) => u.role, workspace: (u) => u.workspaceSlug ?? '—' },
      'No users yet: a user exists once they have signed in.',
    );
    return { users };
  }
}
