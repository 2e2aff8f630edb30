import Router from '@koa/router';
import type { Backups } from '../src/backup/backups.ts';
import type { HomeDiskLimit } from '../src/home-disk.ts';
import type { Metrics } from '../src/metrics.ts';
import type { SurfaceStore } from '../src/store/index.ts';
import { allowlistRoutes } from './admin/allowlist.ts';
import { backupRoutes } from './admin/backups.ts';
import { auditRoutes } from './admin/audit.ts';
import { configRoutes } from './admin/config.ts';
import { linkRoutes } from './admin/links.ts';
import { liveRoutes } from './admin/live.ts';
import { runRoutes } from './admin/runs.ts';
import { userRoutes } from './admin/users.ts';
import { workspaceRoutes } from './admin/workspaces.ts';
import type { LiveEvents } from './live.ts';
import type { RunOutputHub } from './run-output.ts';
import { adminGate, type AuthState, type GateOptions, type Throttle } from './middleware/auth.ts';

export interface AdminDeps {
  store: SurfaceStore;
  gate: GateOptions;
  /** SERVICE_ADMIN_EMAIL: allowlisted implicitly, listed beside the file's entries. */
  implicitAllowlist: readonly string[];
  /** For the workspaces' last CPU and memory samples and the orphan count. */
  metrics: Metrics;
  /** The panel's live events and the recent capacity refusals. */
  live: LiveEvents;
  /** Who may sign in (the allowlist and SERVICE_ADMIN_EMAIL): sign-in links are made for them only. */
  isAllowed: (email: string) => boolean;
  /** Reads the allowlist again now (after an edit: what an answer says was done is what isAllowed then says). */
  allowlistReload: () => Promise<void>;
  /** Counts sign-in links made per client address. */
  linkMints: Throttle;
  /** Workspace backups (made, listed, restored, downloaded). */
  backups: Backups;
  /** Live output of runs, for their output streams. */
  outputHub: RunOutputHub;
  /** The identity providers' names (none: students sign in by links only, which the Overview says). */
  providers: readonly string[];
  /** The bound on homes (HOME_DISK_LIMIT), against which each workspace's home is shown. */
  homeDisk: HomeDiskLimit;
}

/**
 * The admin API under `/admin`, behind the admin gate, one file per resource in `api/admin/`.
 * Handlers only edit desired state through the store.
 */
export function adminRouter(deps: AdminDeps): Router<AuthState> {
  const router = new Router<AuthState>({ prefix: '/admin' });
  router.use(adminGate(deps.gate));
  workspaceRoutes(router, deps);
  userRoutes(router, deps);
  allowlistRoutes(router, deps);
  configRoutes(router, deps);
  auditRoutes(router, deps);
  linkRoutes(router, deps);
  backupRoutes(router, deps);
  liveRoutes(router, deps);
  runRoutes(router, deps);
  return router;
}
