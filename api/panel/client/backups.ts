/** Backups: the stored ones (download, restore into a stopped workspace), and a new one of a workspace. */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, client, messageOf, ok } from './api.ts';
import { html } from './html.ts';
import { ConfirmDialog, Empty, Notice, Time, useResource, type Confirmation, Loading } from './ui.ts';
import type { Backup, WorkspaceRow } from '../../../src/wire/schemas.ts';

const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

export function BackupsPage(): VNode {
  const backups = useResource(() => ok(client.GET('/admin/backups')), 'backups');
  const workspaces = useResource(
    () => ok(client.GET('/admin/workspaces', { params: { query: { sort: 'slug', order: 'asc', limit: 1000 } } })),
    'backup-workspaces',
    ['workspaces', 'status'],
  );
  const [source, setSource] = useState('');
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | undefined>(undefined);
  const rows = workspaces.data?.workspaces ?? [];

  const backUp = async (event: Event) => {
    event.preventDefault();
    const workspace = rows.find((row) => row.id === source);
    if (!workspace) return;
    setBusy(true);
    setNotice(undefined);
    try {
      const { backup } = await ok(client.POST('/admin/workspaces/{workspaceId}/backup', { params: { path: { workspaceId: workspace.id } } }));
      setNotice({
        kind: 'ok',
        text: `Backed up ${workspace.slug}: ${backup.files ?? '?'} files, ${backup.bytes === null ? '?' : megabytes(backup.bytes)} of data (a ${megabytes(backup.sizeBytes)} file, ${backup.name}).`,
      });
      backups.reload();
    } catch (failure) {
      setNotice({ kind: 'error', text: messageOf(failure) });
    } finally {
      setBusy(false);
    }
  };

  /** The restore being confirmed: its backup and the chosen workspace (the dialog is drawn from the live rows, so a stop shows at once). */
  const [restoring, setRestoring] = useState<{ backup: Backup; target: string } | undefined>(undefined);
  /** Who waits for a workspace to be stopped in full (wanted stopped, its editor gone), by workspace id; the live rows resolve them. */
  const stopWaiters = useRef(new Map<string, () => void>());
  const isStopped = (row: WorkspaceRow | undefined) =>
    !row || (row.desiredState !== 'running' && row.observedState !== 'running' && row.observedState !== 'starting');
  useEffect(() => {
    for (const [id, resolve] of stopWaiters.current) {
      if (isStopped(rows.find((row) => row.id === id))) {
        stopWaiters.current.delete(id);
        resolve();
      }
    }
  }, [rows]);
  const stopped = (id: string) =>
    new Promise<void>((resolve) => {
      if (isStopped(rows.find((row) => row.id === id))) resolve();
      else stopWaiters.current.set(id, resolve);
    });

  /** Restores `backup` into the workspace `target` and says what happened. */
  const restoreInto = async (backup: Backup, target: string) => {
    const answer = await ok(
      client.POST('/admin/workspaces/{workspaceId}/restore', { params: { path: { workspaceId: target } }, body: { backup: backup.name } }),
    );
    setNotice({
      kind: 'ok',
      text: `Restored ${backup.name} into ${answer.workspace.slug}${answer.handedOver ? ", without the first student's editor state, credentials and history" : ''}.${answer.kept ? ` Its previous files are kept as ${answer.kept}.` : ''}`,
    });
    backups.reload();
  };

  /** Asks which workspace and whether to replace its files, then restores; into a running one, offers to stop it and go on in one step. */
  const restoreConfirmation = ({ backup, target }: { backup: Backup; target: string }): Confirmation => ({
    title: `Restore ${backup.name}?`,
    body: html`<p>
        The chosen workspace's files are replaced by those of the
        backup${' '}(taken${' '}${backup.created ? html`<${Time} iso=${backup.created} />` : 'at an unknown time'}). The workspace must be stopped. Its current
        files are first kept as a backup of their own, listed here, so nothing is lost. Into another student's workspace, the first student's editor state,
        credentials and history stay out.
      </p>
      <label
        >Into the workspace
        <select onChange=${(event: Event) => setRestoring({ backup, target: (event.target as HTMLSelectElement).value })}>
          ${rows.map(
            (row) =>
              html`<option key=${row.id} value=${row.id} selected=${row.id === target}>
                ${row.slug}${row.owner ? ` (${row.owner})` : ''}${row.id === backup.workspaceId ? ' — its own' : ''}${row.desiredState === 'running' ? ' — running' : isStopped(row) ? '' : ' — stopping'}
              </option>`,
          )}
        </select></label
      >`,
    action: 'Replace the files',
    recover: (failure) => {
      const workspace = rows.find((row) => row.id === target);
      if (!(failure instanceof ApiError) || failure.code !== 'workspace_running' || !workspace) return undefined;
      return {
        message: `${workspace.slug} is running: stop it, then replace its files (its student's editor closes; the files stay).`,
        label: `Stop ${workspace.slug} and replace the files`,
        run: async () => {
          await ok(client.POST('/admin/workspaces/{workspaceId}/stop-containers', { params: { path: { workspaceId: workspace.id } } }));
          await stopped(workspace.id);
          await restoreInto(backup, workspace.id);
          return 'done';
        },
      };
    },
    run: () => restoreInto(backup, target),
  });
  const confirmation = restoring ? restoreConfirmation(restoring) : undefined;
  const restore = (backup: Backup) => setRestoring({ backup, target: rows.find((row) => row.id === backup.workspaceId)?.id ?? rows[0]?.id ?? '' });

  return html`<section aria-labelledby="backups-title">
    <h1 id="backups-title">Backups</h1>
    <p class="muted">A backup holds a workspace's files with their modes; it is kept on the server (DATA_DIR/backups/) and can be downloaded.</p>
    ${notice ? html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>` : null}
    ${backups.error ? html`<${Notice} kind="error">${backups.error}<//>` : null}
    <form class="inline" onSubmit=${backUp}>
      <label for="backup-source">Back up the workspace</label>
      <select id="backup-source" value=${source} onChange=${(event: Event) => setSource((event.target as HTMLSelectElement).value)}>
        <option value="">Choose…</option>
        ${rows.map((row) => html`<option key=${row.id} value=${row.id}>${row.slug}${row.owner ? ` (${row.owner})` : ''}</option>`)}
      </select>
      <button type="submit" disabled=${busy || !source}>${busy ? 'Backing up…' : 'Back up'}</button>
    </form>
    ${
      !backups.data
        ? html`<${Loading} error=${backups.error} />`
        : backups.data.backups.length === 0
          ? html`<${Empty}>No backups yet: choose a workspace above and back it up (or run <code>${'cli backup <slug>'}</code> on the server).<//>`
          : html`<table>
              <caption class="visually-hidden">
                Stored backups, newest first
              </caption>
              <thead>
                <tr>
                  <th scope="col">Workspace</th>
                  <th scope="col">Taken</th>
                  <th scope="col">Files</th>
                  <th scope="col">Data</th>
                  <th scope="col">File</th>
                  <th scope="col"><span class="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                ${backups.data.backups.map(
                  (backup) =>
                    html`<tr key=${backup.name}>
                      <th scope="row">${backup.slug ?? html`<span class="muted">${backup.name}</span>`}</th>
                      <td><${Time} iso=${backup.created ?? backup.modified} /></td>
                      <td class="number">${backup.files ?? '?'}</td>
                      <td class="number">${backup.bytes === null ? '?' : megabytes(backup.bytes)}</td>
                      <td class="number">${megabytes(backup.sizeBytes)}</td>
                      <td class="actions">
                        <a
                          class="button"
                          href=${`/admin/backups/${encodeURIComponent(backup.name)}`}
                          download=${backup.name}
                          aria-label=${`Download ${backup.name}`}
                          >Download</a
                        >
                        <button
                          type="button"
                          disabled=${rows.length === 0}
                          title=${rows.length === 0 ? 'There is no workspace to restore into.' : undefined}
                          onClick=${() => restore(backup)}
                          aria-label=${`Restore ${backup.name}`}
                        >
                          Restore
                        </button>
                      </td>
                    </tr>`,
                )}
              </tbody>
            </table>`
    }
    <${ConfirmDialog} confirmation=${confirmation} onDone=${() => setRestoring(undefined)} />
  </section>`;
}
