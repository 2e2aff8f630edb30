// @lane alone
/**
 * A new embedded database starts from the template (src/db/embedded-template.ts: initdb and the
 * migrations) when there is one, runs initdb and the migrations when there is none, and after all
 * when the template is damaged; what it unpacks stays inside the data directory;
 * a data directory that already holds something is never unpacked into. Alone: initdb, run four
 * times here, keeps both cores busy, and the browser tests of the other lanes time out beside it.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { migrateAt, openMigrated } from '../../src/db/database.ts';
import tar from 'tar-stream';
import { templateFile, unpackTemplate, writeTemplate } from '../../src/db/embedded-template.ts';
import { categoryLogger } from '../../src/log.ts';
import { captureLogger } from '../helpers/controllers.ts';

let scratch: string;
/** A template made as npm install makes it (initdb, then the migrations), into this file's own directory, once. */
let made: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'cp-embedded-template-'));
  made = await writeTemplate(async (url) => void (await migrateAt(url)), path.join(scratch, 'template.tar'));
}, 120_000);
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** Opens (and migrates) a new embedded database in `dataDir` from `template`, writes a row and reads it back; returns the log's messages. */
async function openAndUse(dataDir: string, template: string): Promise<string[]> {
  const { root, records } = captureLogger();
  const database = await openMigrated({
    url: undefined,
    dataDir,
    log: categoryLogger(root, 'db'),
    embedded: { mode: 'owner', describe: { role: 'test', command: 'test' }, template },
  });
  try {
    await database.dataSource.query(`INSERT INTO users (email, name, role) VALUES ('ada@example.org', 'Ada', 'user')`);
    const [user] = (await database.dataSource.query(`SELECT name FROM users WHERE email = 'ada@example.org'`)) as { name: string }[];
    expect(user).toEqual({ name: 'Ada' });
    // The extension the migrations create works on it too.
    const [similar] = (await database.dataSource.query(`SELECT similarity('Ada', 'Adam') > 0 AS similar`)) as { similar: boolean }[];
    expect(similar).toEqual({ similar: true });
  } finally {
    await database.close();
  }
  return records.map((record) => String(record.message));
}

it('is named by the installed PGlite and the migrations, and a new data directory is unpacked from it, its schema up to date', async () => {
  expect(path.basename(await templateFile())).toMatch(/^pglite-\d+\.\d+\.\d+-schema-[0-9a-f]{12}\.tar$/);
  // npm install's postinstall (scripts/embedded-template.ts) wrote the installed one where templateFile says.
  expect(existsSync(await templateFile())).toBe(true);
  expect(made).toBe(path.join(scratch, 'template.tar'));
  expect(existsSync(`${made}.${process.pid}.tmp`)).toBe(false);
  const messages = await openAndUse(path.join(scratch, 'from-template'), made);
  expect(messages).toContain('unpacked a new PGlite cluster from the initdb template');
  expect(messages).toContain('database schema is up to date');
}, 120_000);

it('runs initdb when there is no template, and again after all when the template is damaged (saying so)', async () => {
  const missing = await openAndUse(path.join(scratch, 'no-template'), path.join(scratch, 'nothing-here.tar'));
  expect(missing.filter((message) => message.includes('template'))).toEqual([]);
  expect(missing.some((message) => message.startsWith('applied migrations: '))).toBe(true);

  const damaged = path.join(scratch, 'damaged.tar');
  await writeFile(damaged, 'not a tarball');
  const messages = await openAndUse(path.join(scratch, 'damaged-template'), damaged);
  expect(messages).toContain('the initdb template failed to load; making the new PGlite cluster with initdb instead');
}, 120_000);

it('never unpacks into a data directory that already holds something', async () => {
  const dataDir = path.join(scratch, 'not-empty');
  await mkdir(path.join(dataDir, 'pgdata'), { recursive: true });
  await writeFile(path.join(dataDir, 'pgdata', 'left-behind'), 'an earlier file');
  const messages = await openAndUse(dataDir, made);
  expect(messages.filter((message) => message.includes('template'))).toEqual([]);
  expect(existsSync(path.join(dataDir, 'pgdata', 'left-behind'))).toBe(true);
}, 120_000);

it('unpacks every entry inside the data directory, with its mode, whatever its name says', async () => {
  const pack = tar.pack();
  pack.entry({ name: '/base', type: 'directory', mode: 0o750 });
  pack.entry({ name: '/base/1259', mode: 0o600 }, 'a relation');
  pack.entry({ name: '../../outside', mode: 0o600 }, 'kept in');
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  const file = path.join(scratch, 'crafted.tar');
  await writeFile(file, Buffer.concat(chunks));
  const dataDir = path.join(scratch, 'crafted', 'pgdata');
  await mkdir(dataDir, { recursive: true });
  expect(await unpackTemplate(file, dataDir)).toBe(true);
  expect(await readFile(path.join(dataDir, 'base', '1259'), 'utf8')).toBe('a relation');
  expect((await stat(path.join(dataDir, 'base', '1259'))).mode & 0o777).toBe(0o600);
  expect((await stat(path.join(dataDir, 'base'))).mode & 0o777).toBe(0o750);
  expect(await readFile(path.join(dataDir, 'outside'), 'utf8')).toBe('kept in');
  expect(existsSync(path.join(scratch, 'outside'))).toBe(false);
  expect(await unpackTemplate(path.join(scratch, 'nothing-here.tar'), dataDir)).toBe(false);
});
