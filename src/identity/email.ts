/**
 * What an email address and a domain may contain: the one rule of the control plane, applied alike
 * to the emails identity providers vouch for, to allowlist entries (the API, the CLI and the file)
 * and to the emails users are stored and looked up by.
 *
 * - Well-formed Unicode (no lone surrogates), with no whitespace, control or invisible format
 *   character anywhere (nothing is trimmed here: text with surrounding spaces is refused).
 * - An email is `local@domain` with exactly one `@`; the local part is 1-64 characters.
 * - A domain has at least two labels of letters, digits and hyphens (1-63 characters each, no
 *   hyphen at either end). Internationalised domains are accepted in Unicode or in their ASCII
 *   (`xn--`) form and always kept in the ASCII form (`url.domainToASCII`, UTS #46); a Unicode
 *   spelling that IDNA would map to another one (full-width letters, a soft hyphen) is refused
 *   rather than silently turned into that other domain.
 * - No IP address literals: nothing in brackets, and a last label that is a number (`1.2.3.4`,
 *   `school.0x7f`, which URL parsers read as IPv4 addresses) is refused.
 *
 * Everything is lower-cased, as emails are stored and compared.
 */
import { domainToASCII, domainToUnicode } from 'node:url';

/** A domain label: letters, digits and hyphens, 1-63 characters, not starting or ending with '-'. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** Whitespace, control characters (C0, DEL, C1) and invisible format characters (zero-width, bidi overrides). */
const HIDDEN = /[\s\p{Cc}\p{Cf}]/u;
/** Printable ASCII characters no domain may hold (control characters are refused before; non-ASCII ones are IDNA's to judge). */
const NOT_DOMAIN_ASCII = /[\u0020-\u002c/\u003a-\u0060\u007b-\u007e]/;
/** A last label that URL parsers read as a number, i.e. the domain as an IPv4 address. */
const NUMERIC_LABEL = /^(?:\d+|0x[0-9a-f]*)$/;
/** Longest email address (RFC 5321's path limit less the brackets). */
export const MAX_EMAIL_LENGTH = 254;
/** Longest local part of an email (RFC 5321). */
const MAX_LOCAL_LENGTH = 64;

/** A domain or email in its stored form, or why it has none. */
export type Checked = { value: string } | { problem: string };

/** Why `text` cannot be part of an email or domain (ill-formed, whitespace, control characters), or undefined. */
export function textProblem(text: string): string | undefined {
  if (!text.isWellFormed()) return `${JSON.stringify(text)} is not well-formed text (it holds a lone surrogate)`;
  if (HIDDEN.test(text)) return `${JSON.stringify(text)} contains whitespace or a control character`;
  return undefined;
}

/** Checks a lower-cased domain (its text already checked) and returns its ASCII form. */
function checkDomain(domain: string): Checked {
  if (domain.startsWith('[') || domain.endsWith(']')) return { problem: `"${domain}" is an IP address literal; only domain names are allowed` };
  if (!domain.includes('.')) return { problem: `"${domain}" is not a domain: it has no dot` };
  if (NOT_DOMAIN_ASCII.test(domain)) return { problem: `"${domain}" has characters a domain cannot have (letters, digits, hyphens and dots only)` };
  const labels = domain.split('.');
  if (labels.includes('')) return { problem: `"${domain}" has an empty label (a dot at the start or end, or two dots in a row)` };
  if (NUMERIC_LABEL.test(labels.at(-1)!)) return { problem: `"${domain}" is an IP address (its last label is a number); only domain names are allowed` };
  const ascii = domainToASCII(domain);
  // An xn-- label must decode, and encode back to itself (domainToASCII leaves a bad one as it is).
  const unicode = ascii === '' ? '' : domainToUnicode(ascii);
  if (ascii === '' || unicode.split('.').some((label) => label.startsWith('xn--')) || domainToASCII(unicode) !== ascii) {
    return { problem: `"${domain}" is not a valid internationalised domain` };
  }
  if (ascii !== domain && unicode !== domain) {
    return { problem: `"${domain}" is not in its usual form; write it as "${unicode}" if that is the domain meant` };
  }
  for (const label of ascii.split('.')) {
    if (label.length > 63) return { problem: `"${domain}" has a label longer than 63 characters` };
    if (!LABEL.test(label)) return { problem: `"${domain}" has a label starting or ending with '-'` };
  }
  return { value: ascii };
}

/** A domain (lower-cased, in its ASCII form) or why it is not one. */
export function checkDomainName(input: string): Checked {
  const domain = input.toLowerCase();
  const problem = textProblem(domain);
  return problem === undefined ? checkDomain(domain) : { problem };
}

/** An email address (lower-cased, its domain in ASCII form) or why it is not one. Never trims. */
export function checkEmail(input: string): Checked {
  const email = input.toLowerCase();
  const problem = textProblem(email);
  if (problem !== undefined) return { problem };
  const parts = email.split('@');
  if (parts.length === 1) return { problem: `"${email}" is not an email: it has no '@'` };
  if (parts.length > 2) return { problem: `"${email}" has more than one '@'` };
  const [local = '', domain = ''] = parts;
  if (local === '') return { problem: `"${email}" starts with '@'` };
  if (domain === '') return { problem: `"${email}" ends with '@'` };
  if (local.length > MAX_LOCAL_LENGTH) return { problem: `"${email}" has a part before '@' longer than ${MAX_LOCAL_LENGTH} characters` };
  const checked = checkDomain(domain);
  if ('problem' in checked) return checked;
  const value = `${local}@${checked.value}`;
  if (value.length > MAX_EMAIL_LENGTH) return { problem: `it is longer than ${MAX_EMAIL_LENGTH} characters` };
  return { value };
}

/** The stored form of an email (see checkEmail), or undefined when it is not a valid email. */
export function canonicalEmail(input: string): string | undefined {
  const checked = checkEmail(input);
  return 'value' in checked ? checked.value : undefined;
}

/**
 * How emails are stored and compared: the one rule of this file (lower-case, the domain
 * in its ASCII form), never trimmed, so that no email is ever read as someone else's. Text that is
 * not a valid email is compared lower-cased as it is (it matches no one).
 */
export const normalEmail = (email: string) => canonicalEmail(email) ?? email.toLowerCase();
