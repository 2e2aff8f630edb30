/**
 * Runs: the class's simulator runs, newest first, filtered by outcome and time (the URL keeps the
 * filters: "failed in the last hour" is a link to share), or one workspace's; and one run, read
 * only: its state and its output as it is written, to help a student without taking their keyboard.
 * A coach may stop a run (audited `run.stop`).
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, client, ok } from './api.ts';
import { html } from './html.ts';
import { ConfirmDialog, Empty, Link, Loading, Notice, setQuery, Time, useResource, type Confirmation } from './ui.ts';
import type { ClassRun as Run } from '../../../src/wire/schemas.ts';
import type { RunStatus } from '../../../src/wire/vocabulary.ts';

/** The outcome filter's choices, in its order: keyed by RunStatus, so tsc names a status of the vocabulary missing here (the browser gets no value from the server). */
const STATUSES: Record<RunStatus, string> = { queued: 'queued', running: 'running', stopped: 'stopped', failed: 'failed', canceled: 'canceled' };
const PERIODS: [value: string, label: string, ms: number][] = [
  ['hour', 'the last hour', 3_600_000],
  ['day', 'the last 24 hours', 86_400_000],
  ['week', 'the last 7 days', 7 * 86_400_000],
];

const active = (run: Run) => run.status === 'queued' || run.status === 'running';

/** How long a refused output stream waits before it is opened again (the server's Retry-After, which EventSource cannot read). */
const REFUSED_RETRY_MS = 10_000;

/** How long a run took (or has taken so far), in minutes and seconds. */
function duration(run: Run): string {
  const seconds = Math.round(((run.endedAt ? Date.parse(run.endedAt) : Date.now()) - Date.parse(run.queuedAt)) / 1000);
  return seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

function StopRun({ run, onStopped }: { run: Run; onStopped: () => void }): VNode {
  const [confirmation, setConfirmation] = useState<Confirmation | undefined>(undefined);
  const stop = () =>
    setConfirmation({
      title: `Stop ${run.workspace.slug}'s run?`,
      body: html`<p>${run.ownerEmail ?? 'The student'} sees it stopped, by you (the audit log records it). Their files and editor stay.</p>`,
      action: 'Stop the run',
      run: async () => {
        await ok(client.POST('/admin/runs/{runId}/stop', { params: { path: { runId: run.id } } }));
        onStopped();
      },
    });
  return html`<button type="button" onClick=${stop}>Stop</button><${ConfirmDialog} confirmation=${confirmation} onDone=${() => setConfirmation(undefined)} />`;
}

/** The list of runs: `/panel/runs?status=&period=&workspace=`. */
export function RunsPage({ url }: { url: URL }): VNode {
  const params = url.searchParams;
  const status = params.get('status') ?? '';
  const period = params.get('period') ?? '';
  const workspace = params.get('workspace') ?? '';
  const since = PERIODS.find(([value]) => value === period)?.[2];
  const query = {
    limit: 200,
    // The page's own address names the status: the server refuses one that is no status.
    ...(status && { status: status as RunStatus }),
    ...(since && { since: new Date(Date.now() - since).toISOString() }),
    ...(workspace && { workspace }),
  };
  const { data, error, reload } = useResource(() => ok(client.GET('/admin/runs', { params: { query } })), `${status}|${period}|${workspace}`, [
    'runs',
    'status',
  ]);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const slug = workspace ? data?.runs[0]?.workspace.slug : undefined;
  return html`<section aria-labelledby="runs-title">
    <h1 id="runs-title">Runs${workspace ? html` of ${slug ?? 'one workspace'}` : null}</h1>
    ${notice ? html`<${Notice} kind="ok" onClose=${() => setNotice(undefined)}>${notice}<//>` : null}
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    <form class="filters" role="search" onSubmit=${(event: Event) => event.preventDefault()}>
      <label
        >Outcome
        <select name="status" value=${status} onChange=${(event: Event) => setQuery({ status: (event.target as HTMLSelectElement).value })}>
          <option value="">any</option>
          ${Object.entries(STATUSES).map(([value, label]) => html`<option key=${value} value=${value}>${label}</option>`)}
        </select></label
      >
      <label
        >Started in
        <select name="period" value=${period} onChange=${(event: Event) => setQuery({ period: (event.target as HTMLSelectElement).value })}>
          <option value="">any time</option>
          ${PERIODS.map(([value, label]) => html`<option key=${value} value=${value}>${label}</option>`)}
        </select></label
      >
      ${workspace ? html`<${Link} to="/panel/runs">Every workspace<//>` : null}
    </form>
    ${
      !data
        ? html`<${Loading} error=${error} />`
        : data.runs.length === 0
          ? html`<${Empty}
              >${status || period || workspace ? 'No run matches; change the filters.' : 'No runs yet: a student runs their code from the editor or their workspace page.'}<//
            >`
          : html`<div class="scroll">
              <table class="runs">
                <caption class="visually-hidden">
                  Runs, newest first
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Workspace</th>
                    <th scope="col">Student</th>
                    <th scope="col">Started</th>
                    <th scope="col">Outcome</th>
                    <th scope="col">Took</th>
                    <th scope="col">Exit code</th>
                    <th scope="col"><span class="visually-hidden">Actions</span></th>
                  </tr>
                </thead>
                <tbody>
                  ${data.runs.map(
                    (run) =>
                      html`<tr key=${run.id}>
                        <td><${Link} to=${`/panel/runs?workspace=${run.workspace.id}`}>${run.workspace.slug}<//></td>
                        <td>${run.ownerEmail ?? html`<span class="muted">—</span>`}</td>
                        <td><${Time} iso=${run.queuedAt} /></td>
                        <td class=${run.status === 'failed' ? 'failed' : ''}>
                          <${Link} to=${`/panel/runs/${run.id}`}>${run.status}<//>${run.reason ? html`<span class="muted">: ${run.reason}</span>` : null}
                        </td>
                        <td>${duration(run)}</td>
                        <td>${run.exitCode ?? html`<span class="muted">—</span>`}</td>
                        <td>
                          ${active(run) ? html`<${StopRun} run=${run} onStopped=${() => (setNotice(`${run.workspace.slug}'s run is stopping.`), reload())} />` : null}
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
    }
  </section>`;
}

/** One run, read only: `/panel/runs/<id>`, its output as it is written. */
export function RunPage({ id }: { id: string }): VNode {
  const { data, error, reload } = useResource(
    async () =>
      (
        await ok(client.GET('/admin/runs/{runId}', { params: { path: { runId: id } } })).catch((failure: unknown) =>
          failure instanceof ApiError && failure.status === 404 ? { run: null } : Promise.reject(failure),
        )
      ).run,
    id,
    ['runs', 'status'],
  );
  if (data === null)
    return html`<section>
      <h1>No such run</h1>
      <p><${Link} to="/panel/runs">All runs<//></p>
    </section>`;
  if (!data) return html`<${Loading} error=${error} />`;
  return html`<section aria-labelledby="run-title">
    <h1 id="run-title">Run of ${data.workspace.slug}</h1>
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    <dl class="facts">
      <dt>Student</dt>
      <dd>${data.ownerEmail ?? '—'}</dd>
      <dt>Started</dt>
      <dd><${Time} iso=${data.queuedAt} /></dd>
      <dt>Outcome</dt>
      <dd class=${data.status === 'failed' ? 'failed' : ''}>
        ${data.status}${data.reason ? `: ${data.reason}` : ''}${
          // The exit code, unless the reason says it already ("compile or boot failed (exit code 1)").
          data.exitCode === null || data.reason?.includes(`exit code ${data.exitCode}`) ? '' : ` (exit code ${data.exitCode})`
        }
      </dd>
      <dt>Took</dt>
      <dd>${duration(data)}</dd>
    </dl>
    <p class="actions-row">
      ${active(data) ? html`<${StopRun} run=${data} onStopped=${reload} />` : null}
      <a href=${`/admin/runs/${id}/output.txt`} download>Download the output</a>
      <${Link} to=${`/panel/runs?workspace=${data.workspace.id}`}>${data.workspace.slug}'s runs<//>
    </p>
    <h2>Output${data.outputTruncated ? ' (cut at 1 MiB)' : ''}</h2>
    <${RunOutput} id=${id} label="Output of the run" onEnd=${reload} />
  </section>`;
}

/**
 * A run's output as it is written: its own event stream from where it starts, resumed by
 * EventSource after a lost connection, opened again REFUSED_RETRY_MS after a refusal (429); `onEnd`
 * when the run ends. Text only: the output is appended as text, never parsed as markup.
 */
export function RunOutput({ id, label, onEnd }: { id: string; label: string; onEnd?: () => void }): VNode {
  const output = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const pre = output.current;
    if (!pre) return undefined;
    pre.textContent = '';
    let received = 0;
    let source: EventSource | undefined;
    let again: number | undefined;
    const follow = () => {
      // EventSource resumes by itself (Last-Event-ID) after a lost connection, a cut one included. A
      // refusal (429: too many output streams open) closes it for good: it is opened again, from what was received.
      const opened = new EventSource(`/admin/runs/${id}/output?from=${received}`);
      source = opened;
      opened.addEventListener('output', (event) => {
        const { offset, text } = JSON.parse((event as MessageEvent<string>).data) as { offset: number; text: string };
        const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        pre.append(text.slice(Math.max(0, received - offset)));
        received = Math.max(received, offset + text.length);
        if (atBottom) pre.scrollTop = pre.scrollHeight;
      });
      opened.addEventListener('end', () => {
        opened.close();
        onEnd?.();
      });
      opened.addEventListener('error', () => {
        if (opened.readyState === EventSource.CLOSED) again = window.setTimeout(follow, REFUSED_RETRY_MS);
      });
    };
    follow();
    return () => {
      source?.close();
      window.clearTimeout(again);
    };
  }, [id]);
  return html`<pre class="output" ref=${output} tabindex="0" aria-label=${label}></pre>`;
}
