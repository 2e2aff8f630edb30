/**
 * The usage report's rules: the span asked (its defaults, and an empty one refused) and its CSV file
 * (RFC 4180 quoting; a student's own text that a spreadsheet would take for a formula is shown as
 * text).
 */
import { DEFAULT_USAGE_DAYS, usageSpan } from '../../src/store/usage.ts';
import { csvField, usageCsv } from '../../src/wire/presenters.ts';

const now = new Date('2026-11-29T12:00:00Z');

describe('usageSpan', () => {
  it(`ends now and starts ${DEFAULT_USAGE_DAYS} days before when nothing is asked`, () => {
    expect(usageSpan(undefined, undefined, now)).toEqual({ since: new Date('2026-10-30T12:00:00Z'), until: now });
  });
  it(`starts ${DEFAULT_USAGE_DAYS} days before the end asked`, () => {
    expect(usageSpan(undefined, new Date('2026-11-01T00:00:00Z'), now).since).toEqual(new Date('2026-10-02T00:00:00Z'));
  });
  it('keeps a span asked', () => {
    const since = new Date('2026-09-01T00:00:00Z');
    expect(usageSpan(since, undefined, now)).toEqual({ since, until: now });
  });
  it('refuses an empty span (400 invalid_span)', () => {
    expect(() => usageSpan(now, now, now)).toThrow(expect.objectContaining({ code: 'invalid_span', status: 400 }));
    expect(() => usageSpan(new Date('2026-12-01T00:00:00Z'), undefined, now)).toThrow(/must be before until/);
  });
});

describe('csvField', () => {
  it('writes plain text and numbers as they are', () => {
    expect(csvField('Ada Lovelace')).toBe('Ada Lovelace');
    expect(csvField(12)).toBe('12');
  });
  it('quotes a field with a comma, a quote or a line end, doubling its quotes', () => {
    expect(csvField('Lovelace, Ada')).toBe('"Lovelace, Ada"');
    expect(csvField('Ada "the first" L')).toBe('"Ada ""the first"" L"');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
  });
  it('shows what a spreadsheet would take for a formula as text', () => {
    expect(csvField('=HYPERLINK("http://evil","x")')).toBe(`"'=HYPERLINK(""http://evil"",""x"")"`);
    for (const start of ['+', '-', '@', '\t', '\r']) expect(csvField(`${start}1`).includes(`'${start}1`)).toBe(true);
  });
});

describe('usageCsv', () => {
  it('has a header and one CRLF line per student, hours to two decimals and never seen empty', () => {
    const csv = usageCsv({
      since: '2026-11-01T00:00:00.000Z',
      until: '2026-11-29T00:00:00.000Z',
      students: [
        {
          student: { id: 'a', name: 'Ada', email: 'ada@school.test' },
          workspaceSeconds: 5400,
          runs: 7,
          failedBuilds: 2,
          lastSeenAt: '2026-11-28T10:00:00.000Z',
        },
        { student: { id: 'b', name: '', email: 'bo@school.test' }, workspaceSeconds: 0, runs: 0, failedBuilds: 0, lastSeenAt: null },
      ],
    });
    expect(csv).toBe(
      'email,name,workspace_hours,runs,failed_builds,last_seen\r\nada@school.test,Ada,1.50,7,2,2026-11-28T10:00:00.000Z\r\nbo@school.test,,0.00,0,0,\r\n',
    );
  });
});
