import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { HAND_OVER_EXCLUDES } from '../../src/backup/hand-over-excludes.ts';
import { restoreBackup } from '../../src/backup/restore-backup.ts';
import { packEntry } from '../../src/backup/streams.ts';
import { verifyBackup } from '../../src/backup/verify-backup.ts';
import { writeBackup, writeBackupFile } from '../../src/backup/write-backup.ts';
import { craftBackup, UNBUILDABLE, type CraftedEntry } from '../helpers/backups.ts';
import { MemoryRuntime } from '../helpers/memory-runtime.ts';

/** A tar entry as these tests build and read them. */
interface Entry {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo';
  mode?: number;
  uid?: number;
  gid?: number;
  /** Seconds since the epoch. */
  mtime?: number;
  linkname?: string;
  data?: string | Buffer;
}

const IMAGE = 'classroom-workspace:test';
const ADA = { workspaceId: '11111111-1111-4111-8111-111111111111', slug: 'ada', ownerEmail: 'ada@school.test' };
const BOB = { workspaceId: '22222222-2222-4222-8222-222222222222', slug: 'bob' };

/** A tar of `entries`, as the engine would archive a volume (or as a backup is laid out). */
async function tarOf(entries: Entry[]): Promise<Buffer> {
  const pack = tar.pack();
  const collected = collect(pack);
  for (const entry of entries) {
    const type = entry.type ?? 'file';
    const data = Buffer.from(entry.data ?? '');
    // Type bits keep tar-stream from replacing a mode of 000 with its default.
    const header = {
      name: entry.name,
      type,
      mode: 0o100000 | (entry.mode ?? (type === 'directory' ? 0o755 : 0o644)),
      uid: entry.uid ?? 1000,
      gid: entry.gid ?? 1000,
      mtime: new Date((entry.mtime ?? 1_700_000_000) * 1000),
      linkname: entry.linkname,
    };
    if (type === 'file') pack.entry({ ...header, size: data.length }, data);
    else pack.entry(header);
  }
  pack.finalize();
  return collected;
}

async function collect(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The entries of a tar, in order. */
async function entriesOf(archive: Buffer): Promise<Required<Entry>[]> {
  const extract = tar.extract();
  extract.end(archive);
  const entries: Required<Entry>[] = [];
  for await (const entry of extract) {
    const { header } = entry;
    entries.push({
      name: header.name.replace(/\/$/, ''),
      type: header.type as Required<Entry>['type'],
      mode: header.mode & 0o7777,
      uid: header.uid,
      gid: header.gid,
      mtime: header.mtime.getTime() / 1000,
      linkname: header.linkname ?? '',
      data: await collect(entry),
    });
  }
  return entries;
}

/** The volume of the tests: every kind of entry, odd names, owners and modes. */
const VOLUME_ENTRIES: Entry[] = [
  { name: 'student', type: 'directory', mode: 0o750 },
  { name: 'student/project', type: 'directory' },
  { name: 'student/project/main.py', data: 'print("hi")\n', mtime: 1_577_934_245 },
  { name: 'student/project/run.sh', mode: 0o755, data: '#!/bin/sh\necho run\n' },
  { name: 'student/project/big.bin', data: randomBytes(256 * 1024) },
  { name: 'student/empty', type: 'directory', mode: 0o700 },
  { name: 'student/résumé notes.txt', mode: 0o600, data: 'notes\n' },
  { name: 'student/locked', mode: 0o000, data: 'nobody\n' },
  { name: 'student/owned-by-root', uid: 0, gid: 0, mode: 0o640, data: 'root\n' },
  { name: 'student/odd-owner', uid: 1234, gid: 2345, data: 'odd\n' },
  { name: 'student/suid-root', uid: 0, gid: 0, mode: 0o4755, data: '#!/bin/sh\nid\n' },
  { name: 'student/shared', type: 'directory', mode: 0o3775 },
  { name: 'student/link-to-main', type: 'symlink', linkname: 'project/main.py' },
  { name: 'student/dangling', type: 'symlink', linkname: '/nowhere/at all' },
  { name: 'student/hard-link-to-run', type: 'link', mode: 0o755, linkname: 'student/project/run.sh' },
  { name: 'student/.ssh', type: 'directory', mode: 0o700 },
  { name: 'student/.ssh/id_ed25519', mode: 0o600, data: 'PRIVATE KEY\n' },
  { name: 'student/.ssh-notes', data: 'not a key\n' },
  { name: 'student/.config', type: 'directory' },
  { name: 'student/.config/code-server', type: 'directory' },
  { name: 'student/.config/code-server/config.yaml', data: 'password: hunter2\n' },
  { name: 'student/.config/other.conf', data: 'kept\n' },
  { name: 'student/.local', type: 'directory' },
  { name: 'student/.local/share', type: 'directory' },
  { name: 'student/.local/share/code-server', type: 'directory' },
  { name: 'student/.local/share/code-server/coder.json', data: '{}' },
  { name: 'student/.gitconfig', data: '[user]\nname = Ada\n' },
  { name: 'student/project/key-copy', type: 'link', mode: 0o600, linkname: 'student/.ssh/id_ed25519' },
];
/** `home` and 20 directories of 200 bytes under home/deep/: a path of 4,024 bytes in the home. */
const DEEP_DIRS: CraftedEntry[] = [
  { path: 'home', type: 'directory' },
  { path: 'home/deep', type: 'directory' },
];
for (let index = 0; index < 20; index++) DEEP_DIRS.push({ path: `${DEEP_DIRS.at(-1)!.path}/${String(index).padStart(200, 'd')}`, type: 'directory' });
/** The longest name of a file in the deepest of DEEP_DIRS: /home/student/<path> of 4,095 bytes, PATH_MAX less its NUL. */
const DEEP_NAME = 4095 - Buffer.byteLength(`/home/student/${DEEP_DIRS.at(-1)!.path.slice('home/'.length)}/`);
const FILES = VOLUME_ENTRIES.filter((entry) => (entry.type ?? 'file') === 'file');
const BYTES = FILES.reduce((sum, entry) => sum + Buffer.from(entry.data ?? '').length, 0);

let directory: string;
let runtime: MemoryRuntime;
/** An intact backup of VOLUME_ENTRIES. */
let backupPath: string;

/** Puts `entries` in volume ws-ada-home of `memory` (as if they had been there). */
async function preloadVolume(memory: MemoryRuntime, entries: Entry[]): Promise<void> {
  await memory.importVolume('ws-ada-home', ADA, IMAGE, Readable.from([await tarOf(entries)], { objectMode: false }));
  memory.actions.length = 0;
}

async function backupOf(entries: Entry[], target: string) {
  const memory = new MemoryRuntime();
  await preloadVolume(memory, entries);
  return writeBackupFile(target, { runtime: memory, volume: 'ws-ada-home', image: IMAGE, workspace: ADA });
}

/** Writes to `to` the backup at `from` with its tar entries edited (then recompressed). */
async function rewrite(from: string, to: string, edit: (entries: Required<Entry>[]) => Entry[]): Promise<string> {
  const entries = await entriesOf(gunzipSync(readFileSync(from)));
  writeFileSync(to, gzipSync(await tarOf(edit(entries))));
  return to;
}

/** The manifest entry, edited. */
function withManifest(entries: Required<Entry>[], edit: (manifest: Record<string, unknown>) => unknown): Entry[] {
  return entries.map((entry) =>
    entry.name === 'manifest.json' ? { ...entry, data: JSON.stringify(edit(JSON.parse(entry.data.toString()) as Record<string, unknown>)) } : entry,
  );
}

const file = (name: string) => path.join(directory, name);

beforeAll(async () => {
  directory = mkdtempSync(path.join(os.tmpdir(), 'backup-format-'));
  backupPath = file('ada.tar.gz');
  await backupOf(VOLUME_ENTRIES, backupPath);
});

afterAll(() => rmSync(directory, { recursive: true, force: true }));

beforeEach(async () => {
  runtime = new MemoryRuntime();
  await preloadVolume(runtime, VOLUME_ENTRIES);
});

describe('writing a backup', () => {
  it('puts every file of the volume under home/ with its type, mode, owner, mtime and link target, in the order read, and the manifest last', async () => {
    const target = file('write.tar.gz');
    const progress: number[] = [];
    const manifest = await writeBackupFile(target, {
      runtime,
      volume: 'ws-ada-home',
      image: IMAGE,
      workspace: ADA,
      onProgress: (bytes) => progress.push(bytes),
    });

    const entries = await entriesOf(gunzipSync(readFileSync(target)));
    expect(entries.at(-1)!.name).toBe('manifest.json');
    const content = entries.slice(0, -1);
    expect(content.map((entry) => entry.name)).toEqual(VOLUME_ENTRIES.map((entry) => entry.name.replace(/^student/, 'home')));
    for (const [index, expected] of VOLUME_ENTRIES.entries()) {
      const type = expected.type ?? 'file';
      expect(content[index]).toMatchObject({
        type,
        mode: expected.mode ?? (type === 'directory' ? 0o755 : 0o644),
        uid: expected.uid ?? 1000,
        gid: expected.gid ?? 1000,
        mtime: expected.mtime ?? 1_700_000_000,
        linkname: type === 'link' ? expected.linkname!.replace(/^student/, 'home') : (expected.linkname ?? ''),
        data: Buffer.from(expected.data ?? ''),
      });
    }
    expect(JSON.parse(entries.at(-1)!.data.toString())).toEqual(manifest);
    expect(manifest).toEqual({
      format: 1,
      slug: 'ada',
      workspaceId: ADA.workspaceId,
      ownerEmail: ADA.ownerEmail,
      created: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      image: IMAGE,
      files: FILES.length,
      bytes: BYTES,
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(progress.at(-1)).toBe(BYTES);
    expect(progress).toEqual(progress.toSorted((a, b) => a - b));
    expect(runtime.actions).toEqual(['export volume ws-ada-home']);
  });

  it('leaves FIFOs and devices out, with their other names (hard links), and the backup restores', async () => {
    const target = file('fifo.tar.gz');
    await backupOf(
      [
        { name: 'student', type: 'directory' },
        { name: 'student/pipe', type: 'fifo' },
        { name: 'student/pipe-again', type: 'link', linkname: 'student/pipe' },
        { name: 'student/kept', data: 'x' },
      ],
      target,
    );
    const names = (await entriesOf(gunzipSync(readFileSync(target)))).map((entry) => entry.name);
    expect(names).toEqual(['home', 'home/kept', 'manifest.json']);
    await expect(verifyBackup(target)).resolves.toMatchObject({ files: 1 });
  });

  it.each<[string, Entry]>([
    ['a name', { name: 'student/caf\uFFFD.txt', data: 'latin-1\n' }],
    ['a symbolic link target', { name: 'student/link', type: 'symlink', linkname: 'caf\uFFFD.txt' }],
  ])('refuses a volume with %s that is not UTF-8 (read as U+FFFD): 409 backup_unrestorable naming it, no file left', async (what, entry) => {
    const target = file(`not-utf8-${what.length}.tar.gz`);
    const writing = backupOf([{ name: 'student', type: 'directory' }, entry], target);
    await expect(writing).rejects.toMatchObject({
      status: 409,
      code: 'backup_unrestorable',
      message: expect.stringContaining(
        `"${entry.name.replace(/^student/, 'home')}" ${what === 'a name' ? 'has a name' : 'is a symbolic link to a target'} that is not UTF-8 text`,
      ),
    });
    expect(readdirSync(directory).filter((name) => name.startsWith('not-utf8'))).toEqual([]);
  });

  it('writes the file readable by its owner only, through a partial file that is gone once it is in place', async () => {
    const target = file('private/ada.tar.gz');
    mkdirSync(path.dirname(target));
    await writeBackupFile(target, { runtime, volume: 'ws-ada-home', image: IMAGE, workspace: ADA });
    expect(readdirSync(path.dirname(target))).toEqual(['ada.tar.gz']);
    expect(statSync(target).mode & 0o777).toBe(0o600);
  });

  it('removes the partial file and rethrows when the export fails, leaving what was at the path', async () => {
    const dir = file('failed');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'ada.tar.gz'), 'the previous backup');
    const engineDown = new Error('engine down');
    runtime.failures.set('exportVolume', engineDown);
    await expect(writeBackupFile(path.join(dir, 'ada.tar.gz'), { runtime, volume: 'ws-ada-home', image: IMAGE, workspace: ADA })).rejects.toBe(engineDown);
    expect(readdirSync(dir)).toEqual(['ada.tar.gz']);
    expect(readFileSync(path.join(dir, 'ada.tar.gz'), 'utf8')).toBe('the previous backup');
  });

  it.each([0, 1024, 20_000, 100_000, 250_000])('fails with the error of a destination that fails after %i bytes, and settles', async (limit) => {
    let written = 0;
    const full = Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
    const out = new Writable({
      highWaterMark: 1024,
      write: (chunk: Buffer, _encoding, done) => {
        written += chunk.length;
        done(written > limit ? full : null);
      },
    });
    await expect(writeBackup({ runtime, volume: 'ws-ada-home', image: IMAGE, workspace: ADA, out })).rejects.toBe(full);
  });

  it('fails the writes of an entry whose archive was destroyed and closed, rather than waiting for it forever', async () => {
    const pack = tar.pack();
    const sink = packEntry(pack, { name: 'student/big', size: 1 << 20 });
    pack.destroy();
    await new Promise((resolve) => setTimeout(resolve, 10));
    await expect(sink.write(Buffer.alloc(1 << 20))).rejects.toThrow('closed');
    await expect(sink.end()).rejects.toThrow();
  });

  it('fails with volume_not_found for a volume that does not exist, and leaves no file', async () => {
    await expect(writeBackupFile(file('missing.tar.gz'), { runtime, volume: 'ws-nobody-home', image: IMAGE, workspace: ADA })).rejects.toMatchObject({
      code: 'volume_not_found',
    });
    expect(readdirSync(directory).filter((name) => name.startsWith('missing'))).toEqual([]);
  });
});

describe('verifying a backup', () => {
  it('returns the manifest of an intact backup', async () => {
    const manifest = await verifyBackup(backupPath);
    expect(manifest).toMatchObject({ format: 1, slug: 'ada', files: FILES.length, bytes: BYTES });
  });

  it.each<[string, (entry: Required<Entry>) => Partial<Entry>]>([
    ['a mode', () => ({ mode: 0o777 })],
    ['an owner', () => ({ uid: 0 })],
    ['a group', () => ({ gid: 0 })],
    ['a name', (entry) => ({ name: `${entry.name}-renamed` })],
    ['an mtime', (entry) => ({ mtime: entry.mtime + 1 })],
    ['a byte of data', (entry) => ({ data: Buffer.from(entry.data.toString().replace('r', 's')) })],
  ])('finds %s changed on one entry: backup_tampered', async (_what, change) => {
    const tampered = await rewrite(backupPath, file(`tampered-${randomBytes(4).toString('hex')}.tar.gz`), (entries) =>
      // An entry nothing else names (a renamed link target would break the tree before the checksum).
      entries.map((entry) => (entry.name === 'home/project/main.py' ? { ...entry, ...change(entry) } : entry)),
    );
    await expect(verifyBackup(tampered)).rejects.toMatchObject({ code: 'backup_tampered', status: 400 });
  });

  it('finds a changed symbolic link target: backup_tampered', async () => {
    const tampered = await rewrite(backupPath, file('tampered-link.tar.gz'), (entries) =>
      entries.map((entry) => (entry.name === 'home/link-to-main' ? { ...entry, linkname: '/etc/passwd' } : entry)),
    );
    await expect(verifyBackup(tampered)).rejects.toMatchObject({ code: 'backup_tampered' });
  });

  it('finds entries swapped, removed or added: backup_tampered', async () => {
    // Each still a tree a volume can hold: two files of one directory swapped, an empty directory removed or added.
    const swapped = await rewrite(backupPath, file('swapped.tar.gz'), (entries) => [...entries.slice(0, 2), entries[3]!, entries[2]!, ...entries.slice(4)]);
    const removed = await rewrite(backupPath, file('removed.tar.gz'), (entries) => entries.filter((entry) => entry.name !== 'home/empty'));
    const added = await rewrite(backupPath, file('added.tar.gz'), (entries) => [entries[0]!, { name: 'home/extra', type: 'directory' }, ...entries.slice(1)]);
    for (const tampered of [swapped, removed, added]) await expect(verifyBackup(tampered)).rejects.toMatchObject({ code: 'backup_tampered' });
  });

  it('finds counts that differ from the manifest: backup_tampered', async () => {
    const tampered = await rewrite(backupPath, file('counts.tar.gz'), (entries) =>
      withManifest(entries, (manifest) => ({ ...manifest, files: FILES.length + 1 })),
    );
    await expect(verifyBackup(tampered)).rejects.toMatchObject({ code: 'backup_tampered' });
  });

  it('finds one changed byte of the compressed file: backup_tampered', async () => {
    const bytes = readFileSync(backupPath);
    const middle = Math.floor(bytes.length / 2);
    bytes[middle] = bytes[middle]! ^ 0x01;
    writeFileSync(file('flipped.tar.gz'), bytes);
    await expect(verifyBackup(file('flipped.tar.gz'))).rejects.toMatchObject({ code: 'backup_tampered' });
  });

  it('finds a file cut short, an empty file, and a tar that ends before its manifest: backup_truncated', async () => {
    const bytes = readFileSync(backupPath);
    writeFileSync(file('half.tar.gz'), bytes.subarray(0, Math.floor(bytes.length / 2)));
    writeFileSync(file('no-trailer.tar.gz'), bytes.subarray(0, bytes.length - 4));
    writeFileSync(file('empty.tar.gz'), '');
    const noManifest = await rewrite(backupPath, file('no-manifest.tar.gz'), (entries) => entries.slice(0, -1));
    for (const truncated of ['half.tar.gz', 'no-trailer.tar.gz', 'empty.tar.gz']) {
      await expect(verifyBackup(file(truncated))).rejects.toMatchObject({ code: 'backup_truncated', message: expect.stringContaining('ends early') });
    }
    await expect(verifyBackup(noManifest)).rejects.toMatchObject({ code: 'backup_truncated' });
  });

  it('says backup_not_found when there is no file', async () => {
    await expect(verifyBackup(file('nothing-here.tar.gz'))).rejects.toMatchObject({ code: 'backup_not_found', status: 404 });
  });

  describe('refuses what is not a workspace backup: backup_not_ours', () => {
    const notOurs = { code: 'backup_not_ours', message: expect.stringContaining('is not a workspace backup') };

    it('a plain text file, a gzip of random bytes, a gzip of nothing', async () => {
      writeFileSync(file('notes.txt'), 'just some notes\n');
      writeFileSync(file('random.gz'), gzipSync(randomBytes(64 * 1024)));
      writeFileSync(file('nothing.gz'), gzipSync(Buffer.alloc(0)));
      await expect(verifyBackup(file('notes.txt'))).rejects.toMatchObject({ ...notOurs, message: expect.stringContaining('not gzip-compressed') });
      await expect(verifyBackup(file('random.gz'))).rejects.toMatchObject({ ...notOurs, message: expect.stringContaining('not a tar archive') });
      await expect(verifyBackup(file('nothing.gz'))).rejects.toMatchObject({ ...notOurs, message: expect.stringContaining('no manifest') });
    });

    it('a gzip of some other tar', async () => {
      writeFileSync(file('other.tar.gz'), gzipSync(await tarOf([{ name: 'etc/passwd', data: 'root:x:0:0\n' }])));
      await expect(verifyBackup(file('other.tar.gz'))).rejects.toMatchObject({ ...notOurs, message: expect.stringContaining('outside home/') });
    });

    it.each<[string, (entries: Required<Entry>[]) => Entry[], string]>([
      ['an absolute path', (entries) => [{ name: '/etc/passwd', data: 'x' }, ...entries], 'outside home/ (/etc/passwd)'],
      ['a path climbing out of home/', (entries) => [{ name: 'home/../etc/passwd', data: 'x' }, ...entries], 'outside home/ (home/../etc/passwd)'],
      ['an entry outside home/', (entries) => [{ name: 'etc/passwd', data: 'x' }, ...entries], 'outside home/ (etc/passwd)'],
      ['a hard link to outside home/', (entries) => [{ name: 'home/passwd', type: 'link', linkname: '/etc/passwd' }, ...entries], 'linked to /etc/passwd'],
      ['a FIFO', (entries) => [{ name: 'home/pipe', type: 'fifo' }, ...entries], 'a kind backups never hold (fifo: home/pipe)'],
      ['an entry after the manifest', (entries) => [...entries, { name: 'home/late', data: 'x' }], 'entries after its manifest'],
      ['a manifest of another format', (entries) => withManifest(entries, (manifest) => ({ ...manifest, format: 2 })), 'format 2'],
      ['a manifest without format', (entries) => withManifest(entries, ({ format: _format, ...manifest }) => manifest), 'format nothing'],
      ['a manifest without sha256', (entries) => withManifest(entries, ({ sha256: _sha256, ...manifest }) => manifest), 'no sha256'],
      ['a manifest with a negative count', (entries) => withManifest(entries, (manifest) => ({ ...manifest, bytes: -1 })), 'no bytes count'],
      ['a manifest that is not an object', (entries) => withManifest(entries, () => [1]), 'not a JSON object'],
      [
        'a manifest that is not JSON',
        (entries) => entries.map((entry) => (entry.name === 'manifest.json' ? { ...entry, data: '{"format": 1,' } : entry)),
        'not valid JSON',
      ],
    ])('%s', async (_what, edit, reason) => {
      const forged = await rewrite(backupPath, file(`forged-${randomBytes(4).toString('hex')}.tar.gz`), edit);
      await expect(verifyBackup(forged)).rejects.toMatchObject({ ...notOurs, message: expect.stringContaining(reason) });
    });

    it.each([
      ...Object.entries(UNBUILDABLE),
      [
        'home twice',
        [
          { path: 'home', type: 'directory' },
          { path: 'home', type: 'directory' },
        ],
      ],
      [
        'an entry before its directory',
        [
          { path: 'home', type: 'directory' },
          { path: 'home/later/file', type: 'file' },
          { path: 'home/later', type: 'directory' },
        ],
      ],
      [
        'a hard link to a directory',
        [
          { path: 'home', type: 'directory' },
          { path: 'home/d', type: 'directory' },
          { path: 'home/h', type: 'link', linkname: 'home/d' },
        ],
      ],
      ['a path one byte longer than a workspace holds', [...DEEP_DIRS, { path: `${DEEP_DIRS.at(-1)!.path}/${'f'.repeat(DEEP_NAME + 1)}`, type: 'file' }]],
      [
        'a symbolic link target longer than a link holds',
        [
          { path: 'home', type: 'directory' },
          { path: 'home/far', type: 'symlink', linkname: 't'.repeat(4096) },
        ],
      ],
    ] as [string, CraftedEntry[]][])('a tree a volume cannot hold, even with a matching manifest: %s', async (_what, entries) => {
      const forged = file(`unbuildable-${randomBytes(4).toString('hex')}.tar.gz`);
      await craftBackup(forged, entries, { ...ADA, image: IMAGE });
      await expect(verifyBackup(forged)).rejects.toMatchObject(notOurs);
    });

    it('and takes the same kinds of entry when they build a tree', async () => {
      const fine = file('buildable.tar.gz');
      await craftBackup(
        fine,
        [
          { path: 'home', type: 'directory', mode: 0o755 },
          { path: 'home/etc', type: 'symlink', linkname: '/etc' },
          { path: 'home/d', type: 'directory' },
          { path: 'home/d/f', type: 'file', data: Buffer.from('x\n') },
          { path: 'home/h', type: 'link', linkname: 'home/d/f' },
          { path: 'home/hs', type: 'link', linkname: 'home/etc' },
          { path: `home/${'n'.repeat(255)}`, type: 'file' },
          { path: 'home/far', type: 'symlink', linkname: 't'.repeat(4095) },
          ...DEEP_DIRS.slice(1),
          { path: `${DEEP_DIRS.at(-1)!.path}/${'f'.repeat(DEEP_NAME)}`, type: 'file' },
        ],
        { ...ADA, image: IMAGE },
      );
      await expect(verifyBackup(fine)).resolves.toMatchObject({ files: 3 });
    });
  });
});

describe('restoring a backup', () => {
  it('brings the volume back entry for entry: names, types, modes, mtimes, link targets and data, the root included; every owner the student, no setuid or setgid', async () => {
    const manifest = await restoreBackup({ runtime, path: backupPath, volume: 'ws-ada-staging', image: IMAGE, workspace: ADA });
    expect(manifest).toMatchObject({ slug: 'ada', files: FILES.length });
    expect(runtime.actions).toEqual(['create volume ws-ada-staging', 'import volume ws-ada-staging']);
    const restored = await entriesOf(runtime.volumeArchives.get('ws-ada-staging')!);
    const original = await entriesOf(runtime.volumeArchives.get('ws-ada-home')!);
    expect(restored).toEqual(original.map((entry) => ({ ...entry, uid: 1000, gid: 1000, mode: entry.mode & ~0o6000 })));
    expect(restored.find((entry) => entry.name === 'student/suid-root')).toMatchObject({ uid: 1000, gid: 1000, mode: 0o755 });
    // The sticky bit is no privilege: it stays.
    expect(restored.find((entry) => entry.name === 'student/shared')).toMatchObject({ mode: 0o1775 });
  });

  it('reports progress in file bytes written', async () => {
    const progress: number[] = [];
    await restoreBackup({
      runtime,
      path: backupPath,
      volume: 'ws-ada-staging',
      image: IMAGE,
      workspace: ADA,
      onProgress: (bytes) => progress.push(bytes),
    });
    expect(progress.at(-1)).toBe(BYTES);
  });

  it('leaves out the hand-over excludes and hard links to them, and keeps names that only look alike', async () => {
    await restoreBackup({ runtime, path: backupPath, volume: 'ws-bob-staging', image: IMAGE, workspace: BOB, exclude: HAND_OVER_EXCLUDES });
    const names = (await entriesOf(runtime.volumeArchives.get('ws-bob-staging')!)).map((entry) => entry.name);
    expect(names).toEqual(
      VOLUME_ENTRIES.map((entry) => entry.name).filter(
        (name) => !/^student\/(\.ssh(\/|$)|\.config\/code-server|\.local\/share\/code-server|\.gitconfig)/.test(name) && name !== 'student/project/key-copy',
      ),
    );
    expect(names).toEqual(expect.arrayContaining(['student/.ssh-notes', 'student/.config/other.conf', 'student/.local/share', 'student/project/run.sh']));
  });

  it('refuses an exclude that is not a path inside home, before touching anything', async () => {
    for (const exclude of ['../elsewhere', '/etc', '', 'a//b']) {
      await expect(
        restoreBackup({ runtime, path: backupPath, volume: 'ws-ada-staging', image: IMAGE, workspace: ADA, exclude: [exclude] }),
      ).rejects.toMatchObject({
        code: 'invalid_exclude',
      });
    }
    expect(runtime.actions).toEqual([]);
  });

  it('fails on a backup damaged midway, removing its staging volume, the workspace volume untouched', async () => {
    const bytes = readFileSync(backupPath);
    writeFileSync(file('restore-half.tar.gz'), bytes.subarray(0, bytes.length - 100));
    await expect(restoreBackup({ runtime, path: file('restore-half.tar.gz'), volume: 'ws-ada-staging', image: IMAGE, workspace: ADA })).rejects.toMatchObject({
      code: 'backup_truncated',
    });
    expect(runtime.actions).toEqual(['create volume ws-ada-staging', 'remove volume ws-ada-staging']);
    expect(runtime.volumes.has('ws-ada-staging')).toBe(false);
    expect(runtime.volumes.has('ws-ada-home')).toBe(true);
  });

  it('makes no staging volume for a file refused before its first entry', async () => {
    writeFileSync(file('restore-text.tar.gz'), 'not a backup\n');
    await expect(restoreBackup({ runtime, path: file('restore-text.tar.gz'), volume: 'ws-ada-staging', image: IMAGE, workspace: ADA })).rejects.toMatchObject({
      code: 'backup_not_ours',
    });
    expect(runtime.actions).toEqual([]);
  });

  it('refuses a staging volume that already exists (the workspace volume, say), touching nothing', async () => {
    await expect(restoreBackup({ runtime, path: backupPath, volume: 'ws-ada-home', image: IMAGE, workspace: ADA })).rejects.toMatchObject({
      code: 'restore_target_exists',
      status: 409,
    });
    expect(runtime.actions).toEqual([]);
  });

  it('removes the staging volume and rethrows when the import fails midway', async () => {
    const engineDown = new Error('engine down');
    runtime.failures.set('importVolume', engineDown);
    await expect(restoreBackup({ runtime, path: backupPath, volume: 'ws-ada-staging', image: IMAGE, workspace: ADA })).rejects.toBe(engineDown);
    expect(runtime.actions).toEqual(['create volume ws-ada-staging', 'remove volume ws-ada-staging']);
    expect(runtime.volumes.has('ws-ada-home')).toBe(true);
  });
});
