/** Tar and zip archives as tests make and read them. */
import { Readable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import yazl from 'yazl';

/** A tar (gzipped unless `plain`) of these entries: a path and its text, or a header of another kind (a folder, a link, a device). */
export async function tarOf(entries: (Partial<tar.Header> & { name: string; text?: string })[], plain = false): Promise<Buffer> {
  const pack = tar.pack();
  for (const { text, ...header } of entries) {
    if (text === undefined) pack.entry({ mode: 0o644, ...header });
    else pack.entry({ mode: 0o644, ...header }, text);
  }
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  const bytes = Buffer.concat(chunks);
  return plain ? bytes : gzipSync(bytes);
}

/** The entries of a .tar.gz: each file's path and text, each folder's path with a slash and ''. */
export async function entriesOf(gz: Buffer): Promise<Map<string, string>> {
  const extract = tar.extract();
  Readable.from([gunzipSync(gz)]).pipe(extract);
  const found = new Map<string, string>();
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    found.set(entry.header.type === 'directory' ? `${entry.header.name.replace(/\/$/, '')}/` : entry.header.name, Buffer.concat(chunks).toString('utf8'));
  }
  return found;
}

/** A zip entry: a file (its text, and its Unix mode: 0o120777 makes a link) or, ending in a slash, a folder. */
export interface ZipEntry {
  name: string;
  text?: string;
  mode?: number;
  mtime?: Date;
}

/**
 * A zip of these entries, as a computer's "compress this folder" makes one (Unix modes, deflated).
 * `rename` then changes names in its bytes (each pair the same length): what yazl will not write, a
 * path out of its folder or an absolute one, as a hostile archive holds.
 */
export async function zipOf(entries: ZipEntry[], rename: [string, string][] = []): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const { name, text, mode, mtime } of entries) {
    if (name.endsWith('/')) zip.addEmptyDirectory(name, { ...(mtime && { mtime }) });
    else zip.addBuffer(Buffer.from(text ?? ''), name, { mode: mode ?? 0o100644, ...(mtime && { mtime }) });
  }
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  let bytes = Buffer.concat(chunks);
  for (const [from, to] of rename) {
    if (from.length !== to.length) throw new Error('a zip name is renamed to one of the same length only');
    bytes = Buffer.from(bytes.toString('latin1').replaceAll(from, to), 'latin1');
  }
  return bytes;
}
