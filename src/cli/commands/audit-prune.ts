import { Flags } from '@oclif/core';
import { SingleBar } from 'cli-progress';
import { ValidationError } from '../../errors.ts';
import { CLI_ACTOR } from '../../store/audit.ts';
import { CliCommand } from '../command.ts';
import { parseDateFlag } from '../dates.ts';

/**
 * `audit-prune --before <date> [--dry-run]`: deletes audit entries older than a date, in batches
 * that never hold the table against a running server's audit writes; the prune itself is audited
 * (`audit.prune`). `--dry-run` says how many and which would go.
 */
export default class AuditPrune extends CliCommand {
  static override description =
    'Delete audit entries older than a date (they accumulate until pruned). --dry-run shows how many and the oldest and newest that would go. Asks first on a terminal; --yes for scripts. The prune is audited itself (audit.prune).';
  static override examples = ['<%= config.bin %> audit-prune --before 2026-01-01 --dry-run', '<%= config.bin %> audit-prune --before 2026-01-01 --yes'];
  static override flags = {
    before: Flags.string({ description: 'delete entries older than this date (midnight UTC) or ISO 8601 date-time; not in the future', required: true }),
    'dry-run': Flags.boolean({ description: 'only say what would be deleted' }),
    yes: CliCommand.yesFlag,
  };

  async run(): Promise<{ before: string; count: number; oldest: string | null; newest: string | null; deleted: number; dryRun: boolean }> {
    const { flags } = await this.parse(AuditPrune);
    const before = parseDateFlag(flags.before, 'before');
    if (before.getTime() > Date.now()) throw ValidationError('invalid_date', `--before ${flags.before} is in the future; give a past date.`);
    const { store } = await this.controlPlane();
    const preview = await store.audit.previewPrune(before);
    const summary = {
      before: before.toISOString(),
      count: preview.count,
      oldest: preview.oldest?.toISOString() ?? null,
      newest: preview.newest?.toISOString() ?? null,
      deleted: 0,
      dryRun: flags['dry-run'],
    };
    const range = preview.count > 0 ? ` (from ${summary.oldest} to ${summary.newest})` : '';
    if (flags['dry-run'] || preview.count === 0) {
      this.say(
        `${preview.count} audit ${preview.count === 1 ? 'entry is' : 'entries are'} older than ${summary.before}${range}; ${flags['dry-run'] ? 'nothing was deleted (dry run)' : 'nothing to delete'}.`,
      );
      return summary;
    }
    await this.confirm(`Delete ${preview.count} audit entries older than ${summary.before}${range}?`, flags.yes);
    const bar =
      process.stderr.isTTY && !this.jsonEnabled() ? new SingleBar({ format: 'pruning [{bar}] {value}/{total} entries', stream: process.stderr }) : undefined;
    bar?.start(preview.count, 0);
    summary.deleted = await store.audit.prune(CLI_ACTOR, before, (deleted) => bar?.update(Math.min(deleted, preview.count)));
    bar?.stop();
    this.say(`Deleted ${summary.deleted} audit ${summary.deleted === 1 ? 'entry' : 'entries'} older than ${summary.before}.`);
    return summary;
  }
}
