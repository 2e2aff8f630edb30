import { AllowlistFormatError, formatAllowlist, isAllowed, maySignIn, normalizeEntry, parseAllowlist, serviceAdmins } from '../../src/allowlist/allowlist.ts';
import { AppError } from '../../src/errors.ts';

/** The error normalizeEntry throws for `input` (fails the test when it throws none). */
function entryError(input: string): AppError {
  try {
    normalizeEntry(input);
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error(`normalizeEntry(${JSON.stringify(input)}) did not throw`);
}

/** The message of the AllowlistFormatError parseAllowlist throws for `text`. */
function formatProblem(text: string): string {
  try {
    parseAllowlist(text);
  } catch (error) {
    if (error instanceof AllowlistFormatError) return error.message;
    throw error;
  }
  throw new Error(`parseAllowlist(${JSON.stringify(text)}) did not throw`);
}

describe('normalizeEntry', () => {
  it('should trim and lower-case an email', () => {
    expect(normalizeEntry('  Coach@School.ORG \n')).toBe('coach@school.org');
  });

  it('should accept domains with digits, hyphens and several labels', () => {
    expect(normalizeEntry('Mail-2.School.org')).toBe('mail-2.school.org');
    expect(normalizeEntry('xn--bcher-kva.example')).toBe('xn--bcher-kva.example');
  });

  it('should accept an email whose local part has dots, plus signs and digits', () => {
    expect(normalizeEntry('first.last+robotics42@school.org')).toBe('first.last+robotics42@school.org');
  });

  it.each([
    ['empty', '', /empty/],
    ['only whitespace', '   ', /empty/],
    ['whitespace inside an email', 'co ach@school.org', /whitespace/],
    ['whitespace inside a domain', 'school .org', /whitespace/],
    ['a control character', 'coach\u0000@school.org', /control character/],
    ['two @', 'a@b@school.org', /more than one '@'/],
    ['@ at the end', 'coach@', /ends with '@'/],
    ['a lone @', '@', /starts with '@'/],
    ['@ at the start of something that is no domain', '@nodot', /starts with '@'/],
    ['a domain without a dot', 'localhost', /no dot/],
    ['an email whose domain has no dot', 'coach@localhost', /no dot/],
    ['a domain with an underscore', 'sch_ool.org', /characters a domain cannot have/],
    ['a domain with symbols', 'bü$cher.example', /characters a domain cannot have/],
    ['a lone surrogate in an email', '\ud800@x.test', /not well-formed/],
    ['a lone surrogate in a domain', 'x\udc00.test', /not well-formed/],
    ['a C1 control character', 'coach\u0085x@school.org', /control character/],
    ['a zero-width space', 'co\u200bach@school.org', /control character/],
    ['a right-to-left override', 'coach@school\u202e.org', /control character/],
    ['an IPv4 address', '1.2.3.4', /IP address/],
    ['an IPv4 address in an email', 'coach@10.0.0.1', /IP address/],
    ['an IPv4 address in brackets', 'coach@[10.0.0.1]', /IP address/],
    ['an IPv6 address in brackets', 'coach@[::1]', /IP address/],
    ['a bracketed IPv6 address alone', '[2001:db8::1]', /IP address/],
    ['an all-numeric last label', 'school.123', /IP address/],
    ['a hexadecimal last label', 'school.0x7f', /IP address/],
    ['a Unicode domain in a form that maps to another (full-width letters)', 'ｓｃｈｏｏｌ.org', /not in its usual form/],
    ['an invalid punycode label', 'xn--a.example', /not a valid internationalised domain/],
    ['a label starting with a hyphen', '-school.org', /starting or ending with '-'/],
    ['a label ending with a hyphen', 'school-.org', /starting or ending with '-'/],
    ['two dots in a row', 'school..org', /empty label/],
    ['a trailing dot', 'school.org.', /empty label/],
    ['a label longer than 63 characters', `${'a'.repeat(64)}.org`, /longer than 63/],
    ['longer than 254 characters', `${Array.from({ length: 5 }, () => 'a'.repeat(60)).join('.')}.org`, /longer than 254/],
    ['a local part longer than 64 characters', `${'a'.repeat(65)}@school.org`, /before '@' longer than 64/],
  ])('should refuse %s', (_kind, input, message) => {
    const error = entryError(input);
    expect(error.status).toBe(400);
    expect(error.code).toBe('invalid_allowlist_entry');
    expect(error.message).toMatch(message);
  });

  it('should store an internationalised domain in its ASCII (xn--) form, alone and in an email', () => {
    expect(normalizeEntry('Bücher.Example')).toBe('xn--bcher-kva.example');
    expect(normalizeEntry('ana@bücher.example')).toBe('ana@xn--bcher-kva.example');
    expect(normalizeEntry('ana@xn--bcher-kva.example')).toBe('ana@xn--bcher-kva.example');
  });

  it('should refuse the @domain form and say to use the bare domain', () => {
    const error = entryError('@School.org');
    expect(error.code).toBe('invalid_allowlist_entry');
    expect(error.message).toMatch(/use the bare domain "school\.org"/);
  });
});

describe('parseAllowlist', () => {
  it('should normalise, deduplicate and sort the entries', () => {
    expect(parseAllowlist('{"entries": ["school.org", " Coach@School.org", "coach@school.org", "SCHOOL.ORG", "a.org"]}')).toEqual([
      'a.org',
      'coach@school.org',
      'school.org',
    ]);
  });

  it('should read an empty list', () => {
    expect(parseAllowlist('{"entries": []}')).toEqual([]);
  });

  it('should read back what formatAllowlist writes', () => {
    expect(parseAllowlist(formatAllowlist(['b.org', 'a@b.org', 'b.org']))).toEqual(['a@b.org', 'b.org']);
  });

  it.each([
    ['text that is not JSON', '{"entries": [', /not valid JSON/],
    ['an empty file', '', /not valid JSON/],
    ['a JSON array', '["school.org"]', /not a JSON object/],
    ['JSON null', 'null', /not a JSON object/],
    ['an object without entries', '{}', /no "entries" array/],
    ['entries that is not an array', '{"entries": "school.org"}', /no "entries" array/],
    ['an unknown key', '{"entries": [], "entires": ["school.org"]}', /unexpected key "entires"/],
    ['an entry that is not a string', '{"entries": ["school.org", 42]}', /entries\[1\] is not a string/],
    ['an invalid entry', '{"entries": ["school.org", "a.org", "no dot"]}', /entries\[2\] is invalid: "no dot" contains whitespace/],
    ['an @domain entry', '{"entries": ["@school.org"]}', /entries\[0\] is invalid: .*bare domain "school\.org"/],
  ])('should refuse %s, naming the problem', (_kind, text, message) => {
    expect(formatProblem(text)).toMatch(message);
  });
});

describe('isAllowed', () => {
  const entries = ['coach@school.org', 'robotics.club'];

  it('should admit an email that is an entry', () => {
    expect(isAllowed(entries, 'coach@school.org')).toBe(true);
  });

  it('should refuse another email at the domain of an email entry', () => {
    expect(isAllowed(entries, 'student@school.org')).toBe(false);
  });

  it('should admit every email at exactly a domain entry', () => {
    expect(isAllowed(entries, 'ana@robotics.club')).toBe(true);
    expect(isAllowed(entries, 'ben@robotics.club')).toBe(true);
  });

  it('should not admit a subdomain of a domain entry', () => {
    expect(isAllowed(entries, 'ana@mail.robotics.club')).toBe(false);
  });

  it('should not admit a domain that merely ends like a domain entry', () => {
    expect(isAllowed(entries, 'ana@evilrobotics.club')).toBe(false);
  });

  it('should match case-insensitively', () => {
    expect(isAllowed(entries, 'Coach@SCHOOL.org')).toBe(true);
    expect(isAllowed(entries, 'Ana@Robotics.Club')).toBe(true);
  });

  it('should refuse an email with more than one @, as an allowlist entry would be', () => {
    expect(isAllowed(entries, '"a@b"@robotics.club')).toBe(false);
    expect(isAllowed(entries, 'robotics.club@other.org')).toBe(false);
  });

  it('should never trim an email into an allowed one', () => {
    expect(isAllowed(entries, ' coach@school.org')).toBe(false);
    expect(isAllowed(entries, 'coach@school.org\n')).toBe(false);
    expect(isAllowed(entries, 'ana@robotics.club ')).toBe(false);
  });

  it('should match an internationalised domain in either form', () => {
    expect(isAllowed(['xn--bcher-kva.example'], 'ana@bücher.example')).toBe(true);
    expect(isAllowed(['xn--bcher-kva.example'], 'ana@xn--bcher-kva.example')).toBe(true);
  });

  it('should refuse an email with characters no email may hold', () => {
    expect(isAllowed(['school.org'], 'a\u0000@school.org')).toBe(false);
    expect(isAllowed(['school.org'], '\ud800@school.org')).toBe(false);
  });

  it('should refuse something that is not an email', () => {
    expect(isAllowed(entries, 'robotics.club')).toBe(false);
    expect(isAllowed(entries, '@robotics.club')).toBe(false);
  });

  it('should admit no one with an empty list', () => {
    expect(isAllowed([], 'coach@school.org')).toBe(false);
    expect(isAllowed([], 'ana@robotics.club')).toBe(false);
  });
});

describe('maySignIn (the one rule of the watcher, the app and the CLI)', () => {
  // SERVICE_ADMIN_EMAIL as an operator writes it: spaces, capitals, an internationalised domain.
  const admins = serviceAdmins([' Head@School.org', 'boss@bücher.example']);
  const entries = ['coach@robotics.club', 'school.org'];

  it.each([
    ['an admin email, in any case', 'HEAD@school.org', true],
    ['an admin email with an internationalised domain, in Unicode', 'boss@bücher.example', true],
    ['an admin email with an internationalised domain, in ASCII', 'boss@xn--bcher-kva.example', true],
    ['an admin email with no entry for it (the file empty or not)', 'boss@xn--bcher-kva.example', true],
    ['an email entry', 'Coach@robotics.club', true],
    ['an email at a domain entry', 'ana@school.org', true],
    ['another email at the domain of an email entry', 'ana@robotics.club', false],
    ['a subdomain of a domain entry', 'ana@mail.school.org', false],
    ['an admin email with a space in front (never trimmed)', ' head@school.org', false],
    ['an admin email with a newline after it', 'head@school.org\n', false],
    ['something that is not an email', 'head', false],
    ['the empty string', '', false],
  ])('%s: %s → %s', (_what, email, expected) => {
    expect(maySignIn(email, { admins, entries })).toBe(expected);
  });

  it('admits no one but the admins with an empty list', () => {
    expect(maySignIn('head@school.org', { admins, entries: [] })).toBe(true);
    expect(maySignIn('ana@school.org', { admins, entries: [] })).toBe(false);
    expect(maySignIn('ana@school.org', { admins: [], entries: [] })).toBe(false);
  });
});
