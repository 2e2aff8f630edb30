/** Overview: capacity with the inline cap editor, active builds, who was refused at the cap (live), failures. */
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { client, messageOf, ok } from './api.ts';
import { html } from './html.ts';
import { Ago, Empty, Link, Notice, Time, useResource } from './ui.ts';
import type { Overview } from '../../../src/wire/schemas.ts';

/**
 * The cap, edited in place: validated here as the API validates it, effective at once. It is made
 * anew whenever the cap changes (its field then shows the new cap), so the confirmation of a save
 * (`saved`) is kept by the page, which `onSaved` tells.
 */
function CapEditor({
  cap,
  source,
  saved,
  onSaved,
}: {
  cap: number;
  source: string;
  saved: string | undefined;
  onSaved: (message: string | undefined) => void;
}): VNode {
  const [value, setValue] = useState(String(cap));
  const [error, setError] = useState<string | undefined>(undefined);
  const save = async (event: Event) => {
    event.preventDefault();
    onSaved(undefined);
    const number = Number(value);
    if (!/^\d+$/.test(value.trim()) || number > 10000) return setError('The cap is a whole number from 0 to 10000.');
    try {
      const answer = await ok(client.POST('/admin/config/max-active-containers', { body: { value: number } }));
      setError(undefined);
      onSaved(`Saved: the cap is ${answer.value} (was ${answer.previous}). Lowering it stops no one.`);
    } catch (failure) {
      setError(messageOf(failure));
    }
  };
  return html`<form class="inline" onSubmit=${save}>
    <label for="cap">Cap on running workspaces</label>
    <input
      id="cap"
      name="cap"
      inputmode="numeric"
      value=${value}
      aria-describedby="cap-help"
      aria-invalid=${error ? 'true' : undefined}
      onInput=${(event: Event) => setValue((event.target as HTMLInputElement).value)}
    />
    <button type="submit">Save</button>
    <p id="cap-help" class="muted">${source === 'override' ? 'Set at runtime (overrides MAX_ACTIVE_CONTAINERS).' : 'From MAX_ACTIVE_CONTAINERS.'}</p>
    ${error ? html`<${Notice} kind="error">${error}<//>` : null} ${saved ? html`<${Notice} kind="ok">${saved}<//>` : null}
  </form>`;
}

const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;

/** The nodes of a swarm, as the leader last saw them (one Docker Engine is one node, and is not listed). */
function Nodes({ nodes }: { nodes: Overview['nodes'] }): VNode {
  return html`<h2 id="nodes-title">Nodes</h2>
    <table aria-labelledby="nodes-title">
      <thead>
        <tr>
          <th scope="col">Node</th>
          <th scope="col">State</th>
          <th scope="col">Running</th>
          <th scope="col">Workspaces</th>
          <th scope="col">Memory free</th>
          <th scope="col">Seen</th>
        </tr>
      </thead>
      <tbody>
        ${nodes.map(
          (node) =>
            html`<tr key=${node.name}>
              <td>${node.name}</td>
              <td class=${node.state === 'ready' ? undefined : 'failed'}>
                ${node.state}${node.drainRequested ? ', draining (cli nodes undrain takes it back)' : node.availability === 'active' ? '' : `, ${node.availability}`}
              </td>
              <td>${node.runningWorkspaces}</td>
              <td>${node.workspaces}</td>
              <td>${gib(node.freeMemoryBytes)} of ${gib(node.memoryBytes)}</td>
              <td><${Ago} iso=${node.seenAt} /></td>
            </tr>`,
        )}
      </tbody>
    </table>`;
}

export function OverviewPage(): VNode {
  const { data, error, reload } = useResource(() => ok(client.GET('/admin/overview')), 'overview', [
    'workspaces',
    'status',
    'runs',
    'settings',
    'refusal',
    'nodes',
  ]);
  const [capSaved, setCapSaved] = useState<string | undefined>(undefined);
  if (error && !data) return html`<${Notice} kind="error">${error}<//>`;
  if (!data) return html`<p class="loading">Loading…</p>`;
  const { capacity } = data;
  return html`<section aria-labelledby="overview-title">
    <h1 id="overview-title">Overview</h1>
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    ${
      data.signInProviders.length === 0
        ? html`<p class="notice info">
            No identity provider is configured: students sign in with one-time links, which you make on the${' '}
            <${Link} to="/panel/users">Users<//> or <${Link} to="/panel/allowlist">Allowlist<//> page (a student whose link was used or has expired is told to
            ask you for a new one). For sign-in with school accounts, the operator sets GITHUB_CLIENT_ID, GOOGLE_CLIENT_ID or OIDC_CLIENT_ID.
          </p>`
        : null
    }
    <div class="cards">
      <div class="card">
        <h2>Capacity</h2>
        <p class="figure"><strong>${capacity.running}</strong> running of <strong>${capacity.cap}</strong></p>
        <p class="muted">${capacity.wantedRunning} wanted running${capacity.waiting > 0 ? `, ${capacity.waiting} waiting for a slot` : ''}</p>
        <${CapEditor}
          key=${capacity.cap}
          cap=${capacity.cap}
          source=${capacity.source}
          saved=${capSaved}
          onSaved=${(message: string | undefined) => (setCapSaved(message), message && reload())}
        />
      </div>
      <div class="card">
        <h2>Builds</h2>
        <p class="figure"><strong>${data.activeBuilds}</strong> compiling or booting</p>
        <p class="muted">
          Found since the leader took over: ${data.orphansSeen} orphan containers, ${data.orphanVolumesSeen} orphan volumes (kept; the log names them)
        </p>
      </div>
    </div>
    ${data.nodes.length > 1 ? html`<${Nodes} nodes=${data.nodes} />` : null}
    <h2 id="refusals-title">Refused at the cap (last hour)</h2>
    ${
      data.refusals.length === 0
        ? html`<${Empty}>No one was refused in the last hour. When a student is, they appear here at once.<//>`
        : html`<table aria-labelledby="refusals-title">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Who</th>
                <th scope="col">Workspace</th>
                <th scope="col">Refused</th>
                <th scope="col">Running / cap</th>
              </tr>
            </thead>
            <tbody>
              ${data.refusals.map(
                (refusal) =>
                  html`<tr key=${`${refusal.at}-${refusal.workspaceId}`}>
                    <td><${Ago} iso=${refusal.lastAt} /></td>
                    <td>${refusal.email ?? '—'}</td>
                    <td>${refusal.slug}</td>
                    <td>${refusal.count === 1 ? 'once' : `${refusal.count} times`}</td>
                    <td>${refusal.running} / ${refusal.cap}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
    <h2 id="failed-title">Failed to start</h2>
    ${
      data.failed.length === 0
        ? html`<${Empty}>No workspace failed to start.<//>`
        : html`<table aria-labelledby="failed-title">
            <thead>
              <tr>
                <th scope="col">Workspace</th>
                <th scope="col">Since</th>
                <th scope="col">What the engine said</th>
              </tr>
            </thead>
            <tbody>
              ${data.failed.map(
                (workspace) =>
                  html`<tr key=${workspace.id}>
                    <td><${Link} to=${`/panel/workspaces?q=${encodeURIComponent(workspace.slug)}`}>${workspace.slug}<//></td>
                    <td><${Time} iso=${workspace.since} /></td>
                    <td>${workspace.statusMessage}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
  </section>`;
}
