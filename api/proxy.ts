import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import Keygrip from 'keygrip';
import type { DataSource } from 'typeorm';
import type { ChangeFeed } from '../src/db/changes.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import type { ActivityRecorder } from '../src/store/activity.ts';
import { findSessionUser } from '../src/store/sessions.ts';
import { getWorkspaceBySlug, type WorkspaceRecord } from '../src/store/workspaces.ts';
import { stillAllowed } from './middleware/auth.ts';
import { workspacePage } from './workspace-page.ts';

/** The route label of every proxied request: the template, never the student's path. */
export const PROXY_ROUTE = '/u/:slug/*';

/** How long a looked-up session user or workspace is reused before the database is asked again. */
const CACHE_TTL_MS = 1000;

/** Headers that belong to one connection and never cross a proxy (RFC 9110 §7.6.1). */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

/** A path under /u/: the raw slug segment and the rest, or why it is refused. */
export type WorkspacePath = { slug: string; rest: string; api: boolean } | { invalid: string } | undefined;

const SLUG = /^[a-z0-9-]{1,40}$/;

/**
 * Splits a raw request target under `/u/` into slug and rest, in the one canonical form used for
 * both authorisation and routing: the slug must be a plain `[a-z0-9-]` segment as sent (no
 * percent-encoding), and the rest may not hide a traversal or separator: no `.`/`..` segment,
 * backslash, encoded slash, backslash or percent sign (double encoding), raw or decoded.
 * Returns undefined for paths outside `/u/`.
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
  if (/%(2f|5c|25)/i.test(rest) || rest.includes('\\')) return { invalid: 'This path contains an encoded separator, which is not allowed.' };
  let decoded: string;
  try {
    decoded = decodeURIComponent(rest);
  } catch {
    return { invalid: 'This path is not validly encoded.' };
  }
  if (decoded.split('/').some((segment) => segment === '..' || segment === '.')) return { invalid: 'This path contains a dot segment, which is not allowed.' };
  return { slug, rest: `${rest}${query}`, api: rest === '/api' || rest.startsWith('/api/') };
}

/**
 * A small time-bounded cache, cleared entirely on a change. `load` does not store a value whose
 * lookup began before the last clear, so a lookup racing a demotion cannot put the old role back.
 */
class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private epoch = 0;
  async load(key: string, lookup: () => Promise<V>): Promise<V> {
    const entry = this.entries.get(key);
    if (entry && entry.expires >= Date.now()) return entry.value;
    const epoch = this.epoch;
    const value = await lookup();
    if (epoch === this.epoch) {
      if (this.entries.size > 10_000) this.entries.clear();
      this.entries.set(key, { value, expires: Date.now() + CACHE_TTL_MS });
    }
    return value;
  }
  clear(): void {
    this.epoch++;
    this.entries.clear();
  }
}

export interface ProxyDeps {
  db: DataSource;
  changes: ChangeFeed;
  metrics: Metrics;
  activity: ActivityRecorder;
  log: Logger;
  publicOrigin: string;
  sessionCookie: string;
  sessionSecret: string;
  trustProxy: boolean;
  /** How long to wait for the editor's response headers. */
  timeoutMs: number;
  /** Whether an email may still sign in (allowlist and SERVICE_ADMIN_EMAIL). */
  isAllowed: (email: string) => boolean;
}

type SessionUser = { id: string; email: string; role: 'user' | 'admin' };

/**
 * The reverse proxy to each workspace's editor, outside Koa so that it streams both ways without
 * buffering: `request` serves every path under `/u/<slug>/` except `/u/<slug>/api/...`, `upgrade`
 * serves WebSocket upgrades. Only the owner and admins pass; the control plane's session cookie
 * and Authorization never reach the editor.
 */
export class WorkspaceProxy {
  private readonly deps: ProxyDeps;
  private readonly users = new TtlCache<SessionUser | null>();
  private readonly workspaces = new TtlCache<WorkspaceRecord | null>();
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  private readonly unsubscribe: () => void;
  private readonly keys: Keygrip;
  /** Open WebSocket connections (both ends), closed on shutdown: an HTTP server's close does not end them. */
  private readonly tunnels = new Set<Duplex>();

  constructor(deps: ProxyDeps) {
    this.deps = deps;
    this.keys = new Keygrip([deps.sessionSecret]);
    // Changes take effect at once: a demoted user or a stopped workspace is not served from cache.
    this.unsubscribe = deps.changes.subscribe((change) => (change.kind === 'users' ? this.users.clear() : change.kind === 'workspaces' && this.workspaces.clear()));
  }

  /** Stops following changes, ends every proxied WebSocket and closes idle upstream connections. */
  close(): void {
    this.unsubscribe();
    for (const socket of this.tunnels) socket.destroy();
    this.agent.destroy();
  }

  /** Tracks a socket until it closes. */
  private track(socket: Duplex): void {
    this.tunnels.add(socket);
    socket.once('close', () => this.tunnels.delete(socket));
  }

  /** The signed-in user of a request (cookie signature checked as koa-session signs it → session row → user); verified pairs are cached for a second. */
  private async userOf(req: http.IncomingMessage): Promise<SessionUser | undefined> {
    const name = this.deps.sessionCookie;
    const sessionId = cookieValue(req.headers.cookie, name);
    const signature = cookieValue(req.headers.cookie, `${name}.sig`);
    if (!sessionId || !signature) return undefined;
    // Keyed by the pair, so a cache hit is a pair verified within the last second: no HMAC per request.
    const user = await this.users.load(`${sessionId}.${signature}`, async () =>
      this.keys.verify(`${name}=${sessionId}`, signature) ? ((await findSessionUser(this.deps.db, sessionId)) ?? null) : null,
    );
    return user ?? undefined;
  }

  private async workspaceOf(slug: string): Promise<WorkspaceRecord | undefined> {
    return (await this.workspaces.load(slug, async () => (await getWorkspaceBySlug(this.deps.db, slug)) ?? null)) ?? undefined;
  }

  /** Authorises a request for a workspace; an answer to send instead when it may not pass. */
  private async admit(req: http.IncomingMessage, slug: string): Promise<{ workspace: WorkspaceRecord } | { status: number; code: string; message: string }> {
    const [user, workspace] = await Promise.all([this.userOf(req), this.workspaceOf(slug)]);
    if (!user || !stillAllowed(user, this.deps.isAllowed)) return { status: 401, code: 'authentication_required', message: 'Sign in to use this workspace.' };
    if (!workspace || workspace.desiredState === 'deleted' || !(user.role === 'admin' || workspace.userId === user.id)) {
      // The same answer whether the workspace exists or not, so slugs cannot be probed.
      return { status: 403, code: 'forbidden', message: 'This workspace is not yours.' };
    }
    return { workspace };
  }

  /** Serves one proxied HTTP request (the caller has checked that `path` is a proxied path). */
  async request(req: http.IncomingMessage, res: http.ServerResponse, path: { slug: string; rest: string }): Promise<void> {
    const { metrics, activity } = this.deps;
    metrics.httpRequestsInFlight.inc();
    const done = metrics.httpRequestDuration.startTimer({ method: req.method ?? 'GET', route: PROXY_ROUTE });
    res.once('close', () => {
      metrics.httpRequestsInFlight.dec();
      done({ status_class: `${Math.floor(res.statusCode / 100)}xx` });
    });
    const browser = (req.headers.accept ?? '').includes('text/html');
    const admission = await this.admit(req, path.slug).catch((error: unknown) => {
      this.deps.log.error({ error }, 'proxy authorisation failed');
      return { status: 500, code: 'internal_error', message: 'Something went wrong on our side; it has been logged.' };
    });
    if ('status' in admission) {
      if (admission.status === 401 && browser) return redirect(res, `/auth/sign-in?return_to=${encodeURIComponent(`/u/${path.slug}${path.rest}`)}`);
      return sendError(res, admission.status, admission.code, admission.message);
    }
    const { workspace } = admission;
    activity.touch(workspace.id);
    if (workspace.observedState !== 'running' || !workspace.editorEndpoint) {
      if (browser) return sendHtml(res, path.rest === '/' ? 200 : 503, workspacePage(workspace));
      return sendError(res, 503, 'workspace_not_running', `Workspace ${workspace.slug} is not running; open it first.`, { 'Retry-After': '5' });
    }
    this.forward(req, res, workspace, path);
  }

  private forward(req: http.IncomingMessage, res: http.ServerResponse, workspace: WorkspaceRecord, path: { slug: string; rest: string }, retried = false): void {
    const [host, port] = splitEndpoint(workspace.editorEndpoint!);
    const started = performance.now();
    const bodiless = !req.headers['content-length'] && !req.headers['transfer-encoding'];
    let decided = false;
    const observe = (outcome: string) => {
      if (decided) return;
      decided = true;
      this.deps.metrics.proxyUpstreamDuration.observe({ upstream: 'vscode', outcome }, (performance.now() - started) / 1000);
    };
    const upstream = http.request({ host, port, method: req.method, path: path.rest, headers: this.upstreamHeaders(req, path.slug), agent: this.agent });
    let timer: NodeJS.Timeout | undefined;
    // The timeout is for the editor's answer: it starts once the request body has been sent (an upload may take long).
    upstream.once('finish', () => {
      timer = setTimeout(() => {
        observe('timeout');
        upstream.destroy();
        if (!res.headersSent) sendError(res, 504, 'upstream_timeout', 'The editor did not answer in time.');
        else res.destroy();
      }, this.deps.timeoutMs);
    });
    upstream.on('response', (answer) => {
      clearTimeout(timer);
      observe('ok');
      const status = answer.statusCode ?? 0;
      if (status < 100 || status > 599) {
        answer.destroy();
        return sendError(res, 502, 'upstream_error', 'The editor sent an invalid answer.');
      }
      try {
        // No status message: the editor's text could hold characters Node refuses to write (and would throw).
        res.writeHead(status, withoutOwnCookies(withoutHopByHop(answer.headers), this.deps.sessionCookie));
      } catch {
        answer.destroy();
        return sendError(res, 502, 'upstream_error', 'The editor sent an invalid answer.');
      }
      // An upstream that dies mid-response ends ours abruptly too: the client sees a broken response, not a truncated success.
      // (pipe, not stream.pipeline: pipeline costs an AbortController and a DOMException per call on this hot path.)
      answer.on('error', () => res.destroy());
      answer.on('close', () => !answer.complete && res.destroy());
      answer.pipe(res);
    });
    upstream.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (res.writableEnded) return;
      // A kept-alive socket whose container is gone (its address reused by another) fails on first use:
      // a request without a body is retried once on a fresh socket, as Node's docs advise.
      if (!decided && !retried && bodiless && upstream.reusedSocket && error.code === 'ECONNRESET') return this.forward(req, res, workspace, path, true);
      if (decided) return res.destroy();
      observe('error');
      if (!res.headersSent) sendError(res, 502, 'upstream_error', 'The editor could not be reached.');
      else res.destroy();
    });
    res.on('close', () => {
      clearTimeout(timer);
      if (!res.writableFinished) upstream.destroy();
    });
    if (bodiless) return void upstream.end();
    req.on('error', () => upstream.destroy());
    req.pipe(upstream);
  }

  /** The request headers the editor gets: no hop-by-hop, no Authorization, no session cookie; X-Forwarded-* set. */
  private upstreamHeaders(req: http.IncomingMessage, slug: string, keepUpgrade = false): http.OutgoingHttpHeaders {
    const headers = keepUpgrade ? copyWithout(req.headers, DROPPED_ALWAYS) : withoutHopByHop(req.headers, DROPPED_ALWAYS);
    const cookie = withoutCookies(req.headers.cookie, [this.deps.sessionCookie, `${this.deps.sessionCookie}.sig`]);
    if (cookie) headers.cookie = cookie;
    const client = req.socket.remoteAddress ?? '';
    const forwardedFor = this.deps.trustProxy && req.headers['x-forwarded-for'] ? `${String(req.headers['x-forwarded-for'])}, ${client}` : client;
    headers['x-forwarded-for'] = forwardedFor;
    headers['x-forwarded-proto'] = this.deps.publicOrigin.startsWith('https:') ? 'https' : 'http';
    headers['x-forwarded-host'] = req.headers.host ?? new URL(this.deps.publicOrigin).host;
    headers['x-forwarded-prefix'] = `/u/${slug}`;
    return headers;
  }

  /**
   * Serves a WebSocket upgrade under `/u/<slug>/`: only `Upgrade: websocket` from our own origin,
   * for the owner or an admin, to a running editor; the raw byte streams are then joined, and
   * every chunk either way marks the workspace active.
   */
  async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, path: { slug: string; rest: string }): Promise<void> {
    socket.on('error', () => socket.destroy());
    this.track(socket);
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return rejectUpgrade(socket, 400, 'Only WebSocket upgrades are proxied.');
    if (req.headers.origin !== this.deps.publicOrigin) return rejectUpgrade(socket, 403, 'WebSocket connections must come from this site.');
    const admission = await this.admit(req, path.slug).catch(() => ({ status: 500, code: 'internal_error', message: 'Something went wrong on our side.' }));
    // The client may have gone while we looked it up: open nothing for it.
    if (socket.destroyed) return;
    if ('status' in admission) return rejectUpgrade(socket, admission.status, admission.message);
    const { workspace } = admission;
    if (workspace.observedState !== 'running' || !workspace.editorEndpoint) return rejectUpgrade(socket, 503, `Workspace ${workspace.slug} is not running.`);
    const [host, port] = splitEndpoint(workspace.editorEndpoint);
    const started = performance.now();
    const upstream = net.connect(port, host);
    this.track(upstream);
    const touch = () => this.deps.activity.touch(workspace.id);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      this.deps.metrics.proxyUpstreamDuration.observe({ upstream: 'vscode', outcome: 'ok' }, (performance.now() - started) / 1000);
      const headers = this.upstreamHeaders(req, path.slug, true);
      const lines = [`${req.method} ${path.rest} HTTP/1.1`];
      for (const [name, value] of Object.entries(headers)) {
        for (const item of Array.isArray(value) ? value : [value]) if (item !== undefined) lines.push(`${name}: ${String(item)}`);
      }
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      touch();
      socket.on('data', touch);
      upstream.on('data', touch);
      socket.pipe(upstream).pipe(socket);
    });
    upstream.once('error', () => {
      if (!connected) {
        this.deps.metrics.proxyUpstreamDuration.observe({ upstream: 'vscode', outcome: 'error' }, (performance.now() - started) / 1000);
        return rejectUpgrade(socket, 502, 'The editor could not be reached.');
      }
      socket.destroy();
    });
    upstream.on('close', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
  }
}

function splitEndpoint(endpoint: string): [string, number] {
  const at = endpoint.lastIndexOf(':');
  return [endpoint.slice(0, at), Number(endpoint.slice(at + 1))];
}

/** Request headers never forwarded, beside the hop-by-hop ones: credentials (and cookie, rebuilt without ours). */
const DROPPED_ALWAYS = new Set(['authorization', 'cookie']);
const HOP_BY_HOP_SET = new Set(HOP_BY_HOP);

/** A copy of `headers` without the `dropped` names (built fresh: `delete` makes slow objects). */
function copyWithout(headers: http.IncomingHttpHeaders | http.OutgoingHttpHeaders, dropped: Set<string>, alsoDropped?: Set<string>): http.OutgoingHttpHeaders {
  const result: http.OutgoingHttpHeaders = {};
  for (const name in headers) if (!dropped.has(name) && !alsoDropped?.has(name)) result[name] = headers[name];
  return result;
}

/** Headers without the hop-by-hop ones (including those the Connection header names), and without `extra`. */
function withoutHopByHop(headers: http.IncomingHttpHeaders, extra?: Set<string>): http.OutgoingHttpHeaders {
  const named = headers.connection ? String(headers.connection).split(',').map((name) => name.trim().toLowerCase()) : [];
  const dropped = named.length > 0 ? new Set([...HOP_BY_HOP, ...named]) : HOP_BY_HOP_SET;
  return copyWithout(headers, dropped, extra);
}

/**
 * Response headers without any Set-Cookie for the control plane's own session cookies, so that
 * an editor can never replace a user's session.
 */
function withoutOwnCookies(headers: http.OutgoingHttpHeaders, sessionCookie: string): http.OutgoingHttpHeaders {
  const cookies = headers['set-cookie'];
  if (!cookies) return headers;
  const ours = (line: string) => line.trim().startsWith(`${sessionCookie}=`) || line.trim().startsWith(`${sessionCookie}.sig=`);
  const kept = (Array.isArray(cookies) ? cookies : [String(cookies)]).filter((line) => !ours(line));
  const result = { ...headers };
  if (kept.length > 0) result['set-cookie'] = kept;
  else delete result['set-cookie'];
  return result;
}

/** The value of one cookie in a Cookie header, or undefined. */
function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at !== -1 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** A Cookie header without the named cookies, or undefined when none is left. */
function withoutCookies(header: string | undefined, names: string[]): string | undefined {
  if (!header) return undefined;
  const kept = header
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part && !names.includes(part.slice(0, part.indexOf('=') === -1 ? part.length : part.indexOf('='))));
  return kept.length > 0 ? kept.join('; ') : undefined;
}

function sendError(res: http.ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({ error: { code, message } });
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...headers });
  res.end(body);
}

function sendHtml(res: http.ServerResponse, status: number, html: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(html), 'cache-control': 'no-store' });
  res.end(html);
}

function redirect(res: http.ServerResponse, location: string): void {
  res.writeHead(302, { location, 'content-length': 0, 'cache-control': 'no-store' });
  res.end();
}

function rejectUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: { code: http.STATUS_CODES[status]?.toLowerCase().replaceAll(' ', '_') ?? 'error', message } });
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
