/**
 * Host mode (WORKSPACE_HOST): workspace `<slug>` is served at `<scheme>://<slug>.<base>/` by the
 * same process, on an origin of its own. This file knows the names: which Host is which workspace,
 * the origin of each, the cookies of a workspace's host, and which requests on it are navigations
 * or come from elsewhere.
 *
 * The reserved path `/.cp/` on a workspace's host is ours, never the editor's: code-server serves
 * its pages and assets under plain names (`/`, `/static/`, `/stable-<commit>/`, `/proxy/<port>/`,
 * `/absproxy/<port>/`, `/login`, `/healthz`, ...), and a segment that starts with a dot is one no
 * bundler or code-server route makes; it is not a dot segment (`.`, `..`), so browsers keep it.
 */
import type http from 'node:http';
import type { WorkspaceHostConfig } from '../../src/config.ts';
import { SLUG } from './path.ts';

/** The paths of a workspace's host that are ours, never passed to the editor. */
export const RESERVED_PREFIX = '/.cp/';

/** Where a workspace's host takes a hand-over code (see handoff.ts). */
export const HANDOFF_PATH = `${RESERVED_PREFIX}handoff`;

/** How long the state cookie of a hand-over under way lasts (a sign-in may come between). */
export const STATE_TTL_SECONDS = 10 * 60;

const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** The cookies of a request on a workspace's host. */
export interface HostCookies {
  /** Values of the workspace cookie, in the order they came (several may: see Admission.admitGrant). */
  grants: string[];
  /** Values of the state cookie of a hand-over under way. */
  states: string[];
  /** The other cookies, the Cookie header the editor gets; none of ours or the control plane's. */
  others: string | undefined;
}

/** The names and origins of host mode (see the file comment). */
export class WorkspaceHosts {
  readonly scheme: 'http' | 'https';
  /** The workspace domain, with its port when configured: `ws.school.org`, `ws.localhost:8080`. */
  readonly base: string;
  /** The workspace cookie: `__Host-cp_ws` on https (no sibling can set a `__Host-` cookie), `cp_ws` otherwise. */
  readonly grantCookie: string;
  /** The state cookie of a hand-over under way: `__Host-cp_ws_state` or `cp_ws_state`. */
  readonly stateCookie: string;
  private readonly hostname: string;
  private readonly port: number | undefined;
  /** Cookie names (lower-case) never passed to an editor on a workspace's host, nor set by one: ours and the control plane's. */
  private readonly reserved: Set<string>;

  constructor(config: WorkspaceHostConfig, publicOrigin: string, controlPlaneCookies: readonly string[]) {
    this.scheme = publicOrigin.startsWith('https:') ? 'https' : 'http';
    this.base = config.base;
    this.hostname = config.hostname;
    this.port = config.port;
    const prefix = this.scheme === 'https' ? '__Host-' : '';
    this.grantCookie = `${prefix}cp_ws`;
    this.stateCookie = `${prefix}cp_ws_state`;
    this.reserved = new Set(['cp_ws', '__host-cp_ws', 'cp_ws_state', '__host-cp_ws_state', ...controlPlaneCookies.map((name) => name.toLowerCase())]);
  }

  /** The cookie names an editor's Set-Cookie may not use on a workspace's host. */
  get reservedCookies(): string[] {
    return [...this.reserved];
  }

  /**
   * The workspace a Host header names: its slug; null for a host under the workspace domain that
   * names none (the bare domain, a deeper name, a name that is not a slug, another port); undefined
   * for any other host (the control plane's). Any case; a trailing dot and the scheme's own port
   * are ignored.
   */
  slugOf(header: string | undefined): string | null | undefined {
    const match = /^([^:]*)(?::(\d*))?$/.exec((header ?? '').toLowerCase());
    if (!match) return undefined;
    const hostname = match[1]!.replace(/\.$/, '');
    if (hostname !== this.hostname && !hostname.endsWith(`.${this.hostname}`)) return undefined;
    const port = match[2] ? Number(match[2]) : undefined;
    const wanted = this.port ?? (this.scheme === 'https' ? 443 : 80);
    if ((port ?? (this.scheme === 'https' ? 443 : 80)) !== wanted) return null;
    const label = hostname.slice(0, -(this.hostname.length + 1));
    return SLUG.test(label) ? label : null;
  }

  /** The origin of a workspace: `<scheme>://<slug>.<base>`. */
  origin(slug: string): string {
    return `${this.scheme}://${slug}.${this.base}`;
  }

  /** A Set-Cookie line for a host-only cookie of a workspace's host (HttpOnly, SameSite=Lax, Path=/, Secure on https); 0 seconds clears it. */
  setCookie(name: string, value: string, maxAgeSeconds: number): string {
    return `${name}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Lax${this.scheme === 'https' ? '; Secure' : ''}`;
  }

  /**
   * Splits a Cookie header of a request on a workspace's host: the workspace cookies, the state
   * cookies, and the rest without any cookie of ours or the control plane's (by name, trimmed, in
   * any case).
   */
  cookies(header: string | undefined): HostCookies {
    const result: HostCookies = { grants: [], states: [], others: undefined };
    if (!header) return result;
    const others: string[] = [];
    for (const raw of header.split(';')) {
      const part = raw.trim();
      if (!part) continue;
      const at = part.indexOf('=');
      const name = (at === -1 ? part : part.slice(0, at)).trim();
      const value = at === -1 ? '' : part.slice(at + 1).trim();
      if (name === this.grantCookie) result.grants.push(value);
      else if (name === this.stateCookie) result.states.push(value);
      if (!this.reserved.has(name.toLowerCase())) others.push(part);
    }
    if (others.length > 0) result.others = others.join('; ');
    return result;
  }
}

/** Whether a request is a browser's navigation (GET or HEAD of a page), which may be redirected to sign in, rather than a script's call. */
export function isNavigation(req: http.IncomingMessage): boolean {
  if (!SAFE_METHODS.has(req.method ?? '')) return false;
  const mode = req.headers['sec-fetch-mode'];
  if (mode !== undefined) return mode === 'navigate';
  return acceptsHtml(req);
}

/** Whether a request takes HTML (a browser's page load or link), rather than only JSON. */
export const acceptsHtml = (req: http.IncomingMessage): boolean => (req.headers.accept ?? '').includes('text/html');

/**
 * Why a request on a workspace's host is refused as coming from another site, or undefined when
 * it may pass. A page elsewhere (another workspace's host is same-site with this one, so the
 * browser sends this host's cookie with its requests) may only open this workspace as a top-level
 * page, a GET: it may not frame it, load from it, or send it anything else (a form, a fetch);
 * and a request that names another Origin may only read.
 */
export function crossOriginRefusal(req: http.IncomingMessage, origin: string): string | undefined {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    const dest = req.headers['sec-fetch-dest'];
    const topLevel = req.headers['sec-fetch-mode'] === 'navigate' && SAFE_METHODS.has(req.method ?? '') && (dest === undefined || dest === 'document');
    if (!topLevel) return 'This workspace answers requests from its own pages only.';
  }
  const from = req.headers.origin;
  if (from !== undefined && from !== origin && !SAFE_METHODS.has(req.method ?? '')) return 'This request came from another site and was refused.';
  return undefined;
}
