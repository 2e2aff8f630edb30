/**
 * HTTP forwarding to the editors: one keep-alive pool per running editor container, and each
 * request streamed both ways through undici's raw dispatch.
 */
import type http from 'node:http';
import type { Socket } from 'node:net';
import { createRequire } from 'node:module';
import type { buildConnector, Dispatcher, Pool as UndiciPool } from 'undici';
import type { Metrics } from '../../src/metrics.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { escapeHtml, page } from '../pages/page.ts';
import { sendError, sendHtml } from '../responses.ts';
import { isNavigation } from './host.ts';
import { responseHeaders, upstreamHeaders, type ForwardingContext } from './headers.ts';
import { UpstreamError } from '../../src/errors.ts';
import type { UpstreamKind, Upstreams } from './upstreams.ts';

// undici's Pool module alone (22 modules, not the package's index of 110; about 75 ms less, loaded alone); undici has no exports map.
const Pool = createRequire(import.meta.url)('undici/lib/dispatcher/pool.js') as typeof UndiciPool;
type Pool = UndiciPool;

/** Methods a request of which may be sent again when the connection fails before any answer (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Connection failures before any answer after which an idempotent request is sent once more on a new connection. */
const RETRIED_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/**
 * A proxied path: the workspace's slug and the rest, sent to the editor as it came; `host` when it
 * came on the workspace's own host (host mode: no prefix was stripped, and the answer's cookies are
 * filtered with that host's rules).
 */
export interface ProxiedPath {
  slug: string;
  rest: string;
  host?: boolean;
}

/** Counts one answer (or failure) of an editor, or of a simulator (`nt4`, `halsim`), in `proxy_upstream_duration_seconds`. */
export function observeEditor(metrics: Metrics, outcome: 'ok' | 'error' | 'timeout', started: number, upstream: UpstreamKind = 'vscode'): void {
  metrics.proxyUpstreamDuration.observe({ upstream, outcome }, (performance.now() - started) / 1000);
}

export interface ForwarderDeps {
  metrics: Metrics;
  /** How connections to editors are made: each to a verified address only. */
  upstreams: Upstreams;
  /** How long to wait for the editor's response headers. */
  timeoutMs: number;
  forwarding: ForwardingContext;
  /** The control plane's session cookies: an editor's Set-Cookie for them is dropped. */
  ownCookies: readonly string[];
  /** On a workspace's own host (host mode), the cookies an editor's Set-Cookie may not name; one with a Domain attribute is dropped there too. */
  hostCookies?: readonly string[];
}

/** Sends requests on to the editors (see the file comment). */
export class HttpForwarder {
  private readonly deps: ForwarderDeps;
  /** Upstream connection pools by workspace id, with the container they reach (its address and start). */
  private readonly pools = new Map<string, { endpoint: string; since: number; pool: Pool }>();

  constructor(deps: ForwarderDeps) {
    this.deps = deps;
  }

  /**
   * Sends one request on to a running workspace's editor and its answer back, streamed both ways,
   * with `cookie` (the client's cookies without ours) as its Cookie header.
   */
  forward(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    workspace: WorkspaceRecord,
    path: ProxiedPath,
    cookie: string | undefined,
    retried = false,
  ): void {
    const bodiless = !req.headers['content-length'] && !req.headers['transfer-encoding'];
    const handler = new Forwarding(this, req, res, workspace, path, cookie, bodiless && !retried && IDEMPOTENT.has(req.method ?? ''));
    try {
      const headers = upstreamHeaders(req, path.host ? undefined : path.slug, cookie, this.deps.forwarding);
      this.poolFor(workspace).dispatch({ method: req.method ?? 'GET', path: path.rest, headers, body: bodiless ? null : req }, handler);
    } catch (error) {
      handler.onError(error as Error);
    }
  }

  /** Closes a workspace's pool (its editor is not running, or was replaced), once the requests on it are done. */
  drop(workspaceId: string): void {
    const current = this.pools.get(workspaceId);
    if (!current) return;
    this.pools.delete(workspaceId);
    void current.pool.close().catch(() => undefined);
  }

  /** Closes every pool at once. */
  close(): void {
    for (const { pool } of this.pools.values()) void pool.destroy().catch(() => undefined);
    this.pools.clear();
  }

  /** Counts one answer (or failure) of the editor. */
  observe(outcome: 'ok' | 'error' | 'timeout', started: number): void {
    observeEditor(this.deps.metrics, outcome, started);
  }

  /** The editor's response headers to pass on, filtered by the rules of where the request came (see ForwarderDeps). */
  responseHeaders(raw: Buffer[], path: ProxiedPath): string[] {
    return path.host
      ? responseHeaders(raw, this.deps.hostCookies ?? this.deps.ownCookies, false, true)
      : responseHeaders(raw, this.deps.ownCookies, false, false, `/u/${path.slug}/`);
  }

  /** A verified connection to a workspace's editor, handed to undici's callback (its connector's contract). */
  private async connectEditor(workspaceId: string, endpoint: string, callback: buildConnector.Callback): Promise<void> {
    let socket: Socket;
    try {
      socket = await this.deps.upstreams.connect({ workspaceId }, 'vscode', endpoint);
    } catch (error) {
      return callback(error as Error, null);
    }
    callback(null, socket);
  }

  /**
   * The connection pool to a workspace's editor. One per running container: a container that
   * replaces another (a restart, or an address another workspace's container had) gets a fresh
   * pool, and the old one closes once its requests are done, so no kept-alive socket to a gone
   * container is ever reused.
   */
  private poolFor(workspace: WorkspaceRecord): Pool {
    const endpoint = workspace.status.editorEndpoint!;
    const since = workspace.status.lastTransitionAt?.getTime() ?? 0;
    const current = this.pools.get(workspace.id);
    if (current?.endpoint === endpoint && current.since === since) return current.pool;
    this.drop(workspace.id);
    const { timeoutMs } = this.deps;
    const pool = new Pool(`http://${endpoint}`, {
      connections: 256,
      // The timeout is for the editor's answer: undici starts it once the request body has been sent (an upload may take long).
      headersTimeout: timeoutMs,
      // Server-sent events and long polls may be quiet for long: no timeout between body chunks.
      bodyTimeout: 0,
      // Each connection only to the workspace's live editor (Upstreams verifies the address before and after the handshake).
      connect: (_options, callback) => void this.connectEditor(workspace.id, endpoint, callback),
    });
    this.pools.set(workspace.id, { endpoint, since, pool });
    return pool;
  }
}

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
  private readonly forwarder: HttpForwarder;
  private readonly req: http.IncomingMessage;
  private readonly res: http.ServerResponse;
  private readonly workspace: WorkspaceRecord;
  private readonly path: ProxiedPath;
  private readonly cookie: string | undefined;
  private readonly retry: boolean;
  private readonly started = performance.now();
  private abort: ((error: Error) => void) | undefined;
  private resume: (() => void) | undefined;
  private answered = false;

  constructor(
    forwarder: HttpForwarder,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    workspace: WorkspaceRecord,
    path: ProxiedPath,
    cookie: string | undefined,
    retry: boolean,
  ) {
    this.forwarder = forwarder;
    this.req = req;
    this.res = res;
    this.workspace = workspace;
    this.path = path;
    this.cookie = cookie;
    this.retry = retry;
    // The client gone before the end: stop asking the editor.
    // A response closes once: a plain listener (once's wrapper costs its removal on every request).
    res.on('close', () => !res.writableFinished && this.abort?.(new Error('the client went away')));
  }

  onConnect(abort: (error?: Error) => void): void {
    this.abort = abort;
    if (this.res.destroyed) abort(new Error('the client went away'));
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (status < 200) return true; // 1xx: informational, the answer follows.
    this.answered = true;
    this.forwarder.observe('ok', this.started);
    if (status > 599) return this.refuse('The editor sent an invalid answer.');
    try {
      // No status message: the editor's text could hold characters Node refuses to write (and would throw).
      this.res.writeHead(status, this.forwarder.responseHeaders(rawHeaders, this.path));
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
    if (this.retry && RETRIED_CODES.has(code)) return this.forwarder.forward(this.req, res, this.workspace, this.path, this.cookie, true);
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'ETIMEDOUT') {
      this.forwarder.observe('timeout', this.started);
      return sendError(res, UpstreamError('upstream_timeout', 'The editor did not answer in time.'));
    }
    this.forwarder.observe('error', this.started);
    if (code === 'UPSTREAM_UNVERIFIED' && !isNavigation(this.req))
      return sendError(res, UpstreamError('editor_gone', 'The editor is not running here any more; it may be restarting: try again in a moment.'));
    // A student's page load: a page that says so and tries again (by then the workspace page, if it was stopped).
    if (isNavigation(this.req)) return sendHtml(res, 502, editorNotAnswering(this.workspace.slug));
    sendError(res, UpstreamError('upstream_error', 'The editor could not be reached.'));
  }

  private refuse(message: string): false {
    if (!this.res.headersSent) sendError(this.res, UpstreamError('upstream_error', message));
    else this.res.destroy();
    this.abort?.(new Error(message));
    return false;
  }
}

/** The page of a page load the editor did not answer: it may be restarting, or just stopped. */
function editorNotAnswering(slug: string): string {
  return page(
    'Editor not answering',
    `<meta http-equiv="refresh" content="5">
<h1>The editor is not answering</h1>
<p>Workspace ${escapeHtml(slug)}'s editor did not answer: it may be restarting, or it was just stopped. This page tries again in a few seconds.</p>
<a class="button" href="">Try again now</a>`,
  );
}
