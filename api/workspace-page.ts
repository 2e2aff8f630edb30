import type { WorkspaceRecord } from '../src/store/workspaces.ts';
import { escapeHtml, page } from './pages.ts';

/** What the page says of a workspace: what is wanted, then what is seen. */
function stateText(workspace: WorkspaceRecord): string {
  if (workspace.desiredState !== 'running') return workspace.observedState === 'running' ? 'Stopping…' : 'Stopped';
  if (workspace.observedState === 'waiting') return 'Waiting for a free slot';
  if (workspace.observedState === 'failed') return 'Failed to start';
  return workspace.observedState === 'running' ? 'Running' : 'Starting…';
}

/**
 * The workspace page at `/u/<slug>/` while the editor is not up: the state, an Open button that
 * asks for admission (`POST api/workspace/open`), a toast with the server's message when it is
 * refused (at capacity: the spec's exact text), and polling until the editor runs. Then it goes
 * where the student API says the editor is (`editorUrl`: host mode, the workspace's own origin,
 * where the hand-over ends), else reloads (path mode: the proxy then serves the editor here).
 */
export function workspacePage(workspace: WorkspaceRecord): string {
  const base = `/u/${workspace.slug}/api/workspace`;
  const wanted = workspace.desiredState === 'running';
  return page(
    `Workspace ${workspace.slug}`,
    `<h1>Workspace ${escapeHtml(workspace.slug)}</h1>
<p>State: <strong id="state">${escapeHtml(stateText(workspace))}</strong></p>
<p class="note" id="message">${escapeHtml(workspace.statusMessage)}</p>
<button id="open" type="button"${wanted ? ' disabled' : ''}>Open</button>
<div id="toast" role="alert" hidden style="position:fixed;bottom:1.5rem;left:50%;transform:translateX(-50%);background:#1d2430;color:#fff;padding:.8rem 1.2rem;border-radius:.4rem;max-width:30rem"></div>
<script>
const base = ${JSON.stringify(base)};
const toast = document.getElementById('toast');
const button = document.getElementById('open');
function showToast(text) { toast.textContent = text; toast.hidden = false; setTimeout(() => { toast.hidden = true; }, 10000); }
async function poll() {
  const answer = await fetch(base, { headers: { accept: 'application/json' } });
  if (!answer.ok) return setTimeout(poll, 2000);
  const { workspace } = await answer.json();
  document.getElementById('message').textContent = workspace.statusMessage;
  if (workspace.ready) { if (workspace.editorUrl) location.assign(workspace.editorUrl); else location.reload(); return; }
  document.getElementById('state').textContent = workspace.desiredState === 'running' ? 'Starting…' : 'Stopped';
  button.disabled = workspace.desiredState === 'running';
  if (workspace.desiredState === 'running') setTimeout(poll, 1000);
}
button.addEventListener('click', async () => {
  button.disabled = true;
  const answer = await fetch(base + '/open', { method: 'POST', headers: { accept: 'application/json' } });
  if (!answer.ok) {
    const body = await answer.json().catch(() => ({}));
    showToast(body.error ? body.error.message : 'Could not open the workspace.');
    button.disabled = false;
    return;
  }
  document.getElementById('state').textContent = 'Starting…';
  poll();
});
${wanted ? 'poll();' : ''}
</script>`,
  );
}
