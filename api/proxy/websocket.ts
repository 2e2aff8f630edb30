/**
 * WebSocket tunnels to the editors and simulators: the upgrade request is written on to the
 * upstream as it came (its headers filtered like any request's), over a connection made only to the
 * live container it is meant for (Upstreams), the upstream's answer head is read up to its blank
 * line and filtered like any response's (a 101 keeps Connection and Upgrade), and then the two byte
 * streams are joined. Opening a tunnel to the editor marks the workspace active; what flows through
 * it does not (see ActivityRecorder). Each tunnel remembers whose it is, so that a revocation (see
 * WorkspaceProxy) can find and end it.
 *
 * A tunnel holds two descriptors for as long as it lasts, and a student's program can keep its side
 * open for ever, so: when the client ends (closes, or only sends its FIN), both sides are destroyed
 * at once; when the upstream ends, what it sent is passed on, the client's side is ended, and both
 * are destroyed END_GRACE_MS later at most (the client may never close either); an upstream that does not answer the
 * upgrade within the proxy's timeout is given up (504); and the tunnels open at once are bounded per
 * workspace and in all (TunnelLimits), past which an upgrade is refused with a clear error, counted
 * and logged (once a minute per workspace).
 */
import http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../../src/log.ts';
import type { Metrics } from '../../src/metrics.ts';
import type { ServingTarget } from '../../src/docker/runtime.ts';
import type { ActivityRecorder } from '../../src/store/activity.ts';
import type { SessionUser } from '../../src/store/sessions.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { refuseUpgrade } from '../responses.ts';
import type { Verdict } from './admission.ts';
import { parseResponseHead, responseHeaders, upstreamHeaders, type ForwardingContext } from './headers.ts';
import type { PresenceTracker } from './presence.ts';
import { observeEditor, type ProxiedPath } from './http.ts';
import { UnverifiedUpstreamError, type UpstreamKind, type Upstreams } from './upstreams.ts';
import { TooManyError, UnavailableError, UpstreamError, type AppError } from '../../src/errors.ts';
import { Fold } from '../../src/fold.ts';
import { sessionDigest } from '../../src/store/sessions.ts';

/** The longest answer head an upstream may send before its WebSocket starts (a 101 is a few hundred bytes). */
const MAX_HEAD_BYTES = 64 * 1024;

/** How long a client may take to close its side after its upstream closed (what the upstream sent is passed on meanwhile). */
export const END_GRACE_MS = 2000;

/** TCP keep-alive on both sides of a tunnel: a peer that vanished without a word is found and its tunnel ended. */
export const KEEPALIVE_MS = 30_000;

const HEAD_END = Buffer.from('\r\n\r\n');

/** How many tunnels may be open at once: to one workspace (its editor and simulator together), and in all. */
export interface TunnelLimits {
  perWorkspace: number;
  total: number;
}

export interface TunnelDeps {
  metrics: Metrics;
  log: Logger;
  activity: ActivityRecorder;
  upstreams: Upstreams;
  forwarding: ForwardingContext;
  limits: TunnelLimits;
  /** How long an upstream may take to answer the upgrade. */
  answerTimeoutMs: number;
  /** The control plane's session cookies: an editor's Set-Cookie for them is dropped from its answer. */
  ownCookies: readonly string[];
  /** On a workspace's own host (host mode), the cookies an editor's Set-Cookie may not name; one with a Domain attribute is dropped there too. */
  hostCookies?: readonly string[];
  /** Counts the owner's editors and the NetworkTables clients open, for the class view (none: not counted). */
  presence?: Pick<PresenceTracker, 'tunnelOpened'>;
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
 * simulator of its run in progress (NetworkTables: the run's endpoint, the path under `.cp/nt4`;
 * HALSim: the robot's WebSocket, relayed by halsim.ts rather than piped).
 */
export interface TunnelTarget {
  upstream: UpstreamKind;
  /** `host:port`, as recorded (a run's: its NetworkTables port's). */
  endpoint: string;
  /** Whose container the endpoint must be (the workspace's editor, or its run's simulator). */
  serving: ServingTarget;
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
  /** Open tunnels by workspace id. */
  private readonly open = new Map<string, number>();
  /** One log line a minute per bound hit (per workspace, and the server's). */
  private readonly fold = new Fold();
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
   * Whether a new tunnel to `workspaceId` would pass the bounds (TunnelLimits): undefined when it
   * would, else the refusal to answer with (counted, and logged once a minute per workspace).
   */
  refusal(workspaceId: string, slug: string): AppError | undefined {
    const { limits, metrics, log } = this.deps;
    const bound = this.tunnels.size >= limits.total ? 'server' : (this.open.get(workspaceId) ?? 0) >= limits.perWorkspace ? 'workspace' : undefined;
    if (bound === undefined) return undefined;
    metrics.proxyTunnelRefusals.inc({ bound });
    const repeats = this.fold.take(bound === 'server' ? 'server' : workspaceId);
    if (repeats !== undefined) {
      const line =
        bound === 'server'
          ? `refused a WebSocket: the server has ${limits.total} open (PROXY_MAX_TUNNELS), the most it keeps descriptors for`
          : `refused a WebSocket to workspace ${slug}: it has ${limits.perWorkspace} open (PROXY_MAX_TUNNELS_PER_WORKSPACE)`;
      log.warning({ workspaceId, bound, repeats }, line);
    }
    return bound === 'server'
      ? UnavailableError('server_busy', 'The server has as many connections open as it can hold; try again in a moment.', 5)
      : TooManyError(
          'too_many_connections',
          `This workspace has ${limits.perWorkspace} connections open, the most one workspace may have: close some of its tabs and try again.`,
          5,
        );
  }

  /** Counts `tunnel` as open (against the bounds too, and found by revocations) until `socket`, its client's, closes. */
  hold(tunnel: Tunnel, socket: Duplex): void {
    this.add(tunnel);
    socket.once('close', () => this.remove(tunnel));
  }

  /**
   * Opens a tunnel from an admitted client's socket to `target` of `workspace` (its running editor,
   * or its simulator), for `owner`, with `cookie` (the client's cookies without ours) as the Cookie
   * header the upstream gets. It counts as open (against the bounds too), and can be found and
   * ended, from now on; the connection to the upstream is made once Upstreams has verified whose
   * address it is.
   */
  openTunnel(
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
    workspace: WorkspaceRecord,
    path: ProxiedPath,
    cookie: string | undefined,
    owner: TunnelOwner,
    target: TunnelTarget,
  ): Tunnel {
    let upstream: net.Socket | undefined;
    const tunnel: Tunnel = {
      user: owner.user,
      workspaceId: workspace.id,
      slug: path.slug,
      sessionId: owner.sessionId,
      admit: owner.admit,
      close: () => {
        socket.destroy();
        upstream?.destroy();
      },
    };
    this.hold(tunnel, socket);
    const left = this.deps.presence?.tunnelOpened(workspace, owner.user.id, target.upstream);
    if (left) socket.once('close', left);
    void (async () => {
      const started = performance.now();
      try {
        upstream = await this.deps.upstreams.connect(target.serving, target.upstream, target.endpoint);
      } catch (error) {
        if (socket.destroyed) return;
        const timedOut = (error as NodeJS.ErrnoException).code === 'ETIMEDOUT';
        observeEditor(this.deps.metrics, timedOut ? 'timeout' : 'error', started, target.upstream);
        return refuseUpgrade(socket, upstreamFailure(error, target.upstream));
      }
      this.track(upstream);
      if (socket.destroyed) return void upstream.destroy();
      observeEditor(this.deps.metrics, 'ok', started, target.upstream);
      this.join(req, socket, head, upstream, workspace, path, cookie, target);
    })();
    return tunnel;
  }

  /**
   * Writes the upgrade request to the connected upstream and joins the two sides: the answer head is
   * relayed (relayAnswer), or a 504 sent when it does not come within answerTimeoutMs; from then on,
   * the client's end ends both at once, the upstream's ends the client's side, and both are
   * destroyed END_GRACE_MS later at most.
   */
  private join(
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
    upstream: net.Socket,
    workspace: WorkspaceRecord,
    path: ProxiedPath,
    cookie: string | undefined,
    target: TunnelTarget,
  ): void {
    let answered = false;
    /** The upstream failed before its answer was passed on: the client gets a 502 (or `failure`), not a cut connection. */
    const broken = (failure = UpstreamError('upstream_error', `The ${UPSTREAM_NAMES[target.upstream]} could not be reached.`)) => {
      upstream.destroy();
      if (answered || socket.destroyed) return socket.destroy();
      answered = true;
      refuseUpgrade(socket, failure);
    };
    const waiting = setTimeout(
      () => broken(UpstreamError('upstream_timeout', `The ${UPSTREAM_NAMES[target.upstream]} did not answer in time.`)),
      this.deps.answerTimeoutMs,
    );
    // The client's FIN (a tab closed, a program that dropped it): nothing more is for it, and the upstream may never close its side.
    socket.once('end', () => {
      socket.destroy();
      upstream.destroy();
    });
    // The upstream's FIN: what it sent is passed on (the pipe ends the client's side after it), then both go, whether or not the client closes.
    let grace: NodeJS.Timeout | undefined;
    upstream.once('end', () => {
      if (!answered) return broken();
      grace = setTimeout(() => socket.destroy(), END_GRACE_MS);
    });
    for (const side of [socket, upstream] as Duplex[]) {
      (side as Partial<net.Socket>).setKeepAlive?.(true, KEEPALIVE_MS);
      side.once('close', () => {
        clearTimeout(waiting);
        clearTimeout(grace);
      });
    }
    upstream.on('error', () => broken());
    upstream.on('close', () => (answered ? socket.destroy() : broken()));
    socket.on('close', () => upstream.destroy());

    const headers = upstreamHeaders(req, path.host ? undefined : path.slug, cookie, this.deps.forwarding, true);
    const lines = [`${req.method} ${target.rest} HTTP/1.1`];
    for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
    upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) upstream.write(head);
    // Opening the editor is the student's doing; what flows after is not (VS Code's own keep-alives
    // go every few seconds, whoever is there): the editor's extension says when the student is.
    if (target.upstream === 'vscode') this.deps.activity.touch(workspace.id);
    socket.pipe(upstream);
    this.relayAnswer(
      upstream,
      socket,
      path,
      () => {
        answered = true;
        clearTimeout(waiting);
      },
      () => broken(),
    );
  }

  private add(tunnel: Tunnel): void {
    this.tunnels.add(tunnel);
    this.open.set(tunnel.workspaceId, (this.open.get(tunnel.workspaceId) ?? 0) + 1);
    this.deps.metrics.proxyTunnelsOpen.inc();
  }

  private remove(tunnel: Tunnel): void {
    if (!this.tunnels.delete(tunnel)) return;
    const left = (this.open.get(tunnel.workspaceId) ?? 1) - 1;
    if (left > 0) this.open.set(tunnel.workspaceId, left);
    else this.open.delete(tunnel.workspaceId);
    this.deps.metrics.proxyTunnelsOpen.dec();
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

/** What each upstream is called in a message. */
const UPSTREAM_NAMES = { vscode: 'editor', nt4: 'simulator', halsim: 'robot' } as const;

/** The refusal of an upgrade whose upstream could not be connected to: gone (its address is not its container's), timed out, or unreachable. */
function upstreamFailure(error: unknown, upstream: TunnelTarget['upstream']): AppError {
  if (error instanceof UnverifiedUpstreamError)
    return upstream !== 'vscode'
      ? UnavailableError('no_simulator', 'The simulator of this run is not running any more: press Run again.', 5)
      : UpstreamError('editor_gone', 'The editor is not running here any more; it may be restarting: try again in a moment.');
  if ((error as NodeJS.ErrnoException).code === 'ETIMEDOUT')
    return UpstreamError('upstream_timeout', `The ${UPSTREAM_NAMES[upstream]} did not answer in time.`);
  return UpstreamError('upstream_error', `The ${UPSTREAM_NAMES[upstream]} could not be reached.`);
}
