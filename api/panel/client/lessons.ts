/**
 * Lessons as the coach sees them (issue 43 item 4): the list (each lesson's latest version, its
 * files and how its handouts stand) with New lesson, made from a folder picked in the browser
 * (packed here into a .tar.gz with modern-tar, imported only then) or from a .zip/.tar/.tar.gz archive;
 * and a lesson's page: hand it out to everyone or to chosen students, each student's delivery (where
 * it landed, beside their own folder for a later version, why it failed), Reset of one student's
 * folder after a backup, Collect now or at a deadline, each collection's snapshots and its download,
 * and a new version of its files. Live: every `lessons` change (a delivery landing, a snapshot
 * taken) reads the page again. Names and messages are shown as text (Preact escapes every value).
 */
import type { VNode } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { client, messageOf, ok } from './api.ts';
import { html } from './html.ts';
import { Ago, ConfirmDialog, Empty, kib, Link, Loading, navigate, Notice, Time, useResource, type Confirmation } from './ui.ts';
import type { ClassStudent, Lesson, LessonDetail } from '../../../src/wire/schemas.ts';

type Delivery = LessonDetail['students'][number];
type Collection = LessonDetail['collections'][number];
type Snapshot = Collection['snapshots'][number];

/** What a coach chose: a folder's files (packed here), an archive sent as it is, or a git repository the server clones. */
type Chosen = { kind: 'folder'; folder: string; files: File[] } | { kind: 'archive'; file: File } | { kind: 'git'; url: string; subfolder: string };

/** A notice for one part of a page, beside what it is about. */
type Said = { kind: 'ok' | 'error'; text: string } | undefined;

const plural = (count: number, one: string, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

/** modern-tar, imported at the first folder picked (the server bundles it at its first request, a few seconds once per process). */
const packer = () => import('modern-tar');

/**
 * A folder's files as one .tar.gz, made in the browser: each file under its path in the folder
 * (the folder's own name first, which the server takes off), streamed through modern-tar's packer
 * and gzip, so that no file is held whole. A file that begins with `#!` (a script: `gradlew`) is
 * packed executable, as it was on the coach's disk; the browser does not say a file's mode.
 */
async function packFolder(files: File[]): Promise<Blob> {
  const { createTarPacker } = await packer().catch((failure: unknown) => {
    throw new Error('The folder packer could not be loaded from the control plane; try again.', { cause: failure });
  });
  const { readable, controller } = createTarPacker();
  const packed = new Response(readable.pipeThrough(new CompressionStream('gzip'))).blob();
  try {
    for (const file of files) {
      const script = (await file.slice(0, 2).text()) === '#!';
      const header = { name: file.webkitRelativePath || file.name, size: file.size, mode: script ? 0o755 : 0o644, mtime: new Date(file.lastModified) };
      await file.stream().pipeTo(controller.add(header));
    }
    controller.finalize();
  } catch (failure) {
    controller.error(failure);
    packed.catch(() => undefined);
    throw new Error(`The folder could not be read (${messageOf(failure)}); choose it again.`, { cause: failure });
  }
  return packed;
}

/** The request's body for an upload: the archive's bytes as they are (openapi-typescript types a binary body as a string). */
const archiveBody = (bytes: Blob) => ({
  body: bytes as unknown as string,
  bodySerializer: (body: string) => body,
  headers: { 'content-type': bytes.type === 'application/x-tar' || bytes.type === 'application/zip' ? bytes.type : 'application/gzip' },
});

/** The bytes to upload for files chosen (a folder is packed first). */
const bytesOf = async (chosen: Exclude<Chosen, { kind: 'git' }>): Promise<Blob> => (chosen.kind === 'folder' ? packFolder(chosen.files) : chosen.file);

/** A git repository's body for the API: its address, and its subfolder when one is given. */
const gitBody = (chosen: Extract<Chosen, { kind: 'git' }>) => ({ url: chosen.url, ...(chosen.subfolder ? { subfolder: chosen.subfolder } : {}) });

/** What the button says while a choice is made into a lesson. */
const busyText = (chosen: Chosen) => (chosen.kind === 'folder' ? 'Packing the folder…' : chosen.kind === 'git' ? 'Cloning…' : 'Uploading…');

/** What was chosen, in a line: the folder and how much it holds, or the archive. */
function chosenText(chosen: Chosen): string {
  if (chosen.kind === 'archive') return `The archive ${chosen.file.name} (${kib(chosen.file.size)}).`;
  if (chosen.kind === 'git')
    return `The repository ${chosen.url}${chosen.subfolder ? `, its folder ${chosen.subfolder}` : ''} (cloned by the server as a student's import is).`;
  const bytes = chosen.files.reduce((sum, file) => sum + file.size, 0);
  return `The folder ${chosen.folder}: ${plural(chosen.files.length, 'file')}, ${kib(bytes)}.`;
}

/**
 * A folder or an archive of a lesson's files, or a git repository (https, and a folder of it): the
 * last choice replaces the others. `onChoose` hears what was chosen (undefined: nothing, or a
 * folder without a file).
 */
function FilesPicker({ id, onChoose }: { id: string; onChoose: (chosen: Chosen | undefined) => void }): VNode {
  const folderInput = useRef<HTMLInputElement>(null);
  const archiveInput = useRef<HTMLInputElement>(null);
  const [git, setGit] = useState({ url: '', subfolder: '' });
  const typeGit = (next: { url: string; subfolder: string }) => {
    setGit(next);
    if (folderInput.current) folderInput.current.value = '';
    if (archiveInput.current) archiveInput.current.value = '';
    onChoose(next.url.trim() ? { kind: 'git', url: next.url.trim(), subfolder: next.subfolder.trim() } : undefined);
  };
  const pickFolder = (event: Event) => {
    setGit({ url: '', subfolder: '' });
    if (archiveInput.current) archiveInput.current.value = '';
    const files = [...((event.target as HTMLInputElement).files ?? [])];
    const folder = files[0]?.webkitRelativePath.split('/')[0] ?? '';
    // Fetched while the coach goes on (names the lesson), not when they press the button; a failure is said then.
    if (files.length > 0) packer().catch(() => undefined);
    onChoose(files.length === 0 ? undefined : { kind: 'folder', folder, files });
  };
  const pickArchive = (event: Event) => {
    setGit({ url: '', subfolder: '' });
    if (folderInput.current) folderInput.current.value = '';
    const file = (event.target as HTMLInputElement).files?.[0];
    onChoose(file ? { kind: 'archive', file } : undefined);
  };
  return html`<div class="files-picker">
    <label>A folder <input id=${`${id}-folder`} type="file" webkitdirectory ref=${folderInput} onChange=${pickFolder} /></label>
    <span class="or">or</span>
    <label
      >An archive (.zip, .tar, .tar.gz)
      <input
        id=${`${id}-archive`}
        type="file"
        accept=".zip,.tar,.gz,.tgz,application/zip,application/gzip,application/x-tar"
        ref=${archiveInput}
        onChange=${pickArchive}
    /></label>
    <span class="or">or</span>
    <label
      >A git repository (https://)
      <input
        id=${`${id}-git`}
        type="url"
        placeholder="https://github.com/your-team/lessons"
        autocomplete="off"
        value=${git.url}
        onInput=${(event: Event) => typeGit({ ...git, url: (event.target as HTMLInputElement).value })}
    /></label>
    <label
      >Its folder (optional)
      <input
        id=${`${id}-git-folder`}
        placeholder="the whole repository"
        autocomplete="off"
        value=${git.subfolder}
        onInput=${(event: Event) => typeGit({ ...git, subfolder: (event.target as HTMLInputElement).value })}
    /></label>
  </div>`;
}

/** How a lesson's handouts stand, in words (nothing handed out yet, or the counts). */
function HandoutCounts({ deliveries }: { deliveries: Lesson['deliveries'] }): VNode {
  const { pending, delivered, failed } = deliveries;
  if (pending + delivered + failed === 0) return html`<span class="muted">not handed out yet</span>`;
  return html`<span class="handouts">
    <span class="state running">${delivered} delivered</span>
    ${pending > 0 ? html` <span class="state waiting">${pending} on the way</span>` : null}
    ${failed > 0 ? html` <span class="state failed">${failed} failed</span>` : null}
  </span>`;
}

/** The New lesson form: a name and a folder or an archive; the API's refusal (an unsafe entry, too large) is shown at the form. */
function NewLesson(): VNode {
  const [name, setName] = useState('');
  const [chosen, setChosen] = useState<Chosen | undefined>(undefined);
  const [busy, setBusy] = useState<string | undefined>(undefined);
  const [said, setSaid] = useState<Said>(undefined);
  const choose = (next: Chosen | undefined) => {
    setChosen(next);
    setSaid(undefined);
    // A folder names the lesson unless the coach named it already.
    if (next?.kind === 'folder' && name.trim() === '') setName(next.folder);
  };
  const create = async (event: Event) => {
    event.preventDefault();
    if (!chosen) return;
    setSaid(undefined);
    try {
      setBusy(busyText(chosen));
      const { lesson } =
        chosen.kind === 'git'
          ? await ok(client.POST('/admin/lessons/git', { body: { name: name.trim(), ...gitBody(chosen) } }))
          : await ok(client.POST('/admin/lessons', { params: { query: { name: name.trim() } }, ...archiveBody(await bytesOf(chosen)) }));
      navigate(`/panel/lessons/${lesson.id}`);
    } catch (failure) {
      setSaid({ kind: 'error', text: messageOf(failure) });
    } finally {
      setBusy(undefined);
    }
  };
  return html`<form class="card lesson-form" onSubmit=${create} aria-labelledby="new-lesson-title">
    <h2 id="new-lesson-title">New lesson</h2>
    <label
      >Name
      <input
        required
        maxlength="60"
        value=${name}
        placeholder="Drive Intro"
        aria-describedby="new-lesson-name-hint"
        onInput=${(event: Event) => setName((event.target as HTMLInputElement).value)}
    /></label>
    <p class="muted small" id="new-lesson-name-hint">The folder it lands in, under <code>lessons/</code> of each home.</p>
    <${FilesPicker} id="new-lesson" onChoose=${choose} />
    <p class="muted small">
      ${chosen ? chosenText(chosen) : 'Choose the folder of the lesson (as it should land in each home), an archive of it, or a git repository.'}
    </p>
    ${said ? html`<${Notice} kind=${said.kind}>${said.text}<//>` : null}
    <div><button type="submit" disabled=${busy !== undefined || !chosen}>${busy ?? 'Create the lesson'}</button></div>
  </form>`;
}

/** The Lessons page: the list, live, and New lesson. */
export function LessonsPage(): VNode {
  const { data, error } = useResource(async () => (await ok(client.GET('/admin/lessons'))).lessons, 'lessons', ['lessons']);
  return html`<section aria-labelledby="lessons-title">
    <h1 id="lessons-title">Lessons</h1>
    <p>
      A lesson is a folder you hand out: it lands in each student's home under <code>${'lessons/<name>/'}</code>, whether their workspace runs or not, and never
      over their own files. Collect it at the end, at a button or at a deadline, as one archive with a folder per student.
    </p>
    <${NewLesson} />
    ${error ? html`<${Notice} kind="error">${error}<//>` : null}
    <h2>Your lessons</h2>
    ${
      !data
        ? html`<${Loading} error=${error} />`
        : data.length === 0
          ? html`<${Empty}>No lesson yet: make one above from the folder you want every student to start from.<//>`
          : html`<div class="scroll">
              <table class="lessons">
                <caption class="visually-hidden">
                  Lessons, by name
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Lesson</th>
                    <th scope="col">Version</th>
                    <th scope="col" class="number">Files</th>
                    <th scope="col" class="number">Size</th>
                    <th scope="col">Handed out</th>
                    <th scope="col">Made</th>
                  </tr>
                </thead>
                <tbody>
                  ${data.map(
                    (lesson) =>
                      html`<tr key=${lesson.id}>
                        <th scope="row"><${Link} to=${`/panel/lessons/${lesson.id}`}>${lesson.name}<//></th>
                        <td>v${lesson.latest.version}</td>
                        <td class="number">${lesson.latest.files}</td>
                        <td class="number">${kib(lesson.latest.sizeBytes)}</td>
                        <td><${HandoutCounts} deliveries=${lesson.deliveries} /></td>
                        <td><${Ago} iso=${lesson.createdAt} /> <span class="muted">by ${lesson.createdBy}</span></td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
    }
  </section>`;
}

/** One student of the class with their deliveries of the lesson, newest version first. */
interface StudentRow {
  workspaceId: string;
  slug: string;
  name: string;
  deliveries: Delivery[];
}

/** The class's students with a workspace (by name), and anyone the lesson reached who is not among them (by slug). */
function studentRows(detail: LessonDetail, students: ClassStudent[]): StudentRow[] {
  const rows = new Map<string, StudentRow>();
  for (const { student, workspace } of students)
    if (workspace) rows.set(workspace.id, { workspaceId: workspace.id, slug: workspace.slug, name: student.name || student.email, deliveries: [] });
  for (const delivery of detail.students) {
    const row = rows.get(delivery.workspaceId) ?? { workspaceId: delivery.workspaceId, slug: delivery.slug, name: delivery.slug, deliveries: [] };
    row.deliveries.push(delivery);
    rows.set(delivery.workspaceId, row);
  }
  return [...rows.values()];
}

const DELIVERY_STATES: Record<Delivery['state'], { label: string; style: string }> = {
  delivered: { label: 'Delivered', style: 'running' },
  pending: { label: 'On the way', style: 'waiting' },
  failed: { label: 'Failed', style: 'failed' },
};

/** Where one delivery stands: its state, the folder it landed in (beside the student's own for a later version), or why it failed. */
function DeliveryState({ delivery, lesson }: { delivery: Delivery; lesson: string }): VNode {
  const state = DELIVERY_STATES[delivery.state];
  const folder = delivery.folder && delivery.state === 'delivered' ? delivery.folder : undefined;
  return html`<span class=${`state ${state.style}`}>${state.label}</span> ${folder ? html` in <code>lessons/${folder}</code>` : null}
    ${
      folder && folder !== lesson
        ? html`<div class="muted small">Landed beside their own <code>lessons/${lesson}</code>, which is as they left it.</div>`
        : null
    }
    ${delivery.state === 'failed' && delivery.message ? html`<div class="failed small">${delivery.message}</div>` : null}
    ${delivery.state === 'pending' && delivery.message ? html`<div class="muted small">Trying again: ${delivery.message}</div>` : null}`;
}

/** A student's last reset of the lesson's folder: asked and on its way, or done with the backup that holds what it replaced. */
function ResetState({ delivery }: { delivery: Delivery | undefined }): VNode | null {
  if (!delivery) return null;
  if (delivery.resetRequestedAt) return html`<div class="muted small">Backing up, then resetting…</div>`;
  if (!delivery.resetAt) return null;
  return html`<div class="small">
    Reset <${Ago} iso=${delivery.resetAt} />${
      delivery.resetBackup ? html`; their folder before it is in the backup <${Link} to="/panel/backups"><code>${delivery.resetBackup}</code><//>` : null
    }.
  </div>`;
}

/** How one student's snapshot went: taken (what), missing, failed (why), or still to take. */
function SnapshotState({ snapshot }: { snapshot: Snapshot }): VNode {
  switch (snapshot.state) {
    case 'taken':
      return html`<span class="state running">Taken</span>
        <span class="muted small">
          ${plural(snapshot.files, 'file')}, ${kib(snapshot.sizeBytes)}: ${snapshot.folders.map((folder) => `lessons/${folder}`).join(', ')}</span
        >`;
    case 'missing':
      return html`<span class="state">Missing</span> <span class="muted small">No folder of the lesson was in their home.</span>`;
    case 'failed':
      return html`<span class="state failed">Failed</span> <span class="failed small">${snapshot.message}</span>`;
    case 'pending':
      return html`<span class="state waiting">Taking…</span>`;
  }
}

/** One collection: when it is due, whether it is done, each student's snapshot, and its download once done. */
function CollectionCard({ lessonId, collection, names }: { lessonId: string; collection: Collection; names: Map<string, string> }): VNode {
  const due = Date.parse(collection.dueAt) > Date.now();
  const taken = collection.snapshots.filter((snapshot) => snapshot.state === 'taken').length;
  const download = `/admin/lessons/${lessonId}/collections/${collection.id}/archive`;
  return html`<article class="card collection" aria-labelledby=${`collection-${collection.id}`}>
    <h3 id=${`collection-${collection.id}`}>${collection.doneAt ? 'Collected ' : 'Due '}<${Time} iso=${collection.doneAt ?? collection.dueAt} /></h3>
    <p class="muted small">
      Asked by ${collection.requestedBy}.${' '}
      ${
        collection.doneAt
          ? html`Done <${Ago} iso=${collection.doneAt} />: ${taken} of ${plural(collection.snapshots.length, 'student')} collected.`
          : due
            ? 'Nothing is taken before then.'
            : 'Taking the snapshots…'
      }
    </p>
    ${
      collection.doneAt
        ? html`<a class="button" href=${download} download aria-label=${`Download the collection of ${new Date(collection.doneAt).toLocaleString()}`}
            >Download (.tar.gz)</a
          >`
        : null
    }
    ${
      collection.snapshots.length === 0
        ? collection.doneAt
          ? html`<p class="muted small">The lesson had reached no one: nothing to collect.</p>`
          : null
        : html`<table class="snapshots">
            <caption class="visually-hidden">
              Each student's snapshot
            </caption>
            <thead>
              <tr>
                <th scope="col">Student</th>
                <th scope="col">Snapshot</th>
              </tr>
            </thead>
            <tbody>
              ${collection.snapshots.map(
                (snapshot) =>
                  html`<tr key=${snapshot.workspaceId}>
                    <th scope="row">${names.get(snapshot.workspaceId) ?? snapshot.slug}</th>
                    <td><${SnapshotState} snapshot=${snapshot} /></td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
  </article>`;
}

/** Chooses students to hand the lesson to: the class's students with a workspace, as checkboxes; then hands it to those chosen. */
function StudentPicker({
  rows,
  version,
  onHandOut,
  onCancel,
}: {
  rows: StudentRow[];
  version: number;
  onHandOut: (ids: string[]) => Promise<void>;
  onCancel: () => void;
}): VNode {
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const [busy, setBusy] = useState(false);
  const toggle = (id: string) =>
    setPicked((before) => {
      const next = new Set(before);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    try {
      await onHandOut([...picked]);
    } finally {
      setBusy(false);
    }
  };
  const has = (row: StudentRow) => row.deliveries.find((delivery) => delivery.version === version && delivery.state !== 'failed');
  return html`<form class="picker" onSubmit=${submit}>
    <fieldset>
      <legend>Hand version ${version} to</legend>
      ${
        rows.length === 0
          ? html`<p class="muted">No student has a workspace yet.</p>`
          : html`<ul class="picks">
              ${rows.map(
                (row) =>
                  html`<li key=${row.workspaceId}>
                    <label
                      ><input type="checkbox" checked=${picked.has(row.workspaceId)} onChange=${() => toggle(row.workspaceId)} /> ${row.name}
                      <span class="muted small">${row.slug}${has(row) ? ` · has v${version}` : ''}</span></label
                    >
                  </li>`,
              )}
            </ul>`
      }
    </fieldset>
    <div class="actions-row">
      <button type="submit" disabled=${busy || picked.size === 0}>${busy ? 'Handing out…' : `Hand out to ${plural(picked.size, 'student')}`}</button>
      <button type="button" onClick=${onCancel}>Cancel</button>
      <button type="button" class="link" onClick=${() => setPicked(new Set(rows.map((row) => row.workspaceId)))}>Choose everyone</button>
      <button type="button" class="link" onClick=${() => setPicked(new Set())}>Choose no one</button>
    </div>
  </form>`;
}

/** The time in a datetime-local input's own form (the browser's time zone), an hour from now: the default deadline. */
function inAnHour(): string {
  const at = new Date(Date.now() + 3_600_000);
  at.setSeconds(0, 0);
  return new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** A lesson's page (see the file comment). */
export function LessonPage({ lessonId }: { lessonId: string }): VNode {
  const lesson = useResource(() => ok(client.GET('/admin/lessons/{lessonId}', { params: { path: { lessonId } } })), `lesson-${lessonId}`, ['lessons']);
  const klass = useResource(async () => (await ok(client.GET('/admin/class'))).students, 'lesson-class', ['users', 'workspaces']);
  const [picking, setPicking] = useState(false);
  const [handoutSaid, setHandoutSaid] = useState<Said>(undefined);
  const [collectSaid, setCollectSaid] = useState<Said>(undefined);
  const [versionSaid, setVersionSaid] = useState<Said>(undefined);
  const [handingOut, setHandingOut] = useState(false);
  const [collecting, setCollecting] = useState(false);
  const [uploading, setUploading] = useState<string | undefined>(undefined);
  const [deadline, setDeadline] = useState(inAnHour);
  const [chosen, setChosen] = useState<Chosen | undefined>(undefined);
  const [confirmation, setConfirmation] = useState<Confirmation | undefined>(undefined);
  const detail = lesson.data;
  if (!detail)
    return html`<section>
      <p><${Link} to="/panel/lessons">← Lessons<//></p>
      ${lesson.error ? html`<${Notice} kind="error">${lesson.error}<//>` : null}
      <${Loading} error=${lesson.error} />
    </section>`;
  const { name, latest } = detail.lesson;
  const rows = studentRows(detail, klass.data ?? []);
  const names = new Map(rows.map((row) => [row.workspaceId, row.name]));
  const reached = rows.filter((row) => row.deliveries.some((delivery) => delivery.state === 'delivered')).length;
  const path = { params: { path: { lessonId } } };

  const handOut = async (body: { all: true } | { workspaceIds: string[] }) => {
    setHandoutSaid(undefined);
    try {
      const answer = await ok(client.POST('/admin/lessons/{lessonId}/handout', { ...path, body }));
      setHandoutSaid({
        kind: 'ok',
        text:
          answer.students === 0
            ? `Everyone chosen has version ${answer.version} already (or has it on its way).`
            : `Version ${answer.version} is on its way to ${plural(answer.students, 'student')}.`,
      });
      setPicking(false);
    } catch (failure) {
      setHandoutSaid({ kind: 'error', text: messageOf(failure) });
    } finally {
      lesson.reload();
    }
  };
  const handOutToEveryone = async () => {
    setHandingOut(true);
    await handOut({ all: true });
    setHandingOut(false);
  };

  const reset = (row: StudentRow, delivery: Delivery) =>
    setConfirmation({
      title: `Reset ${row.name}'s ${name}?`,
      body: html`<p>
        Their folder <code>lessons/${delivery.folder ?? name}</code> becomes the handed-out files of version ${delivery.version} again. Their home is backed up
        first, so their changes to it are kept in that backup (listed on the Backups page); this page names it once the reset is done.
      </p>`,
      action: 'Back up and reset',
      run: async () => {
        await ok(client.POST('/admin/lessons/{lessonId}/reset', { ...path, body: { workspaceId: row.workspaceId } }));
        lesson.reload();
      },
    });

  const collect = async (dueAt?: string) => {
    setCollecting(true);
    setCollectSaid(undefined);
    try {
      // The collection shows below at once: when it is due, then each student's snapshot as it is taken.
      await ok(client.POST('/admin/lessons/{lessonId}/collections', { ...path, body: dueAt === undefined ? {} : { dueAt } }));
    } catch (failure) {
      setCollectSaid({ kind: 'error', text: messageOf(failure) });
    } finally {
      setCollecting(false);
      lesson.reload();
    }
  };
  const collectAt = (event: Event) => {
    event.preventDefault();
    const at = new Date(deadline);
    if (Number.isNaN(at.getTime())) return setCollectSaid({ kind: 'error', text: 'Choose the date and time to collect at.' });
    void collect(at.toISOString());
  };

  const upload = async (event: Event) => {
    event.preventDefault();
    if (!chosen) return;
    setVersionSaid(undefined);
    try {
      setUploading(busyText(chosen));
      const answer =
        chosen.kind === 'git'
          ? await ok(client.POST('/admin/lessons/{lessonId}/versions/git', { ...path, body: gitBody(chosen) }))
          : await ok(client.POST('/admin/lessons/{lessonId}/versions', { ...path, ...archiveBody(await bytesOf(chosen)) }));
      (event.target as HTMLFormElement).reset();
      setChosen(undefined);
      setHandoutSaid({ kind: 'ok', text: `Version ${answer.lesson.latest.version} is made: hand it out to send it.` });
    } catch (failure) {
      setVersionSaid({ kind: 'error', text: messageOf(failure) });
    } finally {
      setUploading(undefined);
      lesson.reload();
    }
  };

  return html`<section aria-labelledby="lesson-title">
    <p><${Link} to="/panel/lessons">← Lessons<//></p>
    <h1 id="lesson-title">${name}</h1>
    <p class="counts">
      Version ${latest.version} · ${plural(latest.files, 'file')}, ${kib(latest.sizeBytes)} · lands in <code>lessons/${name}/</code>
      ${` · reached ${reached} of ${plural(rows.length, 'student')}`}
    </p>
    ${lesson.error ? html`<${Notice} kind="error">${lesson.error}<//>` : null}

    <div class="lesson-actions">
      <section class="card" aria-labelledby="handout-title">
        <h2 id="handout-title">Hand out version ${latest.version}</h2>
        <p class="muted small">
          It lands in each chosen home under <code>lessons/</code>, whether the workspace runs or not. Whoever has it already is left as they are, and nothing
          of a student's is overwritten: where a folder of that name is there, it lands beside it.
        </p>
        <div class="actions-row">
          <button type="button" onClick=${handOutToEveryone} disabled=${handingOut}>${handingOut ? 'Handing out…' : 'Hand out to everyone'}</button>
          <button type="button" aria-expanded=${picking} onClick=${() => setPicking(!picking)}>Hand out to chosen students</button>
        </div>
      </section>
      <section class="card" aria-labelledby="collect-title">
        <h2 id="collect-title">Collect</h2>
        <p class="muted small">
          A snapshot of each student's folders of the lesson, from their home whether the workspace runs or not: one archive with a folder per student.
        </p>
        <div class="actions-row">
          <button type="button" onClick=${() => collect()} disabled=${collecting}>Collect now</button>
          <form class="inline" onSubmit=${collectAt}>
            <label for="collect-at">or at</label>
            <input
              id="collect-at"
              type="datetime-local"
              required
              value=${deadline}
              onInput=${(event: Event) => setDeadline((event.target as HTMLInputElement).value)}
            />
            <button type="submit" disabled=${collecting}>Collect at this time</button>
          </form>
        </div>
      </section>
    </div>
    ${
      picking
        ? html`<${StudentPicker}
            rows=${rows}
            version=${latest.version}
            onHandOut=${(ids: string[]) => handOut({ workspaceIds: ids })}
            onCancel=${() => setPicking(false)}
          />`
        : null
    }
    ${handoutSaid ? html`<${Notice} kind=${handoutSaid.kind} onClose=${() => setHandoutSaid(undefined)}>${handoutSaid.text}<//>` : null}
    ${collectSaid ? html`<${Notice} kind=${collectSaid.kind} onClose=${() => setCollectSaid(undefined)}>${collectSaid.text}<//>` : null}

    <h2 id="students-title">Students</h2>
    ${klass.error ? html`<${Notice} kind="error">${klass.error}<//>` : null}
    ${
      rows.length === 0
        ? html`<${Empty}>No student has a workspace yet: the lesson reaches each student once they have one.<//>`
        : html`<div class="scroll">
            <table class="deliveries" aria-labelledby="students-title">
              <thead>
                <tr>
                  <th scope="col">Student</th>
                  <th scope="col">Version</th>
                  <th scope="col">Delivery</th>
                  <th scope="col"><span class="visually-hidden">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                ${rows.map((row) => {
                  const [newest, ...earlier] = row.deliveries;
                  const delivered = row.deliveries.find((delivery) => delivery.state === 'delivered');
                  return html`<tr key=${row.workspaceId}>
                    <th scope="row">${row.name} <span class="muted small">${row.slug}</span></th>
                    <td>${newest ? `v${newest.version}` : html`<span class="muted">—</span>`}</td>
                    <td>
                      ${newest ? html`<${DeliveryState} delivery=${newest} lesson=${name} />` : html`<span class="muted">Not handed out</span>`}
                      ${earlier.map(
                        (delivery) =>
                          html`<div class="muted small" key=${delivery.version}>
                            v${delivery.version}:${' '}
                            ${delivery.folder && delivery.state === 'delivered' ? html`in <code>lessons/${delivery.folder}</code>` : DELIVERY_STATES[delivery.state].label.toLowerCase()}
                          </div>`,
                      )}
                      <${ResetState} delivery=${delivered} />
                    </td>
                    <td class="actions">
                      ${
                        delivered
                          ? html`<button
                              type="button"
                              disabled=${delivered.resetRequestedAt !== null}
                              onClick=${() => reset(row, delivered)}
                              aria-label=${`Reset ${row.name}'s folder`}
                            >
                              Reset
                            </button>`
                          : null
                      }
                    </td>
                  </tr>`;
                })}
              </tbody>
            </table>
          </div>`
    }

    <h2>Collections</h2>
    ${
      detail.collections.length === 0
        ? html`<${Empty}>Not collected yet: Collect above, now or at a deadline.<//>`
        : html`<div class="collections">
            ${detail.collections.map(
              (collection) => html`<${CollectionCard} key=${collection.id} lessonId=${lessonId} collection=${collection} names=${names} />`,
            )}
          </div>`
    }

    <h2>Versions</h2>
    <div class="scroll">
      <table class="versions">
        <caption class="visually-hidden">
          The lesson's versions, newest first
        </caption>
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col" class="number">Files</th>
            <th scope="col" class="number">Size</th>
            <th scope="col">Made</th>
          </tr>
        </thead>
        <tbody>
          ${detail.versions.map(
            (version) =>
              html`<tr key=${version.version}>
                <th scope="row">v${version.version}</th>
                <td class="number">${version.files}</td>
                <td class="number">${kib(version.sizeBytes)}</td>
                <td><${Time} iso=${version.createdAt} /> <span class="muted">by ${version.createdBy}</span></td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>
    <form class="card lesson-form" onSubmit=${upload} aria-labelledby="new-version-title">
      <h3 id="new-version-title">Upload version ${latest.version + 1}</h3>
      <p class="muted small">
        Handed out, it lands beside the earlier version in a home that has it (<code>lessons/${name} (v${latest.version + 1})/</code>), and the student is told;
        their own folder stays as they left it.
      </p>
      <${FilesPicker} id="new-version" onChoose=${(next: Chosen | undefined) => (setChosen(next), setVersionSaid(undefined))} />
      ${chosen ? html`<p class="muted small">${chosenText(chosen)}</p>` : null}
      ${versionSaid ? html`<${Notice} kind=${versionSaid.kind}>${versionSaid.text}<//>` : null}
      <div>
        <button type="submit" disabled=${uploading !== undefined || !chosen}>${uploading ?? `Upload version ${latest.version + 1}`}</button>
      </div>
    </form>
    <${ConfirmDialog} confirmation=${confirmation} onDone=${() => setConfirmation(undefined)} />
  </section>`;
}
