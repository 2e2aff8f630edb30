/** Tar archives as tests make and read them. */
import { Readable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import tar from 'tar-stream';

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
