/**
 * The header rules of the proxy, both ways, on Node's and undici's raw header lists (flat
 * name/value arrays in the order they came), so that nothing is parsed into an object per request.
 */
import type http from 'node:http';

/** Headers that belong to one connection and never cross a proxy (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Request headers never passed on as sent: credentials, Cookie (rebuilt without ours), Expect (this
 * hop answered it), and what a client could claim about where it is: Forwarded, X-Real-IP and every
 * X-Forwarded-* (ours are set by us).
 */
const REPLACED = new Set(['authorization', 'cookie', 'expect', 'forwarded', 'x-real-ip']);

/** Response headers an editor may never send on: Clear-Site-Data could wipe the control plane's cookies (the session) for the whole origin. */
const DROPPED_RESPONSE = new Set(['clear-site-data']);

/** Headers a WebSocket's 101 answer needs, hop-by-hop as they are. */
const UPGRADE = new Set(['connection', 'upgrade']);

/** A header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A header value as sent: visible characters, spaces, tabs and obs-text; no CR, LF or NUL. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** The status line of an HTTP/1.x response (its reason phrase is never passed on). */
const STATUS_LINE = /^HTTP\/1\.[01] ([1-5]\d\d)(?:[ \t][^\r\n]*)?$/;

/** The header names a Connection header lists (hop-by-hop too), lower-cased; undefined when none. */
export function connectionNamed(connection: string | string[] | undefined): Set<string> | undefined {
  if (!connection) return undefined;
  // The usual values name no header: no set to build for every response.
  if (typeof connection === 'string' && /^\s*(keep-alive|close)\s*$/i.test(connection)) return undefined;
  return new Set(
    String(connection)
      .split(',')
      .map((name) => name.trim().toLowerCase()),
  );
}

/** What the X-Forwarded-* headers say, fixed per control plane. */
export interface ForwardingContext {
  /** TRUST_PROXY: a client's X-Forwarded-For (set by the proxy in front) is extended rather than replaced. */
  trustProxy: boolean;
  /** `http` or `https`, from PUBLIC_URL. */
  proto: string;
  /** PUBLIC_URL's host, when the request names none. */
  publicHost: string;
}

/**
 * The request headers the editor gets, as a flat name/value list in the order they came: no
 * hop-by-hop ones (except for a WebSocket upgrade, which needs Connection and Upgrade), no
 * Authorization, no Expect, the Cookie header `cookie` (the client's without our session cookies),
 * one Host and Content-Length at most, no Forwarded or X-Real-IP, and X-Forwarded-* set by us (the
 * client's own are dropped, its X-Forwarded-For extended with TRUST_PROXY), with the stripped prefix
 * `/u/<slug>` (path mode; `slug` undefined on a workspace's own host, where nothing is stripped).
 */
export function upstreamHeaders(
  req: http.IncomingMessage,
  slug: string | undefined,
  cookie: string | undefined,
  forwarding: ForwardingContext,
  keepUpgrade = false,
): string[] {
  const raw = req.rawHeaders;
  const named = connectionNamed(req.headers.connection);
  const result: string[] = [];
  let host = false;
  let length = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    const hopByHop = HOP_BY_HOP.has(lower) || named?.has(lower);
    if (REPLACED.has(lower) || lower.startsWith('x-forwarded-') || (hopByHop && !(keepUpgrade && UPGRADE.has(lower)))) continue;
    if (lower === 'host') {
      if (host) continue;
      host = true;
    } else if (lower === 'content-length') {
      if (length) continue;
      length = true;
    }
    result.push(name, raw[i + 1]!);
  }
  if (cookie) result.push('cookie', cookie);
  const client = req.socket.remoteAddress ?? '';
  result.push(
    'x-forwarded-for',
    forwarding.trustProxy && req.headers['x-forwarded-for'] ? `${String(req.headers['x-forwarded-for'])}, ${client}` : client,
    'x-forwarded-proto',
    forwarding.proto,
    'x-forwarded-host',
    req.headers.host ?? forwarding.publicHost,
  );
  if (slug !== undefined) result.push('x-forwarded-prefix', `/u/${slug}`);
  return result;
}

/** A raw header part as text, bytes kept as they came. */
const latin1 = (part: Buffer | string): string => (typeof part === 'string' ? part : part.toString('latin1'));

/** The name of the cookie a Set-Cookie value sets, trimmed and lower-cased (a pair without `=` counts as a name). */
function setCookieName(value: string): string {
  const end = value.indexOf(';');
  const pair = end === -1 ? value : value.slice(0, end);
  const at = pair.indexOf('=');
  return (at === -1 ? pair : pair.slice(0, at)).trim().toLowerCase();
}

/** Whether a cookie name (lower-cased) is one of `ownCookies`, in any case. */
function isOwnCookie(name: string, ownCookies: readonly string[]): boolean {
  return ownCookies.some((own) => own.toLowerCase() === name);
}

/** Whether a Set-Cookie value has a Domain attribute (any case, any value, even empty), i.e. would reach other hosts than the one that set it. */
function hasDomain(value: string): boolean {
  return value
    .split(';')
    .slice(1)
    .some((attribute) => {
      const at = attribute.indexOf('=');
      return (at === -1 ? attribute : attribute.slice(0, at)).trim().toLowerCase() === 'domain';
    });
}

/**
 * The editor's response headers to write on, as a flat name/value list in their order, bytes kept
 * as they came (latin1): without hop-by-hop ones (including those its Connection header names;
 * for a WebSocket's 101, `keepUpgrade`, Connection and Upgrade stay), without Clear-Site-Data, and
 * without any Set-Cookie whose cookie name, trimmed and in any case, is one of `ownCookies`, so
 * that an editor can never set, clear or shadow a user's session. With `noDomain` (a workspace's
 * own host), a Set-Cookie with a Domain attribute is dropped too: it would reach the other
 * workspaces' hosts (cookie tossing); the editor's host-only cookies are its own business. With
 * `serviceWorkerScope` (path mode: `/u/<slug>/`), a Service-Worker-Allowed that is not an absolute
 * path under it is narrowed to the scope itself: the editor's own service worker (served from a
 * sub-path, allowed `/` by code-server) still registers for the workspace's path, but a student's
 * could never claim the control plane's whole origin in that browser (its pages, sign-in
 * included) and outlive a sign-out.
 */
export function responseHeaders(
  raw: readonly (Buffer | string)[],
  ownCookies: readonly string[],
  keepUpgrade = false,
  noDomain = false,
  serviceWorkerScope?: string,
): string[] {
  const result: string[] = [];
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = latin1(raw[i]!);
    const lower = name.toLowerCase();
    const value = latin1(raw[i + 1]!);
    if (lower === 'connection' && !keepUpgrade) named = connectionNamed(value);
    if (HOP_BY_HOP.has(lower) && !(keepUpgrade && UPGRADE.has(lower))) continue;
    if (DROPPED_RESPONSE.has(lower)) continue;
    if (lower === 'set-cookie' && (isOwnCookie(setCookieName(value), ownCookies) || (noDomain && hasDomain(value)))) continue;
    if (lower === 'service-worker-allowed' && serviceWorkerScope !== undefined && !withinScope(value, serviceWorkerScope)) {
      result.push(name, serviceWorkerScope);
      continue;
    }
    result.push(name, value);
  }
  if (!named) return result;
  return result.filter((_, i) => !named.has(result[i - (i % 2)]!.toLowerCase()));
}

/** Whether a Service-Worker-Allowed value is an absolute path under `scope` once its dot segments (`..`, `%2e%2e`) are resolved. */
function withinScope(value: string, scope: string): boolean {
  const path = value.trim();
  if (!path.startsWith('/') || path.startsWith('//')) return false;
  return new URL(path, 'http://scope.invalid').pathname.startsWith(scope);
}

/**
 * The status and raw headers (flat name/value list) of a response head as read off a socket
 * (latin1, without the blank line that ends it), or undefined when it is not a valid HTTP/1.x
 * head: a status outside 100-599, a line that is not `name: value`, a folded line, or a value
 * holding a CR, LF or NUL.
 */
export function parseResponseHead(text: string): { status: number; headers: string[] } | undefined {
  const lines = text.split('\r\n');
  const status = STATUS_LINE.exec(lines[0]!);
  if (!status) return undefined;
  const headers: string[] = [];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value)) return undefined;
    headers.push(name, value);
  }
  return { status: Number(status[1]), headers };
}
