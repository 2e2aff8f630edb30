/**
 * Audit log: filters by actor (substring), action (prefix, the known names offered) and time range,
 * kept in the URL; newest first; more with the id cursor; a row opens to its details, a change of
 * the cap as before and after.
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { client, messageOf, ok } from './api.ts';
import { html } from './html.ts';
import { Empty, Notice, setQuery, Time, Loading } from './ui.ts';
import type { AuditEntry as Entry } from '../../../src/wire/schemas.ts';

const ACTIONS = [
  'user.promote',
  'user.demote',
  'user.delete',
  'container.stop',
  'container.restart-code',
  'workspace.backup',
  'workspace.restore',
  'workspace.reset',
  'workspace.import',
  'allowlist.add',
  'allowlist.remove',
  'config.max-active-containers',
  'audit.prune',
  'auth.setup',
  'auth.sign-in-link',
  'auth.sign-in-link.use',
  'run.stop',
  'node.drain',
  'node.undrain',
];

/** `datetime-local` value (the browser's time) ↔ ISO 8601 UTC, as the API takes it. */
const toIso = (local: string) => (local ? new Date(local).toISOString() : undefined);
const toLocal = (iso: string | null) => {
  if (!iso || Number.isNaN(Date.parse(iso))) return '';
  const date = new Date(iso);
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};

/** A row's details: a before/after where the entry has both, and the rest of its metadata as it is (a restore's `from` is a workspace, not a before). */
function Details({ entry }: { entry: Entry }): VNode {
  const metadata = entry.metadata ?? {};
  const { from, to, ...others } = metadata;
  const change = from !== undefined && to !== undefined;
  const rest = change ? others : metadata;
  // What a person knows the target by (a workspace's slug, a user's email), beside its id.
  const named = typeof metadata.slug === 'string' ? metadata.slug : typeof metadata.email === 'string' ? metadata.email : undefined;
  return html`<dl class="details">
    <dt>Target</dt>
    <dd>${entry.target.kind} ${named ? html`<strong>${named}</strong> ` : null}<span class="muted">${entry.target.id}</span></dd>
    <dt>Actor id</dt>
    <dd>${entry.actor.id ?? '— (a named actor)'}</dd>
    ${
      change
        ? html`<dt>Change</dt>
            <dd><span class="before">${String(from)}</span> → <span class="after">${String(to)}</span></dd>`
        : null
    }
    ${Object.entries(rest).map(
      ([key, value]) =>
        html`<dt key=${key}>${key}</dt>
          <dd>${typeof value === 'string' ? value : JSON.stringify(value)}</dd>`,
    )}
  </dl>`;
}

function AuditRow({ entry }: { entry: Entry }): VNode {
  return html`<tr data-id=${entry.id}>
    <td><${Time} iso=${entry.timestamp} /></td>
    <td>${entry.actor.email}</td>
    <td><code>${entry.action}</code></td>
    <td>
      <details>
        <summary>${String(entry.metadata?.slug ?? entry.metadata?.email ?? entry.target.id)}</summary>
        <${Details} entry=${entry} />
      </details>
    </td>
  </tr>`;
}

/**
 * One row per entry, made once: "Load more" appends to the list, and Preact skips a row whose
 * element is the one it rendered before, so a page costs its 50 new rows, not all those shown.
 */
const rows = new WeakMap<Entry, VNode>();
function rowOf(entry: Entry): VNode {
  let row = rows.get(entry);
  if (!row) rows.set(entry, (row = html`<${AuditRow} key=${entry.id} entry=${entry} />`));
  return row;
}

export function AuditPage({ url }: { url: URL }): VNode {
  const filters = {
    actor: url.searchParams.get('actor') ?? '',
    action: url.searchParams.get('action') ?? '',
    since: url.searchParams.get('since') ?? '',
    until: url.searchParams.get('until') ?? '',
  };
  const key = JSON.stringify(filters);
  const [entries, setEntries] = useState<Entry[] | undefined>(undefined);
  const [cursor, setCursor] = useState<number | null>(null);
  const [error, setError] = useState<string | undefined>(undefined);
  const [draft, setDraft] = useState(filters);

  const [loading, setLoading] = useState(false);
  // Only the newest read counts: a slow page of the filters before never lands on the new ones.
  const latest = useRef(0);
  const load = async (before: number | null) => {
    const call = ++latest.current;
    setLoading(true);
    const query = { limit: 50, ...Object.fromEntries(Object.entries(filters).filter(([, value]) => value)), ...(before !== null && { before }) };
    try {
      const page = await ok(client.GET('/admin/audit-log', { params: { query } }));
      if (call !== latest.current) return;
      setEntries((current) => (before === null ? page.entries : [...(current ?? []), ...page.entries]));
      setCursor(page.nextCursor);
      setError(undefined);
    } catch (failure) {
      if (call === latest.current) setError(messageOf(failure));
    } finally {
      if (call === latest.current) setLoading(false);
    }
  };
  useEffect(() => {
    setDraft(filters);
    setEntries(undefined);
    void load(null);
  }, [key]);

  const apply = (event: Event) => {
    event.preventDefault();
    setQuery({ actor: draft.actor.trim(), action: draft.action.trim(), since: draft.since, until: draft.until });
  };
  const field = (name: keyof typeof draft) => (event: Event) => setDraft({ ...draft, [name]: (event.target as HTMLInputElement).value });

  return html`<section aria-labelledby="audit-title">
    <h1 id="audit-title">Audit log</h1>
    <form class="filters" onSubmit=${apply} aria-label="Filters">
      <label>Actor <input name="actor" value=${draft.actor} placeholder="part of an email" onInput=${field('actor')} /></label>
      <label>Action <input name="action" list="audit-actions" value=${draft.action} placeholder="user. or user.promote" onInput=${field('action')} /></label>
      <datalist id="audit-actions">${ACTIONS.map((action) => html`<option key=${action} value=${action} />`)}</datalist>
      <label
        >From
        <input
          type="datetime-local"
          name="since"
          value=${toLocal(draft.since)}
          onInput=${(event: Event) => setDraft({ ...draft, since: toIso((event.target as HTMLInputElement).value) ?? '' })}
      /></label>
      <label
        >To
        <input
          type="datetime-local"
          name="until"
          value=${toLocal(draft.until)}
          onInput=${(event: Event) => setDraft({ ...draft, until: toIso((event.target as HTMLInputElement).value) ?? '' })}
      /></label>
      <button type="submit">Apply</button>
      <button type="button" onClick=${() => setQuery({ actor: undefined, action: undefined, since: undefined, until: undefined })}>Clear</button>
    </form>
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    ${
      !entries
        ? html`<${Loading} error=${error} />`
        : entries.length === 0
          ? html`<${Empty}>No entries match. Admin actions (promotions, stops, allowlist edits, cap changes…) appear here as they happen.<//>`
          : html`<table class="audit">
                <caption class="visually-hidden">
                  Audit entries, newest first
                </caption>
                <thead>
                  <tr>
                    <th scope="col">When</th>
                    <th scope="col">Actor</th>
                    <th scope="col">Action</th>
                    <th scope="col">Target</th>
                  </tr>
                </thead>
                <tbody>
                  ${entries.map(rowOf)}
                </tbody>
              </table>
              ${cursor !== null ? html`<button type="button" class="more" disabled=${loading} onClick=${() => load(cursor)}>Load more</button>` : html`<p class="muted">That is all.</p>`}`
    }
  </section>`;
}
