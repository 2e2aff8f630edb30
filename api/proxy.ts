import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import Keygrip from 'keygrip';
import { Pool, type Dispatcher } from 'undici';
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
/** How long before it expires a cache entry in use is looked up again in the background. */
const REFRESH_AHEAD_MS = 250;
/** How long one lookup is shared: a request after that starts its own, so a hung connection stalls only the requests that shared it. */
const SHARED_LOOKUP_MS = 2000;

/** Headers that belong to one connection and never cross a proxy (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** A path under /u/: the raw slug segment and the rest, or why it is refused. */
export type WorkspacePath = { slug: string; rest: string; api: boolean } | { invalid: string } | undefined;

const SLUG = /^[a-z0-9-]{1,40}$/;
/** A `.` or `..` path segment. */
const DOT_SEGMENT = /(^|\/)\.\.?(\/|$)/;

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

/**
 * A small time-bounded cache, cleared entirely on a change. A fresh entry is answered at once,
 * without a promise (the proxy's hot path), and never after it expires. Concurrent misses of one key
 * share one lookup (for SHARED_LOOKUP_MS at most), and an entry still in use during its last
 * REFRESH_AHEAD_MS is looked up again in the background, so frequent traffic does not wait on the
 * database each time an entry expires. A lookup that began before the last clear is neither stored
 * nor shared, so a lookup racing a demotion cannot put the old role back.
 */
class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private readonly pending = new Map<string, Promise<V>>();
  private epoch = 0;
  get(key: string, lookup: () => Promise<V>): V | Promise<V> {
    const entry = this.entries.get(key);
    const now = Date.now();
    if (entry && entry.expires >= now) {
      // A failed refresh leaves the entry to expire; the next miss then reports the failure.
      if (entry.expires - now < REFRESH_AHEAD_MS && !this.pending.has(key)) this.load(key, lookup).catch(() => undefined);
      return entry.value;
    }
    return this.pending.get(key) ?? this.load(key, lookup);
  }
  private load(key: string, lookup: () => Promise<V>): Promise<V> {
    const epoch = this.epoch;
    const loading = lookup().then((value) => {
      if (epoch === this.epoch) {
        if (this.entries.size > 10_000) this.entries.clear();
        this.entries.set(key, { value, expires: Date.now() + CACHE_TTL_MS });
      }
      return value;
    });
    this.pending.set(key, loading);
    const unshare = () => this.pending.get(key) === loading && this.pending.delete(key);
    const timer = setTimeout(unshare, SHARED_LOOKUP_MS).unref();
    const settled = () => (clearTimeout(timer), unshare());
    loading.then(settled, settled);
    return loading;
  }
  clear(): void {
    this.epoch++;
    this.entries.clear();
    this.pending.clear();
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

type Admission = { workspace: WorkspaceRecord } | { status: number; code: string; message: string };

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
  /** Upstream connection pools by workspace id, with the container they reach (its address and start). */
  private readonly pools = new Map<string, { endpoint: string; since: number; pool: Pool }>();
  private readonly unsubscribe: () => void;
  private readonly keys: Keygrip;
  private readonly cookieNames: string[];
  private readonly forwardedProto: string;
  private readonly publicHost: string;
  /** Open WebSocket connections (both ends), closed on shutdown: an HTTP server's close does not end them. */
  private readonly tunnels = new Set<Duplex>();

  constructor(deps: ProxyDeps) {
    this.deps = deps;
    this.keys = new Keygrip([deps.sessionSecret]);
    this.cookieNames = [deps.sessionCookie, `${deps.sessionCookie}.sig`];
    this.forwardedProto = deps.publicOrigin.startsWith('https:') ? 'https' : 'http';
    this.publicHost = new URL(deps.publicOrigin).host;
    // Changes take effect at once: a demoted user or a stopped workspace is not served from cache.
    this.unsubscribe = deps.changes.subscribe((change) => {
      if (change.kind === 'users') this.users.clear();
      if (change.kind !== 'workspaces') return;
      this.workspaces.clear();
      // Stopped, restarted or deleted: the editor it reached is going, and its idle connections go now.
      this.dropPool(change.id);
    });
  }

  /** Stops following changes, ends every proxied WebSocket and closes idle upstream connections. */
  close(): void {
    this.unsubscribe();
    for (const socket of this.tunnels) socket.destroy();
    for (const { pool } of this.pools.values()) void pool.destroy().catch(() => undefined);
    this.pools.clear();
  }

  /** Tracks a socket until it closes. */
  private track(socket: Duplex): void {
    this.tunnels.add(socket);
    socket.once('close', () => this.tunnels.delete(socket));
  }

  /** The signed-in user of a request (cookie signature checked as koa-session signs it → session row → user); verified pairs are cached for a second. */
  private userOf(cookies: SessionCookies): SessionUser | null | Promise<SessionUser | null> {
    const { id, signature } = cookies;
    if (!id || !signature) return null;
    // Keyed by the pair, so a cache hit is a pair verified within the last second: no HMAC per request.
    return this.users.get(`${id}.${signature}`, async () =>
      this.keys.verify(`${this.deps.sessionCookie}=${id}`, signature) ? ((await findSessionUser(this.deps.db, id)) ?? null) : null,
    );
  }

  private workspaceOf(slug: string): WorkspaceRecord | null | Promise<WorkspaceRecord | null> {
    return this.workspaces.get(slug, async () => (await getWorkspaceBySlug(this.deps.db, slug)) ?? null);
  }

  /**
   * Authorises a request for a workspace; an answer to send instead when it may not pass. Answered
   * without a promise when both the session user and the workspace are cached (the common case).
   */
  private admit(cookies: SessionCookies, slug: string): Admission | Promise<Admission> {
    const user = this.userOf(cookies);
    // No session cookie: 401 without asking the database anything.
    if (user === null) return this.decide(null, null);
    const workspace = this.workspaceOf(slug);
    if (user instanceof Promise || workspace instanceof Promise) return Promise.all([user, workspace]).then(([u, w]) => this.decide(u, w));
    return this.decide(user, workspace);
  }

  private decide(user: SessionUser | null, workspace: WorkspaceRecord | null): Admission {
    if (!user || !stillAllowed(user, this.deps.isAllowed)) return { status: 401, code: 'authentication_required', message: 'Sign in to use this workspace.' };
    if (!workspace || workspace.desiredState === 'deleted' || !(user.role === 'admin' || workspace.userId === user.id)) {
      // The same answer whether the workspace exists or not, so slugs cannot be probed.
      return { status: 403, code: 'forbidden', message: 'This workspace is not yours.' };
    }
    return { workspace };
  }

  /** Serves one proxied HTTP request (the caller has checked that `path` is a proxied path). */
  request(req: http.IncomingMessage, res: http.ServerResponse, path: { slug: string; rest: string }): void {
    const { metrics } = this.deps;
    metrics.httpRequestsInFlight.inc();
    const started = performance.now();
    const method = req.method ?? 'GET';
    res.once('close', () => {
      metrics.httpRequestsInFlight.dec();
      metrics.httpRequestDuration.observe({ method, route: PROXY_ROUTE, status_class: `${Math.floor(res.statusCode / 100)}xx` }, (performance.now() - started) / 1000);
    });
    try {
      const cookies = sessionCookies(req.headers.cookie, this.cookieNames);
      const admission = this.admit(cookies, path.slug);
      if (admission instanceof Promise) {
        admission.then((answer) => this.proceed(req, res, path, cookies, answer)).catch((error: unknown) => this.failed(res, error));
      } else this.proceed(req, res, path, cookies, admission);
    } catch (error) {
      this.failed(res, error);
    }
  }

  /** An unexpected failure while serving a proxied request: logged, answered 500 (or the response broken off). */
  private failed(res: http.ServerResponse, error: unknown): void {
    this.deps.log.error({ error }, 'proxying a request failed');
    if (!res.headersSent) sendError(res, 500, 'internal_error', 'Something went wrong on our side; it has been logged.');
    else res.destroy();
  }

  /** Answers a request once it is known whether it may pass: forwarded, refused, or the workspace page. */
  private proceed(req: http.IncomingMessage, res: http.ServerResponse, path: { slug: string; rest: string }, cookies: SessionCookies, admission: Admission): void {
    const { activity } = this.deps;
    const browser = (req.headers.accept ?? '').includes('text/html');
    if ('status' in admission) {
      if (admission.status === 401 && browser) return redirect(res, `/auth/sign-in?return_to=${encodeURIComponent(`/u/${path.slug}${path.rest}`)}`);
      return sendError(res, admission.status, admission.code, admission.message);
    }
    const { workspace } = admission;
    activity.touch(workspace.id);
    if (workspace.observedState !== 'running' || !workspace.editorEndpoint) {
      this.dropPool(workspace.id);
      if (browser) return sendHtml(res, path.rest === '/' ? 200 : 503, workspacePage(workspace));
      return sendError(res, 503, 'workspace_not_running', `Workspace ${workspace.slug} is not running; open it first.`, { 'Retry-After': '5' });
    }
    this.forward(req, res, workspace, path, cookies);
  }

  /**
   * The connection pool to a workspace's editor. One per running container: a container that
   * replaces another (a restart, or an address another workspace's container had) gets a fresh
   * pool, and the old one closes once its requests are done, so no kept-alive socket to a gone
   * container is ever reused.
   */
  private poolFor(workspace: WorkspaceRecord): Pool {
    const endpoint = workspace.editorEndpoint!;
    const since = workspace.lastTransitionAt?.getTime() ?? 0;
    const current = this.pools.get(workspace.id);
    if (current?.endpoint === endpoint && current.since === since) return current.pool;
    this.dropPool(workspace.id);
    const pool = new Pool(`http://${endpoint}`, {
      connections: 256,
      // The timeout is for the editor's answer: undici starts it once the request body has been sent (an upload may take long).
      headersTimeout: this.deps.timeoutMs,
      // Server-sent events and long polls may be quiet for long: no timeout between body chunks.
      bodyTimeout: 0,
      connect: { timeout: Math.min(this.deps.timeoutMs, 10_000) },
    });
    this.pools.set(workspace.id, { endpoint, since, pool });
    return pool;
  }

  /** Closes a workspace's pool (its editor is not running, or was replaced), once the requests on it are done. */
  private dropPool(workspaceId: string): void {
    const current = this.pools.get(workspaceId);
    if (!current) return;
    this.pools.delete(workspaceId);
    void current.pool.close().catch(() => undefined);
  }

  /** Sends one request on to the editor and its answer back, streamed both ways. */
  private forward(req: http.IncomingMessage, res: http.ServerResponse, workspace: WorkspaceRecord, path: { slug: string; rest: string }, cookies: SessionCookies, retried = false): void {
    const bodiless = !req.headers['content-length'] && !req.headers['transfer-encoding'];
    const handler = new Forwarding(this, req, res, workspace, path, cookies, bodiless && !retried && IDEMPOTENT.has(req.method ?? ''));
    try {
      this.poolFor(workspace).dispatch({ method: req.method ?? 'GET', path: path.rest, headers: this.upstreamHeaders(req, path.slug, cookies.others), body: bodiless ? null : req }, handler);
    } catch (error) {
      handler.onError(error as Error);
    }
  }

  /** Sends a request once more, on a new connection (see Forwarding). */
  retry(req: http.IncomingMessage, res: http.ServerResponse, workspace: WorkspaceRecord, path: { slug: string; rest: string }, cookies: SessionCookies): void {
    this.forward(req, res, workspace, path, cookies, true);
  }

  /** The names of the control plane's own session cookies, never passed on either way. */
  get ownCookies(): string[] {
    return this.cookieNames;
  }

  /** Counts one answer (or failure) of the editor in `proxy_upstream_duration_seconds`. */
  observeUpstream(outcome: string, started: number): void {
    this.deps.metrics.proxyUpstreamDuration.observe({ upstream: 'vscode', outcome }, (performance.now() - started) / 1000);
  }

  /**
   * The request headers the editor gets, as a flat name/value list in the order they came: no
   * hop-by-hop ones (except for a WebSocket upgrade, which needs Connection and Upgrade), no
   * Authorization, no Expect, the Cookie header without our session cookies, one Host and
   * Content-Length at most, and X-Forwarded-* set by us (the client's own are replaced, or with
   * TRUST_PROXY extended).
   */
  private upstreamHeaders(req: http.IncomingMessage, slug: string, cookie: string | undefined, keepUpgrade = false): string[] {
    const raw = req.rawHeaders;
    const named = keepUpgrade ? undefined : connectionNamed(req.headers.connection);
    const result: string[] = [];
    let host = false;
    let length = false;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      const lower = name.toLowerCase();
      if (REPLACED.has(lower) || (!keepUpgrade && (HOP_BY_HOP.has(lower) || named?.has(lower)))) continue;
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
      this.deps.trustProxy && req.headers['x-forwarded-for'] ? `${req.headers['x-forwarded-for']}, ${client}` : client,
      'x-forwarded-proto',
      this.forwardedProto,
      'x-forwarded-host',
      req.headers.host ?? this.publicHost,
      'x-forwarded-prefix',
      `/u/${slug}`,
    );
    return result;
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
    const cookies = sessionCookies(req.headers.cookie, this.cookieNames);
    const admission = await Promise.resolve()
      .then(() => this.admit(cookies, path.slug))
      .catch((): Admission => ({ status: 500, code: 'internal_error', message: 'Something went wrong on our side.' }));
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
      this.observeUpstream('ok', started);
      const headers = this.upstreamHeaders(req, path.slug, cookies.others, true);
      const lines = [`${req.method} ${path.rest} HTTP/1.1`];
      for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      touch();
      socket.on('data', touch);
      upstream.on('data', touch);
      socket.pipe(upstream).pipe(socket);
    });
    upstream.once('error', () => {
      if (!connected) {
        this.observeUpstream('error', started);
        return rejectUpgrade(socket, 502, 'The editor could not be reached.');
      }
      socket.destroy();
    });
    upstream.on('close', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
  }
}

/** Methods a request of which may be sent again when the connection fails before any answer (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Connection failures before any answer after which an idempotent request is sent once more on a new connection. */
const RETRIED_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/**
 * One proxied request as undici reports it: the editor's answer is written to the client as it
 * arrives, with backpressure both ways, and every failure becomes 502/504 (before the answer
 * started) or an aborted response (after: the client sees a broken response, not a truncated success).
 *
 * It implements undici's raw handler (onConnect/onHeaders/onData/onComplete/onError): it gets the
 * editor's headers as they came, which are filtered and written on without parsing them into an
 * object (the newer onResponse* interface parses the headers and trailers of every response).
 */
class Forwarding implements Dispatcher.DispatchHandler {
  private readonly proxy: WorkspaceProxy;
  private readonly req: http.IncomingMessage;
  private readonly res: http.ServerResponse;
  private readonly workspace: WorkspaceRecord;
  private readonly path: { slug: string; rest: string };
  private readonly cookies: SessionCookies;
  private readonly retry: boolean;
  private readonly started = performance.now();
  private abort: ((error: Error) => void) | undefined;
  private resume: (() => void) | undefined;
  private answered = false;

  constructor(proxy: WorkspaceProxy, req: http.IncomingMessage, res: http.ServerResponse, workspace: WorkspaceRecord, path: { slug: string; rest: string }, cookies: SessionCookies, retry: boolean) {
    this.proxy = proxy;
    this.req = req;
    this.res = res;
    this.workspace = workspace;
    this.path = path;
    this.cookies = cookies;
    this.retry = retry;
    // The client gone before the end: stop asking the editor.
    res.once('close', () => !res.writableFinished && this.abort?.(new Error('the client went away')));
  }

  onConnect(abort: (error?: Error) => void): void {
    this.abort = abort;
    if (this.res.destroyed) abort(new Error('the client went away'));
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (status < 200) return true; // 1xx: informational, the answer follows.
    this.answered = true;
    this.proxy.observeUpstream('ok', this.started);
    if (status > 599) return this.refuse('The editor sent an invalid answer.');
    try {
      // No status message: the editor's text could hold characters Node refuses to write (and would throw).
      this.res.writeHead(status, responseHeaders(rawHeaders, this.proxy.ownCookies));
    } catch {
      return this.refuse('The editor sent an invalid answer.');
    }
    this.resume = resume;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.res.write(chunk)) return true;
    this.res.once('drain', this.resume!);
    return false;
  }

  onComplete(): void {
    this.res.end();
  }

  onError(error: Error): void {
    const { res } = this;
    if (res.destroyed || res.writableEnded) return;
    if (this.answered) return void res.destroy();
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (this.retry && RETRIED_CODES.has(code)) return this.proxy.retry(this.req, res, this.workspace, this.path, this.cookies);
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
      this.proxy.observeUpstream('timeout', this.started);
      return sendError(res, 504, 'upstream_timeout', 'The editor did not answer in time.');
    }
    this.proxy.observeUpstream('error', this.started);
    sendError(res, 502, 'upstream_error', 'The editor could not be reached.');
  }

  private refuse(message: string): false {
    if (!this.res.headersSent) sendError(this.res, 502, 'upstream_error', message);
    else this.res.destroy();
    this.abort?.(new Error(message));
    return false;
  }
}

function splitEndpoint(endpoint: string): [string, number] {
  const at = endpoint.lastIndexOf(':');
  return [endpoint.slice(0, at), Number(endpoint.slice(at + 1))];
}

/** Request headers never passed on as sent: credentials, Cookie (rebuilt without ours), Expect (this hop answered it), X-Forwarded-* (set by us). */
const REPLACED = new Set(['authorization', 'cookie', 'expect', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-prefix']);

/** The header names a Connection header lists (hop-by-hop too), lower-cased; undefined when none. */
function connectionNamed(connection: string | string[] | undefined): Set<string> | undefined {
  if (!connection) return undefined;
  // The usual values name no header: no set to build for every response.
  if (typeof connection === 'string' && /^\s*(keep-alive|close)\s*$/i.test(connection)) return undefined;
  return new Set(String(connection).split(',').map((name) => name.trim().toLowerCase()));
}

/**
 * The editor's response headers to write on, as a flat name/value list in their order, bytes kept
 * as they came (latin1): without hop-by-hop ones (including those its Connection header names) and
 * without any Set-Cookie for the control plane's own session cookies, so that an editor can never
 * replace a user's session.
 */
function responseHeaders(raw: Buffer[], ownCookies: string[]): string[] {
  const result: string[] = [];
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1');
    const lower = name.toLowerCase();
    const value = raw[i + 1]!.toString('latin1');
    if (lower === 'connection') named = connectionNamed(value);
    if (HOP_BY_HOP.has(lower)) continue;
    if (lower === 'set-cookie' && ownCookies.some((cookie) => value.trimStart().startsWith(`${cookie}=`))) continue;
    result.push(name, value);
  }
  if (!named) return result;
  return result.filter((_, i) => !named.has(result[i - (i % 2)]!.toLowerCase()));
}

/** The session cookie pair of a request, and its other cookies (the Cookie header the editor gets). */
interface SessionCookies {
  id: string | undefined;
  signature: string | undefined;
  others: string | undefined;
}

/**
 * Splits a Cookie header in one pass into the session cookie (`names[0]`, first one wins), its
 * signature (`names[1]`) and the other cookies, joined again with `; `.
 */
function sessionCookies(header: string | undefined, names: string[]): SessionCookies {
  const result: SessionCookies = { id: undefined, signature: undefined, others: undefined };
  if (!header) return result;
  let others = '';
  for (let start = 0; start < header.length; ) {
    let end = header.indexOf(';', start);
    if (end === -1) end = header.length;
    const part = header.slice(start, end).trim();
    start = end + 1;
    if (!part) continue;
    const at = part.indexOf('=');
    const name = at === -1 ? part : part.slice(0, at).trim();
    if (name === names[0]) {
      if (at !== -1) result.id ??= part.slice(at + 1).trim();
    } else if (name === names[1]) {
      if (at !== -1) result.signature ??= part.slice(at + 1).trim();
    } else others = others ? `${others}; ${part}` : part;
  }
  if (others) result.others = others;
  return result;
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
