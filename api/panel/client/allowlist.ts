/** Allowlist: emails and domains (and the SERVICE_ADMIN_EMAIL ones, marked); add with the server's validation shown inline; remove; a one-time sign-in link for an email. */
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { client, messageOf, ok } from './api.ts';
import { html } from './html.ts';
import type { SignInLink } from '../../../src/wire/schemas.ts';
import { signInLinkConfirmation, SignInLinkNotice } from './sign-in-link.ts';
import { ConfirmDialog, Empty, Notice, useResource, type Confirmation, Loading } from './ui.ts';

export function AllowlistPage(): VNode {
  const { data, error, reload } = useResource(() => ok(client.GET('/admin/allowlist')), 'allowlist', ['allowlist']);
  const [entry, setEntry] = useState('');
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const [confirmation, setConfirmation] = useState<Confirmation | undefined>(undefined);
  const [link, setLink] = useState<SignInLink | undefined>(undefined);
  const add = async (event: Event) => {
    event.preventDefault();
    setNotice(undefined);
    try {
      const answer = await ok(client.POST('/admin/allowlist', { body: { entry } }));
      setProblem(undefined);
      setEntry('');
      setNotice(answer.added ? `Added ${answer.entry}.` : `${answer.entry} is already on the allowlist.`);
      reload();
    } catch (failure) {
      setProblem(messageOf(failure));
    }
  };
  const remove = (value: string) =>
    setConfirmation({
      title: `Remove ${value}?`,
      body: html`<p>
        ${value.includes('@') ? value : `Everyone at ${value}`} can no longer sign in; students it admitted lose access at once (admins excepted).
      </p>`,
      action: 'Remove',
      run: async () => {
        await ok(client.DELETE('/admin/allowlist/{entry}', { params: { path: { entry: value } } }));
        setNotice(`Removed ${value}.`);
        reload();
      },
    });
  return html`<section aria-labelledby="allowlist-title">
    <h1 id="allowlist-title">Allowlist</h1>
    <p class="muted">Who may sign in: an email admits that address, a domain (no @) admits every email at it.</p>
    ${error ? html`<${Notice} kind="error">The allowlist cannot be read: ${error}<//>` : null}
    ${notice ? html`<${Notice} kind="ok" onClose=${() => setNotice(undefined)}>${notice}<//>` : null}
    ${link ? html`<${SignInLinkNotice} link=${link} onClose=${() => setLink(undefined)} />` : null}
    <form class="inline" onSubmit=${add}>
      <label for="entry">Email or domain</label>
      <input
        id="entry"
        name="entry"
        value=${entry}
        placeholder="ana@school.org or school.org"
        autocomplete="off"
        required
        aria-invalid=${problem ? 'true' : undefined}
        aria-describedby=${problem ? 'entry-problem' : undefined}
        onInput=${(event: Event) => setEntry((event.target as HTMLInputElement).value)}
      />
      <button type="submit">Add</button>
      ${problem ? html`<p id="entry-problem" class="field-error" role="alert">${problem}</p>` : null}
    </form>
    ${
      !data
        ? html`<${Loading} error=${error} />`
        : data.entries.length + data.implicit.length === 0
          ? html`<${Empty}>No one is on the allowlist yet: add an email or a domain.<//>`
          : html`<table>
              <caption class="visually-hidden">
                Allowlist entries
              </caption>
              <thead>
                <tr>
                  <th scope="col">Entry</th>
                  <th scope="col">Admits</th>
                  <th scope="col"><span class="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                ${data.entries.map(
                  (value) =>
                    html`<tr key=${value}>
                      <th scope="row">${value}</th>
                      <td>${value.includes('@') ? 'this email' : 'every email at this domain'}</td>
                      <td class="actions">
                        ${
                          value.includes('@')
                            ? html`<button
                                type="button"
                                onClick=${() => setConfirmation(signInLinkConfirmation(value, setLink))}
                                aria-label=${`Make a sign-in link for ${value}`}
                              >
                                Sign-in link
                              </button>`
                            : null
                        }
                        <button type="button" onClick=${() => remove(value)} aria-label=${`Remove ${value}`}>Remove</button>
                      </td>
                    </tr>`,
                )}
                ${data.implicit.map(
                  (value) =>
                    html`<tr key=${`implicit-${value}`}>
                      <th scope="row">${value}</th>
                      <td>this email, as an admin</td>
                      <td class="muted small">From SERVICE_ADMIN_EMAIL (the server's configuration)</td>
                    </tr>`,
                )}
              </tbody>
            </table>`
    }
    <${ConfirmDialog} confirmation=${confirmation} onDone=${() => setConfirmation(undefined)} />
  </section>`;
}
