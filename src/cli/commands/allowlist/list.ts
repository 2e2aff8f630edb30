import { CliCommand } from '../../command.ts';

/** `allowlist list`: the entries of the allowlist file, and the SERVICE_ADMIN_EMAIL ones admitted besides. */
export default class AllowlistList extends CliCommand {
  static override description = 'List who may sign in: the emails and domains of the allowlist file, and the SERVICE_ADMIN_EMAIL emails admitted besides.';
  static override examples = ['<%= config.bin %> allowlist list', '<%= config.bin %> allowlist list --json'];
  static override opensDatabase = false;

  async run(): Promise<{ entries: { entry: string; kind: 'email' | 'domain'; source: 'file' | 'SERVICE_ADMIN_EMAIL' }[] }> {
    await this.parse(AllowlistList);
    // The file alone: no database to open for it.
    const kind = (entry: string) => (entry.includes('@') ? ('email' as const) : ('domain' as const));
    const entries = [
      ...(await this.allowlistFile().read()).map((entry) => ({ entry, kind: kind(entry), source: 'file' as const })),
      ...this.settings().serviceAdminEmails.map((entry) => ({ entry, kind: kind(entry), source: 'SERVICE_ADMIN_EMAIL' as const })),
    ];
    this.table(
      entries,
      { entry: (row) => row.entry, kind: (row) => row.kind, source: (row) => row.source },
      'No one is on the allowlist: add an email or a domain with `allowlist add`.',
    );
    return { entries };
  }
}
