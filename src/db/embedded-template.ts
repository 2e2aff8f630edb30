/**
 * Where a new embedded database starts: a cluster made by PGlite's initdb with our migrations
 * applied, kept as a tarball, so that a new data directory is unpacked from it (about a second)
 * instead of running initdb and then every migration (4 s and 1 s on a 2-core machine, most of a
 * first `npm start`). `npm install` makes it (postinstall: scripts/embedded-template.ts); without
 * it a new data directory runs initdb and the migrations, as before.
 *
 * What it holds depends on PGlite's version and on the migrations, so both name it; it is kept in
 * `node_modules/.cache/`, which a reinstall clears. Uncompressed (40 MB): unpacking a gzipped one
 * took a quarter of a second longer.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
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

/** The template in `file`, or undefined when there is none. */
export async function readTemplate(file: string): Promise<Blob | undefined> {
  try {
    return new Blob([await readFile(file)]);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Runs initdb in memory, then `prepare` on the cluster (the migrations, through a loopback
 * PostgreSQL URL), and keeps what they made as the template: written whole, then renamed into
 * place; templates of other versions are removed. Returns the file.
 */
export async function writeTemplate(prepare: (url: string) => Promise<void>): Promise<string> {
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
  const file = await templateFile();
  await mkdir(CACHE, { recursive: true });
  await writeFile(`${file}.${process.pid}.tmp`, Buffer.from(await tarball.arrayBuffer()));
  await rename(`${file}.${process.pid}.tmp`, file);
  for (const name of await readdir(CACHE)) {
    if (name.startsWith('pglite-') && path.join(CACHE, name) !== file && !name.endsWith('.tmp')) await rm(path.join(CACHE, name), { force: true });
  }
  return file;
}
