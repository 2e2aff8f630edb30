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
 * `ana@mail.school.org`). What an entry may contain is the one rule of src/identity/email.ts (the
 * same that sign-in applies to a provider's email): an internationalised domain is kept in its
 * ASCII `xn--` form, and IP addresses, control characters and ill-formed text are refused. Entries
 * are trimmed and lower-cased, duplicates are dropped, and the file is written sorted. An empty
 * list blocks everyone (SERVICE_ADMIN_EMAIL aside, see the watcher).
 */
import { ValidationError } from '../errors.ts';
import { canonicalEmail, checkDomainName, checkEmail, MAX_EMAIL_LENGTH, type Checked } from '../identity/email.ts';

/** Thrown by parseAllowlist (and by AllowlistFile when the file on disk is malformed); the message names the problem. */
export class AllowlistFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AllowlistFormatError';
  }
}

/** The stored form of the trimmed `entry` (an email or a domain), or why it is not a valid entry. */
function checkEntry(entry: string): Checked {
  if (entry === '') return { problem: 'it is empty' };
  if (entry.length > MAX_EMAIL_LENGTH) return { problem: `it is longer than ${MAX_EMAIL_LENGTH} characters` };
  if (!entry.includes('@')) return checkDomainName(entry);
  const at = entry.indexOf('@');
  const domain = entry.slice(at + 1);
  if (at === 0 && domain !== '' && !domain.includes('@') && 'value' in checkDomainName(domain)) {
    return { problem: `"${entry.toLowerCase()}" is not an email; for a whole domain, use the bare domain "${domain.toLowerCase()}"` };
  }
  return checkEmail(entry);
}

/**
 * Trims and lower-cases an email or domain, validates it and returns its stored form (the domain in
 * its ASCII form); throws a 400 ValidationError
 * (code `invalid_allowlist_entry`) naming the problem when it is not a usable entry.
 */
export function normalizeEntry(input: string): string {
  const checked = checkEntry(input.trim());
  if ('problem' in checked) throw ValidationError('invalid_allowlist_entry', `Invalid allowlist entry: ${checked.problem}.`);
  return checked.value;
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
    const checked = checkEntry(item.trim());
    if ('problem' in checked) throw new AllowlistFormatError(`entries[${index}] is invalid: ${checked.problem}`);
    entries.add(checked.value);
  }
  return [...entries].toSorted();
}

/** Serialises entries in the file format (normalised, deduplicated, sorted, one per line, trailing newline). */
export function formatAllowlist(entries: readonly string[]): string {
  return `${JSON.stringify({ entries: [...new Set(entries)].toSorted() }, null, 2)}\n`;
}

/**
 * Whether `email` is admitted by the entries: it is a valid email (never trimmed) and its stored form
 * is an entry, or its domain is. An empty list admits no one.
 */
export function isAllowed(entries: readonly string[], email: string): boolean {
  const address = canonicalEmail(email);
  if (address === undefined) return false;
  return entries.includes(address) || entries.includes(address.slice(address.indexOf('@') + 1));
}

/** SERVICE_ADMIN_EMAIL's emails in their stored form (email.ts), as sign-in compares emails. */
export function serviceAdmins(emails: readonly string[]): string[] {
  return emails.map((email) => canonicalEmail(email.trim()) ?? email.trim().toLowerCase());
}

/**
 * The one rule of who may sign in (through a provider, a sign-in link or the proxy's checks): an
 * email of SERVICE_ADMIN_EMAIL (`admins`, in stored form: serviceAdmins), whatever the file says,
 * or one the allowlist's `entries` admit. The email is compared in its stored form and never
 * trimmed: ` ada@school.org` is nobody.
 */
export function maySignIn(email: string, admitted: { admins: readonly string[]; entries: readonly string[] }): boolean {
  const address = canonicalEmail(email);
  if (address === undefined) return false;
  return admitted.admins.includes(address) || isAllowed(admitted.entries, address);
}
