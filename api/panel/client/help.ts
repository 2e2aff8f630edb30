/**
 * The help queue as the coach sees it: the queue read once for the whole panel (live, the `help`
 * change kind), a count of the waiting hands on the Help tab, a notice on every page when a new
 * hand goes up, and the Help page, where a coach says "Coming" (takes a request: the first coach
 * wins, a second is told who) and resolves it. A student's name and message are their own input:
 * they are shown as text (Preact escapes every value it renders; nothing here sets HTML).
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { client, messageOf, ok } from './api.ts';
import { html } from './html.ts';
import { age, Empty, Link, Loading, Notice, useNow, useResource, type Resource } from './ui.ts';
import type { HelpRequest } from '../../../src/wire/schemas.ts';

/** The queue as read, and when (the ages shown count on from then). */
export interface HelpQueue {
  requests: HelpRequest[];
  readAt: number;
}

/** The help queue, oldest first, read again whenever a request is raised, taken, resolved or withdrawn. */
export function useHelpQueue(): Resource<HelpQueue> {
  return useResource(async () => ({ requests: (await ok(client.GET('/admin/help'))).requests, readAt: Date.now() }), 'help', ['help']);
}

/** Who raised a request, in words: their name, else their email. */
export const studentOf = (request: HelpRequest): string => request.student.name || request.student.email || 'A deleted student';

/** How many requests wait for a coach (taken ones do not). */
export const waitingCount = (queue: HelpQueue | undefined): number => queue?.requests.filter((request) => request.state === 'waiting').length ?? 0;

/**
 * The newest request that went up since the queue was first read, and how many went up since the
 * notice was last dismissed; undefined before any. A request seen once is never announced again.
 */
export function useNewHands(queue: HelpQueue | undefined): { raised: { latest: string; count: number } | undefined; dismiss: () => void } {
  const seen = useRef<Set<string> | undefined>(undefined);
  const [raised, setRaised] = useState<{ latest: string; count: number } | undefined>(undefined);
  useEffect(() => {
    if (!queue) return;
    const ids = queue.requests.map((request) => request.id);
    if (!seen.current) {
      seen.current = new Set(ids);
      return;
    }
    const fresh = queue.requests.filter((request) => request.state === 'waiting' && !seen.current!.has(request.id));
    for (const id of ids) seen.current.add(id);
    if (fresh.length > 0) setRaised((shown) => ({ latest: fresh.at(-1)!.id, count: (shown?.count ?? 0) + fresh.length }));
  }, [queue]);
  return { raised, dismiss: () => setRaised(undefined) };
}

/** The Help tab's count of waiting requests: nothing when none wait. */
export function HelpBadge({ queue }: { queue: HelpQueue | undefined }): VNode | null {
  const waiting = waitingCount(queue);
  if (waiting === 0) return null;
  return html` <span class="badge" title=${`${waiting} waiting for help`}>${waiting}<span class="visually-hidden"> waiting</span></span>`;
}

/** The notice of a new hand: who, what they wrote (as text), and the way to the queue. */
export function HandNotice({ request, count, onClose }: { request: HelpRequest; count: number; onClose: () => void }): VNode {
  return html`<${Notice} kind="info" onClose=${onClose}>
    <span class="toast-line"><strong>${studentOf(request)}</strong> asks for help${request.message ? ':' : '.'}</span>
    ${request.message ? html`<span class="toast-line help-message">${request.message}</span>` : null}
    ${count > 1 ? html`<span class="toast-line">${count} hands raised since you last dismissed this.</span>` : null}
    <${Link} to="/panel/help">See the help queue<//>
  <//>`;
}

/** Where a request stands, in words: waiting (its place), or taken by whom (you, for this coach). */
function stateOf(request: HelpRequest, me: string): VNode {
  if (request.state === 'waiting') return html`<span class="state waiting">waiting${request.place ? ` (#${request.place})` : ''}</span>`;
  const coach = request.takenBy;
  const who = !coach ? 'a coach' : coach.email === me ? 'you' : coach.name ? `${coach.name} (${coach.email})` : coach.email;
  return html`<span class="state running">taken by ${who}</span>`;
}

/** The Help page: the queue oldest first, with Coming and Resolve on each request. */
export function HelpPage({ help, me }: { help: Resource<HelpQueue>; me: string }): VNode {
  const { data, error, reload } = help;
  const now = useNow();
  const [notice, setNotice] = useState<{ kind: 'ok' | 'error'; text: string } | undefined>(undefined);
  const [busy, setBusy] = useState<string | undefined>(undefined);
  const act = async (request: HelpRequest, action: 'take' | 'resolve') => {
    setBusy(request.id);
    setNotice(undefined);
    try {
      const path = { params: { path: { requestId: request.id } } };
      await ok(action === 'take' ? client.POST('/admin/help/{requestId}/take', path) : client.POST('/admin/help/{requestId}/resolve', path));
      setNotice({
        kind: 'ok',
        text: action === 'take' ? `${studentOf(request)} is told you are coming.` : `${studentOf(request)}'s request is resolved.`,
      });
    } catch (failure) {
      setNotice({ kind: 'error', text: messageOf(failure) });
    } finally {
      setBusy(undefined);
      reload();
    }
  };
  const requests = data?.requests ?? [];
  return html`<section aria-labelledby="help-title">
    <h1 id="help-title">Help</h1>
    <p class="counts">${data ? `${waitingCount(data)} waiting, ${requests.length - waitingCount(data)} taken; oldest first.` : ''}</p>
    ${notice ? html`<${Notice} kind=${notice.kind} onClose=${() => setNotice(undefined)}>${notice.text}<//>` : null}
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    ${
      !data
        ? html`<${Loading} error=${error} />`
        : requests.length === 0
          ? html`<${Empty}>No one is asking for help. When a student raises a hand, it appears here and on every page at once.<//>`
          : html`<div class="scroll">
              <table class="help" aria-labelledby="help-title">
                <thead>
                  <tr>
                    <th scope="col">Student</th>
                    <th scope="col">Workspace</th>
                    <th scope="col">Message</th>
                    <th scope="col">Waiting for</th>
                    <th scope="col">State</th>
                    <th scope="col"><span class="visually-hidden">Actions</span></th>
                  </tr>
                </thead>
                <tbody>
                  ${requests.map(
                    (request) =>
                      html`<tr key=${request.id}>
                        <th scope="row">${studentOf(request)}</th>
                        <td>
                          <${Link} to=${`/panel/workspaces?q=${encodeURIComponent(request.workspace.slug)}`}>${request.workspace.slug}<//> ·
                          <${Link} to=${`/panel/look/${request.workspace.id}`}><span aria-label=${`Look at ${studentOf(request)}'s workspace`}>Look</span><//>
                        </td>
                        <td class="help-message">${request.message ?? html`<span class="muted">no message</span>`}</td>
                        <td class="number">${age(request.ageSeconds + Math.max(0, Math.floor((now - data.readAt) / 1000)))}</td>
                        <td>${stateOf(request, me)}</td>
                        <td class="actions">
                          <button
                            type="button"
                            disabled=${busy === request.id || request.state !== 'waiting'}
                            onClick=${() => act(request, 'take')}
                            aria-label=${`Coming to ${studentOf(request)}`}
                          >
                            Coming
                          </button>
                          <button
                            type="button"
                            disabled=${busy === request.id}
                            onClick=${() => act(request, 'resolve')}
                            aria-label=${`Resolve ${studentOf(request)}'s request`}
                          >
                            Resolve
                          </button>
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
    }
  </section>`;
}
