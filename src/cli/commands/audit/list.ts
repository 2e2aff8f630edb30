import { Flags } from '@oclif/core';
import { presentAuditPage } from '../../../wire/presenters.ts';
import type { AuditPage } from '../../../wire/schemas.ts';
import { CliCommand } from '../../command.ts';
import { parseDateFlag } from '../../dates.ts';

/** `audit list`: the audit log with the admin API's filters, newest first; `--before` pages. */
export default class AuditList extends CliCommand {
  static override description = "Show the audit log, newest first, with the admin API's filters. Page with --before <smallest id shown>.";
  static override examples = [
    '<%= config.bin %> audit list',
    '<%= config.bin %> audit list --action user. --since 2026-09-01',
    '<%= config.bin %> audit list --actor coach@ --limit 200 --json',
  ];
  static override flags = {
    action: Flags.string({ description: 'only actions starting with this (user., allowlist.add)' }),
    actor: Flags.string({ description: 'only actors whose email contains this (case-insensitive)' }),
    since: Flags.string({ description: 'only entries at or after this date or date-time' }),
    until: Flags.string({ description: 'only entries before this date or date-time' }),
    before: Flags.integer({ description: 'only entries with an id below this one (the cursor of the next page)', min: 1 }),
    limit: Flags.integer({ description: 'how many entries at most', default: 50, min: 1, max: 500 }),
  };

  async run(): Promise<AuditPage> {
    const { flags } = await this.parse(AuditList);
    const page = await (
      await this.controlPlane()
    ).store.audit.list({
      action: flags.action,
      actor: flags.actor,
      before: flags.before,
      since: flags.since === undefined ? undefined : parseDateFlag(flags.since, 'since'),
      until: flags.until === undefined ? undefined : parseDateFlag(flags.until, 'until'),
      limit: flags.limit,
    });
    const answer = presentAuditPage(page);
    const { entries } = answer;
    this.table(
      entries,
      {
        id: (entry) => String(entry.id),
        time: (entry) => entry.timestamp,
        actor: (entry) => entry.actor.email,
        action: (entry) => entry.action,
        target: (entry) => `${entry.target.kind} ${entry.target.id}`,
        details: (entry) => (entry.metadata ? JSON.stringify(entry.metadata) : ''),
      },
      'No audit entries match.',
    );
    if (page.nextCursor !== null) this.say(`More: --before ${page.nextCursor}`);
    return answer;
  }
}
