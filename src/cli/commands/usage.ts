import { Flags } from '@oclif/core';
import { usageSpan } from '../../store/usage.ts';
import { presentUsage, usageCsv } from '../../wire/presenters.ts';
import type { UsageReport } from '../../wire/schemas.ts';
import { CliCommand } from '../command.ts';
import { parseDateFlag } from '../dates.ts';

/** `usage`: every student's usage over a span, as GET /admin/usage answers it (or its CSV file, with --csv). */
export default class Usage extends CliCommand {
  static override description =
    "Show every student's usage over a span (default: the last 30 days): the hours their workspace ran, the runs they started, the builds that failed, and when they were last seen.";
  static override examples = [
    '<%= config.bin %> usage --since 2026-09-01',
    '<%= config.bin %> usage --since 2026-09-01 --until 2026-10-01 --csv > usage.csv',
    '<%= config.bin %> usage --json',
  ];
  static override flags = {
    since: Flags.string({ description: 'from this date or date-time (default: 30 days before --until)' }),
    until: Flags.string({ description: 'to this date or date-time, not included (default: now)' }),
    csv: Flags.boolean({ description: 'print the report as CSV (as the panel downloads it)', default: false }),
  };

  async run(): Promise<UsageReport> {
    const { flags } = await this.parse(Usage);
    const span = usageSpan(
      flags.since === undefined ? undefined : parseDateFlag(flags.since, 'since'),
      flags.until === undefined ? undefined : parseDateFlag(flags.until, 'until'),
    );
    const report = presentUsage(await (await this.controlPlane()).store.usage.report(span), span);
    if (flags.csv) {
      this.say(usageCsv(report).trimEnd());
      return report;
    }
    this.say(`Usage from ${report.since} to ${report.until}:`);
    this.table(
      report.students,
      {
        student: (row) => (row.student.name ? `${row.student.name} <${row.student.email}>` : row.student.email),
        'workspace hours': (row) => (row.workspaceSeconds / 3600).toFixed(1),
        runs: (row) => String(row.runs),
        'failed builds': (row) => String(row.failedBuilds),
        'last seen': (row) => row.lastSeenAt ?? 'never',
      },
      'No students yet.',
    );
    return report;
  }
}
