/**
 * The reverse proxy to each workspace's editor, outside Koa so that it streams both ways without
 * buffering. Its parts: `path` (which paths it serves and refuses), `host` (host mode's names),
 * `admission` (credentials, cache, access rule), `handoff` (host mode's cookie and one-time codes),
 * `http` (forwarding), `websocket` (tunnels), `headers` (what crosses, both ways).
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Change, ChangeFeed } from '../../src/db/changes.ts';
import { safeReturnTo } from '../../src/identity/return-to.ts';
import type { Logger } from '../../src/log.ts';
import type { Metrics } from '../../src/metrics.ts';
import type { ActivityRecorder } from '../../src/store/activity.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { page, refusalPage } from '../pages.ts';
import { stillAllowed } from '../policy.ts';
import { redirect, refuseUpgrade, sendError, sendHtml, tryAgainLater } from '../responses.ts';
import { workspacePage } from '../workspace-page.ts';
import { Admission, NO_SUCH_WORKSPACE, sessionCookies, type Verdict } from './admission.ts';
import { digest, GRANT_TTL_MS, GrantSigner, HandoffCodes, randomToken } from './handoff.ts';
import { parseWorkspacePath } from './path.ts';
import {
  acceptsHtml,
  crossOriginRefusal,
  HANDOFF_PATH,
  isNavigation,
  RESERVED_PREFIX,
  STATE_TTL_SECONDS,
  type HostCookies,
  type WorkspaceHosts,
} from './host.ts';
import { HttpForwarder, type ProxiedPath } from './http.ts';
import { Tunnels, type Tunnel, type TunnelOwner, type TunnelTarget } from './websocket.ts';

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
const HANDOVER_ROUTE = '/auth/workspace/:slug';

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

/** A state cookie's value (32 random bytes, base64url) and its SHA-256 (base64url) as a hand-over carries it. */
const TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/;

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
  /** How long to wait for the editor's response headers. */
  timeoutMs: number;
  /** Whether an email may still sign in (allowlist and SERVICE_ADMIN_EMAIL). */
  isAllowed: (email: string) => boolean;
  /** Host mode (WORKSPACE_HOST): each workspace on its own host; undefined: path mode. */
  hosts?: WorkspaceHosts;
}

/**
 * Serves every path under `/u/<slug>/` except `/u/<slug>/api/...` (`request`) and WebSocket
 * upgrades there (`upgrade`), and in host mode every request on a workspace's own host
 * (`hostRequest`, `hostUpgrade`) and the hand-over to it (`handover`).
 *
 * Path mode: only the owner passes (`mayOpenEditor`: an admin who is not the owner gets 403, a
 * page for a browser); the control plane's session cookie and Authorization never reach the editor.
 *
 * Host mode: `/u/<slug>/` on the control plane sends whoever may open the editor (its owner or an
 * admin) to the workspace's host; there a browser without the workspace's cookie goes back to the
 * control plane (`/auth/workspace/<slug>`), which hands its session over with a one-time code, and
 * the workspace's host turns the code into its own cookie (`/.cp/handoff`).
 *
 * Either way an open WebSocket is re-checked with the rule that admitted it whenever its user, its
 * workspace or its session changes (the change feed, sign-out) and whenever the allowlist is
 * reloaded (`allowlistChanged`), and ended at once when it no longer passes.
 */
export class WorkspaceProxy {
  private readonly deps: ProxyDeps;
  private readonly admission: Admission;
  private readonly forwarder: HttpForwarder;
  private readonly tunnels: Tunnels;
  private readonly hosts: WorkspaceHosts | undefined;
  private readonly grants: GrantSigner | undefined;
  /** Host mode's one-time hand-over codes, in this process's memory. */
  readonly handoffs = new HandoffCodes();
  private readonly unsubscribe: () => void;
  /** Counts revocation triggers (user and workspace changes, sign-outs, allowlist reloads): an upgrade admitted across one is admitted again. */
  private revision = 0;

  constructor(deps: ProxyDeps) {
    this.deps = deps;
    this.hosts = deps.hosts;
    this.grants = deps.hosts ? new GrantSigner(deps.sessionSecret) : undefined;
    this.admission = new Admission({
      ...deps.store,
      sessionCookie: deps.sessionCookie,
      sessionSecret: deps.sessionSecret,
      isAllowed: deps.isAllowed,
      mode: deps.hosts ? 'host' : 'path',
      grants: this.grants,
    });
    const forwarding = {
      trustProxy: deps.trustProxy,
      proto: deps.publicOrigin.startsWith('https:') ? 'https' : 'http',
      publicHost: new URL(deps.publicOrigin).host,
    };
    const cookieRules = { ownCookies: this.admission.cookieNames, hostCookies: deps.hosts?.reservedCookies };
    this.forwarder = new HttpForwarder({ metrics: deps.metrics, timeoutMs: deps.timeoutMs, forwarding, ...cookieRules });
    this.tunnels = new Tunnels({ metrics: deps.metrics, activity: deps.activity, forwarding, ...cookieRules });
    // Changes take effect at once: a demoted user or a stopped workspace is not served from cache.
    this.unsubscribe = deps.changes.subscribe((change) => {
      this.admission.changed(change);
      // Stopped, restarted or deleted: the editor it reached is going, and its idle connections go now.
      if (change.kind === 'workspaces') this.forwarder.drop(change.id);
      this.revoke(change);
    });
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
   * A control-plane session ended (sign-out): nothing that came with it passes any more, in either
   * mode: no cached lookup of it is used, and its open WebSockets end at once.
   */
  sessionEnded(sessionId: string): void {
    this.admission.sessionEnded();
    this.revision++;
    for (const tunnel of this.tunnels.ofSession(sessionId)) void this.recheck(tunnel);
  }

  /** Stops following changes, ends every proxied WebSocket and closes idle upstream connections. */
  close(): void {
    this.unsubscribe();
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
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket')
      return refuseUpgrade(socket, 400, 'websocket_required', 'Only WebSocket upgrades are proxied.');
    if (req.headers.origin !== this.deps.publicOrigin) return refuseUpgrade(socket, 403, 'csrf_failed', 'WebSocket connections must come from this site.');
    const cookies = sessionCookies(req.headers.cookie, this.admission.cookieNames);
    await this.openTunnel(req, socket, head, path, cookies.others, () => this.admission.admit(cookies, path.slug));
  }

  /**
   * Host mode: serves one request on the host of workspace `slug` (null: a host under the
   * workspace domain that names none, 404). Every path is the editor's, as it came, except those
   * under `/.cp/`, which are ours: the hand-over (`/.cp/handoff`), else 404. Requests from other
   * sites are refused (crossOriginRefusal); a request without a valid workspace cookie is sent to
   * the control plane to hand over when it is a navigation, and refused 401 otherwise.
   */
  hostRequest(req: http.IncomingMessage, res: http.ServerResponse, slug: string | null): void {
    this.measure(req, res, HOST_ROUTE);
    try {
      if (slug === null) return this.notFound(req, res);
      const target = req.url ?? '/';
      if (!target.startsWith('/')) return sendError(res, 400, 'invalid_path', 'The request target must be a path.');
      const refusal = crossOriginRefusal(req, this.hosts!.origin(slug));
      if (refusal) return sendError(res, 403, 'csrf_failed', refusal);
      const cookies = this.hosts!.cookies(req.headers.cookie);
      const pathname = target.split('?', 1)[0]!;
      if (pathname === HANDOFF_PATH) return void this.redeem(req, res, slug, target, cookies).catch((error: unknown) => this.failed(res, error));
      if (pathname.startsWith(RESERVED_PREFIX)) return sendError(res, 404, 'not_found', 'Nothing is served here.');
      const path: ProxiedPath = { slug, rest: target, host: true };
      const verdict = this.admission.admitGrant(cookies.grants, slug);
      if (verdict instanceof Promise) {
        verdict
          .then(
            (answer) => this.proceedHost(req, res, path, cookies, answer),
            (error: unknown) => this.unavailable(req, res, error),
          )
          .catch((error: unknown) => this.failed(res, error));
      } else this.proceedHost(req, res, path, cookies, verdict);
    } catch (error) {
      this.failed(res, error);
    }
  }

  /**
   * Host mode: the student API on a workspace's own host, for its editor's pages (the classroom
   * extension): `/.cp/api/<rest>` with the workspace's cookie is handed to `serve` as the student
   * API of that workspace (`/u/<slug>/api/<rest>`), as the user the cookie names (GRANTED on the
   * request: no session cookie exists on this host), from this workspace's origin. What passes is
   * that one workspace's API, as the editor may: a cookie for another workspace opens nothing here.
   */
  hostApi(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    slug: string | null,
    serve: (req: http.IncomingMessage, res: http.ServerResponse) => void,
  ): void {
    try {
      if (slug === null) return this.notFound(req, res);
      const origin = this.hosts!.origin(slug);
      const refusal = crossOriginRefusal(req, origin);
      if (refusal) return sendError(res, 403, 'csrf_failed', refusal);
      const cookies = this.hosts!.cookies(req.headers.cookie);
      const answer = (verdict: Verdict) => {
        if ('status' in verdict) return sendError(res, verdict.status, verdict.code, verdict.message);
        const rewritten = `/u/${slug}/api/${(req.url ?? '/').slice(EDITOR_API_PREFIX.length)}`;
        const parsed = parseWorkspacePath(rewritten);
        if (!parsed || 'invalid' in parsed) return sendError(res, 400, 'invalid_path', parsed?.invalid ?? 'This path is not valid.');
        (req as GrantedRequest)[GRANTED] = { userId: verdict.user.id, origin };
        req.url = rewritten;
        serve(req, res);
      };
      const verdict = this.admission.admitGrant(cookies.grants, slug);
      if (verdict instanceof Promise) {
        verdict.then(answer, (error: unknown) => this.unavailable(req, res, error)).catch((error: unknown) => this.failed(res, error));
      } else answer(verdict);
    } catch (error) {
      this.failed(res, error);
    }
  }

  /**
   * Host mode: serves a WebSocket upgrade on the host of workspace `slug`: only `Upgrade: websocket`
   * from that workspace's own origin, with its cookie, to a running editor.
   */
  async hostUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, slug: string | null): Promise<void> {
    socket.on('error', () => socket.destroy());
    this.tunnels.track(socket);
    const target = req.url ?? '/';
    if (slug === null || !target.startsWith('/') || (target.startsWith(RESERVED_PREFIX) && !target.startsWith(NT4_PREFIX)))
      return refuseUpgrade(socket, NO_SUCH_WORKSPACE.status, 'not_found', 'There is no WebSocket here.');
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket')
      return refuseUpgrade(socket, 400, 'websocket_required', 'Only WebSocket upgrades are proxied.');
    if (req.headers.origin !== this.hosts!.origin(slug))
      return refuseUpgrade(socket, 403, 'csrf_failed', "WebSocket connections must come from this workspace's own pages.");
    const cookies = this.hosts!.cookies(req.headers.cookie);
    await this.openTunnel(req, socket, head, { slug, rest: target, host: true }, cookies.others, () => this.admission.admitGrant(cookies.grants, slug));
  }

  /**
   * Host mode, on the control plane: `GET /auth/workspace/<slug>?state=<hash>&path=<path>`, where a
   * workspace's host sends a browser without its cookie. A signed-in user who may open the
   * workspace, while its editor runs, is sent back with a one-time code bound to the user, the
   * session, the workspace and the browser's state cookie on that host; anyone else to sign in,
   * a refusal page, or the workspace page (stopped).
   */
  handover(req: http.IncomingMessage, res: http.ServerResponse, slug: string): void {
    this.measure(req, res, HANDOVER_ROUTE);
    this.handOver(req, res, slug).catch((error: unknown) => this.failed(res, error));
  }

  /** The address of a workspace's editor in host mode (undefined in path mode). */
  editorUrl(slug: string): string | undefined {
    return this.hosts ? `${this.hosts.origin(slug)}/` : undefined;
  }

  private async handOver(req: http.IncomingMessage, res: http.ServerResponse, slug: string): Promise<void> {
    const hosts = this.hosts!;
    if (req.method !== 'GET') return sendError(res, 405, 'method_not_allowed', 'Only GET is allowed here.', { Allow: 'GET' });
    // Only a page of its own: never fetched, framed or loaded by another page.
    const mode = req.headers['sec-fetch-mode'];
    const dest = req.headers['sec-fetch-dest'];
    if ((mode !== undefined && mode !== 'navigate') || (dest !== undefined && dest !== 'document'))
      return sendError(res, 403, 'forbidden', 'A workspace is opened as a page of its own.');
    const query = new URL(req.url ?? '/', 'http://control-plane.invalid').searchParams;
    const cookies = sessionCookies(req.headers.cookie, this.admission.cookieNames);
    const verdict = await this.admission.admit(cookies, slug);
    if ('status' in verdict) {
      if (verdict.status === 401) return redirect(res, `/auth/sign-in?return_to=${encodeURIComponent(req.url ?? '/')}`);
      if (verdict.status === 500) return sendError(res, 500, verdict.code, verdict.message);
      return sendHtml(res, 403, refusalPage(verdict.title ?? 'Not allowed', verdict.message));
    }
    const { workspace } = verdict;
    if (!running(workspace)) return redirect(res, `/u/${slug}/`);
    const state = query.get('state') ?? '';
    if (!TOKEN_FORMAT.test(state)) {
      const again = { href: `/u/${slug}/`, label: 'Open the workspace' };
      return sendHtml(res, 400, refusalPage('Could not open the workspace', 'This link to the workspace is incomplete. Open the workspace again.', again));
    }
    const origin = hosts.origin(slug);
    const landing = safeReturnTo(query.get('path') ?? '/', origin) ?? '/';
    const code = this.handoffs.issue({ userId: verdict.user.id, sessionId: verdict.sessionId, workspaceId: workspace.id, stateHash: state, path: landing });
    redirect(res, `${origin}${HANDOFF_PATH}?code=${code}`, 302, { 'referrer-policy': 'no-referrer' });
  }

  /**
   * Host mode, on a workspace's host: `GET /.cp/handoff?code=<code>`. The code is taken (once,
   * within its minute); it must be for this workspace and for this browser (its state cookie), and
   * its session must still admit its user here. Then the workspace's cookie is set, the state
   * cookie cleared, and the browser sent on to where it set out for, so no code stays in the
   * address bar or the history.
   */
  private async redeem(req: http.IncomingMessage, res: http.ServerResponse, slug: string, target: string, cookies: HostCookies): Promise<void> {
    const hosts = this.hosts!;
    // Spent by a browser's navigation alone.
    if (req.method !== 'GET') return sendError(res, 405, 'method_not_allowed', 'Only GET is allowed here.', { Allow: 'GET' });
    const code = new URLSearchParams(target.slice(HANDOFF_PATH.length)).get('code') ?? '';
    const handoff = this.handoffs.take(code);
    const again = { href: `${this.deps.publicOrigin}/u/${slug}/`, label: 'Open the workspace again' };
    const refuse = (message: string) => sendHtml(res, 400, refusalPage('Could not open the workspace', message, again));
    if (!handoff) return refuse('This link has expired or has been used already.');
    const workspace = await this.admission.workspaceOf(slug);
    if (!workspace || workspace.desiredState === 'deleted') return this.notFound(req, res);
    if (handoff.workspaceId !== workspace.id) return refuse('This link is for another workspace.');
    if (!cookies.states.some((state) => digest(state) === handoff.stateHash)) return refuse('This link was made for another browser.');
    const verdict = await this.admission.admitWith(handoff, workspace);
    if ('status' in verdict) return sendHtml(res, verdict.status === 401 ? 400 : 403, refusalPage('Could not open the workspace', verdict.message, again));
    const grant = this.grants!.sign({ userId: handoff.userId, workspaceId: workspace.id, sessionId: handoff.sessionId, expiresAt: Date.now() + GRANT_TTL_MS });
    redirect(res, handoff.path, 302, {
      'set-cookie': [hosts.setCookie(hosts.grantCookie, grant, GRANT_TTL_MS / 1000), hosts.setCookie(hosts.stateCookie, '', 0)],
      'referrer-policy': 'no-referrer',
    });
  }

  /**
   * Host mode: sends a browser that has no valid cookie for this workspace's host to the control
   * plane to hand its session over, with a state cookie on this host that the code it brings back
   * must match (so a code only works in the browser that asked for it).
   */
  private setOut(res: http.ServerResponse, path: ProxiedPath, cookies: HostCookies): void {
    const hosts = this.hosts!;
    const state = cookies.states.find((value) => TOKEN_FORMAT.test(value)) ?? randomToken(32);
    const query = new URLSearchParams({ state: digest(state) });
    if (path.rest !== '/') query.set('path', path.rest);
    redirect(res, `${this.deps.publicOrigin}${HANDOVER_PREFIX}${path.slug}?${query.toString()}`, 302, {
      'set-cookie': hosts.setCookie(hosts.stateCookie, state, STATE_TTL_SECONDS),
      'referrer-policy': 'no-referrer',
    });
  }

  /** A host under the workspace domain that names no workspace: a page for a browser, JSON otherwise. */
  private notFound(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (!acceptsHtml(req)) return sendError(res, 404, 'not_found', NO_SUCH_WORKSPACE.message);
    const home = { href: `${this.deps.publicOrigin}/`, label: 'Go to the start' };
    sendHtml(res, 404, refusalPage('No such workspace', NO_SUCH_WORKSPACE.message, home));
  }

  /** Counts a request served here in the request metrics under `route`. */
  private measure(req: http.IncomingMessage, res: http.ServerResponse, route: string): void {
    const { metrics } = this.deps;
    metrics.httpRequestsInFlight.inc();
    const started = performance.now();
    const method = req.method ?? 'GET';
    res.once('close', () => {
      metrics.httpRequestsInFlight.dec();
      metrics.httpRequestDuration.observe({ method, route, status_class: `${Math.floor(res.statusCode / 100)}xx` }, (performance.now() - started) / 1000);
    });
  }

  /**
   * Admits a WebSocket upgrade with `admit` and opens its tunnel. A revocation while it was being
   * looked up would miss the tunnel it opens: it is looked up again (a few times; under a storm of
   * changes the client is asked to try again rather than let in).
   */
  private async openTunnel(
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
    if (verdict === undefined) return refuseUpgrade(socket, 503, 'try_again', 'Access rules changed while connecting; try again.');
    if ('status' in verdict) return refuseUpgrade(socket, verdict.status, verdict.code, verdict.message);
    const { workspace } = verdict;
    if (workspace.desiredState !== 'running' || !running(workspace)) return tryAgainLater(req, socket, head, `Workspace ${workspace.slug} is not running.`);
    let target: TunnelTarget = { upstream: 'vscode', endpoint: workspace.editorEndpoint!, rest: path.rest };
    const nt4 = nt4Path(path.rest);
    if (nt4 !== undefined) {
      // The workspace's simulator (NetworkTables), while a run has one: no cookie of the browser goes there.
      const run = await this.deps.store.runs.active(workspace.id).catch(() => undefined);
      if (socket.destroyed) return;
      if (!run?.simEndpoint) return refuseUpgrade(socket, 503, 'no_simulator', 'No simulator is running in this workspace: press Run first.');
      target = { upstream: 'nt4', endpoint: run.simEndpoint, rest: nt4 };
      cookie = undefined;
    }
    try {
      this.tunnels.open(req, socket, head, workspace, path, cookie, { user: verdict.user, sessionId: verdict.sessionId, admit }, target);
    } catch (error) {
      // E.g. an editor address net.connect refuses outright: the client still gets an answer.
      this.deps.log.error({ error }, 'opening a WebSocket tunnel failed');
      if (!socket.destroyed) refuseUpgrade(socket, 500, 'internal_error', 'Something went wrong on our side; it has been logged.');
    }
  }

  /** An admission verdict, a failure of the lookup being a logged 500. */
  private check(admit: TunnelOwner['admit']): Promise<Verdict> {
    return Promise.resolve()
      .then(admit)
      .catch((error: unknown): Verdict => {
        this.deps.log.error({ error }, 'authorising a WebSocket failed');
        return { status: 500, code: 'internal_error', message: 'Something went wrong on our side.' };
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
      verdict.workspace.desiredState === 'running';
    if (passes) tunnel.user = verdict.user;
    else tunnel.close();
  }

  /**
   * Who may pass could not be looked up (the database did not answer in time, as under a class-start
   * storm on a saturated machine): a 503 to try again shortly (a page that does so, for a page load),
   * logged as a warning: nothing is wrong with the request.
   */
  private unavailable(req: http.IncomingMessage, res: http.ServerResponse, error: unknown): void {
    this.deps.log.warning({ error: (error as Error).message }, 'could not check a proxied request (the database did not answer); answered 503');
    if (res.headersSent) return void res.destroy();
    if (isNavigation(req)) return sendHtml(res, 503, busyPage());
    sendError(res, 503, 'unavailable', 'The control plane cannot check this request right now; try again in a moment.', { 'Retry-After': '2' });
  }

  /** An unexpected failure while serving a proxied request: logged, answered 500 (or the response broken off). */
  private failed(res: http.ServerResponse, error: unknown): void {
    this.deps.log.error({ error }, 'proxying a request failed');
    if (!res.headersSent) sendError(res, 500, 'internal_error', 'Something went wrong on our side; it has been logged.');
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
      return sendError(res, verdict.status, verdict.code, verdict.message);
    }
    const { workspace } = verdict;
    const editorUrl = this.hosts ? `${this.hosts.origin(workspace.slug)}/` : `/u/${workspace.slug}/`;
    if (isPagePath(path.rest)) return sendHtml(res, 200, workspacePage(workspace, { editorUrl, atEditorAddress: false }));
    this.deps.activity.touch(workspace.id);
    if (!running(workspace)) {
      this.forwarder.drop(workspace.id);
      if (browser) return sendHtml(res, path.rest === '/' ? 200 : 503, workspacePage(workspace, { editorUrl, atEditorAddress: !this.hosts }));
      return sendError(res, 503, 'workspace_not_running', `Workspace ${workspace.slug} is not running; open it first.`, { 'Retry-After': '5' });
    }
    // Host mode: the editor is never served on the control plane's origin, only on its own.
    if (this.hosts) return redirect(res, `${this.hosts.origin(workspace.slug)}${path.rest}`);
    this.forwarder.forward(req, res, workspace, path, cookie);
  }

  /** Answers a request on a workspace's host (host mode) once it is known whether it may pass. */
  private proceedHost(req: http.IncomingMessage, res: http.ServerResponse, path: ProxiedPath, cookies: HostCookies, verdict: Verdict): void {
    if ('status' in verdict) {
      if (verdict.status === 404) return this.notFound(req, res);
      if (verdict.status === 401 && isNavigation(req)) return this.setOut(res, path, cookies);
      if (verdict.status === 403 && acceptsHtml(req)) {
        const home = { href: `${this.deps.publicOrigin}/`, label: 'Go to the start' };
        return sendHtml(res, 403, refusalPage(verdict.title ?? 'Not allowed', verdict.message, home));
      }
      return sendError(res, verdict.status, verdict.code, verdict.message);
    }
    const { workspace } = verdict;
    this.deps.activity.touch(workspace.id);
    if (!running(workspace)) {
      this.forwarder.drop(workspace.id);
      // Its page, with the Open button, is on the control plane.
      if (isNavigation(req)) return redirect(res, `${this.deps.publicOrigin}/u/${workspace.slug}/`);
      return sendError(res, 503, 'workspace_not_running', `Workspace ${workspace.slug} is not running; open it first.`, { 'Retry-After': '5' });
    }
    this.forwarder.forward(req, res, workspace, path, cookies.others);
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
function running(workspace: WorkspaceRecord): boolean {
  return workspace.observedState === 'running' && Boolean(workspace.editorEndpoint);
}
