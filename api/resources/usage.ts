/**
 * The usage report, for a coach's records and a school's: per student, over a span (by default the
 * last 30 days), the hours their workspace ran, the runs they started and the builds that failed,
 * and when they were last seen; as JSON and as a CSV file (spreadsheets; a student's own name cannot
 * become a formula: csvField). `cli usage --since <date>` prints the same.
 */
import Type from 'typebox';
import { DEFAULT_USAGE_DAYS, usageSpan } from '../../src/store/usage.ts';
import { presentUsage, usageCsv } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import type { Store } from '../../src/store/index.ts';
import { json, operation } from '../operation.ts';

const span = Type.Object(
  {
    since: Type.Optional(Type.String({ format: 'date-time', description: `From (inclusive); default: ${DEFAULT_USAGE_DAYS} days before \`until\`.` })),
    until: Type.Optional(Type.String({ format: 'date-time', description: 'To (exclusive); default: now.' })),
  },
  { additionalProperties: false },
);

const read = async (store: Pick<Store, 'usage'>, query: { since?: string; until?: string }) => {
  const asked = usageSpan(query.since === undefined ? undefined : new Date(query.since), query.until === undefined ? undefined : new Date(query.until));
  return presentUsage(await store.usage.report(asked), asked);
};

export const report = operation({
  method: 'get',
  path: '/admin/usage',
  summary: `Every student's usage from \`since\` to \`until\` (default: the last ${DEFAULT_USAGE_DAYS} days): hours their workspace ran, runs, failed builds, last seen. 400 \`invalid_span\` when since is not before until.`,
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  query: span,
  errors: ['invalid_span'],
  responses: { 200: json(Wire.UsageReport, 'The report.') },
  handle: async ({ query }, { store }) => ({ status: 200, body: await read(store, query) }),
});

export const csvFile = operation({
  method: 'get',
  path: '/admin/usage.csv',
  summary: 'The usage report as a CSV file (email, name, workspace_hours, runs, failed_builds, last_seen), for a spreadsheet.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  query: span,
  errors: ['invalid_span'],
  responses: { 200: { file: 'text/csv', description: 'The report, one line per student.' } },
  handle: async ({ query, ctx }, { store }) => {
    const answer = await read(store, query);
    ctx.set('Content-Disposition', `attachment; filename="usage-${answer.since.slice(0, 10)}-to-${answer.until.slice(0, 10)}.csv"`);
    ctx.type = 'text/csv; charset=utf-8';
    ctx.body = usageCsv(answer);
  },
});
