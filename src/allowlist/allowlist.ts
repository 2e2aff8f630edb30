/**
 * The sign-in allowlist: its entries, the file format and the match.
 *
 * File format (`DATA_DIR/allowlist.json`): a JSON object with exactly one key, `entries`, an array
 * of strings:
 *
 *     {"entries": ["coach@school.org", "school.org"]}
 *
 * An entry containing `@` is an email and admits exactly that address. Any other entry is a domain
 * and admits every email at exactly that domain (`school.org` admits `ana@school.org`, not
 * `ana@mail.school.org`). Entries are trimmed and lower-cased, duplicates are dropped, and the file
 * is written sorted. An empty list blocks everyone (SERVICE_ADMIN_EMAIL aside, see the watcher).
 */
import { ValidationError } from '../errors.ts';

/** A domain label: letters, digits and hyphens, 1-63 characters, not starting or ending with '-'. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** Longest entry, the longest usable email address (RFC 5321's path limit less the brackets). */
const MAX_LENGTH = 254;
/** Longest local part of an email (RFC 5321). */
const MAX_LOCAL_LENGTH = 64;

/** Thrown by parseAllowlist (and by AllowlistFile when the file on disk is malformed); the message names the problem. */
export class AllowlistFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AllowlistFormatError';
  }
}

/** Why `domain` is not a usable domain, or undefined when it is. */
function domainProblem(domain: string): string | undefined {
  if (!domain.includes('.')) return `"${domain}" is not a domain: it has no dot`;
  if (/[^a-z0-9.-]/.test(domain)) return `"${domain}" has characters a domain cannot have (letters, digits, hyphens and dots only; internationalised domains in their xn-- form)`;
  for (const label of domain.split('.')) {
    if (label === '') return `"${domain}" has an empty label (a dot at the start or end, or two dots in a row)`;
    if (label.length > 63) return `"${domain}" has a label longer than 63 characters`;
    if (!LABEL.test(label)) return `"${domain}" has a label starting or ending with '-'`;
  }
  return undefined;
}

/** Why the trimmed, lower-cased `entry` is not a valid entry, or undefined when it is. */
function entryProblem(entry: string): string | undefined {
  if (entry === '') return 'it is empty';
  if (entry.length > MAX_LENGTH) return `it is longer than ${MAX_LENGTH} characters`;
  if (/[\s\u0000-\u001f\u007f]/.test(entry)) return `"${entry}" contains whitespace or a control character`;
  const at = entry.split('@').length - 1;
  if (at === 0) return domainProblem(entry);
  if (at > 1) return `"${entry}" has more than one '@'`;
  const [local = '', domain = ''] = entry.split('@');
  if (local === '' && domain !== '' && domainProblem(domain) === undefined) return `"${entry}" is not an email; for a whole domain, use the bare domain "${domain}"`;
  if (local === '') return `"${entry}" starts with '@'`;
  if (domain === '') return `"${entry}" ends with '@'`;
  if (local.length > MAX_LOCAL_LENGTH) return `"${entry}" has a part before '@' longer than ${MAX_LOCAL_LENGTH} characters`;
  return domainProblem(domain);
}

/**
 * Trims and lower-cases an email or domain and validates it; throws a 400 ValidationError
 * (code `invalid_allowlist_entry`) naming the problem when it is not a usable entry.
 */
export function normalizeEntry(input: string): string {
  const entry = input.trim().toLowerCase();
  const problem = entryProblem(entry);
  if (problem !== undefined) throw ValidationError(`Invalid allowlist entry: ${problem}.`, 'invalid_allowlist_entry');
  return entry;
}

/** Parses and validates the contents of an allowlist file; returns its entries normalised, deduplicated and sorted, or throws AllowlistFormatError. */
export function parseAllowlist(text: string): string[] {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new AllowlistFormatError(`not valid JSON (${(error as Error).message}); expected {"entries": ["coach@school.org", "school.org"]}`);
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new AllowlistFormatError('not a JSON object; expected {"entries": ["coach@school.org", "school.org"]}');
  }
  const keys = Object.keys(document);
  const unknown = keys.filter((key) => key !== 'entries');
  if (unknown.length > 0) throw new AllowlistFormatError(`unexpected key ${unknown.map((key) => JSON.stringify(key)).join(', ')}; the only key is "entries"`);
  const list = (document as { entries?: unknown }).entries;
  if (!Array.isArray(list)) throw new AllowlistFormatError('no "entries" array; expected {"entries": ["coach@school.org", "school.org"]}');
  const entries = new Set<string>();
  for (const [index, item] of list.entries()) {
    if (typeof item !== 'string') throw new AllowlistFormatError(`entries[${index}] is not a string`);
    const entry = item.trim().toLowerCase();
    const problem = entryProblem(entry);
    if (problem !== undefined) throw new AllowlistFormatError(`entries[${index}] is invalid: ${problem}`);
    entries.add(entry);
  }
  return [...entries].sort();
}

/** Serialises entries in the file format (normalised, deduplicated, sorted, one per line, trailing newline). */
export function formatAllowlist(entries: readonly string[]): string {
  return `${JSON.stringify({ entries: [...new Set(entries)].sort() }, null, 2)}\n`;
}

/** Whether `email` is admitted: it (lower-cased) is an entry, or the domain after its last '@' is. An empty list admits no one. */
export function isAllowed(entries: readonly string[], email: string): boolean {
  const address = email.trim().toLowerCase();
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return false;
  return entries.includes(address) || entries.includes(address.slice(at + 1));
}
