import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { AppError, AuthorizationError, MethodNotAllowedError, NotFoundError, UnavailableError, ValidationError } from '../../src/errors.ts';
import { safeReturnTo } from '../../src/identity/return-to.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { isDriverStationTarget } from '../driver-station.ts';
import { refusalPage } from '../pages/page.ts';
import { redirect, refuseUpgrade, sendError, sendHtml } from '../responses.ts';
import { NO_SUCH_WORKSPACE, sessionCookies, type Verdict } from './admission.ts';
import type { HandoffStore } from '../../src/store/handoffs.ts';
import { digest, GRANT_TTL_MS, GrantSigner, randomToken } from './handoff.ts';
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
import type { ProxiedPath } from './http.ts';
import { parseWorkspacePath } from './path.ts';
import {
  EDITOR_API_PREFIX,
  GRANTED,
  HANDOVER_PREFIX,
  HANDOVER_ROUTE,
  HOST_ROUTE,
  isSimulatorSocket,
  running,
  WorkspaceProxy,
  type GrantedRequest,
  type ProxyDeps,
} from './index.ts';

/** A state cookie's value (32 random bytes, base64url) and its SHA-256 (base64url) as a hand-over carries it. */
const TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/;

/**
 * Host mode (WORKSPACE_HOST): each workspace's editor on an origin of its own, `<slug>.<domain>`.
 * `/u/<slug>/` on the control plane sends whoever may open the editor (its owner or an admin) to
 * the workspace's host; there a browser without the workspace's cookie goes back to the control
 * plane (`/auth/workspace/<slug>`), which hands its session over with a one-time code, and the
 * workspace's host turns the code into its own cookie (`/.cp/handoff`). What both modes share
 * (admission, forwarding, tunnels and their revocation) is WorkspaceProxy's.
 */
export class HostModeProxy extends WorkspaceProxy {
  private readonly hosts: WorkspaceHosts;
  private readonly grants: GrantSigner;
  /** The one-time hand-over codes, in the database: any replica redeems what any replica issued. */
  private readonly handoffs: HandoffStore;

  constructor(deps: ProxyDeps & { hosts: WorkspaceHosts; handoffs: HandoffStore }) {
    const grants = new GrantSigner(deps.sessionSecret);
    super(deps, { grants, reservedCookies: deps.hosts.reservedCookies });
    this.hosts = deps.hosts;
    this.grants = grants;
    this.handoffs = deps.handoffs;
  }

  /**
   * Host mode: serves one request on the host of workspace `slug` (null: a host under the
   * workspace domain that names none, 404). Every path is the editor's, as it came, except those
   * under `/.cp/`, which are ours: the hand-over (`/.cp/handoff`), the workspace page's Driver
   * Station (`/.cp/driver-station`, admitted as the editor is), else 404. Requests from other
   * sites are refused (crossOriginRefusal); a request without a valid workspace cookie is sent to
   * the control plane to hand over when it is a navigation, and refused 401 otherwise.
   */
  hostRequest(req: http.IncomingMessage, res: http.ServerResponse, slug: string | null): void {
    this.measure(req, res, HOST_ROUTE);
    try {
      if (slug === null) return this.notFound(req, res);
      const target = req.url ?? '/';
      if (!target.startsWith('/')) return sendError(res, ValidationError('invalid_path', 'The request target must be a path.'));
      const refusal = crossOriginRefusal(req, this.hosts.origin(slug));
      if (refusal) return sendError(res, new AppError('csrf_failed', refusal));
      const cookies = this.hosts.cookies(req.headers.cookie);
      const pathname = target.split('?', 1)[0]!;
      if (pathname === HANDOFF_PATH) return void this.redeem(req, res, slug, target, cookies).catch((error: unknown) => this.failed(res, error));
      if (pathname.startsWith(RESERVED_PREFIX) && !isDriverStationTarget(pathname))
        return sendError(res, NotFoundError('not_found', 'Nothing is served here.'));
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
      const origin = this.hosts.origin(slug);
      const refusal = crossOriginRefusal(req, origin);
      if (refusal) return sendError(res, new AppError('csrf_failed', refusal));
      const cookies = this.hosts.cookies(req.headers.cookie);
      const answer = (verdict: Verdict) => {
        if ('status' in verdict) return sendError(res, verdict);
        const rewritten = `/u/${slug}/api/${(req.url ?? '/').slice(EDITOR_API_PREFIX.length)}`;
        const parsed = parseWorkspacePath(rewritten);
        if (!parsed || 'invalid' in parsed) return sendError(res, ValidationError('invalid_path', parsed?.invalid ?? 'This path is not valid.'));
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
    if (socket.destroyed) return;
    const target = req.url ?? '/';
    if (slug === null || !target.startsWith('/') || (target.startsWith(RESERVED_PREFIX) && !isSimulatorSocket(target)))
      return refuseUpgrade(socket, NotFoundError('not_found', 'There is no WebSocket here.'));
    if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket')
      return refuseUpgrade(socket, ValidationError('websocket_required', 'Only WebSocket upgrades are proxied.'));
    if (req.headers.origin !== this.hosts.origin(slug))
      return refuseUpgrade(socket, new AppError('csrf_failed', "WebSocket connections must come from this workspace's own pages."));
    const cookies = this.hosts.cookies(req.headers.cookie);
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

  /** The address of a workspace's editor: its own origin. */
  editorUrl(slug: string): string {
    return `${this.hosts.origin(slug)}/`;
  }

  protected override editorAddress(slug: string): string {
    return this.editorUrl(slug);
  }

  /** On the control plane: the editor is never served on its origin, only on its own (a redirect there). */
  protected override serveEditor(req: http.IncomingMessage, res: http.ServerResponse, workspace: WorkspaceRecord, path: ProxiedPath): void {
    redirect(res, `${this.hosts.origin(workspace.slug)}${path.rest}`);
  }

  private async handOver(req: http.IncomingMessage, res: http.ServerResponse, slug: string): Promise<void> {
    const { hosts } = this;
    if (req.method !== 'GET') return sendError(res, MethodNotAllowedError('GET'));
    // Only a page of its own: never fetched, framed or loaded by another page.
    const mode = req.headers['sec-fetch-mode'];
    const dest = req.headers['sec-fetch-dest'];
    if ((mode !== undefined && mode !== 'navigate') || (dest !== undefined && dest !== 'document'))
      return sendError(res, AuthorizationError('A workspace is opened as a page of its own.'));
    const query = new URL(req.url ?? '/', 'http://control-plane.invalid').searchParams;
    const cookies = sessionCookies(req.headers.cookie, this.admission.cookieNames);
    const verdict = await this.admission.admit(cookies, slug);
    if ('status' in verdict) {
      if (verdict.status === 401) return redirect(res, `/auth/sign-in?return_to=${encodeURIComponent(req.url ?? '/')}`);
      if (verdict.status === 500) return sendError(res, verdict);
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
    const code = await this.handoffs.issue({
      userId: verdict.user.id,
      sessionId: verdict.sessionId,
      workspaceId: workspace.id,
      stateHash: state,
      path: landing,
    });
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
    const { hosts } = this;
    // Spent by a browser's navigation alone.
    if (req.method !== 'GET') return sendError(res, MethodNotAllowedError('GET'));
    const code = new URLSearchParams(target.slice(HANDOFF_PATH.length)).get('code') ?? '';
    const handoff = await this.handoffs.take(code);
    const again = { href: `${this.deps.publicOrigin}/u/${slug}/`, label: 'Open the workspace again' };
    const refuse = (message: string) => sendHtml(res, 400, refusalPage('Could not open the workspace', message, again));
    if (!handoff) return refuse('This link has expired or has been used already.');
    const workspace = await this.admission.workspaceOf(slug);
    if (!workspace || workspace.spec.desiredState === 'deleted') return this.notFound(req, res);
    if (handoff.workspaceId !== workspace.id) return refuse('This link is for another workspace.');
    if (!cookies.states.some((state) => digest(state) === handoff.stateHash)) return refuse('This link was made for another browser.');
    const verdict = await this.admission.admitWith(handoff, workspace);
    if ('status' in verdict) return sendHtml(res, verdict.status === 401 ? 400 : 403, refusalPage('Could not open the workspace', verdict.message, again));
    const grant = this.grants.sign({ userId: handoff.userId, workspaceId: workspace.id, sessionId: handoff.sessionId, expiresAt: Date.now() + GRANT_TTL_MS });
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
    const { hosts } = this;
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
    if (!acceptsHtml(req)) return sendError(res, NO_SUCH_WORKSPACE);
    const home = { href: `${this.deps.publicOrigin}/`, label: 'Go to the start' };
    sendHtml(res, 404, refusalPage('No such workspace', NO_SUCH_WORKSPACE.message, home));
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
      return sendError(res, verdict);
    }
    // The workspace page's Driver Station, a page of its own here (the workspace page, on another
    // site, opens it in a tab: framed, it would have no cookie of this host).
    if (isDriverStationTarget(path.rest)) return this.driverStation(req, res, "'none'");
    const { workspace } = verdict;
    this.deps.activity.touch(workspace.id);
    if (!running(workspace)) {
      this.forwarder.drop(workspace.id);
      // Its page, with the Open button, is on the control plane.
      if (isNavigation(req)) return redirect(res, `${this.deps.publicOrigin}/u/${workspace.slug}/`);
      return sendError(res, UnavailableError('editor_not_running', `Workspace ${workspace.slug} is not running; open it first.`, 5));
    }
    this.forwarder.forward(req, res, workspace, path, cookies.others);
  }
}
