import { ValidationError } from '../errors.ts';

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/**
 * Parses a date a flag was given: `YYYY-MM-DD` (midnight UTC) or an ISO 8601 date-time with its
 * time zone (`2026-09-01T08:00:00Z`, `2026-09-01T10:00+02:00`). Anything else, or a date that does
 * not exist, is a usage error naming the flag.
 */
export function parseDateFlag(text: string, flag: string): Date {
  const trimmed = text.trim();
  const date = DATE.test(trimmed) ? new Date(`${trimmed}T00:00:00Z`) : DATE_TIME.test(trimmed) ? new Date(trimmed) : undefined;
  // `2026-02-30` parses (as March 2): a date that does not exist is refused too.
  if (!date || Number.isNaN(date.getTime()) || (DATE.test(trimmed) && date.toISOString().slice(0, 10) !== trimmed)) {
    throw ValidationError(
      'invalid_date',
      `--${flag} must be a date (2026-09-01, midnight UTC) or an ISO 8601 date-time with a time zone (2026-09-01T08:00:00Z); got ${JSON.stringify(text)}.`,
    );
  }
  return date;
}
