/**
 * The proxy's path rule (api/proxy/path.ts) on its own: which raw request targets under /u/ are
 * proxied, which belong to the student API, and which are refused before any lookup. The same
 * attacks run end to end, through a real proxy to a real container, in test/integration/proxy.test.ts.
 */
import { parseWorkspacePath } from '../../api/proxy/path.ts';

describe('parseWorkspacePath', () => {
  it.each([
    ['/u/ada/', { slug: 'ada', rest: '/', api: false }],
    ['/u/ada', { slug: 'ada', rest: '/', api: false }],
    ['/u/ada/static/main.js?v=3', { slug: 'ada', rest: '/static/main.js?v=3', api: false }],
    ['/u/ada-2/x%20y', { slug: 'ada-2', rest: '/x%20y', api: false }],
    ['/u/ada/a..b/c.d', { slug: 'ada', rest: '/a..b/c.d', api: false }],
    ['/u/ada/api', { slug: 'ada', rest: '/api', api: true }],
    ['/u/ada/api/workspace', { slug: 'ada', rest: '/api/workspace', api: true }],
    ['/u/ada/apis/x', { slug: 'ada', rest: '/apis/x', api: false }],
    ['/u/ada/?q=../../admin', { slug: 'ada', rest: '/?q=../../admin', api: false }],
  ])('proxies %s as %j', (target, expected) => {
    expect(parseWorkspacePath(target)).toEqual(expected);
  });

  it.each(['/', '/healthz', '/admin/status', '/auth/sign-in', '/uploads/u/ada/', '/u'])('leaves %s to the rest of the app', (target) => {
    expect(parseWorkspacePath(target)).toBeUndefined();
  });

  it.each([
    ['an empty slug', '/u//x'],
    ['an upper-case slug', '/u/Ada/'],
    ['a percent-encoded slug', '/u/%61da/'],
    ['an encoded slash in the slug', '/u/ada%2F..%2Fbob/echo'],
    ['a slug of 41 characters', `/u/${'a'.repeat(41)}/`],
    ['a dot segment', '/u/ada/../bob/'],
    ['a lone dot segment', '/u/ada/./x'],
    ['a trailing dot-dot', '/u/ada/x/..'],
    ['an encoded dot-dot', '/u/ada/%2e%2e/bob/'],
    ['an upper-case encoded dot-dot', '/u/ada/%2E%2E/bob/'],
    ['a double-encoded dot-dot', '/u/ada/%252e%252e/bob/'],
    ['an encoded slash', '/u/ada/a%2fb'],
    ['a double-encoded slash', '/u/ada/a%252fb'],
    ['a backslash', '/u/ada/..\\bob'],
    ['an encoded backslash', '/u/ada/..%5cbob'],
    ['a traversal into the control plane', '/u/ada/../../admin/status'],
    ['a traversal through the API prefix', '/u/ada/api/../../../admin/status'],
    ['an invalid percent-encoding', '/u/ada/%e0%a4%a'],
  ])('refuses %s', (_name, target) => {
    expect(parseWorkspacePath(target)).toEqual({ invalid: expect.any(String) });
  });
});
