import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  createReadStream,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { createGunzip, gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { BACKUP_FORMAT, MANIFEST_NAME } from '../../src/backup/backup-format.ts';
import { HAND_OVER_EXCLUDES } from '../../src/backup/hand-over-excludes.ts';
import { restoreBackup } from '../../src/backup/restore-backup.ts';
import { verifyBackup } from '../../src/backup/verify-backup.ts';
import { writeBackup, writeBackupFile } from '../../src/backup/write-backup.ts';
import { CONTROL_PLANE_LABEL, DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { LABELS, MANAGED_LABEL, names } from '../../src/docker/runtime.ts';
import { docker, eventually, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';
import { TcpProxy } from '../helpers/tcp-proxy.ts';

const run = promisify(execFile);
const controlPlaneId = newControlPlaneId();
const runtime = new DockerRuntime({ controlPlaneId });
const suffix = randomBytes(3).toString('hex');
const ada = { workspaceId: randomUUID(), slug: `ada-${suffix}`, ownerEmail: 'ada@school.test' };
const bob = { workspaceId: randomUUID(), slug: `bob-${suffix}` };
const adaVolume = names.volume(ada.slug);
const staging = (slug: string) => `ws-${slug}-home-restore-${randomBytes(4).toString('hex')}`;

/**
 * The random data's size in MiB: many times what the sockets and streams on the way hold, so that a
 * backup and a restore stream it with backpressure and a cut a quarter of the way in is far from the
 * end. (It was 200 MiB until 2026-12-02; every backup and restore here gzips or gunzips all of it in
 * this process, which made this file one of the suite's busiest for no more coverage.)
 */
const DATA_MB = 64;

/**
 * The test data (our fixture, run with busybox in the test image, not student code): modes 0644,
 * 0755, 0600 and 000, owners 1000, 0 and 1234:2345, a setuid-root program and a setgid directory,
 * a symbolic and a hard link, an empty directory, a name with a space and non-ASCII letters, what a
 * hand-over leaves behind, DATA_MB of random data.
 */
const FIXTURE = `set -e
cd /home/student
mkdir -p project/src empty-dir .ssh .config/code-server .local/share/code-server/User
printf 'print("hi")\\n' > project/src/main.py && chmod 0644 project/src/main.py
printf '#!/bin/sh\\necho run\\n' > project/run.sh && chmod 0755 project/run.sh
printf 'PRIVATE KEY\\n' > .ssh/id_ed25519 && chmod 0600 .ssh/id_ed25519 && chmod 0700 .ssh
printf 'password: hunter2\\n' > .config/code-server/config.yaml
printf '{}' > .local/share/code-server/User/settings.json
printf '[user]\\nname = Ada\\n' > .gitconfig
printf 'notes\\n' > 'résumé notes.txt'
printf 'nobody\\n' > locked && chmod 000 locked
ln -s project/src/main.py link-to-main
ln project/run.sh hard-link-to-run
dd if=/dev/urandom of=project/data.bin bs=1M count=${DATA_MB} 2>/dev/null
chown -R 1000:1000 .
printf 'root\\n' > owned-by-root && chmod 0640 owned-by-root
printf 'odd\\n' > odd-owner && chown 1234:2345 odd-owner
printf '#!/bin/sh\\nid\\n' > suid-root && chown 0:0 suid-root && chmod 4755 suid-root
mkdir shared && chmod 2775 shared
touch -d '2020-01-02 03:04:05' project/src/main.py
chmod 0750 .
`;

/** Every entry of a volume, sorted: name, type, mode, owner, mtime, size, link count, then the link target or the data's SHA-256. */
const LISTING = `cd /home/student && find . | LC_ALL=C sort | while IFS= read -r f; do
  printf '%s|' "$(stat -c '%n|%F|%a|%u|%g|%Y|%s|%h' "$f")"
  if [ -L "$f" ]; then readlink "$f"; elif [ -f "$f" ]; then sha256sum < "$f" | cut -d' ' -f1; else echo; fi
done`;

/** Runs a busybox script in the test image with `volume` at /home/student (our fixture: never a student's code). */
async function sh(volume: string, script: string, options: { readOnly?: boolean } = {}): Promise<string> {
  const mount = `${volume}:/home/student${options.readOnly ? ':ro' : ''}`;
  const args = ['run', '--rm', '--network', 'none', '--label', `${CONTROL_PLANE_LABEL}=${controlPlaneId}`, '-v', mount, TEST_IMAGE, 'sh', '-c', script];
  const { stdout } = await run('docker', args, { maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

const listing = (volume: string) => sh(volume, LISTING, { readOnly: true });

/** The backup helpers of this test's control plane. */
async function helpers() {
  return docker.listContainers({ all: true, filters: { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`, `${LABELS.role}=backup`] } });
}

/** The tar headers of a backup file, in order, and the text of its manifest. */
async function readBackupFile(file: string): Promise<{ headers: tar.Header[]; manifestText: string }> {
  const extract = tar.extract();
  const piped = pipeline(createReadStream(file), createGunzip(), extract);
  const headers: tar.Header[] = [];
  const chunks: Buffer[] = [];
  for await (const entry of extract) {
    headers.push(entry.header);
    const manifest = entry.header.name === MANIFEST_NAME;
    for await (const chunk of entry) if (manifest) chunks.push(chunk as Buffer);
  }
  await piped;
  return { headers, manifestText: Buffer.concat(chunks).toString('utf8') };
}

let directory: string;
let backupPath: string;
let adaListing: string;
/** Every engine event on this test's backup helpers (create, start, destroy...). */
const helperEvents: string[] = [];
let events: NodeJS.ReadableStream | undefined;

beforeAll(async () => {
  events = await docker.getEvents({ filters: { type: ['container'], label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`, `${LABELS.role}=backup`] } });
  events.on('data', (data: Buffer) => {
    for (const line of data.toString().split('\n').filter(Boolean)) helperEvents.push((JSON.parse(line) as { Action: string }).Action);
  });
  directory = mkdtempSync(path.join(os.tmpdir(), 'backup-test-'));
  backupPath = path.join(directory, 'ada.tar.gz');
  await runtime.ensureVolume(ada, adaVolume);
  await sh(adaVolume, FIXTURE);
  adaListing = await listing(adaVolume);
}, 120_000);

afterAll(async () => {
  (events as { destroy?: () => void } | undefined)?.destroy?.();
  // The disk-full test's tmpfs, should that test have stopped before its own unmount.
  await run('umount', [path.join(directory, 'full')]).catch(() => undefined);
  await removeEverything(controlPlaneId);
  rmSync(directory, { recursive: true, force: true });
}, 60_000);

describe('backing up a home volume', () => {
  it('writes a gzip of the volume under home/ with owners, modes and mtimes, the manifest last, and leaves no helper container behind', async () => {
    const manifest = await writeBackupFile(backupPath, { runtime, volume: adaVolume, image: TEST_IMAGE, workspace: ada });
    expect(await helpers()).toEqual([]);
    expect(readdirSync(directory)).toEqual(['ada.tar.gz']);
    expect(statSync(backupPath).size).toBeGreaterThan(DATA_MB * 1024 * 1024);

    const { headers, manifestText } = await readBackupFile(backupPath);
    const byName = new Map(headers.map((header) => [header.name.replace(/\/$/, ''), header]));
    expect(headers.at(-1)!.name).toBe(MANIFEST_NAME);
    expect(headers.slice(0, -1).every((header) => header.name === 'home' || header.name.startsWith('home/'))).toBe(true);
    expect(byName.get('home')).toMatchObject({ type: 'directory', uid: 1000, gid: 1000 });
    expect(byName.get('home')!.mode & 0o7777).toBe(0o750);
    expect(byName.get('home/empty-dir')).toMatchObject({ type: 'directory' });
    expect(byName.get('home/project/src/main.py')).toMatchObject({ type: 'file', uid: 1000, gid: 1000, mtime: new Date('2020-01-02T03:04:05Z') });
    expect(byName.get('home/project/src/main.py')!.mode & 0o7777).toBe(0o644);
    expect(byName.get('home/project/run.sh')!.mode & 0o7777).toBe(0o755);
    expect(byName.get('home/.ssh/id_ed25519')!.mode & 0o7777).toBe(0o600);
    expect(byName.get('home/locked')!.mode & 0o7777).toBe(0o000);
    expect(byName.get('home/owned-by-root')).toMatchObject({ uid: 0, gid: 0 });
    expect(byName.get('home/odd-owner')).toMatchObject({ uid: 1234, gid: 2345 });
    expect(byName.get('home/suid-root')).toMatchObject({ uid: 0, gid: 0 });
    expect(byName.get('home/suid-root')!.mode & 0o7777).toBe(0o4755);
    expect(byName.get('home/shared')!.mode & 0o7777).toBe(0o2775);
    expect(byName.get('home/résumé notes.txt')).toMatchObject({ type: 'file', size: 6 });
    expect(byName.get('home/link-to-main')).toMatchObject({ type: 'symlink', linkname: 'project/src/main.py' });
    // Whichever of two hard-linked names the engine reads first is the file, the other a link to it.
    const hardLinked = [byName.get('home/hard-link-to-run')!, byName.get('home/project/run.sh')!].toSorted((a) => (a.type === 'file' ? -1 : 1));
    expect(hardLinked.map((header) => header.type)).toEqual(['file', 'link']);
    expect(hardLinked[1]!.linkname).toBe(hardLinked[0]!.name);
    expect(byName.get('home/project/data.bin')).toMatchObject({ size: DATA_MB * 1024 * 1024 });

    expect(JSON.parse(manifestText)).toEqual(manifest);
    expect(manifest).toEqual({
      format: BACKUP_FORMAT,
      slug: ada.slug,
      workspaceId: ada.workspaceId,
      ownerEmail: ada.ownerEmail,
      created: expect.stringMatching(/^\d{4}-/),
      image: TEST_IMAGE,
      files: 12,
      bytes: expect.any(Number),
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(manifest.bytes).toBeGreaterThan(DATA_MB * 1024 * 1024);
    expect(await verifyBackup(backupPath)).toEqual(manifest);
  }, 180_000);

  it('fails a backup on a full disk, removing the partial file and the helper container', async () => {
    const full = path.join(directory, 'full');
    mkdirSync(full);
    await run('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', full]);
    try {
      await expect(writeBackupFile(path.join(full, 'ada.tar.gz'), { runtime, volume: adaVolume, image: TEST_IMAGE, workspace: ada })).rejects.toMatchObject({
        code: 'ENOSPC',
      });
      expect(readdirSync(full)).toEqual([]);
      await eventually('the helper container to be removed', async () => (await helpers()).length === 0);
    } finally {
      await run('umount', [full]);
    }
  }, 120_000);

  it('fails with volume_not_found for a volume that does not exist, creating neither volume nor helper', async () => {
    const missing = `ws-missing-${suffix}-home`;
    await expect(writeBackup({ runtime, volume: missing, image: TEST_IMAGE, workspace: ada, out: new PassThrough() })).rejects.toMatchObject({
      code: 'volume_not_found',
    });
    expect(await runtime.volumeExists(missing)).toBe(false);
    expect(await helpers()).toEqual([]);
  });
});

describe('the backup helper containers', () => {
  // While the engine streams an archive it holds the container's lock, so an inspect would wait for
  // the stream to end: these checks read the engine's container list instead.
  it('export through a container that is not started, mounts the volume read-only, has no network, and goes when the stream is destroyed', async () => {
    const stream = await runtime.exportVolume(adaVolume, ada, TEST_IMAGE);
    try {
      const [helper, ...others] = await helpers();
      expect(others).toEqual([]);
      expect(helper!.Names).toEqual([expect.stringMatching(new RegExp(`^/ws-${ada.slug}-backup-[0-9a-f]{8}$`))]);
      expect(helper!.State).toBe('created');
      expect(helper!.HostConfig.NetworkMode).toBe('none');
      expect(helper!.Mounts).toEqual([expect.objectContaining({ Type: 'volume', Name: adaVolume, Destination: '/home/student', RW: false })]);
      expect(helper!.Labels).toMatchObject({
        [MANAGED_LABEL]: 'true',
        [CONTROL_PLANE_LABEL]: controlPlaneId,
        [LABELS.workspaceId]: ada.workspaceId,
        [LABELS.workspaceSlug]: ada.slug,
        [LABELS.role]: 'backup',
      });
      // The control plane's own listing reports it under its role, which the workspace controller passes over.
      expect((await runtime.listContainers({ workspaceId: ada.workspaceId })).map((container) => container.role)).toEqual(['backup']);
    } finally {
      stream.destroy();
    }
    await eventually('the export helper to be removed', async () => (await helpers()).length === 0);
  });

  it('import through a container that is not started and mounts the volume read-write, creating the volume with the workspace labels', async () => {
    const volume = staging(bob.slug);
    const body = new PassThrough();
    const importing = runtime.importVolume(volume, bob, TEST_IMAGE, body);
    try {
      const helper = await eventually('the import helper', async () => (await helpers())[0]);
      expect(helper.Names).toEqual([expect.stringMatching(new RegExp(`^/ws-${bob.slug}-backup-[0-9a-f]{8}$`))]);
      expect(helper.State).toBe('created');
      expect(helper.HostConfig.NetworkMode).toBe('none');
      expect(helper.Mounts).toEqual([expect.objectContaining({ Name: volume, Destination: '/home/student', RW: true })]);
      expect(helper.Labels).toMatchObject({ [LABELS.role]: 'backup', [LABELS.workspaceId]: bob.workspaceId });
    } finally {
      const pack = tar.pack();
      pack.entry({ name: 'student', type: 'directory', mode: 0o40750, uid: 1000, gid: 1000 });
      pack.entry({ name: 'student/hello.txt', uid: 1000, gid: 1000 }, 'hello\n');
      pack.finalize();
      void pipeline(pack, body);
    }
    await importing;
    expect(await helpers()).toEqual([]);
    const { Labels } = await docker.getVolume(volume).inspect();
    expect(Labels).toMatchObject({
      [MANAGED_LABEL]: 'true',
      [CONTROL_PLANE_LABEL]: controlPlaneId,
      [LABELS.workspaceId]: bob.workspaceId,
      [LABELS.workspaceSlug]: bob.slug,
    });
    // The root entry set the volume root's owner and mode.
    expect(await sh(volume, 'cat hello.txt; stat -c %u:%a /home/student', { readOnly: true })).toBe('hello\n1000:750\n');
    await runtime.removeVolumeNamed(volume);
    expect(await runtime.volumeExists(volume)).toBe(false);
  });

  it("import fails at once, with the stream's error and no helper left, when its writer gave up before the upload began", async () => {
    const volume = staging(bob.slug);
    const gaveUp = new Error('the backup file is not ours');
    const body = new PassThrough();
    body.on('error', () => undefined);
    body.destroy(gaveUp);
    // Without the check the upload would pipe a stream that never ends and wait out the 60 s call timeout.
    await expect(runtime.importVolume(volume, bob, TEST_IMAGE, body)).rejects.toBe(gaveUp);
    expect(await helpers()).toEqual([]);
    await runtime.removeVolumeNamed(volume);
  });

  it('leave volumes of another control plane alone: volume_not_managed', async () => {
    const foreign = `ws-foreign-${suffix}-home`;
    await docker.createVolume({ Name: foreign, Labels: { [MANAGED_LABEL]: 'true', [CONTROL_PLANE_LABEL]: `${controlPlaneId}-other` } });
    try {
      await expect(runtime.removeVolumeNamed(foreign)).rejects.toMatchObject({ code: 'volume_not_managed' });
      const body = new PassThrough();
      await expect(runtime.importVolume(foreign, bob, TEST_IMAGE, body)).rejects.toMatchObject({ code: 'volume_not_managed' });
      expect(body.destroyed).toBe(true);
      expect(await runtime.volumeExists(foreign)).toBe(true);
      expect(await helpers()).toEqual([]);
    } finally {
      await docker.getVolume(foreign).remove();
    }
  });
});

/** A listing as a restore leaves it: every entry owned by the student, no setuid or setgid bit. */
const asRestored = (text: string) =>
  text.replaceAll(
    /^([^|]*\|[^|]*\|)(\d+)\|\d+\|\d+\|/gm,
    (_line, head: string, mode: string) => `${head}${(Number.parseInt(mode, 8) & ~0o6000).toString(8)}|1000|1000|`,
  );

describe('restoring a backup', () => {
  it('brings back into a fresh volume what was backed up: names, types, modes, mtimes, links, data and the root, all owned by the student and without setuid or setgid', async () => {
    const volume = staging(ada.slug);
    await restoreBackup({ runtime, path: backupPath, volume, image: TEST_IMAGE, workspace: ada });
    expect(await helpers()).toEqual([]);
    const restored = await listing(volume);
    expect(restored).toBe(asRestored(adaListing));
    expect(restored).toMatch(/^\.\/suid-root\|regular file\|755\|1000\|1000\|/m);
    expect(restored).toMatch(/^\.\/shared\|directory\|775\|1000\|1000\|/m);
    expect(restored).toMatch(/^\.\/odd-owner\|regular file\|644\|1000\|1000\|/m);
    // The same again, through a backup of the restored volume: nothing left to change, byte for byte of content.
    const again = path.join(directory, 'again.tar.gz');
    const first = await writeBackupFile(again, { runtime, volume, image: TEST_IMAGE, workspace: ada });
    const twice = staging(ada.slug);
    await restoreBackup({ runtime, path: again, volume: twice, image: TEST_IMAGE, workspace: ada });
    expect(await listing(twice)).toBe(restored);
    const second = await writeBackup({ runtime, volume: twice, image: TEST_IMAGE, workspace: ada, out: new PassThrough().resume() });
    expect(second.sha256).toBe(first.sha256);
    rmSync(again);
    await runtime.removeVolumeNamed(volume);
    await runtime.removeVolumeNamed(twice);
  }, 240_000);

  it('hands files over to another workspace without the editor state, credentials and identity of the first student', async () => {
    const volume = staging(bob.slug);
    await restoreBackup({ runtime, path: backupPath, volume, image: TEST_IMAGE, workspace: bob, exclude: HAND_OVER_EXCLUDES });
    const left = /^\.\/(\.ssh|\.config\/code-server|\.local\/share\/code-server|\.gitconfig)(\/|\|)/;
    // A directory's link count counts its subdirectories, some of which stayed behind.
    const withoutDirectoryLinks = (text: string) => text.replaceAll(/^(.*\|directory\|(?:[^|]*\|){5})\d+\|/gm, '$1|');
    const expected = asRestored(adaListing)
      .split('\n')
      .filter((line) => !left.test(line))
      .join('\n');
    expect(withoutDirectoryLinks(await listing(volume))).toBe(withoutDirectoryLinks(expected));
    expect(expected).toContain('./project/src/main.py|');
    expect((await docker.getVolume(volume).inspect()).Labels).toMatchObject({ [LABELS.workspaceId]: bob.workspaceId, [LABELS.workspaceSlug]: bob.slug });
    await runtime.removeVolumeNamed(volume);
  }, 180_000);

  it('refuses a truncated backup (backup_truncated), a backup with one changed byte (backup_tampered), and other files (backup_not_ours), creating nothing', async () => {
    const truncated = path.join(directory, 'truncated.tar.gz');
    const flipped = path.join(directory, 'flipped.tar.gz');
    const randomGzip = path.join(directory, 'random.gz');
    const text = path.join(directory, 'notes.txt');
    copyFileSync(backupPath, flipped);
    const size = statSync(backupPath).size;
    // The first half of the file, as an interrupted copy leaves it.
    await run('dd', [`if=${backupPath}`, `of=${truncated}`, 'bs=1M', `count=${Math.floor(size / 2 / 1024 / 1024)}`]);
    const fd = openSync(flipped, 'r+');
    const offset = Math.floor(size / 2);
    const byte = Buffer.alloc(1);
    readSync(fd, byte, 0, 1, offset);
    writeSync(fd, Buffer.from([byte[0]! ^ 0x01]), 0, 1, offset);
    closeSync(fd);
    writeFileSync(randomGzip, gzipSync(randomBytes(1024 * 1024)));
    writeFileSync(text, 'not a backup\n');

    const cases: [string, string][] = [
      [truncated, 'backup_truncated'],
      [flipped, 'backup_tampered'],
      [randomGzip, 'backup_not_ours'],
      [text, 'backup_not_ours'],
    ];
    for (const [file, code] of cases) {
      await expect(verifyBackup(file)).rejects.toMatchObject({ code });
      const volume = staging(ada.slug);
      await expect(restoreBackup({ runtime, path: file, volume, image: TEST_IMAGE, workspace: ada })).rejects.toMatchObject({ code });
      expect(await runtime.volumeExists(volume)).toBe(false);
    }
    expect(await helpers()).toEqual([]);
  }, 180_000);

  it('removes the staging volume when the connection to the engine breaks midway, and the workspace volume is untouched', async () => {
    // The engine reached through a loopback proxy whose connections are cut once data flows.
    const proxy = await new TcpProxy({ path: '/var/run/docker.sock' }).listen();
    const cut = new DockerRuntime({ controlPlaneId, docker: { host: '127.0.0.1', port: proxy.port, protocol: 'http' } });
    const volume = staging(ada.slug);
    let dropped = false;
    try {
      const restoring = restoreBackup({
        runtime: cut,
        path: backupPath,
        volume,
        image: TEST_IMAGE,
        workspace: ada,
        // A quarter of the data in: the upload is under way (the archive streams with backpressure), and far from done.
        onProgress: (bytes) => void (bytes > (DATA_MB / 4) * 1024 * 1024 && !dropped && ((dropped = true), proxy.dropConnections())),
      });
      await expect(restoring).rejects.toThrow();
      expect(dropped).toBe(true);
    } finally {
      await proxy.close();
    }
    expect(await runtime.volumeExists(volume)).toBe(false);
    expect(await helpers()).toEqual([]);
    expect(await listing(adaVolume)).toBe(adaListing);
  }, 120_000);
});

describe('over every backup and restore above', () => {
  it('never started a helper container, and removed every one it created', async () => {
    const count = (action: string) => helperEvents.filter((event) => event === action).length;
    await eventually('the engine to report every removal', async () => count('create') > 0 && count('destroy') === count('create'), 5000);
    expect(helperEvents).not.toContain('start');
    expect(await helpers()).toEqual([]);
  });
});
