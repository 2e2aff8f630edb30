/**
 * The reverse proxy to each workspace's editor, outside Koa so that it streams both ways without
 * buffering. Its parts: `path` (which paths it serves and refuses), `host` (host mode's names),
 * `admission` (credentials, cache, access rule), `handoff` (host mode's cookie and one-time codes),
 * `http` (forwarding), `websocket` (tunnels), `halsim` (the Driver Station's relay to a run's robot),
 * `headers` (what crosses, both ways).
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Change, ChangeFeed } from '../../src/db/changes.ts';
import { AppError, InternalError, MethodNotAllowedError, UnavailableError, ValidationError } from '../../src/errors.ts';
import type { Logger } from '../../src/log.ts';
import type { Metrics } from '../../src/metrics.ts';
import { statusClass } from '../../src/request-histogram.ts';
import type { ActivityRecorder } from '../../src/store/activity.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { isDriverStationTarget, sendDriverStationPage } from '../driver-station.ts';
import { page, refusalPage } from '../pages/page.ts';
import { stillAllowed } from '../policy.ts';
import { redirect, refuseUpgrade, sendError, sendHtml, tryAgainLater } from '../responses.ts';
import { workspacePage } from '../pages/workspace-page.ts';
import { Admission, sessionCookies, type Verdict } from './admission.ts';
import type { GrantSigner } from './handoff.ts';
import { acceptsHtml, isNavigation, RESERVED_PREFIX } from './host.ts';
import { HalsimRelay, isHalsimTarget } from './halsim.ts';
import { HttpForwarder, type ProxiedPath } from './http.ts';
import type { PresenceTracker } from './presence.ts';
import { Tunnels, type Tunnel, type TunnelLimits, type TunnelOwner, type TunnelTarget } from './websocket.ts';
import type { Upstreams } from './upstreams.ts';
import { HALSIM_URI } from '../../src/docker/runtime.ts';

export { parseWorkspacePath, SLUG, type WorkspacePath } from './path.ts';
export { WorkspaceHosts } from './host.ts';

/** How often a WebSocket upgrade is looked up again when revocations keep coming during its lookup. */
const MAX_ADMISSION_ROUNDS = 5;

/** The route label of every proxied request under `/u/<slug>/`: the template, never the student's path. */
export const PROXY_ROUTE = '/u/:slug/*';

/** The route label of every request on a workspace's own host (host mode). */
export const HOST_ROUTE = '<workspace host>/*';

/** Where the control plane hands a session over to a workspace's host (host mode), and its route label. */
export const HANDOVER_PREFIX = '/auth/workspace/';
export const HANDOVER_ROUTE = '/auth/workspace/:slug';

/** The workspace page under `/u/<slug>/` on the control plane, whether or not the editor runs (a way back to it from the editor). */
export const PAGE_PATH = RESERVED_PREFIX;

/** Whether a request target under `/u/<slug>` asks for the workspace page (PAGE_PATH, with any query). */
export const isPagePath = (rest: string): boolean => rest === PAGE_PATH || rest.startsWith(`${PAGE_PATH}?`);

/** Where, under an editor's address (`/u/<slug>/` or a workspace's host), its pages find the student API of their workspace. */
export const EDITOR_API_PREFIX = `${RESERVED_PREFIX}api/`;

/** Marks a request the proxy admitted with a workspace's cookie (host mode): whom for, and the origin it came from. */
export const GRANTED = Symbol('granted');

/** A request with its GRANTED mark. */
export type GrantedRequest = http.IncomingMessage & { [GRANTED]?: { userId: string; origin: string } };

/** Where, under an editor's address, the simulator's NetworkTables are (a WebSocket: `.cp/nt4/nt/<client>` reaches the simulator's `/nt/<client>`). */
export const NT4_PREFIX = `${RESERVED_PREFIX}nt4/`;

/** The simulator's path of a request target under NT4_PREFIX (`/nt/<client>`, with its query), or undefined for any other target. */
function nt4Path(target: string): string | undefined {
  return target.startsWith(NT4_PREFIX) ? `/${target.slice(NT4_PREFIX.length)}` : undefined;
}

/** Whether a request target under the editor's reserved prefix is a WebSocket the proxy serves: the simulator's NetworkTables or its robot's HALSim. */
export function isSimulatorSocket(target: string): boolean {
  return target.startsWith(NT4_PREFIX) || isHalsimTarget(target);
}

export interface ProxyDeps {
  store: Pick<SurfaceStore, 'sessions' | 'workspaces' | 'runs'>;
  changes: ChangeFeed;
  metrics: Metrics;
  activity: ActivityRecorder;
  log: Logger;
  publicOrigin: string;
  sessionCookie: string;
  sessionSecret: string;
  trustProxy: boolean;
  /** How long to wait for the editor's response headers (and for an upstream's answer to a WebSocket upgrade). */
  timeoutMs: number;
  /** Connections to editors and simulators, each verified to reach the container it is for. */
  upstreams: Upstreams;
  /** How many WebSocket tunnels may be open at once, per workspace and in all. */
  tunnelLimits: TunnelLimits;
  /** Whether an email may still sign in (allowlist and SERVICE_ADMIN_EMAIL). */
  isAllowed: (email: string) => boolean;
  /** Who is at each workspace (the owner's editors, NetworkTables, a Driver Station), for the class view; none: not counted (no row in `servers`). */
  presence?: PresenceTracker;
  /** The HALSim relay's watchdog, when a test gives another (halsim.ts: HalsimRelayDeps.watchdogMs). */
  driverWatchdogMs?: number;
}
/**
 * Serves every path under `/u/<slug>/` except `/u/<slug>/api/...` (`request`) and, in path mode,
 * WebSocket upgrades there (`upgrade`); host mode is HostModeProxy (host-mode.ts), which adds the
 * workspaces' own hosts and the hand-over to them.
 *
 * Path mode: only the owner passes (`mayOpenEditor`: an admin who is not the owner gets 403, a
 * page for a browser); the control plane's session cookie and Authorization never reach the editor.
 *
 * Either way an open WebSocket is re-checked with the rule that admitted it whenever its user, its
 * workspace or its session changes (the change feed, sign-out) and whenever the allowlist is
 * reloaded (`allowlistChanged`), and ended at once when it no longer passes. Every refusal is an
 * AppError (src/errors.ts), answered by sendError or refuseUpgrade.
 */
export class WorkspaceProxy {
  protected readonly deps: ProxyDeps;
  protected readonly admission: Admission;
  protected readonly forwarder: HttpForwarder;
  protected readonly tunnels: Tunnels;
  private readonly halsim: HalsimRelay;
  private readonly unsubscribe: () => void;
  private readonly unsubscribeListening: () => void;
  /** Counts revocation triggers (user and workspace changes, sign-outs, allowlist reloads): an upgrade admitted across one is admitted again. */
  private revision = 0;

  /** `host`: host mode's (HostModeProxy): its cookie signer and the cookie names its hosts keep from editors. */
  constructor(deps: ProxyDeps, host?: { grants: GrantSigner; reservedCookies: readonly string[] }) {
    this.deps = deps;
    this.admission = new Admission({
      ...deps.store,
      sessionCookie: deps.sessionCookie,
      sessionSecret: deps.sessionSecret,
      isAllowed: deps.isAllowed,
      mode: host ? 'host' : 'path',
      grants: host?.grants,
    });
    const forwarding = {
      trustProxy: deps.trustProxy,
      proto: deps.publicOrigin.startsWith('https:') ? 'https' : 'http',
      publicHost: new URL(deps.publicOrigin).host,
    };
    const cookieRules = { ownCookies: this.admission.cookieNames, hostCookies: host?.reservedCookies };
    this.forwarder = new HttpForwarder({ metrics: deps.metrics, timeoutMs: deps.timeoutMs, upstreams: deps.upstreams, forwarding, ...cookieRules });
    this.tunnels = new Tunnels({
      metrics: deps.metrics,
      log: deps.log,
      activity: deps.activity,
      upstreams: deps.upstreams,
      forwarding,
      limits: deps.tunnelLimits,
      answerTimeoutMs: deps.timeoutMs,
      presence: deps.presence,
      ...cookieRules,
    });
    this.halsim = new HalsimRelay({
      metrics: deps.metrics,
      log: deps.log,
      upstreams: deps.upstreams,
      tunnels: this.tunnels,
      answerTimeoutMs: deps.timeoutMs,
      presence: deps.presence,
      watchdogMs: deps.driverWatchdogMs,
    });
    // Changes take effect at once: a demoted user or a stopped workspace is not served from cache.
    this.unsubscribe = deps.changes.subscribe((change) => {
      this.admission.changed(change);
      // Stopped, restarted or deleted: the editor it reached is going, and its idle connections go now.
      if (change.kind === 'workspaces') {
        this.forwarder.drop(change.id);
        this.deps.upstreams.forget(change.id);
      }
      this.revoke(change);
    });
    this.unsubscribeListening = deps.changes.onListening(() => this.resync());
  }

  /**
   * The allowlist was reloaded: every open WebSocket whose user it no longer admits (admins
   * excepted, as at admission) ends now. Roles are those of the last check, which every change of
   * the user repeats.
   */
  allowlistChanged(): void {
    this.revision++;
    for (const tunnel of this.tunnels.all()) if (!stillAllowed(tunnel.user, this.deps.isAllowed)) tunnel.close();
  }

  /**
   * A control-plane session ended (sign-out, on any replica; `digest` is sessionDigest of its id):
   * nothing that came with it passes any more, in either mode: no cached lookup of it is used, and
   * its open WebSockets end at once.
   */
  sessionEnded(digest: string): void {
    this.admission.sessionEnded();
    this.revision++;
    for (const tunnel of this.tunnels.ofSession(digest)) void this.recheck(tunnel);
  }

  /**
   * The change listener (re)started listening: changes may have been missed before (PostgreSQL
   * replays nothing), so nothing cached is trusted and every open WebSocket is checked again now.
   */
  private resync(): void {
    this.admission.sessionEnded();
    this.admission.changed({ kind: 'workspaces', id: '*' });
    this.revision++;
    for (const tunnel of this.tunnels.all()) void this.recheck(tunnel);
  }

  /** Stops following changes, ends every proxied WebSocket and closes idle upstream connections. */
  /** Ends the open WebSocket tunnels (a shutdown: browsers reconnect through another process); HTTP is forwarded until close. */
  endTunnels(): void {
    this.tunnels.close();
  }

  close(): void {
    this.unsubscribe();
    this.unsubscribeListening();
    this.tunnels.close();
    this.forwarder.close();
  }

  /** Serves one request under `/u/<slug>/` on the control plane (the caller has checked that `path` is a proxied path). */
  request(req: http.IncomingMessage, res: http.ServerResponse, path: ProxiedPath): void {
    this.measure(req, res, PROXY_ROUTE);
    try {
      const cookies = sessionCookies(req.headers.cookie, this.admission.cookieNames);
      const verdict = this.admission.admit(cookies, path.slug);
      if (verdict instanceof Promise) {
        verdict
          .then(
            (answer) => this.proceed(req, res, path, cookies.others, answer),
            (error: unknown) => this.unavailable(req, res, error),
          )
          .catch((error: unknown) => this.failed(res, error));
      } else this.proceed(req, res, path, cookies.others, verdict);
    } catch (error) {
      this.failed(res, error);
    }
  }

  /**
   * Serves a WebSocket upgrade under `/u/<slug>/` (path mode): only `Upgrade: websocket` from our
   * own origin, for the owner, to a running editor.
   */
  async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, path: ProxiedPath): Promise<void> {
    socket.on('error', () => socket.destroy());
    this.tunnels.track(socket);
    if (socket.destroyed) return;
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket')
      return refuseUpgrade(socket, ValidationError('websocket_required', 'Only WebSocket upgrades are proxied.'));
    if (req.headers.origin !== this.deps.publicOrigin)
      return refuseUpgrade(socket, new AppError('csrf_failed', 'WebSocket connections must come from this site.'));
    const cookies = sessionCookies(req.headers.cookie, this.admission.cookieNames);
    await this.openTunnel(req, socket, head, path, cookies.others, () => this.admission.admit(cookies, path.slug));
  }

  /** Counts a request served here in the request metrics under `route`. */
  protected measure(req: http.IncomingMessage, res: http.ServerResponse, route: string): void {
    const { metrics } = this.deps;
    metrics.httpRequestsInFlight.inc();
    const started = performance.now();
    const method = req.method ?? 'GET';
    // A response closes once: a plain listener (once's wrapper costs its removal on every request).
    res.on('close', () => {
      metrics.httpRequestsInFlight.dec();
      metrics.httpRequestDuration.observe({ method, route, status_class: statusClass(res.statusCode) }, (performance.now() - started) / 1000);
    });
  }

  /**
   * Admits a WebSocket upgrade with `admit` and opens its tunnel. A revocation while it was being
   * looked up would miss the tunnel it opens: it is looked up again (a few times; under a storm of
   * changes the client is asked to try again rather than let in).
   */
  protected async openTunnel(
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
    path: ProxiedPath,
    cookie: string | undefined,
    admit: TunnelOwner['admit'],
  ): Promise<void> {
    let verdict: Verdict | undefined;
    for (let round = 0; round < MAX_ADMISSION_ROUNDS && verdict === undefined && !socket.destroyed; round++) {
      const seen = this.revision;
      const answer = await this.check(admit);
      if (seen === this.revision) verdict = answer;
    }
    // The client may have gone while we looked it up: open nothing for it.
    if (socket.destroyed) return;
    if (verdict === undefined) return refuseUpgrade(socket, UnavailableError('try_again', 'Access rules changed while connecting; try again.', 1));
    if ('status' in verdict) return refuseUpgrade(socket, verdict);
    const { workspace } = verdict;
    if (workspace.spec.desiredState !== 'running' || !running(workspace))
      return tryAgainLater(req, socket, head, `Workspace ${workspace.slug} is not running.`);
    let target: TunnelTarget = { upstream: 'vscode', endpoint: workspace.status.editorEndpoint!, serving: { workspaceId: workspace.id }, rest: path.rest };
    const nt4 = nt4Path(path.rest);
    const halsim = isHalsimTarget(path.rest);
    if (nt4 !== undefined || halsim) {
      // The workspace's simulator (NetworkTables, or its robot's HALSim), while a run has one: no cookie of the browser goes there.
      const run = await this.deps.store.runs.active(workspace.id).catch(() => undefined);
      if (socket.destroyed) return;
      if (!run?.simEndpoint) return refuseUpgrade(socket, UnavailableError('no_simulator', 'No simulator is running in this workspace: press Run first.', 5));
      const serving = { workspaceId: workspace.id, runId: run.id };
      target = halsim
        ? { upstream: 'halsim', endpoint: run.simEndpoint, serving, rest: HALSIM_URI }
        : { upstream: 'nt4', endpoint: run.simEndpoint, serving, rest: nt4! };
      cookie = undefined;
    }
    const refused = this.tunnels.refusal(workspace.id, workspace.slug);
    if (refused) return refuseUpgrade(socket, refused);
    const owner = { user: verdict.user, sessionId: verdict.sessionId, admit };
    // HALSim is relayed message by message, not piped (halsim.ts).
    if (halsim) return this.halsim.open(req, socket, head, workspace, path, owner, target);
    this.tunnels.openTunnel(req, socket, head, workspace, path, cookie, owner, target);
  }

  /** An admission verdict, a failure of the lookup being a logged 500. */
  private check(admit: TunnelOwner['admit']): Promise<Verdict> {
    return Promise.resolve()
      .then(admit)
      .catch((error: unknown): Verdict => {
        this.deps.log.error({ error }, 'authorising a WebSocket failed');
        return InternalError();
      });
  }

  /**
   * Checks again, with the rule that admitted them, the open WebSockets a change is about: a user's
   * (demoted, deleted) or a workspace's (stopped, deleted, given to someone else); each that no
   * longer passes, or whose workspace is no longer wanted running, ends at once. A check that
   * fails (the database) ends it too.
   */
  private revoke(change: Change): void {
    let affected: Tunnel[];
    if (change.kind === 'users') affected = this.tunnels.ofUser(change.id);
    else if (change.kind === 'workspaces') affected = this.tunnels.ofWorkspace(change.id);
    else return;
    this.revision++;
    for (const tunnel of affected) void this.recheck(tunnel);
  }

  /** Checks one open tunnel again (see revoke) and ends it unless it still passes. */
  private async recheck(tunnel: Tunnel): Promise<void> {
    const verdict = await this.check(tunnel.admit);
    const passes =
      !('status' in verdict) &&
      verdict.user.id === tunnel.user.id &&
      verdict.workspace.id === tunnel.workspaceId &&
      verdict.workspace.spec.desiredState === 'running';
    if (passes) tunnel.user = verdict.user;
    else tunnel.close();
  }

  /**
   * Who may pass could not be looked up (the database did not answer in time, as under a class-start
   * storm on a saturated machine): a 503 to try again shortly (a page that does so, for a page load),
   * logged as a warning: nothing is wrong with the request.
   */
  protected unavailable(req: http.IncomingMessage, res: http.ServerResponse, error: unknown): void {
    this.deps.log.warning({ error: (error as Error).message }, 'could not check a proxied request (the database did not answer); answered 503');
    if (res.headersSent) return void res.destroy();
    if (isNavigation(req)) return sendHtml(res, 503, busyPage());
    sendError(res, UnavailableError('unavailable', 'The control plane cannot check this request right now; try again in a moment.', 2));
  }

  /** Answers with the Driver Station page (GET and HEAD), which `framers` may frame. */
  protected driverStation(req: http.IncomingMessage, res: http.ServerResponse, framers: string): void {
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, MethodNotAllowedError('GET, HEAD'));
    sendDriverStationPage(req, res, framers).catch((error: unknown) => this.failed(res, error));
  }

  /** An unexpected failure while serving a proxied request: logged, answered 500 (or the response broken off). */
  protected failed(res: http.ServerResponse, error: unknown): void {
    this.deps.log.error({ error }, 'proxying a request failed');
    if (!res.headersSent) sendError(res, InternalError());
    else res.destroy();
  }

  /**
   * Answers a request under `/u/<slug>/` once it is known whether it may pass: refused, the
   * workspace page (not running), forwarded (path mode) or sent to the workspace's host (host mode).
   */
  private proceed(req: http.IncomingMessage, res: http.ServerResponse, path: ProxiedPath, cookie: string | undefined, verdict: Verdict): void {
    const browser = acceptsHtml(req);
    if ('status' in verdict) {
      if (verdict.status === 401 && browser) return redirect(res, `/auth/sign-in?return_to=${encodeURIComponent(`/u/${path.slug}${path.rest}`)}`);
      if (verdict.status === 403 && browser) return sendHtml(res, 403, refusalPage(verdict.title ?? 'Not allowed', verdict.message));
      return sendError(res, verdict);
    }
    const { workspace } = verdict;
    const editorUrl = this.editorAddress(workspace.slug);
    if (isPagePath(path.rest)) return sendHtml(res, 200, workspacePage(workspace, { editorUrl, atEditorAddress: false }));
    // The workspace page's Driver Station, framed by it (this origin), served whether or not the
    // editor runs; only where the editor is (path mode: host mode's is on the workspace's host).
    if (isDriverStationTarget(path.rest) && editorUrl.startsWith('/')) return this.driverStation(req, res, "'self'");
    this.deps.activity.touch(workspace.id);
    if (!running(workspace)) {
      this.forwarder.drop(workspace.id);
      if (browser)
        return sendHtml(res, path.rest === '/' ? 200 : 503, workspacePage(workspace, { editorUrl, atEditorAddress: editorUrl === `/u/${workspace.slug}/` }));
      return sendError(res, UnavailableError('editor_not_running', `Workspace ${workspace.slug} is not running; open it first.`, 5));
    }
    this.serveEditor(req, res, workspace, path, cookie);
  }

  /** Where a workspace's editor is for a browser: path mode, `/u/<slug>/` on this origin. */
  protected editorAddress(slug: string): string {
    return `/u/${slug}/`;
  }

  /** Serves a request under `/u/<slug>/` to the running editor that may open it: path mode, forwarded to it. */
  protected serveEditor(req: http.IncomingMessage, res: http.ServerResponse, workspace: WorkspaceRecord, path: ProxiedPath, cookie: string | undefined): void {
    this.forwarder.forward(req, res, workspace, path, cookie);
  }
}

/** The page of a page load that could not be checked: it tries again by itself. */
function busyPage(): string {
  return page(
    'Busy',
    '<meta http-equiv="refresh" content="3"><h1>One moment</h1><p>The server is very busy (a whole class starting at once?). This page tries again in a few seconds.</p><a class="button" href="">Try again now</a>',
  );
}

/** Whether a workspace's editor is up and known (where to reach it). */
export function running(workspace: WorkspaceRecord): boolean {
  return workspace.status.observedState === 'running' && Boolean(workspace.status.editorEndpoint);
}
