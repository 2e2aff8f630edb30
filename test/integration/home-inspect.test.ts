/**
 * A coach's look at a student's home (RuntimeVolumes.inspectHome) against the real Docker Engine:
 * a home filled by a fixture of ours (run with busybox in the test image: never a student's code),
 * read through the runtime's helper container from the busybox test image and from the real
 * workspace image (Debian's coreutils: scripts/build-workspace-image.sh makes sure it is there, a
 * no-op when it is up to date). Everything carries this file's control-plane id and is removed by it;
 * after every test no look helper is left.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CONTROL_PLANE_LABEL, DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { HOME_LIST_MAX, HomeUnreadableError, ImageMissingError, LABELS, names, type HomeAnswer, type HomeRequest } from '../../src/docker/runtime.ts';
import { docker, eventually, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';

const run = promisify(execFile);
const projectRoot = path.resolve(import.meta.dirname, '../..');
const WORKSPACE_IMAGE = 'classroom-workspace:latest';
const controlPlaneId = newControlPlaneId();
const runtime = new DockerRuntime({ controlPlaneId });
const suffix = randomBytes(3).toString('hex');
const ada = { workspaceId: randomUUID(), slug: `look-${suffix}` };
const volume = names.volume(ada.slug);
/** An image whose `timeout` never ends (the helper's first program): a look that hangs. */
const HANGING_IMAGE = `classroom-look-hangs:${suffix}`;

/**
 * The home: text, binary and 2 GB sparse files, folders, a name with spaces and one with letters
 * beyond ASCII, links out of the home and inside it, a FIFO, a folder of HOME_LIST_MAX entries and
 * one of HOME_LIST_MAX + 1, a name holding a newline, a file and a folder uid 1000 cannot read.
 */
const FIXTURE = `set -e
cd /home/student
mkdir -p project/src 'my folder' full over
printf 'class Robot {}\\n' > project/src/Robot.java
printf 'see you\\n' > 'notes with spaces.txt'
printf 'caf\\303\\251\\n' > 'café.txt'
printf '\\000\\001\\377 binary \\000\\r\\n\\000end' > data.bin
truncate -s 2G sparse.img
ln -s /etc etc-link
ln -s project/src/Robot.java robot-link
ln -s project project-link
mkfifo pipe
(cd full && seq 1 ${HOME_LIST_MAX} | xargs touch)
(cd over && seq 0 ${HOME_LIST_MAX} | xargs touch)
printf 'x' > "$(printf 'evil\\nname')"
chown -R 1000:1000 .
printf 'secret\\n' > locked && chmod 000 locked
mkdir closed && chmod 000 closed
`;

/** Our helpers (role `backup`) of this control plane, whatever their state. */
const helpers = () => docker.listContainers({ all: true, filters: { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`, `${LABELS.role}=backup`] } });

const look = (image: string, request: HomeRequest): Promise<HomeAnswer> => runtime.inspectHome(volume, ada, image, request);

const entriesOf = (answer: HomeAnswer) => {
  if (answer.outcome !== 'listed') throw new Error(`not listed: ${answer.outcome}`);
  return answer.entries;
};

beforeAll(async () => {
  try {
    await run('bash', [path.join(projectRoot, 'scripts/build-workspace-image.sh')], {
      env: { ...process.env, WORKSPACE_IMAGE_TAG: WORKSPACE_IMAGE },
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(`scripts/build-workspace-image.sh failed:\n${stdout}${stderr}`, { cause: error });
  }
  await runtime.ensureVolume(ada, volume);
  await run('docker', [
    'run',
    '--rm',
    '--network',
    'none',
    '--label',
    `${CONTROL_PLANE_LABEL}=${controlPlaneId}`,
    '-v',
    `${volume}:/home/student`,
    TEST_IMAGE,
    'sh',
    '-c',
    FIXTURE,
  ]);
}, 30 * 60_000);

afterEach(async () => {
  expect(await helpers()).toEqual([]);
});

afterAll(async () => {
  await removeEverything(controlPlaneId);
  await docker
    .getImage(HANGING_IMAGE)
    .remove({ force: true })
    .catch(() => undefined);
});

describe.each([
  ['busybox (the test image)', TEST_IMAGE],
  ['coreutils (the workspace image)', WORKSPACE_IMAGE],
])('a look at a home with %s', (_name, image) => {
  it('lists the home: files, folders, links shown as links, a FIFO as other, names with spaces and accents, sizes', async () => {
    const answer = await look(image, { op: 'list', path: '' });
    expect(answer).toMatchObject({ outcome: 'listed', truncated: false });
    const byName = new Map(entriesOf(answer).map((entry) => [entry.name, entry]));
    expect(byName.get('notes with spaces.txt')).toEqual({ name: 'notes with spaces.txt', kind: 'file', size: 8 });
    expect(byName.get('café.txt')).toEqual({ name: 'café.txt', kind: 'file', size: 6 });
    expect(byName.get('data.bin')).toEqual({ name: 'data.bin', kind: 'file', size: 18 });
    expect(byName.get('sparse.img')).toEqual({ name: 'sparse.img', kind: 'file', size: 2 ** 31 });
    expect(byName.get('project')).toEqual({ name: 'project', kind: 'dir', size: 0 });
    expect(byName.get('my folder')).toEqual({ name: 'my folder', kind: 'dir', size: 0 });
    expect(byName.get('etc-link')).toEqual({ name: 'etc-link', kind: 'link', size: 4 });
    expect(byName.get('robot-link')?.kind).toBe('link');
    expect(byName.get('pipe')).toEqual({ name: 'pipe', kind: 'other', size: 0 });
    // A name holding a newline is cut there; its rest is never an entry of its own.
    expect(byName.get('evil')?.kind).toBe('file');
    expect(byName.has('name')).toBe(false);
    expect([...byName.keys()].toSorted()).toEqual(
      [
        'café.txt',
        'closed',
        'data.bin',
        'etc-link',
        'evil',
        'full',
        'locked',
        'my folder',
        'notes with spaces.txt',
        'over',
        'pipe',
        'project',
        'project-link',
        'robot-link',
        'sparse.img',
      ].toSorted(),
    );
  });

  it("lists a folder's own entries, not deeper ones, and a link to a folder in the home as that folder", async () => {
    expect(entriesOf(await look(image, { op: 'list', path: 'project' }))).toEqual([{ name: 'src', kind: 'dir', size: 0 }]);
    expect(entriesOf(await look(image, { op: 'list', path: 'project/src' }))).toEqual([{ name: 'Robot.java', kind: 'file', size: 15 }]);
    expect(entriesOf(await look(image, { op: 'list', path: 'project-link/src' }))).toEqual([{ name: 'Robot.java', kind: 'file', size: 15 }]);
    expect(await look(image, { op: 'list', path: 'my folder' })).toEqual({ outcome: 'listed', entries: [], truncated: false });
  });

  it('gives at most HOME_LIST_MAX entries, and says when there were more', async () => {
    const full = await look(image, { op: 'list', path: 'full' });
    expect(full).toMatchObject({ outcome: 'listed', truncated: false });
    expect(new Set(entriesOf(full).map((entry) => entry.name)).size).toBe(HOME_LIST_MAX);
    const over = await look(image, { op: 'list', path: 'over' });
    expect(over).toMatchObject({ outcome: 'listed', truncated: true });
    expect(new Set(entriesOf(over).map((entry) => entry.name)).size).toBe(HOME_LIST_MAX);
  });

  it('reads a text file, and a binary one byte for byte (NULs, CR, 0xff)', async () => {
    expect(await look(image, { op: 'read', path: 'project/src/Robot.java', maxBytes: 1024 })).toEqual({
      outcome: 'read',
      size: 15,
      bytes: Buffer.from('class Robot {}\n'),
    });
    expect(await look(image, { op: 'read', path: 'café.txt', maxBytes: 1024 })).toEqual({ outcome: 'read', size: 6, bytes: Buffer.from('café\n') });
    expect(await look(image, { op: 'read', path: 'data.bin', maxBytes: 1024 })).toEqual({
      outcome: 'read',
      size: 18,
      bytes: Buffer.from([0, 1, 0xff, ...Buffer.from(' binary '), 0, 13, 10, 0, ...Buffer.from('end')]),
    });
    expect(await look(image, { op: 'read', path: 'data.bin', maxBytes: 4 })).toEqual({ outcome: 'read', size: 18, bytes: Buffer.from([0, 1, 0xff, 0x20]) });
  });

  it('reads the start of a 2 GB file: its whole size, and maxBytes of it', async () => {
    const answer = await look(image, { op: 'read', path: 'sparse.img', maxBytes: 256 * 1024 });
    if (answer.outcome !== 'read') throw new Error(`not read: ${answer.outcome}`);
    expect(answer.size).toBe(2147483648);
    expect(answer.bytes.length).toBe(262144);
    expect(answer.bytes.equals(Buffer.alloc(262144))).toBe(true);
  });

  it('refuses a path that leads out of the home through a link, as the target and on the way', async () => {
    expect(await look(image, { op: 'list', path: 'etc-link' })).toEqual({ outcome: 'outside' });
    expect(await look(image, { op: 'read', path: 'etc-link/passwd', maxBytes: 1024 })).toEqual({ outcome: 'outside' });
    expect(await look(image, { op: 'list', path: 'etc-link/nothing-there' })).toEqual({ outcome: 'outside' });
  });

  it('never follows a link for a read, and never opens a FIFO', async () => {
    expect(await look(image, { op: 'read', path: 'robot-link', maxBytes: 1024 })).toEqual({ outcome: 'not_a_file' });
    // Opened, it would wait for a writer that never comes: the look would time out instead.
    expect(await look(image, { op: 'read', path: 'pipe', maxBytes: 1024 })).toEqual({ outcome: 'not_a_file' });
    expect(await look(image, { op: 'read', path: 'project', maxBytes: 1024 })).toEqual({ outcome: 'not_a_file' });
  });

  it('says what is missing, and which kind is wrong', async () => {
    expect(await look(image, { op: 'read', path: 'nothing.txt', maxBytes: 1024 })).toEqual({ outcome: 'missing' });
    expect(await look(image, { op: 'list', path: 'nothing/deeper' })).toEqual({ outcome: 'missing' });
    expect(await look(image, { op: 'list', path: 'data.bin' })).toEqual({ outcome: 'not_a_directory' });
    expect(await look(image, { op: 'list', path: 'pipe' })).toEqual({ outcome: 'not_a_directory' });
  });

  it("refuses what uid 1000 cannot read, as the student's own editor could not", async () => {
    await expect(look(image, { op: 'read', path: 'locked', maxBytes: 1024 })).rejects.toThrow(HomeUnreadableError);
    await expect(look(image, { op: 'list', path: 'closed' })).rejects.toThrow(HomeUnreadableError);
  });
});

describe('a look that cannot be made', () => {
  it('fails with volume_not_found for a volume that does not exist, and makes none', async () => {
    const missing = names.volume(`nobody-${suffix}`);
    await expect(runtime.inspectHome(missing, ada, TEST_IMAGE, { op: 'list', path: '' })).rejects.toMatchObject({ code: 'volume_not_found' });
    expect(await runtime.volumeExists(missing)).toBe(false);
  });

  it('fails with ImageMissingError when the image is not on the engine', async () => {
    await expect(look(`classroom-workspace:missing-${suffix}`, { op: 'list', path: '' })).rejects.toThrow(ImageMissingError);
  });

  it('ends a look that hangs after 10 s with a clear error, its helper (hardened, removed by the engine as it ends) removed', async () => {
    const context = mkdtempSync(path.join(os.tmpdir(), 'look-hangs-'));
    try {
      writeFileSync(path.join(context, 'timeout'), '#!/bin/sh\nexec sleep 120\n', { mode: 0o755 });
      writeFileSync(path.join(context, 'Dockerfile'), `FROM ${TEST_IMAGE}\nCOPY timeout /usr/local/bin/timeout\n`);
      await run('docker', ['build', '-q', '-t', HANGING_IMAGE, context]);
    } finally {
      rmSync(context, { recursive: true, force: true });
    }
    const hanging = look(HANGING_IMAGE, { op: 'list', path: '' });
    hanging.catch(() => undefined);
    const [helper] = await eventually('the hanging helper to run', async () => {
      const running = (await helpers()).filter((container) => container.State === 'running');
      return running.length > 0 && running;
    });
    expect(helper!.Names[0]).toMatch(new RegExp(`^/ws-${ada.slug}-look-[0-9a-f]{8}$`));
    const { Config, HostConfig } = await docker.getContainer(helper!.Id).inspect();
    expect(Config.User).toBe('1000:1000');
    expect((Config as { NetworkDisabled?: boolean }).NetworkDisabled).toBe(true);
    expect(HostConfig).toMatchObject({
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      AutoRemove: true,
      LogConfig: { Type: 'none' },
    });
    expect(HostConfig.PidsLimit).toBeGreaterThan(0);
    expect(HostConfig.Memory).toBeGreaterThan(0);
    expect(HostConfig.NanoCpus).toBeGreaterThan(0);
    expect(HostConfig.Mounts).toEqual([expect.objectContaining({ Type: 'volume', Source: volume, Target: '/home/student', ReadOnly: true })]);
    await expect(hanging).rejects.toThrow(/looking at the home took over 10 s/);
  }, 30_000);
});
