/**
 * Workspaces: every workspace with its owner, wanted and observed state, activity, CPU and memory,
 * its home's disk use against its bound (marked from 90 %, its student's notice on hover) and active run; search, filters, sorting and paging done by the server and kept in the URL; stop
 * and restart with a confirmation; a bulk stop of a selection. Updates live.
 */
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { client, ok } from './api.ts';
import type { paths } from './openapi.d.ts';
import { html } from './html.ts';
import { Ago, ConfirmDialog, Empty, Link, Notice, setQuery, useResource, type Confirmation, Loading } from './ui.ts';
import type { WorkspaceRow as Row } from '../../../src/wire/schemas.ts';
import type { DesiredState, ObservedState } from '../../../src/wire/vocabulary.ts';

/** The query of GET /admin/workspaces. */
type Query = NonNullable<paths['/admin/workspaces']['get']['parameters']['query']>;

/** A whole class on one page: 500 rows render well within 200 ms (bench/panel.ts). */
const PAGE_SIZE = 500;
/** The observed states and their labels, in the order the counts and the filter list them: keyed by ObservedState, so tsc names a state of the vocabulary missing here (the browser gets no value from the server). */
const OBSERVED: Record<ObservedState, string> = {
  running: 'running',
  starting: 'starting',
  waiting: 'waiting',
  stopped: 'stopped',
  failed: 'failed',
  unknown: 'unknown',
};
/** The wanted states the filter offers, keyed by DesiredState (a workspace being deleted is no choice: it is gone in moments). */
const WANTED: Record<Exclude<DesiredState, 'deleted'>, string> = { running: 'running', stopped: 'stopped' };
const COLUMNS: [key: string, label: string][] = [
  ['slug', 'Workspace'],
  ['owner', 'Owner'],
  ['desired', 'Wanted'],
  ['observed', 'Observed'],
  ['lastActivity', 'Last activity'],
  ['cpu', 'CPU'],
  ['memory', 'Memory'],
  ['disk', 'Disk'],
];

const percent = (value: number | null) => (value === null ? '—' : `${value.toFixed(value < 10 ? 1 : 0)} %`);
const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;

/** A home's last measure against its bound (HOME_DISK_LIMIT): `1.2 / 5.0 GiB`, marked and explained past 90 %. */
function disk(row: Row): VNode | string {
  if (!row.disk) return '—';
  const text = `${(row.disk.usedBytes / 1024 ** 3).toFixed(1)} / ${gib(row.disk.limitBytes)}`;
  return row.disk.message ? html`<span class="state waiting" title=${row.disk.message}>${text}</span>` : text;
}

export function WorkspacesPage({ url }: { url: URL }): VNode {
  const query = url.searchParams;
  const sort = query.get('sort') ?? 'slug';
  const order: Query['order'] = query.get('order') === 'desc' ? 'desc' : 'asc';
  const page = Math.max(1, Number(query.get('page') ?? '1') || 1);
  // The page's own address names the sort and the filters as text: the server refuses what is none of its words.
  const filters = Object.fromEntries(['q', 'observed', 'desired'].flatMap((name) => (query.get(name) ? [[name, query.get(name)!]] : []))) as Query;
  const params: Query = { sort: sort as Query['sort'], order, offset: (page - 1) * PAGE_SIZE, limit: PAGE_SIZE, ...filters };
  const { data, error, reload } = useResource(() => ok(client.GET('/admin/workspaces', { params: { query: params } })), JSON.stringify(params), [
    'workspaces',
    'status',
    'runs',
    'users',
  ]);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  // A selection is of the rows shown: another page, search or filter starts a new one.
  useEffect(() => setSelected(new Set()), [JSON.stringify(params)]);
  const [confirmation, setConfirmation] = useState<Confirmation | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);

  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };
  const sortBy = (key: string) => setQuery({ sort: key, order: sort === key && order === 'asc' ? 'desc' : 'asc', page: undefined });
  const act = (row: Row, action: 'stop' | 'restart') =>
    setConfirmation({
      title: action === 'stop' ? `Stop ${row.slug}?` : `Restart ${row.slug}'s editor?`,
      body:
        action === 'stop'
          ? html`<p>${row.owner ?? 'The student'} loses the open editor; the files stay. They can open it again.</p>`
          : html`<p>${row.owner ?? 'The student'}'s editor gets a fresh container; the files stay, unsaved editor state is lost.</p>`,
      action: action === 'stop' ? 'Stop' : 'Restart',
      run: async () => {
        await ok(
          action === 'stop'
            ? client.POST('/admin/workspaces/{workspaceId}/stop-containers', { params: { path: { workspaceId: row.id } } })
            : client.POST('/admin/workspaces/{workspaceId}/restart-code', { params: { path: { workspaceId: row.id } } }),
        );
        setNotice(action === 'stop' ? `${row.slug} is stopping.` : `${row.slug} gets a fresh editor.`);
        reload();
      },
    });
  const stopSelected = () => {
    const rows = (data?.workspaces ?? []).filter((row) => selected.has(row.id));
    const running = rows.filter((row) => row.desiredState === 'running');
    const skipped = rows.length - running.length;
    setConfirmation({
      title: `Stop ${running.length} workspace${running.length === 1 ? '' : 's'}?`,
      body: html`<p>These students lose their open editor (their files stay):</p>
        <ul class="names">
          ${running.map((row) => html`<li key=${row.id}>${row.slug}${row.owner ? ` (${row.owner})` : ''}</li>`)}
        </ul>
        ${skipped > 0 ? html`<p class="muted">${skipped} already stopped ${skipped === 1 ? 'is' : 'are'} left as they are.</p>` : null}`,
      action: 'Stop them',
      run: async () => {
        const answer = await ok(client.POST('/admin/workspaces/stop', { body: { ids: rows.map((row) => row.id) } }));
        setSelected(new Set());
        setNotice(`Stopping ${answer.stopped.length}; ${answer.skipped.length} skipped.`);
        reload();
      },
    });
  };

  const counts = data?.counts;
  const pages = data ? Math.max(1, Math.ceil(data.total / PAGE_SIZE)) : 1;
  const selectable = (data?.workspaces ?? []).filter((row) => row.desiredState === 'running');
  return html`<section aria-labelledby="workspaces-title">
    <h1 id="workspaces-title">Workspaces</h1>
    ${
      counts
        ? html`<p class="counts">
            ${`${counts.all} in all: ${
              Object.entries(OBSERVED)
                .filter(([state]) => (counts.observed[state] ?? 0) > 0)
                .map(([state, label]) => `${counts.observed[state]} ${label}`)
                .join(', ') || 'none yet'
            }`}
          </p>`
        : null
    }
    ${notice ? html`<${Notice} kind="ok" onClose=${() => setNotice(undefined)}>${notice}<//>` : null}
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    <form class="filters" role="search" onSubmit=${(event: Event) => event.preventDefault()}>
      <label
        >Search
        <input
          type="search"
          name="q"
          value=${query.get('q') ?? ''}
          placeholder="slug or email"
          onInput=${(event: Event) => setQuery({ q: (event.target as HTMLInputElement).value, page: undefined })}
      /></label>
      <label
        >Observed
        <select
          name="observed"
          value=${query.get('observed') ?? ''}
          onChange=${(event: Event) => setQuery({ observed: (event.target as HTMLSelectElement).value, page: undefined })}
        >
          <option value="">any</option>
          ${Object.entries(OBSERVED).map(([state, label]) => html`<option key=${state} value=${state}>${label}</option>`)}
        </select></label
      >
      <label
        >Wanted
        <select
          name="desired"
          value=${query.get('desired') ?? ''}
          onChange=${(event: Event) => setQuery({ desired: (event.target as HTMLSelectElement).value, page: undefined })}
        >
          <option value="">any</option>
          ${Object.entries(WANTED).map(([state, label]) => html`<option key=${state} value=${state}>${label}</option>`)}
        </select></label
      >
      <button type="button" disabled=${selected.size === 0} onClick=${stopSelected}>Stop selected (${selected.size})</button>
    </form>
    ${
      !data
        ? html`<${Loading} error=${error} />`
        : data.total === 0
          ? html`<${Empty}
              >${counts?.all === 0 ? 'No workspaces yet: a student gets one at their first sign-in.' : 'No workspace matches; clear the search or the filters.'}<//
            >`
          : html`<div class="scroll">
                <table class="workspaces" role="table">
                  <caption class="visually-hidden">
                    Workspaces, ${data.total} matching, sorted by ${sort} ${order === 'asc' ? 'ascending' : 'descending'}
                  </caption>
                  <thead role="rowgroup">
                    <tr role="row">
                      <th role="columnheader" scope="col">
                        <input
                          type="checkbox"
                          aria-label="Select every running workspace on this page"
                          checked=${selectable.length > 0 && selectable.every((row) => selected.has(row.id))}
                          onChange=${(event: Event) => setSelected(new Set((event.target as HTMLInputElement).checked ? selectable.map((row) => row.id) : []))}
                        />
                      </th>
                      ${COLUMNS.map(
                        ([key, label]) =>
                          html`<th
                            role="columnheader"
                            scope="col"
                            key=${key}
                            aria-sort=${sort === key ? (order === 'asc' ? 'ascending' : 'descending') : 'none'}
                          >
                            <button type="button" class="sort" onClick=${() => sortBy(key)}>
                              ${label}${sort === key ? (order === 'asc' ? ' ▲' : ' ▼') : ''}
                            </button>
                          </th>`,
                      )}
                      <th role="columnheader" scope="col">Run</th>
                      <th role="columnheader" scope="col"><span class="visually-hidden">Actions</span></th>
                    </tr>
                  </thead>
                  <tbody role="rowgroup">
                    ${data.workspaces.map(
                      (row) =>
                        html`<tr key=${row.id} role="row">
                          <td role="cell">
                            <input
                              type="checkbox"
                              aria-label=${`Select ${row.slug}`}
                              disabled=${row.desiredState !== 'running'}
                              checked=${selected.has(row.id)}
                              onChange=${() => toggle(row.id)}
                            />
                          </td>
                          <th role="rowheader" scope="row">${row.slug}</th>
                          <td role="cell">${row.owner ?? html`<span class="muted">deleted</span>`}</td>
                          <td role="cell">${row.desiredState}</td>
                          <td role="cell">
                            <span class=${`state ${row.observedState}`}>${row.observedState}</span
                            >${row.statusMessage ? html`<div class="muted small">${row.statusMessage}</div>` : null}
                          </td>
                          <td role="cell"><${Ago} iso=${row.lastActivityAt} /></td>
                          <td role="cell" class="number">${percent(row.cpuPercent)}</td>
                          <td role="cell" class="number">${percent(row.memoryPercent)}</td>
                          <td role="cell" class="number">${disk(row)}</td>
                          <td role="cell">
                            <${Link} to=${`/panel/runs?workspace=${row.id}`}
                              >${row.activeRun ? (row.activeRun.status === 'queued' ? 'building' : row.activeRun.status) : html`<span class="muted">runs</span>`}<//
                            >
                          </td>
                          <td role="cell" class="actions">
                            <button type="button" disabled=${row.desiredState !== 'running'} onClick=${() => act(row, 'stop')} aria-label=${`Stop ${row.slug}`}>
                              Stop
                            </button>
                            <button
                              type="button"
                              disabled=${row.desiredState !== 'running'}
                              onClick=${() => act(row, 'restart')}
                              aria-label=${`Restart ${row.slug}'s editor`}
                            >
                              Restart
                            </button>
                          </td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>
              ${
                pages > 1
                  ? html`<nav class="pager" aria-label="Pages">
                      <button type="button" disabled=${page <= 1} onClick=${() => setQuery({ page: page - 1 })}>Previous</button>
                      <span>Page ${page} of ${pages}</span>
                      <button type="button" disabled=${page >= pages} onClick=${() => setQuery({ page: page + 1 })}>Next</button>
                    </nav>`
                  : null
              }`
    }
    <${ConfirmDialog} confirmation=${confirmation} onDone=${() => setConfirmation(undefined)} />
  </section>`;
}
