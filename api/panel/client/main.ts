/** The admin panel: one page whose tabs are the nouns of the admin API. */
import { render, type VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { AllowlistPage } from './allowlist.ts';
import { api, onLive, type Refusal } from './api.ts';
import { AuditPage } from './audit.ts';
import { BackupsPage } from './backups.ts';
import { html } from './html.ts';
import { OverviewPage } from './overview.ts';
import { RunPage, RunsPage } from './runs.ts';
import { Link, Notice, useLocation } from './ui.ts';
import { UsersPage } from './users.ts';
import { WorkspacesPage } from './workspaces.ts';

const TABS: [path: string, label: string][] = [
  ['/panel/', 'Overview'],
  ['/panel/workspaces', 'Workspaces'],
  ['/panel/runs', 'Runs'],
  ['/panel/users', 'Users'],
  ['/panel/allowlist', 'Allowlist'],
  ['/panel/audit', 'Audit log'],
  ['/panel/backups', 'Backups'],
];

function Page({ url, me }: { url: URL; me: string }): VNode {
  const run = /^\/panel\/runs\/([0-9a-f-]{36})\/?$/.exec(url.pathname);
  if (run) return html`<${RunPage} id=${run[1]} />`;
  switch (url.pathname.replace(/\/$/, '')) {
    case '/panel/runs':
      return html`<${RunsPage} url=${url} />`;
    case '/panel/workspaces':
      return html`<${WorkspacesPage} url=${url} />`;
    case '/panel/users':
      return html`<${UsersPage} url=${url} me=${me} />`;
    case '/panel/allowlist':
      return html`<${AllowlistPage} />`;
    case '/panel/audit':
      return html`<${AuditPage} url=${url} />`;
    case '/panel/backups':
      return html`<${BackupsPage} />`;
    case '/panel':
      return html`<${OverviewPage} />`;
    default:
      return html`<section>
        <h1>Not found</h1>
        <p>No such page in the admin panel. <${Link} to="/panel/">Go to the overview<//>.</p>
      </section>`;
  }
}

function App(): VNode {
  const url = useLocation();
  const [me, setMe] = useState<string | undefined>(undefined);
  useEffect(() => {
    void api<{ user: { email: string } }>('GET', '/auth/me').then(
      (answer) => setMe(answer.user.email),
      () => setMe(''),
    );
  }, []);
  useEffect(() => {
    const label =
      TABS.find(([path]) => path !== '/panel/' && url.pathname.startsWith(path))?.[1] ??
      (url.pathname.replace(/\/$/, '') === '/panel' ? 'Overview' : 'Admin panel');
    document.title = `${label} · Admin panel`;
  }, [url.pathname]);
  const current = url.pathname.replace(/\/$/, '');
  // Capacity refusals reach the coach on every page: a toast until dismissed, and a count on Overview until it is looked at.
  const [refusals, setRefusals] = useState<Refusal[]>([]);
  const [unseen, setUnseen] = useState(0);
  useEffect(
    () =>
      onLive((event) => {
        if (event.type !== 'refusal') return;
        setRefusals((shown) => [...shown, event.refusal].slice(-3));
        setUnseen((count) => count + 1);
      }),
    [],
  );
  useEffect(() => {
    if (current === '/panel') setUnseen(0);
  }, [current, unseen]);
  return html`<div class="layout">
    <a class="skip" href="#main">Skip to the page</a>
    <header>
      <span class="brand">Classroom workspaces</span>
      <nav aria-label="Admin panel">
        <ul>
          ${TABS.map(
            ([path, label]) =>
              html`<li key=${path}>
                <${Link} to=${path} current=${current === path.replace(/\/$/, '') || (path !== '/panel/' && current.startsWith(path))}
                  >${label}${
                    path === '/panel/' && unseen > 0
                      ? html` <span class="badge" title=${`${unseen} refused at the cap`}
                          >${unseen}<span class="visually-hidden"> refused at the cap</span></span
                        >`
                      : null
                  }<//
                >
              </li>`,
          )}
        </ul>
      </nav>
      <span class="me"
        >${me ? html`${me}` : null}
        <form method="post" action="/auth/sign-out"><button type="submit" class="link">Sign out</button></form>
      </span>
    </header>
    <main id="main" tabindex="-1"><${Page} url=${url} me=${me ?? ''} /></main>
    ${
      refusals.length > 0
        ? html`<div class="toasts">
            <${Notice} kind="error" onClose=${() => setRefusals([])}>
              ${refusals.map(
                (refusal) =>
                  html`<span class="refused" key=${`${refusal.at}-${refusal.workspaceId}`}
                    >${refusal.email ?? refusal.slug} was refused at the cap${refusal.count > 1 ? ` ${refusal.count} times` : ''} (${refusal.running} of
                    ${refusal.cap} running).${' '}</span
                  >`,
              )}
              <${Link} to="/panel/">See the overview<//>
            <//>
          </div>`
        : null
    }
  </div>`;
}

const root = document.getElementById('app')!;
// The server's "Loading…" line goes; Preact renders into an empty container.
root.replaceChildren();
render(html`<${App} />`, root);
