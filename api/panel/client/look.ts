/**
 * A coach's look over a student's shoulder (`/panel/look/<workspace id>`), read only: the page
 * begins a look when it opens (audit `workspace.view`; the student's page and editor say "Your
 * coach is looking at your workspace" while it lasts), keeps it every LOOK_KEEP_MS while it is open,
 * and ends it when it closes. It shows the student's files (a folder tree opened folder by folder,
 * and one file's start as text: read by the control plane from their home, never through their
 * editor), what they are doing (from the class view: the run in progress, its output live under
 * the files, how the last one ended, their robot, NetworkTables, a raised hand). Nothing of the
 * student's is rendered as markup or run: names and contents are text.
 */
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { client, messageOf, ok } from './api.ts';
import { html } from './html.ts';
import { RunOutput } from './runs.ts';
import { kib, Link, Loading, Notice, useResource } from './ui.ts';
import type { HomeFile, HomeListing, Look, LookField } from '../../../src/wire/schemas.ts';
import { FIELD, fieldTransform, footprint, poseText, type Pose } from 'robot-dashboard';

/** How often the open page keeps its look (the server ends one not kept for a minute). */
const LOOK_KEEP_MS = 20_000;
/** How often a look asking the student reads their answer. */
const ASKING_MS = 2000;
/** How often the robot's field is read while a run is in progress. */
const FIELD_MS = 1000;
/** The field's drawing, in its own units (pixels at 1:1). */
const FIELD_WIDTH = 640;
const FIELD_HEIGHT = 310;

const joined = (folder: string, name: string) => (folder === '' ? name : `${folder}/${name}`);

/** Begins the look while mounted, keeps it, and ends it on leaving (also when the tab closes); its state or the reason it failed. */
function useLook(workspaceId: string): { look: Look | undefined; error: string | undefined } {
  const [look, setLook] = useState<Look | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    let current: Look | undefined;
    let gone = false;
    const end = () => {
      if (!current) return;
      // keepalive: the request outlives a closing tab; its Origin is the panel's, as the admin API requires.
      void fetch(`/admin/looks/${current.id}/end`, { method: 'POST', credentials: 'same-origin', keepalive: true });
      current = undefined;
    };
    const begin = async () => {
      try {
        current = (await ok(client.POST('/admin/workspaces/{workspaceId}/looks', { params: { path: { workspaceId } } }))).look;
        if (gone) return end();
        setLook(current);
        setError(undefined);
      } catch (failure) {
        setError(messageOf(failure));
      }
    };
    void begin();
    const keep = () => {
      if (!current) return;
      void ok(client.POST('/admin/looks/{lookId}/keep', { params: { path: { lookId: current.id } } })).then(
        (answer) => setLook((current = answer.look)),
        // Ended meanwhile (a minute without a keep: a sleeping laptop): a new look begins.
        () => void begin(),
      );
    };
    const timer = setInterval(keep, LOOK_KEEP_MS);
    // While the student is asked (LOOK_CONSENT=ask), their answer is read every ASKING_MS.
    const asking = setInterval(() => current?.state === 'asking' && keep(), ASKING_MS);
    addEventListener('pagehide', end);
    return () => {
      gone = true;
      clearInterval(timer);
      clearInterval(asking);
      removeEventListener('pagehide', end);
      end();
    };
  }, [workspaceId]);
  return { look, error };
}

/** One folder of the tree: its entries, each folder opening to its own (read when opened). */
function Folder({
  workspaceId,
  path,
  chosen,
  onChoose,
}: {
  workspaceId: string;
  path: string;
  chosen: string | undefined;
  onChoose: (path: string) => void;
}): VNode {
  const [listing, setListing] = useState<HomeListing | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [open, setOpen] = useState<Set<string>>(new Set());
  useEffect(() => {
    void ok(client.GET('/admin/workspaces/{workspaceId}/files', { params: { path: { workspaceId }, query: { path } } })).then(setListing, (failure: unknown) =>
      setError(messageOf(failure)),
    );
  }, [workspaceId, path]);
  if (error) return html`<p class="field-error">${error}</p>`;
  if (!listing) return html`<p class="muted">Reading…</p>`;
  if (listing.entries.length === 0) return html`<p class="muted">Empty folder.</p>`;
  const toggle = (name: string) => {
    const next = new Set(open);
    if (next.has(name)) next.delete(name);
    else next.add(name);
    setOpen(next);
  };
  return html`<ul class="tree">
    ${listing.entries.map((entry) => {
      const full = joined(path, entry.name);
      if (entry.kind === 'dir')
        return html`<li key=${entry.name}>
          <button type="button" class="link folder" aria-expanded=${open.has(entry.name)} onClick=${() => toggle(entry.name)}>${entry.name}/</button>
          ${open.has(entry.name) ? html`<${Folder} workspaceId=${workspaceId} path=${full} chosen=${chosen} onChoose=${onChoose} />` : null}
        </li>`;
      if (entry.kind === 'file')
        return html`<li key=${entry.name}>
          <button
            type="button"
            class=${`link file${chosen === full ? ' chosen' : ''}`}
            aria-current=${chosen === full ? 'true' : undefined}
            onClick=${() => onChoose(full)}
          >
            ${entry.name}
          </button>
          <span class="muted size">${kib(entry.size)}</span>
        </li>`;
      return html`<li key=${entry.name} class="muted">
        ${entry.name} <span class="size">(${entry.kind === 'link' ? 'a link, not followed' : 'a special file'})</span>
      </li>`;
    })}
    ${listing.truncated ? html`<li class="muted">… and more: only the first 2,000 are listed.</li>` : null}
  </ul>`;
}

/** The chosen file's start, as text. */
function FileView({ workspaceId, path }: { workspaceId: string; path: string }): VNode {
  const [file, setFile] = useState<HomeFile | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    setFile(undefined);
    setError(undefined);
    void ok(client.GET('/admin/workspaces/{workspaceId}/files/content', { params: { path: { workspaceId }, query: { path } } })).then(
      setFile,
      (failure: unknown) => setError(messageOf(failure)),
    );
  }, [workspaceId, path]);
  return html`<section class="file-view" aria-labelledby="file-title">
    <h2 id="file-title"><code>${path}</code></h2>
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    ${
      !file
        ? error
          ? null
          : html`<p class="muted">Reading…</p>`
        : file.binary
          ? html`<p class="muted">A binary file of ${kib(file.size)}: not shown.</p>`
          : html`${file.truncated ? html`<p class="muted">The first ${kib(file.shownBytes)} of ${kib(file.size)}.</p>` : html`<p class="muted">${kib(file.size)}</p>`}
              <pre class="file"><code>${file.text}</code></pre>`
    }
  </section>`;
}

/** What a field's state says when there is no field to draw. */
const FIELD_STATES: Record<LookField['state'], string> = {
  no_run: 'No run in progress: the field shows while one runs.',
  starting: 'The run is building: the field shows once its robot runs.',
  connecting: 'Reading the robot…',
  live: '',
  unreachable: "The robot's NetworkTables could not be reached (it may be starting or stopping).",
  too_much: 'The robot sends more than a look reads (over 512 KiB or 1,000 messages a second): its field is not shown for half a minute.',
};

/**
 * The robot's field in the run in progress, read every FIELD_MS by the control plane from the run's
 * NetworkTables (never through the student's editor), drawn as the Driver Station draws it: the
 * field, its objects (trajectories as lines, others as boxes) and the robot turned to its heading.
 * What the robot names is shown as text only.
 */
function RobotField({ workspaceId }: { workspaceId: string }): VNode {
  const [field, setField] = useState<LookField | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    let gone = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = async () => {
      try {
        const answer = await ok(client.GET('/admin/workspaces/{workspaceId}/field', { params: { path: { workspaceId } } }));
        if (gone) return;
        setField(answer);
        setError(undefined);
      } catch (failure) {
        if (!gone) setError(messageOf(failure));
      }
      if (!gone) timer = setTimeout(() => void read(), FIELD_MS);
    };
    void read();
    return () => {
      gone = true;
      clearTimeout(timer);
    };
  }, [workspaceId]);
  const view = field?.fields[0];
  const robot = view?.objects.find((object) => object.drawn === 'robot')?.poses[0];
  const transform = fieldTransform(FIELD_WIDTH, FIELD_HEIGHT, 8);
  const points = (corners: [number, number][]) => corners.map(([x, y]) => transform.toPixels(x, y).join(',')).join(' ');
  const [left, top] = transform.toPixels(0, FIELD.widthMeters);
  const [right, bottom] = transform.toPixels(FIELD.lengthMeters, 0);
  const arrow = (pose: Pose) => {
    const [fx, fy] = transform.toPixels(pose.x, pose.y);
    const radians = (pose.degrees * Math.PI) / 180;
    const [tx, ty] = transform.toPixels(pose.x + 0.6 * Math.cos(radians), pose.y + 0.6 * Math.sin(radians));
    return html`<line x1=${fx} y1=${fy} x2=${tx} y2=${ty} class="heading" />`;
  };
  return html`<section aria-labelledby="look-field-title" class="look-field">
    <h2 id="look-field-title">The robot's field</h2>
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    <svg viewBox=${`0 0 ${FIELD_WIDTH} ${FIELD_HEIGHT}`} role="img" aria-label=${robot ? `The field, the robot at ${poseText(robot)}` : 'The field'}>
      <rect x=${left} y=${top} width=${right - left} height=${bottom - top} class="carpet" />
      <rect x=${left - 4} y=${top} width="4" height=${bottom - top} class="blue" />
      <rect x=${right} y=${top} width="4" height=${bottom - top} class="red" />
      <line x1=${(left + right) / 2} y1=${top} x2=${(left + right) / 2} y2=${bottom} class="centre" />
      ${view?.objects.map((object) =>
        object.drawn === 'line'
          ? html`<polyline key=${object.name} points=${points(object.poses.map((pose) => [pose.x, pose.y]))} class="trajectory" />`
          : object.drawn === 'boxes'
            ? object.poses.map(
                (pose, index) =>
                  html`<polygon key=${`${object.name}-${index}`} points=${points(footprint(pose, { lengthMeters: 0.4, widthMeters: 0.4 }))} class="box" />`,
              )
            : null,
      )}
      ${robot ? html`<g class="robot"><polygon points=${points(footprint(robot))} />${arrow(robot)}</g>` : null}
    </svg>
    <p class="muted field-caption">
      ${
        !field
          ? 'Reading the robot…'
          : field.state !== 'live'
            ? FIELD_STATES[field.state]
            : !view
              ? 'No field: the robot publishes none (a Field2d on SmartDashboard).'
              : robot
                ? `${view.name}: robot at ${poseText(robot)}.`
                : `${view.name}: no robot pose.`
      }
    </p>
  </section>`;
}

/** The look page (see the file comment). */
export function LookPage({ workspaceId }: { workspaceId: string }): VNode {
  const { look, error } = useLook(workspaceId);
  const [chosen, setChosen] = useState<string | undefined>(undefined);
  const { data } = useResource(
    async () => (await ok(client.GET('/admin/class'))).students.find((row) => row.workspace?.id === workspaceId),
    `look-${workspaceId}`,
    ['workspaces', 'status', 'runs', 'help'],
  );
  const who = data ? data.student.name || data.student.email : 'the student';
  return html`<section aria-labelledby="look-title" class="look">
    <p><${Link} to="/panel/class">← Class<//></p>
    <h1 id="look-title">Looking at ${who}'s workspace</h1>
    <p class="counts">${data?.student.name ? `${data.student.email}. ` : ''}Read only: while this page is open, ${who} is told that you are looking.</p>
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    ${
      data
        ? html`<ul class="now">
            <li>
              <span class="label">Run: </span>${
                data.run
                  ? html`<${Link} to=${`/panel/runs/${data.run.id}`}>${data.run.phase === 'queued' ? 'building' : 'running'} (open the run)<//>`
                  : html`<span class="muted">none in progress</span>`
              }
            </li>
            <li>
              <span class="label">Last result: </span>${
                data.lastResult
                  ? html`<${Link} to=${`/panel/runs/${data.lastResult.runId}`}
                        >${data.lastResult.outcome === 'compile_errors' ? `${data.lastResult.errors} compile errors` : data.lastResult.outcome.replace('_', ' ')}<//
                      >${data.lastResult.firstError ? html` <code>${data.lastResult.firstError}</code>` : null}`
                  : html`<span class="muted">no run yet</span>`
              }
            </li>
            <li>
              <span class="label">Robot: </span
              >${data.robot ? (data.robot.enabled ? `enabled, ${data.robot.mode}` : 'disabled') : html`<span class="muted">no Driver Station</span>`}${
                data.ntConnected ? '; NetworkTables connected' : ''
              }
            </li>
            ${data.help ? html`<li>Help: ${data.help.state === 'waiting' ? 'waiting' : `taken by ${data.help.takenBy ?? 'a coach'}`}${data.help.message ? html`: <span class="help-message">${data.help.message}</span>` : null}</li>` : null}
          </ul>`
        : null
    }
    ${
      !look
        ? html`<${Loading} error=${error} />`
        : look.state === 'asking'
          ? html`<${Notice} kind="info">${who} is asked to let you look, on their workspace page and in their editor. Their files show here once they do.<//>`
          : look.state === 'declined'
            ? html`<${Notice} kind="info">${who} said no to this look. Ask them in person, or open it again later.<//>`
            : html`<div class="look-panes">
                  <section class="files" aria-label="Files">
                    <h2>Files</h2>
                    <${Folder} workspaceId=${workspaceId} path="" chosen=${chosen} onChoose=${setChosen} />
                  </section>
                  ${chosen ? html`<${FileView} workspaceId=${workspaceId} path=${chosen} />` : html`<p class="muted">Choose a file to read it.</p>`}
                </div>
                ${data?.run ? html`<${RobotField} key=${data.run.id} workspaceId=${workspaceId} />` : null}
                ${
                  data?.run
                    ? html`<section aria-labelledby="look-output-title">
                        <h2 id="look-output-title">The run in progress</h2>
                        <${RunOutput} key=${data.run.id} id=${data.run.id} label="Output of the run in progress" />
                      </section>`
                    : null
                }`
    }
  </section>`;
}
