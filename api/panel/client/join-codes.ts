/**
 * Join codes as the coach sees them (JOIN_CODES=on; the tab is shown only then): open a code for
 * 1 to 12 hours with an optional label, see each open code large enough to project with where
 * students type it, its expiry and its guests, and close it early. Past codes below, with the
 * backups their expiry made. Live: a `join_codes` or `users` change reads the list again. Guests'
 * names are their own input: shown as text (Preact escapes every value it renders).
 */
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { client, messageOf, ok } from './api.ts';
import { html } from './html.ts';
import { ConfirmDialog, Empty, Link, Loading, Notice, Time, useResource, type Confirmation } from './ui.ts';
import type { JoinCode } from '../../../src/wire/schemas.ts';

/** The list of codes, newest first, read again on every change of a code or of a user (a guest joined or went). */
export const useJoinCodes = () => useResource(async () => (await ok(client.GET('/admin/join-codes'))).codes, 'join-codes', ['join_codes', 'users']);

/** Whether join codes are on (JOIN_CODES=on; GET /admin/config/join-codes); undefined until known. */
export function useJoinCodesOn(): boolean | undefined {
  return useResource(async () => (await ok(client.GET('/admin/config/join-codes'))).enabled, 'join-codes-on').data;
}

/** Where students type a code: this control plane's /join. */
const joinUrl = () => `${location.origin}/join`;

/** One open code, large enough to project, with its expiry, its guests and Close. */
function OpenCode({ code, onClose }: { code: JoinCode; onClose: (code: JoinCode) => void }): VNode {
  return html`<article class="join-code-card" aria-label=${`Join code ${code.code}`}>
    <p class="join-code" aria-label="The code">${code.code}</p>
    ${code.label ? html`<p class="join-code-label">${code.label}</p>` : null}
    <p>Students go to <strong>${joinUrl()}</strong> and type this code and their name.</p>
    <p>Open until <${Time} iso=${code.expiresAt} />; then each guest's workspace is backed up and removed.</p>
    <h3>${code.guests.length === 0 ? 'No guests yet' : `${code.guests.length} guest${code.guests.length === 1 ? '' : 's'}`}</h3>
    ${
      code.guests.length === 0
        ? null
        : html`<ul class="join-guests">
            ${code.guests.map(
              (guest) =>
                html`<li key=${guest.userId}>
                  ${guest.name}
                  ${guest.workspaceSlug ? html` · <${Link} to=${`/panel/workspaces?q=${encodeURIComponent(guest.workspaceSlug)}`}>${guest.workspaceSlug}<//>` : null}
                </li>`,
            )}
          </ul>`
    }
    <button type="button" class="danger" onClick=${() => onClose(code)}>Close now</button>
  </article>`;
}

/** Where a past code stands, in words. */
function pastState(code: JoinCode): string {
  const ended = code.state === 'closed' ? `closed by ${code.closedBy ?? 'a coach'}` : 'expired';
  if (code.handledAt) return `${ended}; guests backed up and removed`;
  return code.guests.length > 0 ? `${ended}; removing ${code.guests.length} guest${code.guests.length === 1 ? '' : 's'}` : ended;
}

/** The Join codes page (see the file comment). */
export function JoinCodesPage(): VNode {
  const { data, error, reload } = useJoinCodes();
  const [hours, setHours] = useState('2');
  const [label, setLabel] = useState('');
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | undefined>(undefined);
  const [confirmation, setConfirmation] = useState<Confirmation | undefined>(undefined);
  const open = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setNotice(undefined);
    try {
      const { code } = await ok(client.POST('/admin/join-codes', { body: { hours: Number(hours), label: label.trim() || null } }));
      setLabel('');
      setNotice({ kind: 'ok', text: `Join code ${code.code} is open.` });
    } catch (failure) {
      setNotice({ kind: 'error', text: messageOf(failure) });
    } finally {
      setBusy(false);
      reload();
    }
  };
  const close = (code: JoinCode) =>
    setConfirmation({
      title: `Close join code ${code.code}?`,
      body: html`<p>
        No one can join with it any more, and its ${code.guests.length} guest${code.guests.length === 1 ? ' is' : 's are'} signed out now. Each guest's
        workspace is backed up, then removed.
      </p>`,
      action: 'Close the code',
      run: async () => {
        await ok(client.POST('/admin/join-codes/{codeId}/close', { params: { path: { codeId: code.id } } }));
        setNotice({ kind: 'ok', text: `Join code ${code.code} is closed.` });
        reload();
      },
    });
  const codes = data ?? [];
  const openCodes = codes.filter((code) => code.state === 'open');
  const past = codes.filter((code) => code.state !== 'open');
  return html`<section aria-labelledby="join-codes-title">
    <h1 id="join-codes-title">Join codes</h1>
    <p>
      For shared computers and outreach days: open a code, show it, and each student types it with a name at <strong>${joinUrl()}</strong> to get a guest
      workspace, without an account or the allowlist. When the code expires or you close it, each guest's workspace is backed up and removed.
    </p>
    <form class="filters" onSubmit=${open} aria-label="Open a join code">
      <label
        >Hours
        <input type="number" min="1" max="12" step="1" required value=${hours} onInput=${(event: Event) => setHours((event.target as HTMLInputElement).value)}
      /></label>
      <label
        >Label (optional)
        <input maxlength="60" placeholder="Outreach day" value=${label} onInput=${(event: Event) => setLabel((event.target as HTMLInputElement).value)}
      /></label>
      <button type="submit" disabled=${busy}>${busy ? 'Opening…' : 'Open a code'}</button>
    </form>
    ${notice ? html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>` : null}
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    ${
      !data
        ? html`<${Loading} error=${error} />`
        : openCodes.length === 0
          ? html`<${Empty}>No code is open. Open one above when your students are ready to join.<//>`
          : html`<div class="join-codes">${openCodes.map((code) => html`<${OpenCode} key=${code.id} code=${code} onClose=${close} />`)}</div>`
    }
    ${
      past.length === 0
        ? null
        : html`<h2>Past codes</h2>
            <div class="scroll">
              <table class="join-past">
                <thead>
                  <tr>
                    <th scope="col">Code</th>
                    <th scope="col">Label</th>
                    <th scope="col">Opened</th>
                    <th scope="col">Ended</th>
                    <th scope="col" class="number">Guests</th>
                    <th scope="col">State</th>
                    <th scope="col">Backups</th>
                  </tr>
                </thead>
                <tbody>
                  ${past.map(
                    (code) =>
                      html`<tr key=${code.id}>
                        <th scope="row"><code>${code.code}</code></th>
                        <td>${code.label}</td>
                        <td><${Time} iso=${code.openedAt} /></td>
                        <td><${Time} iso=${code.closedAt ?? code.expiresAt} /></td>
                        <td class="number">${code.joined}</td>
                        <td>${pastState(code)}</td>
                        <td>
                          ${code.backups.length === 0 ? html`<span class="muted">none</span>` : html`<${Link} to="/panel/backups">${code.backups.length}<//>`}
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
    }
    <${ConfirmDialog} confirmation=${confirmation} onDone=${() => setConfirmation(undefined)} />
  </section>`;
}
