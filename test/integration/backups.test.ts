/**
 * Workspace backups end to end, on real PostgreSQL and Docker: `cli backup`, `cli backups list` and
 * `cli restore` as an operator runs them (in process, through bin/cli's entry), the admin API's
 * backup endpoints, and the workspace controller moving a restored workspace onto its new home
 * volume (the old one removed, the files there when the editor starts again). Refusals: a running
 * workspace, a corrupted archive (the target's home untouched, no staging volume left), unknown
 * names. A home at the limits: its longest paths, names and link targets back up and restore (its
 * safety copy before a restore too), and a name a backup cannot carry is refused at backup and
 * before a restore, named. The format itself (owners, modes, links, large data, tampering) is
 * test/integration/backup.test.ts's.
 */
import { checkAnswer } from '../helpers/contract.ts';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { EXIT } from '../../src/cli/command.ts';
import { CONTROL_PLANE_LABEL, DockerRuntime, engineClient } from '../../src/docker/docker-runtime.ts';
import { LABELS, names } from '../../src/docker/runtime.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { craftBackup, UNBUILDABLE } from '../helpers/backups.ts';
import { cli } from '../helpers/cli.ts';
import { createHarness, eventually, removeEverything, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, waitForState, type Student } from '../helpers/workspaces.ts';

const run = promisify(execFile);
const docker = engineClient();
const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
const ADMIN_TOKEN = 'admin-token-backups-0123456789abcdef01234';
let harness: Harness;
let app: TestApp;
let dataDir: string;
let env: Record<string, string>;
let ada: Student;
let bob: Student;

/** Files of a student's home (our fixture, written with busybox in the test image: never student code). */
const FIXTURE = `set -e
cd /home/student
mkdir -p project/src empty .ssh .local/share/code-server
printf 'print("hi")\\n' > project/src/main.py
printf '#!/bin/sh\\necho run\\n' > project/run.sh && chmod 0755 project/run.sh
printf 'KEY\\n' > .ssh/id_ed25519 && chmod 0600 .ssh/id_ed25519
printf '{}' > .local/share/code-server/state.json
printf 'notes\\n' > 'my notes é.txt'
ln -s project/src/main.py main-link
chown -R 1000:1000 .`;

/** Every entry of the home: path, type, mode, owner and size, sorted. */
const LISTING = `cd /home/student && find . | LC_ALL=C sort | while IFS= read -r f; do stat -c '%n %F %a %u %s' "$f"; done`;

/** Runs a busybox script with `volume` at /home/student, labelled as this test's (removed with it). */
async function sh(volume: string, script: string): Promise<string> {
  const args = [
    'run',
    '--rm',
    '--network',
    'none',
    '--label',
    `${CONTROL_PLANE_LABEL}=${harness.controlPlaneId}`,
    '-v',
    `${volume}:/home/student`,
    TEST_IMAGE,
    'sh',
    '-c',
    script,
  ];
  return (await run('docker', args)).stdout;
}

/** A listing as a restore leaves it: every entry the student's (a restore gives them everything). */
const asRestored = (listing: string) => listing.replace(/ \d+ (\d+)$/gm, ' 1000 $1');
const workspaceOf = async (student: Student) => (await harness.store.workspaces.get(student.workspace.id))!;
const homeOf = async (student: Student) => names.home(await workspaceOf(student));
const listingOf = async (student: Student) => sh(await homeOf(student), LISTING);

/** This test's staging volumes: a restore's, not (or not yet) any workspace's home. */
async function stagingVolumes(): Promise<string[]> {
  const { Volumes } = await docker.listVolumes({ filters: { label: [`${CONTROL_PLANE_LABEL}=${harness.controlPlaneId}`] } });
  const homes = [await homeOf(ada), await homeOf(bob)];
  return (Volumes ?? []).map((volume) => volume.Name).filter((name) => name.includes('-home-restore-') && !homes.includes(name));
}

const auditActions = async () =>
  (
    (await db.dataSource.query('SELECT actor_email, action, metadata FROM audit_log ORDER BY id')) as {
      actor_email: string;
      action: string;
      metadata: Record<string, unknown>;
    }[]
  ).map((row) => ({ actor: row.actor_email, action: row.action, metadata: row.metadata }));

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-backups-'));
  harness = createHarness(db.dataSource);
  env = {
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    NODE_ENV: 'test',
    CONTROL_PLANE_ID: harness.controlPlaneId,
    WORKSPACE_IMAGE: TEST_IMAGE,
  };
  app = await startApp(
    db.dataSource,
    { ADMIN_TOKEN, DATA_DIR: dataDir, CONTROL_PLANE_ID: harness.controlPlaneId, WORKSPACE_IMAGE: TEST_IMAGE },
    { changes: harness.changes },
  );
  ada = await newStudent(harness.store, 'ada', tag);
  bob = await newStudent(harness.store, 'bob', tag);
  const runtime = new DockerRuntime({ controlPlaneId: harness.controlPlaneId });
  for (const student of [ada, bob])
    await runtime.ensureVolume({ workspaceId: student.workspace.id, slug: student.workspace.slug }, names.volume(student.workspace.slug));
  await sh(names.volume(ada.workspace.slug), FIXTURE);
  await sh(names.volume(bob.workspace.slug), 'printf "bob\\n" > /home/student/bob.txt && chown 1000:1000 /home/student/bob.txt');
  // The CLI's changes reach the controller as a running server's would: NOTIFY, heard by LISTEN.
  harness.changes.listen(db.url, harness.log);
  await harness.controller.start();
}, 60_000);

afterAll(async () => {
  await harness?.stop();
  await harness?.changes.close();
  await app?.close();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

describe('the CLI', () => {
  let stored: string;
  let original: string;

  it('backs a workspace up under DATA_DIR/backups/ with its manifest beside it, audited, and lists it', async () => {
    original = await listingOf(ada);
    const result = await cli(['backup', ada.email], env);
    expect(result).toMatchObject({ code: EXIT.ok, stderr: '' });
    expect(result.stdout).toMatch(
      new RegExp(
        `^Backed up ${ada.workspace.slug}: 5 files, 0\\.0 MB of data \\(a 0\\.0 MB file\\), to ${dataDir}/backups/${ada.workspace.slug}-\\d{8}T\\d{6}Z\\.tar\\.gz\\.\\n$`,
      ),
    );
    const files = await readdir(path.join(dataDir, 'backups'));
    stored = files.find((file) => file.endsWith('.tar.gz'))!;
    expect(files.toSorted()).toEqual([stored, `${stored}.json`]);
    expect(JSON.parse(readFileSync(path.join(dataDir, 'backups', `${stored}.json`), 'utf8'))).toMatchObject({
      slug: ada.workspace.slug,
      workspaceId: ada.workspace.id,
      ownerEmail: ada.email,
      files: 5,
      image: TEST_IMAGE,
    });
    expect((await auditActions()).at(-1)).toMatchObject({
      actor: 'cli',
      action: 'workspace.backup',
      metadata: { slug: ada.workspace.slug, backup: stored, files: 5 },
    });

    const list = JSON.parse((await cli(['backups', 'list', '--json'], env)).stdout) as { backups: { name: string; slug: string; files: number }[] };
    expect(list.backups).toEqual([expect.objectContaining({ name: stored, slug: ada.workspace.slug, files: 5 })]);
    // The table gives the same two figures as the backup's line and the panel: the data, and the file.
    const table = (await cli(['backups', 'list'], env)).stdout.split('\n');
    expect(table[0]).toMatch(/^NAME\s+WORKSPACE\s+CREATED\s+FILES\s+DATA\s+FILE$/);
    expect(table[1]).toMatch(/\s5\s+0\.0 MB\s+0\.0 MB$/);
  });

  it('refuses to restore into a running workspace (exit 4), touching nothing', async () => {
    await harness.store.workspaces.open(ada.workspace.id);
    await waitForState(harness.store, ada.workspace.id, 'running');
    const result = await cli(['restore', stored, '--yes'], env);
    expect(result).toEqual({
      code: EXIT.refused,
      stdout: '',
      stderr: `Error: Workspace ${ada.workspace.slug} is running; stop it first (cli workspaces stop ${ada.workspace.slug}).\n`,
    });
    expect(await stagingVolumes()).toEqual([]);
    await harness.store.workspaces.stop(SYSTEM_ACTOR, ada.workspace.id, 'coach');
    await waitForState(harness.store, ada.workspace.id, 'stopped');
  }, 60_000);

  it('restores into the same workspace: a fresh volume, swapped in (audited), the old one removed by the controller, the files as they were', async () => {
    const before = await homeOf(ada);
    await sh(before, 'rm -rf /home/student/project && echo extra > /home/student/extra.txt');
    const changed = await listingOf(ada);
    const result = await cli(['restore', stored, '--yes'], env);
    expect(result).toMatchObject({ code: EXIT.ok, stderr: '' });
    const kept = new RegExp(
      `^Restored 5 files \\(0\\.0 MB\\) of ${ada.workspace.slug} into ${ada.workspace.slug}\\. The files it replaced are kept as (${ada.workspace.slug}-\\d{8}T\\d{6}Z(?:-\\d+)?\\.tar\\.gz) \\(cli restore \\1 puts them back\\)\\.\\n$`,
    ).exec(result.stdout)?.[1];
    expect({ stdout: result.stdout, kept: typeof kept }).toEqual({ stdout: result.stdout, kept: 'string' });
    const after = await homeOf(ada);
    expect(after).toMatch(new RegExp(`^ws-${ada.workspace.slug}-home-restore-[0-9a-f]{8}$`));
    expect(await listingOf(ada)).toBe(original);
    // The replaced files were kept first (a backup of their own, audited), and the restore names it.
    expect((await auditActions()).slice(-2)).toMatchObject([
      { actor: 'cli', action: 'workspace.backup', metadata: { slug: ada.workspace.slug, backup: kept } },
      { actor: 'cli', action: 'workspace.restore', metadata: { slug: ada.workspace.slug, backup: stored, from: ada.workspace.slug, files: 5, kept } },
    ]);
    const list = JSON.parse((await cli(['backups', 'list', '--json'], env)).stdout) as { backups: { name: string }[] };
    expect(list.backups.map((backup) => backup.name)).toContain(kept);
    // The controller moves the workspace off the old volume, which then goes.
    await eventually('the old home volume removed', async () => !(await docker.listVolumes()).Volumes?.some((volume) => volume.Name === before), 20_000);
    // The editor starts on the restored files.
    await harness.store.workspaces.open(ada.workspace.id);
    await waitForState(harness.store, ada.workspace.id, 'running');
    const [code] = (await harness.runtime.listContainers({ workspaceId: ada.workspace.id })).filter((container) => container.role === 'code');
    expect(code!.homeVolume).toBe(after);
    await harness.store.workspaces.stop(SYSTEM_ACTOR, ada.workspace.id, 'coach');
    await waitForState(harness.store, ada.workspace.id, 'stopped');
    // The kept backup brings the replaced files back.
    expect(await cli(['restore', kept!, '--yes'], env)).toMatchObject({ code: EXIT.ok, stderr: '' });
    expect(await listingOf(ada)).toBe(asRestored(changed));
  }, 90_000);

  it('leaves only the current home when restores follow each other with no container started between them', async () => {
    for (let i = 0; i < 2; i++) expect(await cli(['restore', stored, '--yes'], env)).toMatchObject({ code: EXIT.ok, stderr: '' });
    const home = await homeOf(ada);
    const volumesOfAda = async () =>
      ((await docker.listVolumes({ filters: { label: [`${LABELS.workspaceId}=${ada.workspace.id}`] } })).Volumes ?? []).map((volume) => volume.Name);
    await eventually('only the current home volume left', async () => JSON.stringify(await volumesOfAda()) === JSON.stringify([home]), 20_000);
    // The controller removes a volume, then forgets it: the record follows a moment after the engine.
    await eventually('the replaced homes forgotten', async () => (await workspaceOf(ada)).spec.retiredVolumes.length === 0, 20_000);
    expect(await volumesOfAda()).toEqual([home]);
  }, 60_000);

  it("hands work over to another workspace without the first student's credentials and editor state, keeping the target's own files as a backup", async () => {
    const bobsOwn = await listingOf(bob);
    const result = await cli(['restore', path.join(dataDir, 'backups', stored), '--to', bob.workspace.slug, '--yes', '--json'], env);
    expect(result).toMatchObject({ code: EXIT.ok, stderr: '' });
    // What POST /admin/workspaces/{id}/restore answers (test/integration/cli-json.test.ts).
    await checkAnswer(
      'POST',
      new URL(`http://127.0.0.1/admin/workspaces/${bob.workspace.id}/restore`),
      new Response(result.stdout, { status: 200, headers: { 'content-type': 'application/json' } }),
    );
    const { handedOver, kept, workspace } = JSON.parse(result.stdout) as { handedOver: boolean; kept: string; workspace: { slug: string } };
    expect(workspace.slug).toBe(bob.workspace.slug);
    expect({ handedOver, kept }).toEqual({ handedOver: true, kept: expect.stringMatching(new RegExp(`^${bob.workspace.slug}-\\d{8}T\\d{6}Z`)) });
    const listing = await listingOf(bob);
    expect(listing).toContain('./project/src/main.py regular file 644 1000');
    expect(listing).toContain('./my notes é.txt');
    expect(listing).not.toContain('.ssh');
    expect(listing).not.toContain('code-server');
    expect(listing).not.toContain('bob.txt');
    // Bob's own files have a way back.
    expect(await cli(['restore', kept, '--yes'], env)).toMatchObject({ code: EXIT.ok, stderr: '' });
    expect(await listingOf(bob)).toBe(asRestored(bobsOwn));
    expect(await cli(['restore', path.join(dataDir, 'backups', stored), '--to', bob.workspace.slug, '--yes'], env)).toMatchObject({ code: EXIT.ok });
  });

  it('refuses a corrupted archive before touching the target: its home as it was, no staging volume left', async () => {
    const corrupt = path.join(dataDir, 'corrupt.tar.gz');
    const bytes = readFileSync(path.join(dataDir, 'backups', stored));
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff;
    writeFileSync(corrupt, bytes);
    const before = { volume: await homeOf(bob), listing: await listingOf(bob) };
    const result = await cli(['restore', corrupt, '--to', bob.workspace.slug, '--yes'], env);
    expect(result.code).toBe(EXIT.usage);
    expect(result.stderr).toMatch(/^Error: .*(changed|corrupt|damaged|tampered|truncated|not)/i);
    expect({ volume: await homeOf(bob), listing: await listingOf(bob) }).toEqual(before);
    expect(await stagingVolumes()).toEqual([]);
  });

  it('says what is unknown: a workspace (exit 3), a backup (exit 3)', async () => {
    expect(await cli(['backup', 'nobody'], env)).toEqual({
      code: EXIT.notFound,
      stdout: '',
      stderr: 'Error: No workspace "nobody" (give a slug or an owner\'s email).\n',
    });
    expect((await cli(['restore', 'nothing-20260101T000000Z.tar.gz', '--yes'], env)).code).toBe(EXIT.notFound);
  });

  it('writes to a file of the operator with --output', async () => {
    const file = path.join(dataDir, 'by-hand.tar.gz');
    const result = await cli(['backup', bob.workspace.slug, '--output', file, '--json'], env);
    expect(result.code).toBe(EXIT.ok);
    expect(JSON.parse(result.stdout)).toMatchObject({ name: null, file, slug: bob.workspace.slug });
    expect(readFileSync(file).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
  });
});

describe('the admin API', () => {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  let workspace: WorkspaceRecord;
  let name: string;

  it('makes a backup of a workspace (201, audited with the admin actor), lists it, and sends it as a download', async () => {
    workspace = await workspaceOf(bob);
    const made = await fetch(`${app.url}/admin/workspaces/${workspace.id}/backup`, { method: 'POST', headers: admin });
    expect(made.status).toBe(201);
    const { backup } = (await made.json()) as { backup: { name: string; slug: string; files: number; sizeBytes: number } };
    name = backup.name;
    expect(backup).toMatchObject({ slug: workspace.slug, files: expect.any(Number) });
    expect((await auditActions()).at(-1)).toMatchObject({ actor: 'admin-token', action: 'workspace.backup', metadata: { backup: name } });
    const list = (await (await fetch(`${app.url}/admin/backups`, { headers: admin })).json()) as { backups: { name: string }[] };
    expect(list.backups.map((entry) => entry.name)).toContain(name);
    const download = await fetch(`${app.url}/admin/backups/${name}`, { headers: admin });
    expect(download.status).toBe(200);
    expect(download.headers.get('content-disposition')).toBe(`attachment; filename="${name}"`);
    expect(Buffer.from(await download.arrayBuffer()).equals(readFileSync(path.join(dataDir, 'backups', name)))).toBe(true);
  });

  it('restores a stored backup into a stopped workspace, and refuses a running one (409) and unknown names (404)', async () => {
    const restore = (id: string, body: unknown) =>
      fetch(`${app.url}/admin/workspaces/${id}/restore`, {
        method: 'POST',
        headers: { ...admin, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const restored = await restore(workspace.id, { backup: name });
    expect(restored.status).toBe(200);
    const body = (await restored.json()) as { kept: string };
    expect(body).toMatchObject({ from: workspace.slug, handedOver: false, workspace: { slug: workspace.slug }, kept: expect.stringMatching(/\.tar\.gz$/) });
    expect((await auditActions()).at(-1)).toMatchObject({ actor: 'admin-token', action: 'workspace.restore', metadata: { backup: name, kept: body.kept } });

    await harness.store.workspaces.open(workspace.id);
    const running = await restore(workspace.id, { backup: name });
    expect(running.status).toBe(409);
    expect(((await running.json()) as { error: { code: string } }).error.code).toBe('workspace_running');
    await harness.store.workspaces.stop(SYSTEM_ACTOR, workspace.id, 'coach');
    // Stopped for the tests after this one, which restore into it (a restore waits for the editor to be gone).
    await waitForState(harness.store, workspace.id, 'stopped');

    for (const unknown of ['nothing-20260101T000000Z.tar.gz', '../allowlist.json', 'x']) {
      const answer = await restore(workspace.id, { backup: unknown });
      expect({ unknown, status: answer.status }).toEqual({ unknown, status: 404 });
    }
    expect((await fetch(`${app.url}/admin/backups/..%2Fallowlist.json`, { headers: admin })).status).toBe(404);
    expect((await fetch(`${app.url}/admin/backups`)).status).toBe(401);
  }, 60_000);

  it.each(Object.keys(UNBUILDABLE))('refuses to restore a crafted backup with %s: 400 backup_not_ours, no staging volume, never a 500', async (what) => {
    const crafted = `${workspace.slug}-20260101T0000${String(Object.keys(UNBUILDABLE).indexOf(what)).padStart(2, '0')}Z.tar.gz`;
    await craftBackup(path.join(dataDir, 'backups', crafted), UNBUILDABLE[what]!, { slug: workspace.slug, workspaceId: workspace.id, image: TEST_IMAGE });
    const from = app.logs.length;
    // The workspace's home is the volume an earlier restore left (named like a staging volume).
    const before = await stagingVolumes();
    const answer = await fetch(`${app.url}/admin/workspaces/${workspace.id}/restore`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ backup: crafted }),
    });
    expect(answer.status).toBe(400);
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('backup_not_ours');
    expect(await stagingVolumes()).toEqual(before);
    expect(app.logs.slice(from).filter((record) => record.level === 'error')).toEqual([]);
  });

  it('lists a backup whose manifest beside it is damaged without one, and restores it from the file alone', async () => {
    const sidecar = path.join(dataDir, 'backups', `${name}.json`);
    const kept = readFileSync(sidecar, 'utf8');
    try {
      for (const damaged of ['{"slug": "ab', '42', 'null']) {
        writeFileSync(sidecar, damaged);
        const list = await fetch(`${app.url}/admin/backups`, { headers: admin });
        expect(list.status).toBe(200);
        const { backups } = (await list.json()) as { backups: { name: string; slug: string | null }[] };
        expect(backups.find((entry) => entry.name === name)).toMatchObject({ slug: null });
      }
      const restored = await fetch(`${app.url}/admin/workspaces/${workspace.id}/restore`, {
        method: 'POST',
        headers: { ...admin, 'content-type': 'application/json' },
        body: JSON.stringify({ backup: name }),
      });
      expect(restored.status).toBe(200);
    } finally {
      writeFileSync(sidecar, kept);
    }
  }, 60_000);
});

describe('a home at the limits of what a workspace holds', () => {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  /** 20 directories of 200 bytes under deep/: a directory path of 4,024 bytes in the home. */
  const DEEP_DIR = `deep/${Array.from({ length: 20 }, (_, index) => String(index).padStart(200, 'd')).join('/')}`;
  /** A file in it whose path, as the container names it (/home/student/...), is 4,095 bytes: PATH_MAX less its NUL. */
  const DEEP_FILE = `${DEEP_DIR}/${'f'.repeat(4095 - '/home/student/'.length - DEEP_DIR.length - 1)}`;
  /** A name of 255 bytes (NAME_MAX), and a symbolic link target of 4,095 bytes (the longest one holds). */
  const LONG_NAME = 'n'.repeat(255);
  const FAR_TARGET = `../${'t'.repeat(4092)}`;
  /**
   * The home (our fixture, busybox in the test image): the deepest file a workspace can name, a
   * long name, a long link target, a hard link to a symbolic link (one more name of the link), and
   * a FIFO with a second name (backups leave FIFOs out, with their hard links).
   */
  const LIMITS = `set -e
cd /home/student
mkdir -p '${DEEP_DIR}'
printf 'at the bottom\\n' > '${DEEP_FILE}'
printf 'long name\\n' > '${LONG_NAME}'
ln -s '${FAR_TARGET}' far-link
printf 'notes\\n' > notes.txt && ln -s notes.txt notes-link && ln notes-link notes-link-again
mkfifo pipe && ln pipe pipe-again`;
  /** What the home holds that a restore brings back: the fixture's listing without its FIFOs. */
  const withoutFifos = (listing: string) => listing.replaceAll(/^.* fifo .*\n/gm, '');
  /** The content of the deepest file, the long link's target, and the link count and kind of the hard-linked symbolic link. */
  const DETAILS = `cd /home/student && cat '${DEEP_FILE}' && readlink far-link && stat -c '%h %F' notes-link-again`;
  const details = `at the bottom\n${FAR_TARGET}\n2 symbolic link\n`;
  let cy: Student;
  let workspace: WorkspaceRecord;
  /** A stored backup of cy's workspace that holds one small file. */
  let small: string;

  const backUp = () => fetch(`${app.url}/admin/workspaces/${workspace.id}/backup`, { method: 'POST', headers: admin });
  const restore = (backup: string) =>
    fetch(`${app.url}/admin/workspaces/${workspace.id}/restore`, {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ backup }),
    });

  beforeAll(async () => {
    cy = await newStudent(harness.store, 'cy', tag);
    workspace = cy.workspace;
    await new DockerRuntime({ controlPlaneId: harness.controlPlaneId }).ensureVolume(
      { workspaceId: workspace.id, slug: workspace.slug },
      names.volume(workspace.slug),
    );
    await sh(names.volume(workspace.slug), LIMITS);
    small = `${workspace.slug}-20260101T000000Z.tar.gz`;
    await craftBackup(
      path.join(dataDir, 'backups', small),
      [
        { path: 'home', type: 'directory', mode: 0o755 },
        { path: 'home/hello.txt', type: 'file', data: Buffer.from('hello\n') },
      ],
      { slug: workspace.slug, workspaceId: workspace.id, image: TEST_IMAGE },
    );
  }, 60_000);

  it('backs up (201) and restores (200) the deepest path, the longest name and link target, and a hard link to a symbolic link: each comes back with its content', async () => {
    expect(Buffer.byteLength(`/home/student/${DEEP_FILE}`)).toBe(4095);
    const original = await listingOf(cy);
    expect(original).toContain(' fifo ');
    expect(await sh(await homeOf(cy), DETAILS)).toBe(details);
    const made = await backUp();
    expect(made.status).toBe(201);
    const { backup } = (await made.json()) as { backup: { name: string } };
    const restored = await restore(backup.name);
    expect({ status: restored.status, body: (await restored.json()) as unknown }).toMatchObject({ status: 200, body: { kept: expect.any(String) } });
    expect(await listingOf(cy)).toBe(asRestored(withoutFifos(original)));
    expect(await sh(await homeOf(cy), DETAILS)).toBe(details);
  }, 60_000);

  it('keeps such a home before a restore replaces it, as a backup that brings it back', async () => {
    const before = await listingOf(cy);
    const replaced = await restore(small);
    expect(replaced.status).toBe(200);
    const { kept } = (await replaced.json()) as { kept: string };
    expect(await sh(await homeOf(cy), 'ls /home/student')).toBe('hello.txt\n');
    // The safety copy restores what it kept.
    const back = await restore(kept);
    expect({ status: back.status, body: (await back.json()) as unknown }).toMatchObject({ status: 200, body: { from: workspace.slug } });
    expect(await listingOf(cy)).toBe(before);
    expect(await sh(await homeOf(cy), DETAILS)).toBe(details);
  }, 60_000);

  it('refuses to back up a name that is not UTF-8 (409 backup_unrestorable), and a restore over it (409 restore_not_kept), naming the file and touching nothing', async () => {
    const home = await homeOf(cy);
    await sh(home, `printf 'latin-1\\n' > "$(printf '/home/student/caf\\351.txt')"`);
    const before = { backups: await readdir(path.join(dataDir, 'backups')), listing: await listingOf(cy), staging: await stagingVolumes() };
    const named = expect.stringContaining(`"home/caf\uFFFD.txt" has a name that is not UTF-8 text`);

    const made = await backUp();
    expect({ status: made.status, body: (await made.json()) as unknown }).toEqual({
      status: 409,
      body: { error: { code: 'backup_unrestorable', message: named } },
    });
    const restored = await restore(small);
    expect({ status: restored.status, body: (await restored.json()) as unknown }).toEqual({
      status: 409,
      body: { error: { code: 'restore_not_kept', message: named } },
    });
    const cliMade = await cli(['backup', workspace.slug], env);
    expect({ code: cliMade.code, stderr: cliMade.stderr }).toEqual({
      code: EXIT.refused,
      stderr: expect.stringMatching(/^Error: The home of .* has a name that is not UTF-8 text/),
    });

    expect({ backups: await readdir(path.join(dataDir, 'backups')), listing: await listingOf(cy), staging: await stagingVolumes() }).toEqual(before);
    expect(await homeOf(cy)).toBe(home);
  }, 60_000);
});
