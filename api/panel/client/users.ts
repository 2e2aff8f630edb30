/** Users: name, email, role and workspace; search; promote, demote (never the last admin), a one-time sign-in link, delete with a typed confirmation. */
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { client, ok } from './api.ts';
import { html } from './html.ts';
import type { SignInLink, User } from '../../../src/wire/schemas.ts';
import { signInLinkConfirmation, SignInLinkNotice } from './sign-in-link.ts';
import { ConfirmDialog, Empty, Notice, setQuery, useResource, type Confirmation, Loading } from './ui.ts';

export function UsersPage({ url, me }: { url: URL; me: string }): VNode {
  const { data, error, reload } = useResource(() => ok(client.GET('/admin/users')), 'users', ['users', 'workspaces']);
  const [confirmation, setConfirmation] = useState<Confirmation | undefined>(undefined);
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | undefined>(undefined);
  const [link, setLink] = useState<SignInLink | undefined>(undefined);
  const q = (url.searchParams.get('q') ?? '').trim().toLowerCase();
  const users = (data?.users ?? []).filter(
    (user) => !q || user.email.includes(q) || user.name.toLowerCase().includes(q) || (user.workspaceSlug ?? '').includes(q),
  );
  const admins = (data?.users ?? []).filter((user) => user.role === 'admin').length;

  /** Promote or demote, after a confirmation naming the person and what changes for them (a demotion keeps them signed in). */
  const setRole = (user: User, action: 'promote' | 'demote') =>
    setConfirmation({
      title: action === 'promote' ? `Make ${user.email} an admin?` : `Demote ${user.email}?`,
      body:
        action === 'promote'
          ? html`<p>
              <strong>${user.name || user.email}</strong> will reach this panel, every student's workspace and the admin API, and can promote, demote and delete
              others.
            </p>`
          : html`<p>
              <strong>${user.name || user.email}</strong> becomes a student: they keep their own workspace and stay signed in, and lose the panel and other
              students' workspaces at once.
            </p>`,
      action: action === 'promote' ? 'Make admin' : 'Demote',
      run: async () => {
        await ok(
          action === 'promote'
            ? client.POST('/admin/users/{userId}/promote', { params: { path: { userId: user.id } } })
            : client.POST('/admin/users/{userId}/demote', { params: { path: { userId: user.id } } }),
        );
        setNotice({ kind: 'ok', text: action === 'promote' ? `${user.email} is now an admin.` : `${user.email} is no longer an admin.` });
        reload();
      },
    });
  const remove = (user: User) =>
    setConfirmation({
      title: `Delete ${user.email}?`,
      body: html`<p>
        This deletes the account${user.workspaceSlug ? html` and the workspace <strong>${user.workspaceSlug}</strong> with all its files` : ''}. It cannot be
        undone${user.workspaceSlug ? ' (back the workspace up first if its files matter)' : ''}.
      </p>`,
      action: 'Delete',
      typed: user.email,
      run: async () => {
        await ok(client.DELETE('/admin/users/{userId}', { params: { path: { userId: user.id } } }));
        setNotice({ kind: 'ok', text: `Deleted ${user.email}.` });
        reload();
      },
    });

  return html`<section aria-labelledby="users-title">
    <h1 id="users-title">Users</h1>
    ${notice ? html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>` : null}
    ${link ? html`<${SignInLinkNotice} link=${link} onClose=${() => setLink(undefined)} />` : null} ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    <form class="filters" role="search" onSubmit=${(event: Event) => event.preventDefault()}>
      <label
        >Search
        <input
          type="search"
          name="q"
          value=${url.searchParams.get('q') ?? ''}
          placeholder="name, email or workspace"
          onInput=${(event: Event) => setQuery({ q: (event.target as HTMLInputElement).value })}
      /></label>
    </form>
    ${
      !data
        ? html`<${Loading} error=${error} />`
        : users.length === 0
          ? html`<${Empty}
              >${data.users.length === 0 ? 'No users yet: a person becomes a user at their first sign-in (add them to the allowlist first).' : 'No user matches the search.'}<//
            >`
          : html`<table>
              <caption class="visually-hidden">
                Users
              </caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Email</th>
                  <th scope="col">Role</th>
                  <th scope="col">Workspace</th>
                  <th scope="col"><span class="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                ${users.map((user) => {
                  const last = user.role === 'admin' && admins <= 1;
                  return html`<tr key=${user.id}>
                    <td>
                      ${
                        user.name ||
                        html`<span class="muted" title="The name comes from the identity provider at sign-in; a sign-in link carries none."
                          >not given yet</span
                        >`
                      }
                    </td>
                    <th scope="row">${user.email}${user.email === me ? html` <span class="muted">(you)</span>` : null}</th>
                    <td>${user.role}</td>
                    <td>${user.workspaceSlug ?? html`<span class="muted">—</span>`}</td>
                    <td class="actions">
                      ${
                        user.role === 'admin'
                          ? html`<button
                                type="button"
                                disabled=${last}
                                aria-describedby=${last ? `last-${user.id}` : undefined}
                                onClick=${() => setRole(user, 'demote')}
                              >
                                Demote
                              </button>
                              ${last ? html`<span id=${`last-${user.id}`} class="muted small">The last admin cannot be demoted or deleted: promote someone else first.</span>` : null}`
                          : html`<button type="button" onClick=${() => setRole(user, 'promote')}>Make admin</button>`
                      }
                      <button
                        type="button"
                        onClick=${() => setConfirmation(signInLinkConfirmation(user.email, setLink))}
                        aria-label=${`Make a sign-in link for ${user.email}`}
                      >
                        Sign-in link
                      </button>
                      <button type="button" class="danger" disabled=${last} onClick=${() => remove(user)} aria-label=${`Delete ${user.email}`}>Delete</button>
                    </td>
                  </tr>`;
                })}
              </tbody>
            </table>`
    }
    <${ConfirmDialog} confirmation=${confirmation} onDone=${() => setConfirmation(undefined)} />
  </section>`;
}
