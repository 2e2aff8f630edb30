/** A path under /u/: the raw slug segment and the rest (with the query), or why it is refused. */
export type WorkspacePath = { slug: string; rest: string; api: boolean } | { invalid: string } | undefined;

/** A workspace slug as it may appear in a path or a host name. */
export const SLUG = /^[a-z0-9-]{1,40}$/;
/** A `.` or `..` path segment. */
const DOT_SEGMENT = /(^|\/)\.\.?(\/|$)/;

/**
 * Splits a raw request target under `/u/` into slug and rest, in the one canonical form used for
 * both authorisation and routing: the slug must be a plain `[a-z0-9-]` segment as sent (no
 * percent-encoding), and the rest may not hide a traversal or separator: no `.`/`..` segment,
 * backslash, encoded slash, backslash or percent sign (double encoding), raw or decoded. `api` is
 * set for `/u/<slug>/api` and below (the student API, served by Koa). Returns undefined for paths
 * outside `/u/`.
 */
export function parseWorkspacePath(target: string): WorkspacePath {
  const queryAt = target.indexOf('?');
  const path = queryAt === -1 ? target : target.slice(0, queryAt);
  const query = queryAt === -1 ? '' : target.slice(queryAt);
  if (!path.startsWith('/u/')) return undefined;
  const slugEnd = path.indexOf('/', 3);
  const slug = slugEnd === -1 ? path.slice(3) : path.slice(3, slugEnd);
  if (!SLUG.test(slug)) return { invalid: 'The workspace name in this path is not valid.' };
  const rest = slugEnd === -1 ? '/' : path.slice(slugEnd);
  if (rest.includes('\\') || /%(2f|5c|25)/i.test(rest)) return { invalid: 'This path contains an encoded separator, which is not allowed.' };
  let decoded = rest;
  if (rest.includes('%')) {
    try {
      decoded = decodeURIComponent(rest);
    } catch {
      return { invalid: 'This path is not validly encoded.' };
    }
  }
  if (DOT_SEGMENT.test(decoded)) return { invalid: 'This path contains a dot segment, which is not allowed.' };
  return { slug, rest: `${rest}${query}`, api: rest === '/api' || rest.startsWith('/api/') };
}
