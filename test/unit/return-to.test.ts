/**
 * safeReturnTo: where a browser may be sent after sign-in. Only same-origin absolute paths pass;
 * everything that a browser could resolve to another host (or to a script) is refused.
 */
import { safeReturnTo } from '../../src/identity/return-to.ts';

const ORIGIN = 'http://127.0.0.1:8080';

describe('safeReturnTo accepts same-origin absolute paths', () => {
  it.each([
    ['a workspace path', '/u/ada/'],
    ['a path with query and fragment', '/admin?tab=audit#x'],
    ['the root', '/'],
  ])('%s: %s is returned unchanged', (_what, candidate) => {
    expect(safeReturnTo(candidate, ORIGIN)).toBe(candidate);
  });
});

describe('safeReturnTo refuses what could leave the origin', () => {
  it.each([
    ['protocol-relative', '//evil.example'],
    ['triple slash', '///evil.example'],
    ['absolute URL to another host', 'https://evil.example/'],
    ['absolute URL even to the same origin (a path is required)', 'http://127.0.0.1:8080/x'],
    ['slash backslash', '/\\evil.example'],
    ['double backslash', '\\\\evil.example'],
    ['percent-encoded slashes', '/%2F%2Fevil.example'],
    ['double-encoded slashes', '/%252F%252Fevil.example'],
    ['encoded protocol-relative without a leading slash', '%2F%2Fevil.example'],
    ['encoded backslash', '/%5Cevil.example'],
    ['tab between slashes', '/\t/evil.example'],
    ['space between slashes', '/ /evil.example'],
    ['javascript: URL', 'javascript:alert(1)'],
    ['the empty string', ''],
    ['a path over 2048 characters', `/${'a'.repeat(2999)}`],
    ['a malformed percent-encoding', '/%E0%A4%A'],
  ])('%s: %j', (_what, candidate) => {
    expect(safeReturnTo(candidate, ORIGIN)).toBeUndefined();
  });
});

describe('safeReturnTo refuses non-strings', () => {
  it.each([
    ['undefined', undefined],
    ['null', null],
    ['a number', 42],
    ['an array holding a path', ['/u/ada/']],
    ['an object', { path: '/u/ada/' }],
  ])('%s', (_what, candidate) => {
    expect(safeReturnTo(candidate, ORIGIN)).toBeUndefined();
  });
});
