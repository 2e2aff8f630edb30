import { presentHelpRequest } from '../../../wire/presenters.ts';
import type { HelpQueue } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `help list`: the help queue, as the panel's (GET /admin/help): waiting and taken requests, oldest first. */
export default class HelpList extends CliCommand {
  static override description =
    "List the help queue: students' requests waiting or taken by a coach, oldest first, with the student, the workspace, the age, the place among the waiting and the coach coming.";
  static override examples = ['<%= config.bin %> help list', '<%= config.bin %> help list --json'];

  async run(): Promise<HelpQueue> {
    await this.parse(HelpList);
    const requests = await (await this.controlPlane()).store.help.queue();
    this.table(
      requests,
      {
        place: (r) => (r.place === null ? '' : String(r.place)),
        student: (r) => r.student.email ?? '',
        workspace: (r) => r.workspace.slug,
        waiting: (r) => `${Math.floor(r.ageSeconds / 60)} min`,
        state: (r) => (r.takenBy ? `taken by ${r.takenBy.email}` : r.state),
        message: (r) => r.message ?? '',
      },
      'No one is asking for help.',
    );
    return { requests: requests.map(presentHelpRequest) };
  }
}
