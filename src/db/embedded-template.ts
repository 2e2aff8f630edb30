/**
 * Where a new embedded database starts: a cluster fresh from PGlite's initdb, kept as a tarball, so
 * that a new data directory is unpacked from it (under a second) instead of running initdb (4 s on
 * a 2-core machine, most of a first `npm start`). `npm install` makes it (postinstall:
 * scripts/embedded-template.ts); without it a new data directory runs initdb, as before.
 *
 * It holds nothing of ours (no migration, no extension created): only what initdb makes, which
 * depends on PGlite's version alone, so it is named by that version and kept in
 * `node_modules/.cache/`, which a reinstall of PGlite clears with it.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROJECT_ROOT } from '../config.ts';

/** The installed PGlite's version, from its package.json (found beside its entry point: its exports do not list that file). */
function pgliteVersion(): Promise<string> {
  const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
  const manifest = path.join(entry.slice(0, entry.lastIndexOf(`${path.sep}dist${path.sep}`)), 'package.json');
  return readFile(manifest, 'utf8').then((text) => (JSON.parse(text) as { version: string }).version);
}

/** The template's file for the installed PGlite. */
export async function templateFile(): Promise<string> {
  return path.join(PROJECT_ROOT, 'node_modules', '.cache', 'classroom-control-plane', `pglite-${await pgliteVersion()}-initdb.tar.gz`);
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

/** Runs initdb in memory and keeps what it made as the template (written whole, then renamed into place). Returns the file. */
export async function writeTemplate(): Promise<string> {
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = await PGlite.create();
  let tarball: Blob;
  try {
    tarball = await pglite.dumpDataDir('gzip');
  } finally {
    await pglite.close();
  }
  const file = await templateFile();
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(`${file}.${process.pid}.tmp`, Buffer.from(await tarball.arrayBuffer()));
  await rename(`${file}.${process.pid}.tmp`, file);
  return file;
}
