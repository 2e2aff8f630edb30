/**
 * The same-origin path to go to after sign-in, or undefined when `candidate` is not one: it must be
 * an absolute path (`/…`), with no backslash, whitespace or control character, no `.` or `..`
 * segment, not protocol-relative (`//host`), and stay so after percent-decoding (up to three rounds,
 * for double encoding) and after URL normalisation.
 * Resolved against `origin`, it must keep that origin.
 */
export function safeReturnTo(candidate: unknown, origin: string): string | undefined {
  if (typeof candidate !== 'string' || candidate.length === 0 || candidate.length > 2048) return undefined;
  let text = candidate;
  for (let round = 0; round < 4; round++) {
    // oxlint-disable-next-line no-control-regex -- control characters are exactly what is refused here
    if (!text.startsWith('/') || text.startsWith('//') || /[\\\s\u0000-\u001f\u007f]/.test(text)) return undefined;
    let decoded: string;
    try {
      decoded = decodeURIComponent(text);
    } catch {
      return undefined;
    }
    if (decoded === text) break;
    text = decoded;
  }
  // Dot segments are refused outright: `/..//host` normalises to the protocol-relative `//host`.
  if (
    text
      .split(/[?#]/, 1)[0]!
      .split('/')
      .some((segment) => segment === '.' || segment === '..')
  )
    return undefined;
  const url = new URL(candidate, origin);
  if (url.origin !== new URL(origin).origin) return undefined;
  const path = `${url.pathname}${url.search}${url.hash}`;
  return path.startsWith('//') || path.startsWith('/\\') ? undefined : path;
}
