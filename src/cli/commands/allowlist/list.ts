import type { Allowlist } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';

/** `allowlist list`: the entries of the allowlist file, and the SERVICE_ADMIN_EMAIL ones admitted besides. */
export default class AllowlistList extends CliCommand {
  static override description = 'List who may sign in: the emails and domains of the allowlist file, and the SERVICE_ADMIN_EMAIL emails admitted besides.';
  static override examples = ['<%= config.bin %> allowlist list', '<%= config.bin %> allowlist list --json'];
  static override opensDatabase = false;

  async run(): Promise<Allowlist> {
    await this.parse(AllowlistList);
    // The file alone: no database to open for it.
    const kind = (entry: string) => (entry.includes('@') ? ('email' as const) : ('domain' as const));
    // As GET /admin/allowlist answers: the file's entries, and SERVICE_ADMIN_EMAIL's admitted whatever it says.
    const answer = { entries: await this.allowlistFile().read(), implicit: this.settings().serviceAdminEmails };
    this.table(
      [
        ...answer.entries.map((entry) => ({ entry, kind: kind(entry), source: 'file' })),
        ...answer.implicit.map((entry) => ({ entry, kind: kind(entry), source: 'SERVICE_ADMIN_EMAIL' })),
      ],
      { entry: (row) => row.entry, kind: (row) => row.kind, source: (row) => row.source },
      'No one is on the allowlist: add an email or a domain with `allowlist add`.',
    );
    return answer;
  }
}
