/**
 * WebSocket tunnels to the editors: the upgrade request is written on to the editor as it came
 * (its headers filtered like any request's), the editor's answer head is read up to its blank line
 * and filtered like any response's (a 101 keeps Connection and Upgrade), and then the two byte
 * streams are joined. Opening a tunnel to the editor marks the workspace active; what flows through
 * it does not (see ActivityRecorder). Each tunnel remembers whose
 * it is, so that a revocation (see WorkspaceProxy) can find and end it.
 */
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Metrics } from '../../src/metrics.ts';
import type { ActivityRecorder } from '../../src/store/activity.ts';
import type { SessionUser } from '../../src/store/sessions.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { refuseUpgrade } from '../responses.ts';
import type { Verdict } from './admission.ts';
import { parseResponseHead, responseHeaders, upstreamHeaders, type ForwardingContext } from './headers.ts';
import { observeEditor, type ProxiedPath } from './http.ts';
import { UpstreamError } from '../../src/errors.ts';
import { sessionDigest } from '../../src/store/sessions.ts';

/** The longest answer head an editor may send before its WebSocket starts (a 101 is a few hundred bytes). */
const MAX_HEAD_BYTES = 64 * 1024;

const HEAD_END = Buffer.from('\r\n\r\n');

export interface TunnelDeps {
  metrics: Metrics;
  activity: ActivityRecorder;
  forwarding: ForwardingContext;
  /** The control plane's session cookies: an editor's Set-Cookie for them is dropped from its answer. */
  ownCookies: readonly string[];
  /** On a workspace's own host (host mode), the cookies an editor's Set-Cookie may not name; one with a Domain attribute is dropped there too. */
  hostCookies?: readonly string[];
}

/** Whose a tunnel is: the user it was admitted for, the control-plane session behind it, and how to admit it again. */
export interface TunnelOwner {
  user: SessionUser;
  /** The control-plane session it came with (path mode: the session cookie's; host mode: the one its workspace cookie names). */
  sessionId: string;
  /** Admits it again with the rule and the credentials that admitted it. */
  admit: () => Verdict | Promise<Verdict>;
}

/**
 * Where a tunnel goes: a workspace's editor (its recorded endpoint, the request's own path), or the
 * simulator of its run in progress (NetworkTables: the run's endpoint, the path under `.cp/nt4`).
 */
export interface TunnelTarget {
  upstream: 'vscode' | 'nt4';
  /** `host:port`. */
  endpoint: string;
  /** The request target the upstream gets. */
  rest: string;
}

/** One open tunnel and whose it is: the user it was admitted for, with the session it came with, and the workspace it reaches. */
export interface Tunnel {
  /** The user as last admitted (the role is refreshed by each re-check). */
  user: SessionUser;
  readonly workspaceId: string;
  readonly slug: string;
  readonly sessionId: string;
  readonly admit: () => Verdict | Promise<Verdict>;
  /** Ends both sides at once. */
  close(): void;
}

/** The open tunnels (see the file comment). */
export class Tunnels {
  private readonly deps: TunnelDeps;
  /** Open sockets (both ends), closed on shutdown: an HTTP server's close does not end them. */
  private readonly sockets = new Set<Duplex>();
  private readonly tunnels = new Set<Tunnel>();
  private closed = false;

  constructor(deps: TunnelDeps) {
    this.deps = deps;
  }

  /**
   * Tracks a socket until it closes (the client's from the start, so that shutdown ends it even
   * while it is being admitted). Once closed (a shutdown), a new one is ended at once: the balancer
   * sends the upgrade to another replica, and the browser's next try goes there.
   */
  track(socket: Duplex): void {
    if (this.closed) return void socket.destroy();
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  /** The open tunnels of a user. */
  ofUser(userId: string): Tunnel[] {
    return [...this.tunnels].filter((tunnel) => tunnel.user.id === userId);
  }

  /** The open tunnels that came with a control-plane session, named by sessionDigest of its id. */
  ofSession(digest: string): Tunnel[] {
    return [...this.tunnels].filter((tunnel) => sessionDigest(tunnel.sessionId) === digest);
  }

  /** The open tunnels to a workspace. */
  ofWorkspace(workspaceId: string): Tunnel[] {
    return [...this.tunnels].filter((tunnel) => tunnel.workspaceId === workspaceId);
  }

  /** Every open tunnel. */
  all(): Tunnel[] {
    return [...this.tunnels];
  }

  /**
   * Opens a tunnel from an admitted client's socket to `target` of `workspace` (its running editor,
   * or its simulator), for `owner`, with `cookie` (the client's cookies without ours) as the Cookie
   * header the upstream gets. It counts as open, and can be found and ended, from now on.
   */
  open(
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
    workspace: WorkspaceRecord,
    path: ProxiedPath,
    cookie: string | undefined,
    owner: TunnelOwner,
    target: TunnelTarget,
  ): Tunnel {
    const { metrics, activity } = this.deps;
    const at = target.endpoint.lastIndexOf(':');
    const started = performance.now();
    const upstream = net.connect({ port: Number(target.endpoint.slice(at + 1)), host: target.endpoint.slice(0, at), noDelay: true });
    this.track(upstream);
    const tunnel: Tunnel = {
      user: owner.user,
      workspaceId: workspace.id,
      slug: path.slug,
      sessionId: owner.sessionId,
      admit: owner.admit,
      close: () => {
        socket.destroy();
        upstream.destroy();
      },
    };
    this.tunnels.add(tunnel);
    socket.once('close', () => this.tunnels.delete(tunnel));

    let connected = false;
    let answered = false;
    /** The editor failed before its answer was passed on: the client gets a 502, not a cut connection. */
    const broken = () => {
      if (answered || socket.destroyed) return socket.destroy();
      answered = true;
      refuseUpgrade(socket, UpstreamError(502, 'upstream_error', 'The editor could not be reached.'));
    };
    upstream.once('connect', () => {
      connected = true;
      observeEditor(metrics, 'ok', started, target.upstream);
      const headers = upstreamHeaders(req, path.host ? undefined : path.slug, cookie, this.deps.forwarding, true);
      const lines = [`${req.method} ${target.rest} HTTP/1.1`];
      for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      // Opening the editor is the student's doing; what flows after is not (VS Code's own keep-alives
      // go every few seconds, whoever is there): the editor's extension says when the student is.
      if (target.upstream === 'vscode') activity.touch(workspace.id);
      socket.pipe(upstream);
      this.relayAnswer(upstream, socket, path, () => (answered = true), broken);
    });
    upstream.once('error', () => {
      if (!connected) {
        observeEditor(metrics, 'error', started, target.upstream);
        answered = true;
        return refuseUpgrade(socket, UpstreamError(502, 'upstream_error', 'The editor could not be reached.'));
      }
      broken();
    });
    upstream.on('close', () => (answered ? socket.destroy() : broken()));
    socket.on('close', () => upstream.destroy());
    return tunnel;
  }

  /** Ends every tunnel at once. */
  close(): void {
    this.closed = true;
    for (const socket of this.sockets) socket.destroy();
  }

  /**
   * Reads the editor's answer head, writes it on to the client filtered (responseHeaders), then
   * joins the editor's bytes to the client. A head that is not valid HTTP, or longer than
   * MAX_HEAD_BYTES, is `broken`. An answer other than 101 closes the connection once sent.
   */
  private relayAnswer(upstream: net.Socket, socket: Duplex, path: ProxiedPath, answered: () => void, broken: () => void): void {
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf(HEAD_END);
      if (end === -1) {
        if (buffered.length > MAX_HEAD_BYTES) {
          upstream.off('data', onData);
          broken();
        }
        return;
      }
      upstream.off('data', onData);
      const parsed = parseResponseHead(buffered.subarray(0, end).toString('latin1'));
      if (!parsed) return broken();
      const upgraded = parsed.status === 101;
      const headers = path.host
        ? responseHeaders(parsed.headers, this.deps.hostCookies ?? this.deps.ownCookies, upgraded, true)
        : responseHeaders(parsed.headers, this.deps.ownCookies, upgraded);
      const lines = [`HTTP/1.1 ${parsed.status} ${http.STATUS_CODES[parsed.status] ?? ''}`];
      for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
      if (!upgraded) lines.push('Connection: close');
      answered();
      socket.write(Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'));
      const rest = buffered.subarray(end + HEAD_END.length);
      if (rest.length > 0) socket.write(rest);
      upstream.pipe(socket);
    };
    upstream.on('data', onData);
  }
}
