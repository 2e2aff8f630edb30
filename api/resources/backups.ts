/** Backups: the stored ones, one made of a workspace, one restored into a workspace, one downloaded. */
import { createReadStream } from 'node:fs';
import Type from 'typebox';
import { presentBackup, presentWorkspaceChange } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';
import { workspaceOf } from './workspaces.ts';

export const list = operation({
  method: 'get',
  path: '/admin/backups',
  summary: 'The stored backups, newest first.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.BackupList, 'The backups.') },
  handle: async (_input, { backups }) => ({ status: 200, body: { backups: (await backups.list()).map(presentBackup) } }),
});

export const download = operation({
  method: 'get',
  path: '/admin/backups/{name}',
  summary: 'A stored backup, as a download.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: { file: 'application/gzip', description: 'The backup file (tar.gz).' } },
  handle: async ({ params, ctx }, { backups }) => {
    const file = await backups.pathOf(params.name);
    ctx.set('Content-Disposition', `attachment; filename="${params.name}"`);
    ctx.type = 'application/gzip';
    ctx.body = createReadStream(file);
  },
});

export const create = operation({
  method: 'post',
  path: '/admin/workspaces/{workspaceId}/backup',
  summary: "Backs up the workspace's files (audit `workspace.backup`).",
  auth: 'admin',
  tag: 'admin',
  long: true,
  errors: ['backup_unrestorable', 'backup_unsupported_owner', 'volume_not_found'],
  responses: { 201: json(Wire.BackupAnswer, 'The stored backup.') },
  handle: async ({ actor, params }, { store, backups }) => {
    const made = await backups.create(actor, await workspaceOf(store, params.workspaceId));
    return { status: 201, body: { backup: presentBackup({ name: made.name!, sizeBytes: made.sizeBytes!, modified: new Date(), manifest: made.manifest }) } };
  },
});

export const restore = operation({
  method: 'post',
  path: '/admin/workspaces/{workspaceId}/restore',
  summary: 'Restores a stored backup into the stopped workspace, keeping its files as a backup first (audit `workspace.restore`).',
  auth: 'admin',
  tag: 'admin',
  long: true,
  body: Type.Object({ backup: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
  errors: [
    'backup_not_found',
    'workspace_running',
    'backup_tampered',
    'backup_truncated',
    'backup_not_ours',
    'restore_not_kept',
    'restore_backup_failed',
    'restore_target_exists',
  ],
  responses: { 200: json(Wire.RestoreAnswer, 'Restored.') },
  handle: async ({ actor, params, body }, { store, backups }) => {
    const workspace = await workspaceOf(store, params.workspaceId);
    const restored = await backups.restore(actor, await backups.pathOf(body.backup), { to: workspace });
    return {
      status: 200,
      body: { workspace: presentWorkspaceChange(restored.workspace), from: restored.manifest.slug, handedOver: restored.handedOver, kept: restored.kept },
    };
  },
});
