/**
 * Where a new embedded database starts: a cluster made by PGlite's initdb with our migrations
 * applied, kept as a tarball, so that a new data directory is unpacked from it (a quarter of a
 * second) instead of running initdb and then every migration (4 s and 1 s on a 2-core machine, most of a
 * first `npm start`). `npm install` makes it (postinstall: scripts/embedded-template.ts); without
 * it a new data directory runs initdb and the migrations, as before.
 *
 * What it holds depends on PGlite's version and on the migrations, so both name it; it is kept in
 * `node_modules/.cache/`, which a reinstall clears. Uncompressed (40 MB): unpacking a gzipped one
 * took a quarter of a second longer.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { closeSync, createReadStream, mkdirSync, openSync, writeSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import tar from 'tar-stream';
import { MIGRATIONS } from '../../migrations/index.ts';
import { PROJECT_ROOT } from '../config.ts';

/** Where templates are kept. */
const CACHE = path.join(PROJECT_ROOT, 'node_modules', '.cache', 'classroom-control-plane');

/** The installed PGlite's version, from its package.json (found beside its entry point: its exports do not list that file). */
async function pgliteVersion(): Promise<string> {
  const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
  const manifest = path.join(entry.slice(0, entry.lastIndexOf(`${path.sep}dist${path.sep}`)), 'package.json');
  return (JSON.parse(await readFile(manifest, 'utf8')) as { version: string }).version;
}

/** The template's file for the installed PGlite and the migrations of this checkout. */
export async function templateFile(): Promise<string> {
  const schema = createHash('sha256')
    .update(MIGRATIONS.map((migration) => migration.name).join('\n'))
    .digest('hex')
    .slice(0, 12);
  return path.join(CACHE, `pglite-${await pgliteVersion()}-schema-${schema}.tar`);
}

/**
 * Unpacks the template in `file` into `dataDir` (new and empty), streamed from the file to the
 * directory, each entry with its mode. False when there is no template; throws when it is damaged
 * (what was unpacked so far stays for the caller to remove). Its writes are synchronous: it runs
 * before PGlite starts, in the thread that serves the database (or an operator command's), where
 * nothing else waits, and a thousand files each through the thread pool took 1.8 s, not 0.3 s.
 * PGlite's own loadDataDir took 2 s here (the 40 MB read into a Blob, read back in chunks, joined
 * and unpacked in its file system).
 */
export async function unpackTemplate(file: string, dataDir: string): Promise<boolean> {
  const input = createReadStream(file, { highWaterMark: 1024 * 1024 });
  const opened = await once(input, 'open').then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return false;
      throw error;
    },
  );
  if (!opened) return false;
  const extract = tar.extract();
  const feeding = pipeline(input, extract);
  try {
    for await (const entry of extract) {
      const { name, type, mode } = entry.header;
      // PGlite writes names from the cluster's root ("/base/5/1259"): kept inside dataDir whatever they say.
      const target = path.join(dataDir, path.join('/', name));
      if (type === 'directory') {
        mkdirSync(target, { recursive: true, mode });
        entry.resume();
      } else if (type === 'file') {
        mkdirSync(path.dirname(target), { recursive: true });
        const fd = openSync(target, 'w', mode);
        try {
          for await (const chunk of entry) writeSync(fd, chunk as Buffer);
        } finally {
          closeSync(fd);
        }
      } else throw new Error(`the template holds an entry of type ${type} (${name})`);
    }
    await feeding;
  } catch (error) {
    extract.destroy();
    await feeding.catch(() => undefined);
    throw error;
  }
  return true;
}

/**
 * Runs initdb in memory, then `prepare` on the cluster (the migrations, through a loopback
 * PostgreSQL URL), and keeps what they made as the template: written whole, then renamed into
 * place. Into `file` when given (a test's own), else into the installed PGlite's (templateFile),
 * and templates of other versions are removed. Returns the file.
 */
export async function writeTemplate(prepare: (url: string) => Promise<void>, file?: string): Promise<string> {
  const [{ PGlite }, { PGLiteSocketServer }, { pg_trgm }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('@electric-sql/pglite-socket'),
    import('@electric-sql/pglite/contrib/pg_trgm'),
  ]);
  const pglite = await PGlite.create({ extensions: { pg_trgm } });
  let tarball: Blob;
  try {
    // Two connections: migrate() holds its advisory lock on one while the migrations run on the other.
    const server = new PGLiteSocketServer({ db: pglite, host: '127.0.0.1', port: 0, maxConnections: 2 });
    await server.start();
    try {
      await prepare(`postgres://postgres@${server.getServerConn()}/postgres`);
    } finally {
      await server.stop();
    }
    tarball = await pglite.dumpDataDir('none');
  } finally {
    await pglite.close();
  }
  const target = file ?? (await templateFile());
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(`${target}.${process.pid}.tmp`, Buffer.from(await tarball.arrayBuffer()));
  await rename(`${target}.${process.pid}.tmp`, target);
  if (file !== undefined) return target;
  for (const name of await readdir(CACHE)) {
    if (name.startsWith('pglite-') && path.join(CACHE, name) !== target && !name.endsWith('.tmp')) await rm(path.join(CACHE, name), { force: true });
  }
  return target;
}
