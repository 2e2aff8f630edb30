/**
 * The Class page, the coach's view during class: one row per student with what they are doing now
 * (online, their workspace, the run in progress and for how long, their robot, NetworkTables), how
 * their last run went (built, the compile errors and the first of them, a crash and its exit code),
 * and their open help request. It reads the class again at every change it hears (at most every
 * 300 ms), so a change is on screen within a second or two; the durations tick between reads.
 * Sorting, the filters and the search are the page's own (the class is one answer): they live in
 * its address, so a coach's choice survives a reload. A student's name and message are shown as
 * text (Preact escapes every value it renders).
 */
import type { VNode } from 'preact';
import { useState } from 'preact/hooks';
import { client, ok } from './api.ts';
import { html } from './html.ts';
import { age, Ago, Empty, Link, Loading, Notice, setQuery, useNow, useResource } from './ui.ts';
import type { ClassStudent, ClassView } from '../../../src/wire/schemas.ts';
import type { RobotMode, RunOutcome } from '../../../src/wire/vocabulary.ts';

/** No activity for this long (and no run in progress): idle. */
export const IDLE_MINUTES = 10;

/** The filters, keyed by their word in the address. */
const FILTERS = {
  all: 'Everyone',
  help: 'Needs help',
  failing: 'Failing',
  idle: 'Idle',
  'not-started': 'Not started',
} as const;
type Filter = keyof typeof FILTERS;

/** The orders, keyed by their word in the address. */
const SORTS = {
  attention: 'Needs attention first',
  name: 'Name',
  activity: 'Last activity',
  state: 'Workspace state',
} as const;
type Sort = keyof typeof SORTS;

/** A failed last run, in words: keyed by RunOutcome (tsc names an outcome of the vocabulary missing here). */
const OUTCOMES: Record<RunOutcome, string> = {
  built: 'Built',
  compile_errors: 'Compile errors',
  build_failed: 'Build failed',
  crashed: 'Crashed',
  canceled: 'Canceled',
};
const MODES: Record<RobotMode, string> = { teleop: 'Teleop', autonomous: 'Autonomous', test: 'Test' };

/** A word of the address that is one of `words`, else `fallback` (an address edited by hand shows the default). */
const choice = <K extends string>(value: string | null, words: Record<K, string>, fallback: K): K =>
  value !== null && Object.hasOwn(words, value) ? (value as K) : fallback;

const nameOf = (row: ClassStudent): string => row.student.name || row.student.email;

/** Never opened their workspace (or have none). */
export const notStarted = (row: ClassStudent): boolean => row.workspace === null || (row.lastActivityAt === null && row.run === null);

/** Their last run failed (compile errors, a failed build, a crash), and no run of theirs is running since. */
export const failing = (row: ClassStudent): boolean =>
  row.lastResult !== null && ['compile_errors', 'build_failed', 'crashed'].includes(row.lastResult.outcome) && row.run?.phase !== 'running';

/** Started, no run in progress, and nothing done for IDLE_MINUTES (at `now`, epoch ms). */
export const idle = (row: ClassStudent, now: number): boolean =>
  !notStarted(row) && row.run === null && (row.lastActivityAt === null || now - Date.parse(row.lastActivityAt) > IDLE_MINUTES * 60_000);

/** Whether a row passes a filter. */
function passes(row: ClassStudent, filter: Filter, now: number): boolean {
  switch (filter) {
    case 'help':
      return row.help !== null;
    case 'failing':
      return failing(row);
    case 'idle':
      return idle(row, now);
    case 'not-started':
      return notStarted(row);
    case 'all':
      return true;
  }
}

/** How urgently a row wants the coach (lower first): a hand waiting, a hand taken, failing, building, running, the rest, idle, not started. */
function urgency(row: ClassStudent, now: number): number {
  if (row.help?.state === 'waiting') return 0;
  if (row.help) return 1;
  if (failing(row)) return 2;
  if (row.run?.phase === 'queued') return 3;
  if (row.run) return 4;
  if (notStarted(row)) return 7;
  if (idle(row, now)) return 6;
  return 5;
}

const byName = (a: ClassStudent, b: ClassStudent) => nameOf(a).localeCompare(nameOf(b));
const time = (iso: string | null | undefined) => (iso ? Date.parse(iso) : 0);

/** The rows in a sort's order (ties by name; hands by how long they have waited). */
function sorted(rows: ClassStudent[], sort: Sort, now: number): ClassStudent[] {
  const order: Record<Sort, (a: ClassStudent, b: ClassStudent) => number> = {
    attention: (a, b) => urgency(a, now) - urgency(b, now) || time(a.help?.createdAt) - time(b.help?.createdAt) || byName(a, b),
    name: byName,
    activity: (a, b) => time(b.lastActivityAt) - time(a.lastActivityAt) || byName(a, b),
    state: (a, b) => (a.workspace?.observedState ?? '~').localeCompare(b.workspace?.observedState ?? '~') || byName(a, b),
  };
  return rows.toSorted(order[sort]);
}

/** A duration as a clock: `0:42`, `12:05`, `1:02:05`. */
function clock(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const two = (value: number) => String(value).padStart(2, '0');
  return s >= 3600 ? `${Math.floor(s / 3600)}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}` : `${Math.floor(s / 60)}:${two(s % 60)}`;
}

/** The run in progress and for how long (`since` is shifted by the gap between the server's clock and this browser's). */
function RunCell({ row, elapsed }: { row: ClassStudent; elapsed: (iso: string) => number }): VNode {
  const run = row.run;
  if (!run) return html`<span class="muted">—</span>`;
  if (run.phase === 'queued')
    return html`<${Link} to=${`/panel/runs/${run.id}`}><span class="state waiting">Building ${clock(elapsed(run.queuedAt))}</span><//>`;
  return html`<${Link} to=${`/panel/runs/${run.id}`}><span class="state running">Running ${clock(elapsed(run.readyAt ?? run.queuedAt))}</span><//>`;
}

/** How the last run ended, with the first compile error or the exit code. */
function ResultCell({ row }: { row: ClassStudent }): VNode {
  const last = row.lastResult;
  if (!last) return html`<span class="muted">no run yet</span>`;
  const link = (body: VNode | string) => html`<${Link} to=${`/panel/runs/${last.runId}`}>${body}<//>`;
  switch (last.outcome) {
    case 'compile_errors':
      return html`<span class="result"
        >${link(html`<span class="state failed">${last.errors} compile error${last.errors === 1 ? '' : 's'}</span>`)}
        ${last.firstError ? html`<code class="first-error">${last.firstError}</code>` : null}</span
      >`;
    case 'crashed':
      return link(html`<span class="state failed">Crashed${last.exitCode !== null ? ` (exit ${last.exitCode})` : ''}</span>`);
    case 'build_failed':
      return html`<span class="result"
        >${link(html`<span class="state failed">Build failed</span>`)} ${last.reason ? html`<span class="muted">${last.reason}</span>` : null}</span
      >`;
    case 'built':
      return link(html`<span class="state running">${OUTCOMES.built}</span>`);
    case 'canceled':
      return link(html`<span class="muted">${OUTCOMES.canceled}</span>`);
  }
}

/** The robot: disabled, or enabled in its mode; a dash with no Driver Station. */
function RobotCell({ row }: { row: ClassStudent }): VNode {
  if (!row.robot) return html`<span class="muted">—</span>`;
  return row.robot.enabled ? html`<span class="state running">Enabled · ${MODES[row.robot.mode]}</span>` : html`<span class="state stopped">Disabled</span>`;
}

/** The open help request: how long it has waited, the message, who is coming. */
function HelpCell({ row, elapsed }: { row: ClassStudent; elapsed: (iso: string) => number }): VNode {
  const help = row.help;
  if (!help) return html`<span class="muted">—</span>`;
  return html`<span class="result"
    ><${Link} to="/panel/help"
      ><span class=${`state ${help.state === 'waiting' ? 'failed' : 'waiting'}`}
        >${help.state === 'waiting' ? `Waiting ${age(Math.floor(elapsed(help.createdAt)))}` : `${help.takenBy ?? 'A coach'} is coming`}</span
      ><//
    >
    ${help.message ? html`<span class="help-message">${help.message}</span>` : null}</span
  >`;
}

/** A date input's value (`YYYY-MM-DD`) for a time, in the browser's time zone. */
const dateValue = (epochMs: number): string => {
  const date = new Date(epochMs);
  return `${date.getFullYear()}-${String(date.getMonth() + 1).padStart(2, '0')}-${String(date.getDate()).padStart(2, '0')}`;
};

/**
 * The usage report's download (GET /admin/usage.csv): from a day to a day (both in the browser's
 * time zone, the last one included), by default the last 30 days.
 */
function UsageDownload(): VNode {
  const [from, setFrom] = useState(() => dateValue(Date.now() - 30 * 86_400_000));
  const [to, setTo] = useState(() => dateValue(Date.now()));
  const since = new Date(`${from}T00:00`);
  const until = new Date(new Date(`${to}T00:00`).getTime() + 86_400_000);
  const valid = !Number.isNaN(since.getTime()) && !Number.isNaN(until.getTime()) && since < until;
  const href = valid ? `/admin/usage.csv?${new URLSearchParams({ since: since.toISOString(), until: until.toISOString() })}` : undefined;
  return html`<form class="inline usage" aria-labelledby="usage-title" onSubmit=${(event: Event) => event.preventDefault()}>
    <h2 id="usage-title">Usage report</h2>
    <p class="muted">Per student: the hours their workspace ran, their runs and failed builds, and when they were last seen.</p>
    <label>From <input type="date" value=${from} onInput=${(event: Event) => setFrom((event.target as HTMLInputElement).value)} /></label>
    <label>To <input type="date" value=${to} onInput=${(event: Event) => setTo((event.target as HTMLInputElement).value)} /></label>
    ${valid ? html`<a class="button" href=${href} download>Download CSV</a>` : html`<span class="field-error">The first day must not be after the last.</span>`}
  </form>`;
}

/** The Class page (see the file comment). */
export function ClassPage({ url }: { url: URL }): VNode {
  const query = url.searchParams;
  const filter = choice(query.get('show'), FILTERS, 'all');
  const sort = choice(query.get('sort'), SORTS, 'attention');
  const search = (query.get('q') ?? '').trim().toLowerCase();
  const { data, error } = useResource(
    async (): Promise<ClassView & { receivedAt: number }> => ({ ...(await ok(client.GET('/admin/class'))), receivedAt: Date.now() }),
    'class',
    ['workspaces', 'status', 'runs', 'help', 'users'],
  );
  const now = useNow();
  // Seconds since a server time, on the server's clock: the time read plus what has passed here since.
  const elapsed = (iso: string) => (data ? (Date.parse(data.readAt) + (now - data.receivedAt) - Date.parse(iso)) / 1000 : 0);
  const serverNow = data ? Date.parse(data.readAt) + (now - data.receivedAt) : now;
  const students = data?.students ?? [];
  const counts = Object.fromEntries(
    (Object.keys(FILTERS) as Filter[]).map((key) => [key, students.filter((row) => passes(row, key, serverNow)).length]),
  ) as Record<Filter, number>;
  const shown = sorted(
    students.filter((row) => passes(row, filter, serverNow) && (!search || `${row.student.name} ${row.student.email}`.toLowerCase().includes(search))),
    sort,
    serverNow,
  );
  const online = students.filter((row) => row.online).length;
  return html`<section aria-labelledby="class-title">
    <h1 id="class-title">Class</h1>
    <p class="counts">
      ${
        data
          ? `${students.length} student${students.length === 1 ? '' : 's'}: ${online} online, ${counts.help} asking for help, ${counts.failing} failing, ${counts.idle} idle, ${counts['not-started']} not started.`
          : ''
      }
    </p>
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    <form class="filters" role="search" onSubmit=${(event: Event) => event.preventDefault()}>
      <fieldset class="segmented">
        <legend class="visually-hidden">Show</legend>
        ${(Object.entries(FILTERS) as [Filter, string][]).map(
          ([key, label]) =>
            html`<label key=${key} class=${filter === key ? 'chosen' : ''}
              ><input type="radio" name="show" value=${key} checked=${filter === key} onChange=${() => setQuery({ show: key === 'all' ? undefined : key })} />
              ${label} <span class="count">${counts[key]}</span></label
            >`,
        )}
      </fieldset>
      <label
        >Search
        <input
          type="search"
          name="q"
          value=${query.get('q') ?? ''}
          placeholder="name or email"
          onInput=${(event: Event) => setQuery({ q: (event.target as HTMLInputElement).value || undefined })}
      /></label>
      <label
        >Sort
        <select name="sort" value=${sort} onChange=${(event: Event) => setQuery({ sort: (event.target as HTMLSelectElement).value })}>
          ${(Object.entries(SORTS) as [Sort, string][]).map(([key, label]) => html`<option key=${key} value=${key}>${label}</option>`)}
        </select></label
      >
    </form>
    ${
      !data
        ? html`<${Loading} error=${error} />`
        : students.length === 0
          ? html`<${Empty}>No students yet: a student appears here at their first sign-in.<//>`
          : shown.length === 0
            ? html`<${Empty}>No student matches; choose Everyone or clear the search.<//>`
            : html`<div class="scroll">
                <table class="class" aria-labelledby="class-title">
                  <thead>
                    <tr>
                      <th scope="col">Student</th>
                      <th scope="col">Help</th>
                      <th scope="col">Run</th>
                      <th scope="col">Last result</th>
                      <th scope="col">Robot</th>
                      <th scope="col">NetworkTables</th>
                      <th scope="col">Workspace</th>
                      <th scope="col">Last activity</th>
                      <th scope="col"><span class="visually-hidden">Look</span></th>
                    </tr>
                  </thead>
                  <tbody>
                    ${shown.map(
                      (row) =>
                        html`<tr key=${row.student.id} data-student=${row.student.email}>
                          <th scope="row">
                            <span class=${`presence ${row.online ? 'online' : 'offline'}`} title=${row.online ? 'Online now' : 'Not online'}
                              ><span class="visually-hidden">${row.online ? 'Online' : 'Offline'}</span></span
                            >
                            ${nameOf(row)}${row.student.name ? html` <span class="muted email">${row.student.email}</span>` : null}
                          </th>
                          <td><${HelpCell} row=${row} elapsed=${elapsed} /></td>
                          <td><${RunCell} row=${row} elapsed=${elapsed} /></td>
                          <td><${ResultCell} row=${row} /></td>
                          <td><${RobotCell} row=${row} /></td>
                          <td>${row.ntConnected ? html`<span class="state running">Connected</span>` : html`<span class="muted">—</span>`}</td>
                          <td>
                            ${
                              row.workspace
                                ? html`<${Link} to=${`/panel/workspaces?q=${encodeURIComponent(row.workspace.slug)}`}
                                    ><span class=${`state ${row.workspace.observedState}`}>${row.workspace.observedState}</span><//
                                  >`
                                : html`<span class="muted">none yet</span>`
                            }
                          </td>
                          <td><${Ago} iso=${row.lastActivityAt} /></td>
                          <td class="actions">
                            ${row.workspace ? html`<${Link} to=${`/panel/look/${row.workspace.id}`}><span aria-label=${`Look at ${nameOf(row)}'s workspace`}>Look</span><//>` : null}
                          </td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>`
    }
    <${UsageDownload} />
  </section>`;
}
