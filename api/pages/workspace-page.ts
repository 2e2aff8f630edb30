import { HELP_MESSAGE_MAX } from '../../src/store/help.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { escapeHtml, page } from './page.ts';

/** What the page says of a workspace: what is wanted, then what is seen. */
function stateText(workspace: WorkspaceRecord): string {
  if (workspace.spec.desiredState !== 'running') return workspace.status.observedState === 'running' ? 'Stopping…' : 'Stopped';
  if (workspace.status.observedState === 'waiting') return 'Waiting for a free slot';
  if (workspace.status.observedState === 'failed') return 'Failed to start';
  return workspace.status.observedState === 'running' ? 'Running' : 'Starting…';
}

/** How long after a home was brought back from a backup its page still says so. */
const RESTORE_NOTICE_MS = 14 * 24 * 3_600_000;

/** `2026-11-26 15:42 UTC`: a time as the page states it. */
const utc = (date: Date) => `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;

/**
 * The notice of a home brought back from a backup (its swarm node was lost): from what time the
 * files are, and that what was saved after is not there. Shown for two weeks after.
 */
function restoreNotice(workspace: WorkspaceRecord): string {
  const restore = workspace.status.homeRestore;
  if (!restore || Date.now() - restore.at.getTime() > RESTORE_NOTICE_MS) return '';
  return `<div id="restored" role="status"><p><strong>Your files were brought back from a backup.</strong> On <time datetime="${restore.at.toISOString()}">${utc(restore.at)}</time>, ${escapeHtml(restore.reason)}, so your workspace now runs on another one, with your files as they were at <time id="restored-from" datetime="${restore.from.toISOString()}">${utc(restore.from)}</time>. Anything saved after that time is not there.</p></div>`;
}

/** How often the page asks for its workspace (its state, its run, the help queue). */
export const REFRESH_MS = 2000;
/** How often it asks while the editor starts and the page is to take the student into it (Open pressed, or this is the editor's address). */
export const STARTING_REFRESH_MS = 500;

/** Where the page was asked for, which decides what it does once the editor runs. */
export interface WorkspacePageOptions {
  /**
   * Where the editor is: `/u/<slug>/` (path mode), the workspace's own origin (host mode). When
   * the page was served at that very address (path mode, the editor not up), it reloads into the
   * editor once it runs; otherwise it offers a link to it, and goes there only once the student
   * pressed Open on it (a student watching runs here is not taken away).
   */
  editorUrl: string;
  /** Whether this page is at the editor's address (it then becomes the editor once that runs). */
  atEditorAddress: boolean;
}

const STYLE = `<style>
body{max-width:52rem} [hidden]{display:none !important}
section{margin-top:1.6rem} h2{font-size:1.15rem;margin-bottom:.4rem}
.row{display:flex;gap:.6rem;align-items:center;flex-wrap:wrap} .row button,.row a.button{display:inline-block;margin:0} .row form{margin:0 0 0 auto}
pre#output{background:#1d2430;color:#e8edf3;padding:.8rem;border-radius:.4rem;max-height:26rem;overflow:auto;white-space:pre-wrap;word-break:break-word;font-size:.85rem;min-height:3rem}
#idle,#restored,#disk{border:2px solid #b35c00;background:#fff4e5;padding:.6rem .9rem;border-radius:.4rem} #restored p{margin:0}
#starting progress{vertical-align:middle;margin-right:.4rem}
#ds-frame{display:block;width:100%;height:34rem;border:1px solid #d6dbe1;border-radius:.4rem;margin-top:.6rem}
#problems{color:#a12622} table{border-collapse:collapse;width:100%;font-size:.9rem} th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #d6dbe1}
.failed{color:#a12622} .muted{color:#5a6472}
#import-form label{display:block;margin-top:.5rem} #import-form button{display:inline-block}
#import-progress{border:1px solid #d6dbe1;border-radius:.4rem;padding:.6rem .9rem;margin-top:.8rem} #import-progress ol{margin:.2rem 0 .4rem;padding-left:1.4rem}
#import-progress li.now{font-weight:600} #import-progress li.past{color:#5a6472} #import-progress li.past::after{content:' ✓'}
#help-form label{display:block} #help-form .row{margin-top:.6rem} #help-message{display:block;width:100%;box-sizing:border-box;margin-top:.25rem;padding:.55rem .6rem;font:inherit;border:1px solid #8a94a3;border-radius:.4rem;resize:vertical}
#help-open,#look{border:2px solid #1d5fb3;background:#eaf2fd;padding:.6rem .9rem;border-radius:.4rem;margin:1rem 0} #help-open p{margin:0 0 .3rem} #look p{margin:0} #look .row{margin-top:.5rem} #help-said{white-space:pre-wrap;word-break:break-word}
dialog{max-width:30rem;border:1px solid #1d2430;border-radius:.5rem;padding:1rem 1.2rem} dialog::backdrop{background:rgba(29,36,48,.45)} dialog .row{justify-content:flex-end}
</style>`;

/**
 * The workspace page, for its student (and, in host mode, an admin): the state with Open, Stop
 * and Sign out, the idle warning with "Keep working", the notice of a home nearly full or full, a
 * hand raised for help (with a message; its place in the queue, then the coach coming, and "Never
 * mind"), the notice of a coach looking at the workspace (read only) while the look lasts (with LOOK_CONSENT=ask, first asking, with "Let them look" and "Not now"), the lessons a coach
 * handed out and where each landed (beside the student's own for a later version), and the student's run loop without the editor: Run, Restart and Stop,
 * the run's state, its output live as it is written (compile errors picked out), the Driver Station
 * (api/driver-station.ts, in a frame from the editor's address while the student has it open), the
 * past runs with their outcome and output to download; "Reset to starter" and an import of a team's
 * repository, each confirmed in a dialog (the workspace is stopped first), the import's progress
 * followed phase by phase. Served at `/u/<slug>/` while the editor is not up
 * (path mode; Open then reloads into the editor), and always at `/u/<slug>/.cp/` (a way back to it
 * from the editor). Everything it shows comes from the student API (`/u/<slug>/api/...`); text from
 * a run goes into the page as text, never as markup.
 */
export function workspacePage(workspace: WorkspaceRecord, options: WorkspacePageOptions): string {
  const base = `/u/${workspace.slug}/api`;
  const wanted = workspace.spec.desiredState === 'running';
  const config = JSON.stringify({ base, editorUrl: options.editorUrl, atEditorAddress: options.atEditorAddress });
  return page(
    `Workspace ${workspace.slug}`,
    `${STYLE}<h1>Workspace ${escapeHtml(workspace.slug)}</h1>
<p>State: <strong id="state">${escapeHtml(stateText(workspace))}</strong></p>
<p id="stopped" role="status" hidden></p>
<p id="starting" role="status" hidden><progress></progress> Starting your editor… It opens here by itself when it is ready.</p>
<p class="note" id="message">${escapeHtml(workspace.status.statusMessage)}</p>
${restoreNotice(workspace)}
<p id="guest" class="note" hidden></p>
<div id="look" hidden><p id="looked" role="status"></p><div class="row" id="look-ask" hidden><button id="look-accept" type="button">Let them look</button><button id="look-decline" type="button">Not now</button></div></div>
<div class="row"><button id="open" type="button"${wanted ? ' disabled' : ''}>Open</button><a id="editor" class="button" href="${escapeHtml(options.editorUrl)}" hidden>Open the editor</a><button id="stop" type="button"${wanted ? '' : ' hidden'}>Stop my workspace</button><form method="post" action="/auth/sign-out"><button type="submit">Sign out</button></form></div>
<div id="idle" role="status" hidden><p id="idle-text"></p><button id="keep" type="button">Keep working</button></div>
<p id="disk" role="status" hidden></p>
<section aria-labelledby="help-title">
<h2 id="help-title">Ask your coach for help</h2>
<form id="help-form" hidden><label for="help-message">What are you stuck on? (optional, at most ${HELP_MESSAGE_MAX} characters)</label><textarea id="help-message" name="message" maxlength="${HELP_MESSAGE_MAX}" rows="2" placeholder="My robot does not drive"></textarea>
<div class="row"><button id="help-ask" type="submit">Ask for help</button></div></form>
<div id="help-open" role="status" aria-live="polite" hidden><p><strong id="help-text"></strong></p><p id="help-said" class="muted" hidden></p><button id="help-withdraw" type="button">Never mind</button></div>
</section>
<section id="lessons" aria-labelledby="lessons-title" hidden>
<h2 id="lessons-title">Lessons from your coach</h2>
<p class="muted">Your coach hands lessons out into the lessons folder of your home. A new version of a lesson you have lands beside it: your own files are never changed.</p>
<ul id="lesson-list"></ul>
</section>
<section aria-labelledby="run-title">
<h2 id="run-title">Run your robot code</h2>
<div class="row"><button id="run" type="button" disabled>Run</button><button id="restart-run" type="button" hidden>Restart</button><button id="stop-run" type="button" hidden>Stop</button><span id="run-state" role="status"></span></div>
<ul id="problems" hidden></ul>
<pre id="output" tabindex="0" aria-label="Output of the run" hidden></pre>
<p><a id="download" hidden>Download the whole output</a></p>
</section>
<section aria-labelledby="ds-title">
<h2 id="ds-title">Driver Station</h2>
<p class="muted">Enable your robot, drive it with the keyboard or a gamepad, pick its autonomous routine, and watch it on the field and in graphs, as in the editor. One Driver Station drives at a time: this one takes over from the editor's while it is open.</p>
<div class="row"><button id="ds-open" type="button" disabled>Open the Driver Station</button><button id="ds-close" type="button" hidden>Close the Driver Station</button></div>
<div id="ds-holder"></div>
</section>
<section aria-labelledby="runs-title"><h2 id="runs-title">Past runs</h2>
<table><thead><tr><th scope="col">Started</th><th scope="col">Outcome</th><th scope="col">Exit code</th><th scope="col">Output</th></tr></thead><tbody id="runs"></tbody></table>
<p class="muted" id="no-runs">No runs yet.</p></section>
<section aria-labelledby="project-title"><h2 id="project-title">Start over, or bring in your team's project</h2>
<p class="muted">Your home folder is your robot project: Run builds what is there. Both of these replace it, after a backup of your whole home (your coach can bring it back), while your workspace is stopped.</p>
<div class="row"><button id="reset" type="button">Reset to starter…</button></div>
<form id="import-form"><label>Your team's repository (https://) <input id="import-url" name="url" type="url" required placeholder="https://github.com/your-team/robot-2026" autocomplete="off"></label>
<label>Branch (optional) <input id="import-branch" name="branch" placeholder="the repository's default branch" autocomplete="off"></label>
<label>Subfolder (optional) <input id="import-subfolder" name="subfolder" placeholder="the whole repository" autocomplete="off"></label>
<div class="row"><button id="import" type="submit">Import…</button></div></form>
<div id="import-progress" role="status" aria-live="polite" hidden><ol id="import-phases"></ol><p id="import-text"></p></div></section>
<dialog id="confirm" aria-labelledby="confirm-title"><h2 id="confirm-title"></h2><p id="confirm-text"></p><div class="row"><button id="confirm-cancel" type="button">Cancel</button><button id="confirm-ok" type="button"></button></div></dialog>
<div id="toast" role="alert" hidden style="position:fixed;bottom:1.5rem;left:50%;transform:translateX(-50%);background:#1d2430;color:#fff;padding:.8rem 1.2rem;border-radius:.4rem;max-width:30rem"><span id="toast-text"></span> <button id="toast-close" type="button" aria-label="Dismiss the message">Dismiss</button></div>
<script>
const config = ${config.replaceAll('<', '\\u003c')};
const $ = (id) => document.getElementById(id);
const toast = $('toast');
let workspace;
let followed;
let source;
let listenAgain;
let shownChars = 0;
let opening = false;
let shownStatus;
let toastTimer;
// The student's answer to the look asking them, given here: { lookId, accept }.
let lookAnswered = null;
// A message stays until dismissed (or, for a refused Open, until an Open succeeds); a confirmation goes by itself.
function showToast(text, fleeting) {
  clearTimeout(toastTimer);
  $('toast-text').textContent = text;
  toast.hidden = false;
  if (fleeting) toastTimer = setTimeout(() => { toast.hidden = true; }, 10000);
}
$('toast-close').addEventListener('click', () => { toast.hidden = true; });
async function call(method, path, payload) {
  const headers = payload === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' };
  const answer = await fetch(config.base + path, { method, headers, body: payload === undefined ? undefined : JSON.stringify(payload) });
  const body = await answer.json().catch(() => ({}));
  if (!answer.ok) throw new Error(body.error ? body.error.message : 'The control plane answered ' + answer.status + '.');
  return body;
}
const OUTCOME = { queued: 'Building…', running: 'Running', stopped: 'Stopped', failed: 'Failed', canceled: 'Canceled' };
function describe(run) {
  if (!run) return 'Not run yet.';
  const outcome = OUTCOME[run.status] || run.status;
  return run.reason ? outcome + ': ' + run.reason : outcome;
}
function problemsOf(text) {
  const found = [];
  for (const line of text.split('\\n')) {
    const match = /^(.+\\.java):(\\d+): (error|warning): (.*)$/.exec(line);
    if (match) found.push(match[1].split('/').pop() + ' line ' + match[2] + ': ' + match[3] + ': ' + match[4]);
  }
  return found;
}
function showProblems() {
  const list = $('problems');
  const found = problemsOf($('output').textContent);
  list.replaceChildren(...found.map((text) => { const item = document.createElement('li'); item.textContent = text; return item; }));
  list.hidden = found.length === 0;
}
function follow(run) {
  if (followed === run.id) return;
  followed = run.id;
  // Shown once there is a run to show (an empty box said nothing).
  $('output').textContent = '';
  $('output').hidden = false;
  shownChars = 0;
  $('download').href = config.base + '/runs/' + run.id + '/output.txt';
  $('download').hidden = false;
  listen(run);
}
// EventSource resumes by itself after a lost connection (a slow reader cut included), from the last
// offset it got. A refusal (429: too many output streams open) closes it for good: it is opened
// again after a while (the Retry-After, which EventSource cannot read), from the last offset shown.
function listen(run) {
  if (source) source.close();
  clearTimeout(listenAgain);
  const output = $('output');
  const opened = new EventSource(config.base + '/runs/' + run.id + '/output?from=' + shownChars);
  source = opened;
  opened.addEventListener('output', (event) => {
    const { offset, text } = JSON.parse(event.data);
    const fresh = text.slice(Math.max(0, shownChars - offset));
    shownChars = Math.max(shownChars, offset + text.length);
    const atBottom = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
    output.append(fresh);
    // The page keeps the last 200,000 characters; the whole output is downloadable.
    if (output.textContent.length > 250000) output.textContent = output.textContent.slice(-200000);
    if (atBottom) output.scrollTop = output.scrollHeight;
    if (fresh.includes('\\n')) showProblems();
  });
  opened.addEventListener('end', (event) => {
    opened.close();
    const end = JSON.parse(event.data);
    // The exit code, unless the reason says it already ("compile or boot failed (exit code 1)").
    const code = end.exitCode !== null && !(end.reason || '').includes('exit code ' + end.exitCode) ? ' (exit code ' + end.exitCode + ')' : '';
    output.append('\\n■ ' + describe(end) + code + '\\n');
    showProblems();
    refresh();
    refreshRuns();
  });
  opened.addEventListener('error', () => {
    if (opened.readyState === EventSource.CLOSED && followed === run.id) listenAgain = setTimeout(() => listen(run), 10000);
  });
}
function renderRuns(runs) {
  const body = $('runs');
  body.replaceChildren(...runs.map((run) => {
    const row = document.createElement('tr');
    const cells = [new Date(run.queuedAt).toLocaleString(), describe(run), run.exitCode === null ? '—' : String(run.exitCode)];
    for (const text of cells) { const cell = document.createElement('td'); cell.textContent = text; row.append(cell); }
    if (run.status === 'failed') row.children[1].className = 'failed';
    const link = document.createElement('a');
    link.href = config.base + '/runs/' + run.id + '/output.txt';
    link.textContent = run.outputLength > 0 ? 'Download' : '—';
    const cell = document.createElement('td');
    if (run.outputLength > 0) cell.append(link); else cell.textContent = '—';
    row.append(cell);
    return row;
  }));
  $('no-runs').hidden = runs.length > 0;
}
async function refreshRuns() {
  try { renderRuns((await call('GET', '/runs')).runs); } catch {}
}
const STOPPED_BY = { student: 'You stopped your workspace', coach: 'Your coach stopped your workspace', operator: "The server's operator stopped your workspace", idle: 'Your workspace was stopped' };
/** Why it stopped, in the student's words: by whom, when, and how to go on. */
function stoppedText(stopped) {
  const at = new Date(stopped.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  const why = stopped.by === 'idle' ? ' after ' + stopped.afterIdleMinutes + ' minutes without activity' : '';
  return (STOPPED_BY[stopped.by] || 'Your workspace was stopped') + ' at ' + at + why + '. Your files are kept: Open starts it again.';
}
function render() {
  const running = workspace.desiredState === 'running';
  $('stopped').hidden = !workspace.stopped;
  if (workspace.stopped) $('stopped').textContent = stoppedText(workspace.stopped);
  $('state').textContent = !running ? (workspace.observedState === 'running' ? 'Stopping…' : 'Stopped') : workspace.ready ? 'Running' : 'Starting…';
  $('message').textContent = workspace.statusMessage;
  $('open').disabled = running;
  $('stop').hidden = !running;
  $('open').hidden = running && !config.atEditorAddress && workspace.ready;
  // Going into the editor once it runs: said from the first second until the editor's own page says it.
  $('starting').hidden = workspace.ready || !(opening || (running && config.atEditorAddress));
  const up = running && workspace.ready;
  $('editor').hidden = !(up && !config.atEditorAddress);
  const run = workspace.run;
  const active = run && (run.status === 'queued' || run.status === 'running');
  $('run').disabled = !up || active;
  $('stop-run').hidden = !active;
  $('restart-run').hidden = !active;
  $('run-state').textContent = !up && !active ? 'Open your workspace to run your code.' : describe(run);
  const idle = workspace.idle;
  const warn = idle && idle.stopsAt && Date.now() >= Date.parse(idle.warnFrom);
  if (warn) {
    const minutes = Math.max(1, Math.round((Date.parse(idle.stopsAt) - Date.now()) / 60000));
    $('idle-text').textContent = 'Your workspace will be stopped in about ' + minutes + ' minute' + (minutes === 1 ? '' : 's') + ' because nothing has happened in it. Your files are kept.';
  }
  $('idle').hidden = !warn;
  // The Driver Station needs the workspace up (its robot runs there); closed when it goes down.
  $('ds-open').disabled = !up;
  if (!up) closeDriverStation();
  // The home nearly full, full, or not measurable in full: how much is used, what is refused, how to free it.
  const disk = workspace.disk;
  $('disk').hidden = !(disk && disk.message);
  $('disk').textContent = disk && disk.message ? disk.message : '';
  // A coach looking (read only), or asking to first (LOOK_CONSENT=ask), said while it lasts; their name is their own text: set as text.
  // The student's own answer is shown at once, and over a read begun before it (which still says asking).
  let look = workspace.lookedAt;
  if (look && look.asking && lookAnswered && lookAnswered.lookId === look.lookId) look = lookAnswered.accept ? { ...look, asking: false } : null;
  $('look').hidden = !look;
  $('look-ask').hidden = !(look && look.asking);
  $('looked').textContent = !look ? '' : 'Your coach ' + look.by + (look.asking ? ' asks to look' : ' is looking') + ' at your workspace (read only).';
  // A guest's workspace ends with their join code.
  $('guest').hidden = !workspace.guest;
  $('guest').textContent = !workspace.guest ? '' : 'You joined as a guest with a join code. At ' +
    new Date(workspace.guest.endsAt).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) +
    ', when the code ends, this workspace is backed up for your coach and then removed.';
  // The lessons that reached the home, newest first, and where each landed (names are the coach's text: set as text).
  const lessons = workspace.lessons || [];
  $('lessons').hidden = lessons.length === 0;
  $('lesson-list').replaceChildren(...lessons.map((lesson) => {
    const item = document.createElement('li');
    item.textContent = lesson.name + (lesson.version > 1 ? ', version ' + lesson.version : '') + ': in lessons/' + lesson.folder +
      (lesson.beside ? ', beside your lessons/' + lesson.name + ', which is as you left it.' : '.');
    return item;
  }));
}
// Set once the page goes into the editor: a second navigation (two reads that both saw it ready) would abort the first.
let leaving = false;
async function refresh() {
  if (leaving) return;
  let answer;
  try { answer = await call('GET', '/workspace'); } catch { return; }
  if (leaving) return;
  workspace = answer.workspace;
  // Into the editor: a navigation, not a reload (VS Code takes a reloaded page for a window reloaded, and skips its start, the README included).
  if (workspace.ready && (config.atEditorAddress || opening)) { leaving = true; if (workspace.editorUrl) location.assign(workspace.editorUrl); else location.replace(location.href); return; }
  if (workspace.run && followed !== workspace.run.id) { follow(workspace.run); refreshRuns(); }
  else if (workspace.run && workspace.run.status !== shownStatus) refreshRuns();
  shownStatus = workspace.run && workspace.run.status;
  render();
}
$('open').addEventListener('click', async () => {
  $('open').disabled = true;
  opening = true;
  $('state').textContent = 'Starting…';
  $('starting').hidden = false;
  try { await call('POST', '/workspace/open'); toast.hidden = true; refresh(); }
  catch (error) { opening = false; $('starting').hidden = true; if (workspace) render(); showToast(error.message); $('open').disabled = false; }
});
$('stop').addEventListener('click', async () => {
  $('stop').disabled = true;
  try { workspace = (await call('POST', '/workspace/stop')).workspace; opening = false; render(); showToast('Your workspace is stopping. Your files are kept; Open starts it again.', true); }
  catch (error) { showToast(error.message); }
  $('stop').disabled = false;
});
// The Driver Station: its page at the editor's address (where the robot's HALSim is), in a frame
// made when the student opens it and removed when they close it (the robot is then disabled).
function closeDriverStation() {
  $('ds-holder').replaceChildren();
  $('ds-open').hidden = false;
  $('ds-close').hidden = true;
}
$('ds-open').addEventListener('click', () => {
  const address = new URL('.cp/driver-station', new URL(config.editorUrl, location.href));
  // The editor on another origin (host mode): a tab of its own there, where its cookie is (a frame of another site gets none).
  if (address.origin !== location.origin) return void window.open(address.href, '_blank');
  const frame = document.createElement('iframe');
  frame.id = 'ds-frame';
  frame.title = 'Driver Station';
  frame.allow = 'gamepad';
  frame.src = address.href;
  $('ds-holder').replaceChildren(frame);
  $('ds-open').hidden = true;
  $('ds-close').hidden = false;
  frame.focus();
});
$('ds-close').addEventListener('click', closeDriverStation);
// Its page says how tall it is (from its frame only; a height, nothing else, within bounds).
window.addEventListener('message', (event) => {
  const frame = $('ds-frame');
  const height = event.data && event.data.driverStationHeight;
  if (frame && event.source === frame.contentWindow && Number.isFinite(height)) frame.style.height = Math.min(Math.max(height, 200), 3000) + 2 + 'px';
});
$('run').addEventListener('click', async () => {
  $('run').disabled = true;
  try { const { run } = await call('POST', '/runs'); follow(run); refresh(); refreshRuns(); }
  catch (error) { showToast(error.message); refresh(); }
});
$('stop-run').addEventListener('click', async () => {
  const run = workspace && workspace.run;
  if (!run) return;
  try { await call('POST', '/runs/' + run.id + '/stop'); refresh(); } catch (error) { showToast(error.message); }
});
$('restart-run').addEventListener('click', async () => {
  $('restart-run').disabled = true;
  $('run-state').textContent = 'Restarting…';
  try { const { run } = await call('POST', '/runs/restart'); follow(run); refresh(); refreshRuns(); }
  catch (error) { showToast(error.message); refresh(); }
  $('restart-run').disabled = false;
});
// A confirmation in the page (a dialog): resolves true when the student confirms.
function confirmAction(title, text, ok) {
  const dialog = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-ok').textContent = ok;
  dialog.showModal();
  return new Promise((resolve) => {
    const done = (answer) => { $('confirm-ok').onclick = null; $('confirm-cancel').onclick = null; dialog.onclose = null; dialog.close(); resolve(answer); };
    $('confirm-ok').onclick = () => done(true);
    $('confirm-cancel').onclick = () => done(false);
    dialog.onclose = () => done(false);
  });
}
// Reset and import replace files the editor has open: the workspace stops first (a run must be stopped by the student).
async function stopFirst() {
  const current = (await call('GET', '/workspace')).workspace;
  if (current.desiredState === 'running') { workspace = (await call('POST', '/workspace/stop')).workspace; opening = false; render(); }
  for (let tries = 0; tries < 240; tries++) {
    workspace = (await call('GET', '/workspace')).workspace;
    render();
    if (workspace.observedState !== 'running' && workspace.observedState !== 'starting') return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error('Your workspace is taking long to stop; try again in a moment.');
}
function runActive() {
  const run = workspace && workspace.run;
  return run && (run.status === 'queued' || run.status === 'running');
}
const STOP_NOTE = ' Your workspace is stopped first (Open starts it again after).';
$('reset').addEventListener('click', async () => {
  if (runActive()) return showToast('Your robot code is running: stop the run first (a reset replaces the files it runs from).');
  const sure = await confirmAction('Reset to starter?', 'Your home goes back to what a new workspace gets: the starter project, and the editor as new. A backup of your whole home is made first, so nothing is lost: your coach can bring it back.' + STOP_NOTE, 'Back up, then reset');
  if (!sure) return;
  $('reset').disabled = true;
  try {
    await stopFirst();
    const answer = await call('POST', '/workspace/reset');
    workspace = answer.workspace;
    render();
    showToast(answer.backup ? 'Your project is back to the starter. Everything that was in your home is in the backup ' + answer.backup + ' (your coach can bring it back). Open starts your workspace.' : 'Your project is back to the starter. Open starts your workspace.');
  } catch (error) { showToast(error.message); }
  $('reset').disabled = false;
});
const PHASES = [['checking', 'Checking the address'], ['cloning', 'Cloning'], ['backing-up', 'Backing up your home'], ['copying', 'Copying into your home']];
const megabytes = (bytes) => (bytes / 1048576).toFixed(1) + ' MB';
let importPolling;
function renderImport(record) {
  const box = $('import-progress');
  const shown = !box.hidden;
  box.hidden = false;
  const at = PHASES.findIndex(([phase]) => phase === record.phase);
  const reached = record.phase === 'done' ? PHASES.length : at;
  $('import-phases').replaceChildren(...PHASES.map(([phase, label], index) => {
    const item = document.createElement('li');
    item.textContent = label + (index === at && record.phase !== 'checking' ? ' (' + megabytes(record.bytes) + ')' : '') + (index === at ? '…' : '');
    if (index === at) item.className = 'now';
    else if (index < reached) item.className = 'past';
    return item;
  }));
  const busy = record.phase !== 'done' && record.phase !== 'failed';
  $('import').disabled = busy;
  $('reset').disabled = busy;
  if (record.phase === 'done') {
    $('import-text').textContent = 'Done: your project is now ' + record.url + (record.subfolder ? ' (' + record.subfolder + ')' : '') + ' at commit ' + (record.commit || '').slice(0, 7) + '.' + (record.backup ? ' What was in your home before is in the backup ' + record.backup + ' (your coach can bring it back).' : '') + ' Open starts your workspace.';
  } else if (record.phase === 'failed') {
    $('import-text').textContent = 'Import failed: ' + record.error.message + ' Your home is as it was.';
  } else $('import-text').textContent = 'Importing ' + record.url + '…';
  $('import-text').className = record.phase === 'failed' ? 'failed' : '';
  // Where it failed is in the message: the list would only say where it did not get.
  $('import-phases').hidden = record.phase === 'failed';
  if (!shown) box.scrollIntoView({ block: 'end' });
}
async function followImport() {
  clearTimeout(importPolling);
  let record;
  try { record = (await call('GET', '/workspace/import')).import; } catch { importPolling = setTimeout(followImport, 2000); return; }
  if (!record) return;
  renderImport(record);
  if (record.phase !== 'done' && record.phase !== 'failed') importPolling = setTimeout(followImport, 1000);
  else refresh();
}
$('import-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  if (runActive()) return showToast('Your robot code is running: stop the run first (an import replaces the files it runs from).');
  const body = { url: $('import-url').value.trim(), branch: $('import-branch').value.trim(), subfolder: $('import-subfolder').value.trim() };
  const what = body.url + (body.branch ? ', branch ' + body.branch : '') + (body.subfolder ? ', folder ' + body.subfolder : '');
  const sure = await confirmAction("Import your team's project?", 'The project in your home is replaced by ' + what + '. A backup of your whole home is made first, so nothing is lost: your coach can bring it back.' + STOP_NOTE, 'Back up, then import');
  if (!sure) return;
  $('import').disabled = true;
  renderImport({ phase: 'checking', bytes: 0, url: body.url });
  try {
    await stopFirst();
    renderImport((await call('POST', '/workspace/import', body)).import);
    followImport();
  } catch (error) {
    $('import').disabled = false;
    $('reset').disabled = false;
    $('import-progress').hidden = true;
    showToast(error.message);
  }
});
// The hand raised for help: its place in the queue, then the coach coming; read with the workspace
// every 2 s (a place moves whenever anyone's request does). A read begun before the student's own
// raise or withdrawal answered is not shown (it would put back what they just changed).
let help;
let helpKnown = false;
let helpChanges = 0;
function renderHelp() {
  const open = Boolean(help) && (help.state === 'waiting' || help.state === 'taken');
  $('help-form').hidden = open;
  $('help-open').hidden = !open;
  if (!open) return;
  const coach = help.takenBy && (help.takenBy.name || help.takenBy.email);
  $('help-text').textContent = help.state === 'taken' ? coach + ' is coming.' : 'You are number ' + help.place + ' in the queue.';
  $('help-said').textContent = help.message ? 'You wrote: ' + help.message : '';
  $('help-said').hidden = !help.message;
}
async function refreshHelp() {
  const changes = helpChanges;
  let answer;
  // Unread at first: the form is offered (a raise says what is wrong); later, what was last read stays.
  try { answer = (await call('GET', '/help')).help; } catch { if (helpKnown) return; answer = null; }
  if (changes !== helpChanges) return;
  help = answer;
  helpKnown = true;
  renderHelp();
}
function helpChanged(answer) {
  helpChanges++;
  help = answer;
  helpKnown = true;
  renderHelp();
}
$('help-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('help-ask').disabled = true;
  const message = $('help-message').value.trim();
  try { helpChanged((await call('POST', '/help', message ? { message } : {})).help); $('help-message').value = ''; toast.hidden = true; }
  catch (error) { showToast(error.message); refreshHelp(); }
  $('help-ask').disabled = false;
});
$('help-withdraw').addEventListener('click', async () => {
  $('help-withdraw').disabled = true;
  try { helpChanged((await call('POST', '/help/withdraw')).help); showToast('You took your request for help back.', true); }
  catch (error) { showToast(error.message); refreshHelp(); }
  $('help-withdraw').disabled = false;
});
// The student's answer to a coach asking to look (the same as the editor's: one answer for both).
async function answerLook(accept) {
  const look = workspace && workspace.lookedAt;
  if (!look) return;
  $('look-accept').disabled = true;
  $('look-decline').disabled = true;
  try {
    await call('POST', '/looks/' + look.lookId + (accept ? '/accept' : '/decline'));
    lookAnswered = { lookId: look.lookId, accept };
    toast.hidden = true;
    render();
  } catch (error) { showToast(error.message); refresh(); }
  $('look-accept').disabled = false;
  $('look-decline').disabled = false;
}
$('look-accept').addEventListener('click', () => answerLook(true));
$('look-decline').addEventListener('click', () => answerLook(false));
$('keep').addEventListener('click', async () => {
  try { workspace = (await call('POST', '/workspace/keep')).workspace; render(); showToast('Your workspace keeps running.', true); }
  catch (error) { showToast(error.message); }
});
refresh();
refreshRuns();
refreshHelp();
// An import in progress (the page reloaded meanwhile) is followed again.
call('GET', '/workspace/import').then(({ import: record }) => { if (record && record.phase !== 'done' && record.phase !== 'failed') followImport(); }, () => undefined);
setInterval(() => { if (!document.hidden) { refresh(); refreshHelp(); } }, ${REFRESH_MS});
// While the editor starts and this page takes the student into it once it is ready: asked more often.
setInterval(() => { if (!document.hidden && workspace && workspace.desiredState === 'running' && !workspace.ready && (opening || config.atEditorAddress)) refresh(); }, ${STARTING_REFRESH_MS});
</script>`,
  );
}
