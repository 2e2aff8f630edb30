/**
 * Requests that Node refuses before any route sees them: most often headers over its 16 KB limit.
 * That is what a cookie bomb makes: a page on a workspace's host sets a dozen large cookies on a
 * parent domain, and from then on the browser sends them with every request to every host under it
 * (every workspace, and the control plane too when it shares the domain) for as long as the page
 * chose. Node's own answer is a bare 431 with no body, the same on every page, for a year. Here the
 * browser gets a page that says what happened, and the answer clears what it can: every cookie of
 * the site by `Clear-Site-Data: "cookies"` (browsers take it on https and on localhost), and each
 * cookie the request named by an expired Set-Cookie on this host and on each parent domain.
 */
import type { Duplex } from 'node:stream';
import http from 'node:http';
import { ERROR_CODES } from '../src/error-codes.ts';
import { AppError } from '../src/errors.ts';
import { NO_FRAMES } from './middleware/frames.ts';
import { escapeHtml, page } from './pages/page.ts';
import { errorBody } from './responses.ts';

/** At most this many cookie names are cleared one by one (Clear-Site-Data takes the rest). */
const MAX_CLEARED = 60;

/** What the raw bytes of a refused request say: the Host, whether a browser asked for a page, the names of its cookies. */
interface RawRequest {
  host: string | undefined;
  wantsPage: boolean;
  cookieNames: string[];
}

/** Reads what it can of a request's head from its raw bytes (as far as they came; the end may be missing). */
function readRaw(raw: Buffer | undefined): RawRequest {
  const lines = (raw ?? Buffer.alloc(0)).toString('latin1').split('\r\n');
  const header = (name: string) =>
    lines.filter((line) => line.slice(0, name.length + 1).toLowerCase() === `${name}:`).map((line) => line.slice(name.length + 1).trim());
  const cookieNames = new Set<string>();
  for (const value of header('cookie'))
    for (const part of value.split(';')) {
      const name = part.split('=', 1)[0]!.trim();
      if (/^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$/.test(name)) cookieNames.add(name);
    }
  const wantsPage = header('accept').some((value) => value.includes('text/html')) || header('sec-fetch-mode').includes('navigate');
  return { host: header('host')[0]?.toLowerCase(), wantsPage, cookieNames: [...cookieNames].slice(0, MAX_CLEARED) };
}

/**
 * Expired Set-Cookie lines for `names`: on `host` itself and on each parent domain of two labels or
 * more (a cookie set for `school.org` from `ada.ws.school.org` is cleared only with that Domain).
 * The names in `ownCookies` are cleared on parent domains only: on the host itself they are the
 * control plane's own session, not something planted.
 */
export function clearingCookies(names: readonly string[], host: string | undefined, ownCookies: readonly string[]): string[] {
  const hostname = host?.replace(/:\d+$/, '');
  const labels = hostname && /^[a-z0-9.-]+$/.test(hostname) ? hostname.split('.') : [];
  const parents = labels.slice(1, -1).map((_label, index) => labels.slice(index + 1).join('.'));
  const lines: string[] = [];
  for (const name of names) {
    if (!ownCookies.includes(name)) lines.push(`${name}=; Max-Age=0; Path=/`);
    for (const domain of parents) lines.push(`${name}=; Max-Age=0; Path=/; Domain=${domain}`);
  }
  return lines;
}

/**
 * The HTTP server's 'clientError' listener: a request with headers too large gets the page (or, for
 * a client that asked for no page, a JSON error `headers_too_large`) and the clearing headers
 * above; any other malformed request a JSON 400 `bad_request`. Either way the connection then ends.
 * `onOverflow` hears of each overflow (for the log).
 */
export function answerClientError(
  error: Error & { code?: string; rawPacket?: Buffer },
  socket: Duplex,
  ownCookies: readonly string[],
  onOverflow: (request: { host: string | undefined; cookies: number }) => void,
): void {
  if (error.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return writeError(socket, new AppError('request_timeout', 'The request did not arrive in time.'));
  if (error.code !== 'HPE_HEADER_OVERFLOW') return writeError(socket, new AppError('bad_request', 'The request could not be read.'));
  const raw = readRaw(error.rawPacket);
  onOverflow({ host: raw.host, cookies: raw.cookieNames.length });
  const headers: Record<string, string | string[]> = {
    'Clear-Site-Data': '"cookies"',
    'Set-Cookie': clearingCookies(raw.cookieNames, raw.host, ownCookies),
    ...NO_FRAMES,
  };
  if (!raw.wantsPage) {
    const message =
      'The request headers are too large, most likely because of too many or too large cookies; they have been cleared where this server can clear them.';
    return writeError(socket, new AppError('headers_too_large', message), headers);
  }
  const body = page(
    'Too many cookies',
    `<h1>Your browser sent too many cookies</h1>
<p>This browser's cookies for this site have grown too large to send: a page you opened (a workspace, perhaps a classmate's) set them, and the browser now sends them with every request here. This server has cleared ${raw.cookieNames.length > 0 ? `the ${raw.cookieNames.length} it could name, and asked your browser to clear the rest` : 'what it could, and asked your browser to clear the rest'}; you may have to sign in again.</p>
<a class="button" href="/">Try again</a>
<p class="note">If this page comes back, clear this site's cookies in your browser's settings${raw.host ? ` (${escapeHtml(raw.host)} and the sites around it)` : ''}, and tell your coach: the operator can put workspaces on a domain of their own, where their cookies never reach this site.</p>`,
  );
  writeAndEnd(socket, ERROR_CODES.headers_too_large.status, { ...headers, 'Content-Type': 'text/html; charset=utf-8' }, body);
}

/** Writes an error as its JSON body, with its status and `headers`, on a socket whose request was never parsed, then ends it. */
function writeError(socket: Duplex, error: AppError, headers: Record<string, string | string[]> = {}): void {
  const body = JSON.stringify(errorBody(error.code, error.message));
  writeAndEnd(socket, error.status, { ...headers, 'Content-Type': 'application/json; charset=utf-8' }, body);
}

/** Writes a whole HTTP/1.1 answer on a socket whose request was never parsed, then ends it. */
function writeAndEnd(socket: Duplex, status: number, headers: Record<string, string | string[]>, body: string): void {
  const lines = [`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}`];
  for (const [name, value] of Object.entries({
    ...headers,
    'Cache-Control': 'no-store',
    'Content-Length': String(Buffer.byteLength(body)),
    Connection: 'close',
  })) {
    for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${one}`);
  }
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}
