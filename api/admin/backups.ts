import { createReadStream } from 'node:fs';
import type Router from '@koa/router';
import type { JSONSchemaType } from 'ajv';
import { LONG_REQUEST_MS } from '../../src/caller.ts';
import { NotFoundError } from '../../src/errors.ts';
import type { AdminDeps } from '../admin.ts';
import type { AuthState } from '../middleware/auth.ts';
import { longRequest } from '../middleware/deadline.ts';
import { jsonBody, validateBody, type BodyState } from '../middleware/validate.ts';
import { presentBackup, presentWorkspaceChange } from '../../src/wire/presenters.ts';
import type { BackupAnswer, BackupList, RestoreAnswer } from '../../src/wire/schemas.ts';

interface RestoreBody {
  backup: string;
}

export const restoreSchema: JSONSchemaType<RestoreBody> = {
  type: 'object',
  properties: { backup: { type: 'string', minLength: 1, maxLength: 200 } },
  required: ['backup'],
  additionalProperties: false,
};

/** Backups: the stored ones, one made of a workspace, one restored into a workspace, one downloaded. */
export function backupRoutes(router: Router<AuthState>, { store, backups }: AdminDeps): void {
  const workspaceOf = async (id: string) => {
    const workspace = await store.workspaces.get(id);
    if (!workspace || workspace.desiredState === 'deleted') throw NotFoundError('workspace_not_found', `No workspace with id ${JSON.stringify(id)}.`);
    return workspace;
  };

  router.get('/backups', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { backups: (await backups.list()).map(presentBackup) } satisfies BackupList;
  });

  router.get('/backups/:name', async (ctx) => {
    const file = await backups.pathOf(ctx.params.name!);
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Content-Disposition', `attachment; filename="${ctx.params.name!}"`);
    ctx.type = 'application/gzip';
    ctx.body = createReadStream(file);
  });

  router.post('/workspaces/:workspaceId/backup', longRequest(LONG_REQUEST_MS), async (ctx) => {
    const workspace = await workspaceOf(ctx.params.workspaceId!);
    const made = await backups.create(ctx.state.actor!, workspace);
    ctx.status = 201;
    ctx.body = {
      backup: presentBackup({ name: made.name!, sizeBytes: made.sizeBytes!, modified: new Date(), manifest: made.manifest }),
    } satisfies BackupAnswer;
  });

  router.post('/workspaces/:workspaceId/restore', longRequest(LONG_REQUEST_MS), jsonBody(), validateBody(restoreSchema), async (ctx) => {
    const workspace = await workspaceOf(ctx.params.workspaceId!);
    const file = await backups.pathOf((ctx.state as BodyState<RestoreBody>).body.backup);
    const restored = await backups.restore(ctx.state.actor!, file, { to: workspace });
    ctx.body = {
      workspace: presentWorkspaceChange(restored.workspace),
      from: restored.manifest.slug,
      handedOver: restored.handedOver,
      kept: restored.kept,
    } satisfies RestoreAnswer;
  });
}
