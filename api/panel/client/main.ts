/** The admin panel: one page whose tabs are the nouns of the admin API. */
import { render, type VNode } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { AllowlistPage } from './allowlist.ts';
import { client, ok, onLive, type Refusal } from './api.ts';
import { AuditPage } from './audit.ts';
import { ClassPage } from './class.ts';
import { BackupsPage } from './backups.ts';
import { HandNotice, HelpBadge, HelpPage, useHelpQueue, useNewHands, type HelpQueue } from './help.ts';
import { JoinCodesPage, useJoinCodesOn } from './join-codes.ts';
import { LessonPage, LessonsPage } from './lessons.ts';
import { LookPage } from './look.ts';
import { html } from './html.ts';
import { OverviewPage } from './overview.ts';
import { RunPage, RunsPage } from './runs.ts';
import { Link, Notice, useLocation, type Resource } from './ui.ts';
import { UsersPage } from './users.ts';
import { WorkspacesPage } from './workspaces.ts';

const TABS: [path: string, label: string][] = [
  ['/panel/class', 'Class'],
  ['/panel/', 'Overview'],
  ['/panel/help', 'Help'],
  ['/panel/lessons', 'Lessons'],
  ['/panel/workspaces', 'Workspaces'],
  ['/panel/runs', 'Runs'],
  ['/panel/users', 'Users'],
  ['/panel/allowlist', 'Allowlist'],
  ['/panel/audit', 'Audit log'],
  ['/panel/backups', 'Backups'],
];

/** The Join codes tab (shown only while JOIN_CODES=on). */
const JOIN_CODES_TAB: [path: string, label: string] = ['/panel/join-codes', 'Join codes'];

function Page({ url, me, help }: { url: URL; me: string; help: Resource<HelpQueue> }): VNode {
  const run = /^\/panel\/runs\/([0-9a-f-]{36})\/?$/.exec(url.pathname);
  if (run) return html`<${RunPage} id=${run[1]} />`;
  const look = /^\/panel\/look\/([0-9a-f-]{36})\/?$/.exec(url.pathname);
  if (look) return html`<${LookPage} workspaceId=${look[1]} key=${look[1]} />`;
  const lesson = /^\/panel\/lessons\/([0-9a-f-]{36})\/?$/.exec(url.pathname);
  if (lesson) return html`<${LessonPage} lessonId=${lesson[1]} key=${lesson[1]} />`;
  switch (url.pathname.replace(/\/$/, '')) {
    case '/panel/runs':
      return html`<${RunsPage} url=${url} />`;
    case '/panel/workspaces':
      return html`<${WorkspacesPage} url=${url} />`;
    case '/panel/users':
      return html`<${UsersPage} url=${url} me=${me} />`;
    case '/panel/class':
      return html`<${ClassPage} url=${url} />`;
    case '/panel/help':
      return html`<${HelpPage} help=${help} me=${me} />`;
    case '/panel/join-codes':
      return html`<${JoinCodesPage} />`;
    case '/panel/lessons':
      return html`<${LessonsPage} />`;
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
    void ok(client.GET('/auth/me')).then(
      (answer) => setMe(answer.user.email),
      () => setMe(''),
    );
  }, []);
  useEffect(() => {
    const label =
      [...TABS, JOIN_CODES_TAB].find(([path]) => path !== '/panel/' && url.pathname.startsWith(path))?.[1] ??
      (url.pathname.replace(/\/$/, '') === '/panel' ? 'Overview' : 'Admin panel');
    document.title = `${label} · Admin panel`;
  }, [url.pathname]);
  const current = url.pathname.replace(/\/$/, '');
  // The Join codes tab, after Help, only while JOIN_CODES=on.
  const joinCodesOn = useJoinCodesOn();
  const tabs = joinCodesOn ? TABS.flatMap((tab) => (tab[0] === '/panel/help' ? [tab, JOIN_CODES_TAB] : [tab])) : TABS;
  // Capacity refusals reach the coach on every page: one small toast in a corner until dismissed (the latest refusal and how
  // many came since it was last dismissed), and a count on Overview until it is looked at.
  const [toast, setToast] = useState<{ latest: Refusal; count: number } | undefined>(undefined);
  const [unseen, setUnseen] = useState(0);
  // While the toast shows, the page ends with room for it, so that scrolling down brings every row out from under it.
  const toastBox = useRef<HTMLElement>(null);
  // The help queue, read once for every page: the Help tab's count, the notice of a new hand, and the Help page itself.
  const help = useHelpQueue();
  const hands = useNewHands(help.data);
  const hand = hands.raised && help.data?.requests.find((request) => request.id === hands.raised!.latest && request.state === 'waiting');
  const [toastSpace, setToastSpace] = useState(0);
  useLayoutEffect(() => {
    const box = toastBox.current;
    if (!box) return setToastSpace(0);
    const observer = new ResizeObserver(() => setToastSpace(box.offsetHeight));
    observer.observe(box);
    return () => observer.disconnect();
  }, [toast !== undefined || hand !== undefined]);
  useEffect(
    () =>
      onLive((event) => {
        if (event.type !== 'refusal') return;
        setToast((shown) => ({ latest: event.refusal, count: (shown?.count ?? 0) + 1 }));
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
          ${tabs.map(
            ([path, label]) =>
              html`<li key=${path}>
                <${Link} to=${path} current=${current === path.replace(/\/$/, '') || (path !== '/panel/' && current.startsWith(path))}
                  >${label}${
                    path === '/panel/' && unseen > 0
                      ? html` <span class="badge" title=${`${unseen} refused at the cap`}
                          >${unseen}<span class="visually-hidden"> refused at the cap</span></span
                        >`
                      : path === '/panel/help'
                        ? html`<${HelpBadge} queue=${help.data} />`
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
    <main id="main" tabindex="-1" style=${toastSpace ? { paddingBottom: `calc(${toastSpace}px + 2rem)` } : undefined}>
      <${Page} url=${url} me=${me ?? ''} help=${help} />
    </main>
    ${
      toast || hand
        ? html`<aside class="toasts" aria-label="Notices" ref=${toastBox}>
            ${
              hand
                ? html`<div class="hand">
                    <${HandNotice} request=${hand} count=${hands.raised!.count} onClose=${hands.dismiss} />
                  </div>`
                : null
            }
            ${
              toast
                ? html`<div class="refusal">
                    <${Notice} kind="error" onClose=${() => setToast(undefined)}>
                      <span class="toast-line">${refusedText(toast.latest)}</span>
                      ${toast.count > 1 ? html`<span class="toast-line">${toast.count} refusals since you last dismissed this.</span>` : null}
                      <${Link} to="/panel/">See the overview<//>
                    <//>
                  </div>`
                : null
            }
          </aside>`
        : null
    }
  </div>`;
}

/** One refusal at the cap in a coach's words: who, how often in its minute, and the cap then. */
function refusedText(refusal: Refusal): string {
  const times = refusal.count > 1 ? ` ${refusal.count} times` : '';
  return `${refusal.email ?? refusal.slug} was refused at the cap${times} (${refusal.running} of ${refusal.cap} running).`;
}

const root = document.getElementById('app')!;
// The server's "Loading…" line goes; Preact renders into an empty container.
root.replaceChildren();
render(html`<${App} />`, root);
