import Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import { AllowlistFormatError } from '../src/allowlist/allowlist.ts';
import type { AllowlistFile } from '../src/allowlist/allowlist-file.ts';
import { addAllowlistEntry, removeAllowlistEntry } from '../src/allowlist/allowlist-store.ts';
import { ConflictError } from '../src/errors.ts';
import { listAudit } from '../src/store/audit.ts';
import { deleteUser, demoteUser, listUsers, promoteUser } from '../src/store/users.ts';
import { getEffectiveCap, setCapOverride } from '../src/store/settings.ts';
import { restartCode, statusOverview, stopWorkspace, type StoreContext, type WorkspaceRecord } from '../src/store/workspaces.ts';
import { adminGate, type AuthState, type GateOptions } from './middleware/auth.ts';
import { jsonBody, validateBody, validateQuery, type BodyState, type QueryState } from './middleware/validate.ts';

/** The largest cap an admin may set; far above what one Docker host runs. */
export const MAX_CAP = 10000;

interface CapBody {
  value: number;
}

const capSchema: JSONSchemaType<CapBody> = {
  type: 'object',
  properties: { value: { type: 'integer', minimum: 0, maximum: MAX_CAP } },
  required: ['value'],
  additionalProperties: false,
};

interface AuditLogQuery {
  action?: string;
  actor?: string;
  before?: number;
  limit: number;
  since?: string;
  until?: string;
}

const auditLogQuerySchema = {
  type: 'object',
  properties: {
    action: { type: 'string', maxLength: 200 },
    actor: { type: 'string', maxLength: 200 },
    // bigserial ids; the maximum keeps the cursor exact as a JSON number.
    before: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    limit: { type: 'integer', minimum: 1, maximum: 500, default: 50 },
    since: { type: 'string', format: 'date-time' },
    until: { type: 'string', format: 'date-time' },
  },
  required: ['limit'],
  additionalProperties: false,
};

interface AllowlistBody {
  entry: string;
}

const allowlistSchema: JSONSchemaType<AllowlistBody> = {
  type: 'object',
  properties: { entry: { type: 'string', minLength: 1, maxLength: 254 } },
  required: ['entry'],
  additionalProperties: false,
};

export interface AdminDeps {
  store: StoreContext;
  gate: GateOptions;
  allowlistFile: AllowlistFile;
  /** SERVICE_ADMIN_EMAIL: allowlisted implicitly, listed beside the file's entries. */
  implicitAllowlist: readonly string[];
}

/** Runs an allowlist edit, turning a malformed file (someone is editing it by hand) into a 409. */
async function editAllowlist<T>(edit: () => Promise<T>): Promise<T> {
  try {
    return await edit();
  } catch (error) {
    if (error instanceof AllowlistFormatError) throw ConflictError('allowlist_file_invalid', `The allowlist file is not valid; fix it first. ${error.message}`);
    throw error;
  }
}

/**
 * The answer to a desired-state change: the new spec and the last observed status; 202 while it
 * is still converging, 200 when what is observed already matches.
 */
function changeAnswer(workspace: WorkspaceRecord): { status: number; body: unknown } {
  const converged = workspace.observedGeneration === workspace.generation && workspace.observedState === workspace.desiredState;
  return {
    status: converged ? 200 : 202,
    body: {
      workspace: {
        id: workspace.id,
        slug: workspace.slug,
        desiredState: workspace.desiredState,
        generation: workspace.generation,
        restartGeneration: workspace.restartGeneration,
        observedState: workspace.observedState,
        observedGeneration: workspace.observedGeneration,
      },
    },
  };
}

/** The admin API under `/admin`, behind the admin gate. Handlers only edit desired state through the store. */
export function adminRouter(deps: AdminDeps): Router<AuthState> {
  const router = new Router<AuthState>({ prefix: '/admin' });
  router.use(adminGate(deps.gate));

  const { store } = deps;

  router.get('/status', async (ctx) => {
    ctx.body = await statusOverview(store.db, await getEffectiveCap(store.db, store.environmentCap));
  });

  router.post('/workspaces/:workspaceId/stop-containers', async (ctx) => {
    const answer = changeAnswer(await stopWorkspace(store, ctx.state.actor!, ctx.params.workspaceId!));
    ctx.status = answer.status;
    ctx.body = answer.body;
  });

  router.post('/workspaces/:workspaceId/restart-code', async (ctx) => {
    const answer = changeAnswer(await restartCode(store, ctx.state.actor!, ctx.params.workspaceId!));
    ctx.status = answer.status;
    ctx.body = answer.body;
  });

  router.get('/users', async (ctx) => {
    ctx.body = { users: await listUsers(store.db) };
  });

  router.post('/users/:userId/promote', async (ctx) => {
    ctx.body = await promoteUser(store.db, ctx.state.actor!, ctx.params.userId!, store.changes);
  });

  router.post('/users/:userId/demote', async (ctx) => {
    ctx.body = await demoteUser(store.db, ctx.state.actor!, ctx.params.userId!, store.changes);
  });

  router.delete('/users/:userId', async (ctx) => {
    ctx.body = { user: await deleteUser(store, ctx.state.actor!, ctx.params.userId!) };
  });

  router.get('/allowlist', async (ctx) => {
    const entries = await editAllowlist(() => deps.allowlistFile.read());
    ctx.body = { entries, implicit: deps.implicitAllowlist };
  });

  router.post('/allowlist', jsonBody(), validateBody(allowlistSchema), async (ctx) => {
    const { entry } = (ctx.state as BodyState<AllowlistBody>).body;
    const result = await editAllowlist(() => addAllowlistEntry(store.db, deps.allowlistFile, ctx.state.actor!, entry));
    ctx.status = result.added ? 201 : 200;
    ctx.body = result;
  });

  router.delete('/allowlist/:entry', async (ctx) => {
    ctx.body = await editAllowlist(() => removeAllowlistEntry(store.db, deps.allowlistFile, ctx.state.actor!, ctx.params.entry!));
  });

  router.get('/config/max-active-containers', async (ctx) => {
    ctx.body = await getEffectiveCap(store.db, store.environmentCap);
  });

  router.post('/config/max-active-containers', jsonBody(), validateBody(capSchema), async (ctx) => {
    const { value } = (ctx.state as BodyState<CapBody>).body;
    const change = await setCapOverride(store.db, ctx.state.actor!, value, store.environmentCap);
    ctx.body = { value, source: 'override', previous: change.from };
  });

  router.get('/audit-log', validateQuery<AuditLogQuery>(auditLogQuerySchema), async (ctx) => {
    const { since, until, ...filter } = (ctx.state as QueryState<AuditLogQuery>).query;
    ctx.body = await listAudit(store.db, {
      ...filter,
      since: since === undefined ? undefined : new Date(since),
      until: until === undefined ? undefined : new Date(until),
    });
  });

  return router;
}
