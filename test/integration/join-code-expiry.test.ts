/**
 * Issue 43, item 5: a join code's expiry on the real Docker Engine and PostgreSQL. A guest who
 * joined and worked in their workspace (a file in their home), and one who never opened theirs; the
 * coach closes the code (as at its expiry); the expiry, woken by that change, backs up the worker's
 * home (a stored backup holding the file), then deletes both guests, so that the workspace
 * controller removes the container and the home volume, and marks the code handled naming the backup.
 */
import { createReadStream, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import { JoinCodeExpiry } from '../../controllers/join-code-expiry.ts';
import { Backups } from '../../src/backup/backups.ts';
import { names } from '../../src/docker/runtime.ts';
import { categoryLogger } from '../../src/log.ts';
import type { Actor } from '../../src/store/audit.ts';
import { captureLogger, createHarness, eventually, execIn, inspectByName, removeEverything, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { openAndWait } from '../helpers/workspaces.ts';

/** The names of a stored backup's entries. */
async function entriesOf(file: string): Promise<string[]> {
  const found: string[] = [];
  const extract = tar.extract();
  extract.on('entry', (header, stream, next) => {
    found.push(header.name);
    stream.on('end', next);
    stream.resume();
  });
  await pipeline(createReadStream(file), createGunzip(), extract);
  return found;
}

const db = useTestDatabase({ truncate: false });
const coach: Actor = { id: null, email: 'coach@school.test' };
const tag = Date.now().toString(36);
let harness: Harness;
let backups: Backups;
let expiry: JoinCodeExpiry;

beforeAll(async () => {
  harness = createHarness(db.dataSource);
  await harness.controller.start();
  backups = new Backups({ store: harness.store, runtime: harness.runtime, dataDir: mkdtempSync(path.join(os.tmpdir(), 'cp-join-expiry-')), image: TEST_IMAGE });
  expiry = new JoinCodeExpiry({
    store: harness.store,
    backups,
    runtime: harness.runtime,
    metrics: harness.metrics,
    log: categoryLogger(captureLogger().root, 'joins'),
  });
}, 60_000);

afterAll(async () => {
  await expiry?.stop();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

it("backs up a guest's home when their code is closed, then removes the guests, their container and their home, and marks the code handled", async () => {
  const { store } = harness;
  const code = await store.joinCodes.open(coach, { hours: 1, label: `Outreach ${tag}` });
  const ada = await store.joinCodes.join({ code: code.code, name: 'Ada', address: '10.9.0.1' });
  const bob = await store.joinCodes.join({ code: code.code, name: 'Bob', address: '10.9.0.2' });
  const running = await openAndWait(store, ada.workspace);
  const editor = (await inspectByName(names.code(running.slug)))!;
  expect((await execIn(editor.Id, ['sh', '-c', 'echo "drive forward" > /home/student/Robot.java'])).code).toBe(0);
  const home = names.home(running);
  expect(await harness.runtime.volumeExists(home)).toBe(true);

  expiry.start();
  await store.joinCodes.close(coach, code.id);
  const handled = await eventually('the code handled', async () => {
    const now = await store.joinCodes.get(code.id);
    return now?.handledAt ? now : undefined;
  });

  // One backup: Ada's home, with her file (Bob never opened his workspace: no home to keep).
  expect(handled.backups).toHaveLength(1);
  const [backup] = handled.backups;
  expect(backup).toMatch(new RegExp(`^${ada.workspace.slug}-\\d{8}T\\d{6}Z(-\\d+)?\\.tar\\.gz$`));
  expect(existsSync(path.join(backups.dir, backup!))).toBe(true);
  const manifest = JSON.parse(readFileSync(path.join(backups.dir, `${backup}.json`), 'utf8')) as { slug: string; ownerEmail: string };
  expect(manifest).toMatchObject({ slug: ada.workspace.slug, ownerEmail: ada.email });
  expect(await entriesOf(path.join(backups.dir, backup!))).toContain('home/Robot.java');

  // Both guests gone, their sessions with them; the controller removes Ada's editor and her home.
  expect(await store.users.get(ada.userId)).toBeUndefined();
  expect(await store.users.get(bob.userId)).toBeUndefined();
  await eventually('the workspaces finalized', async () => !(await store.workspaces.get(ada.workspace.id)) && !(await store.workspaces.get(bob.workspace.id)));
  expect(await inspectByName(names.code(running.slug))).toBeUndefined();
  expect(await harness.runtime.volumeExists(home)).toBe(false);

  const [entry] = (await db.dataSource.query("SELECT actor_email, metadata FROM audit_log WHERE action = 'join_code.expire' AND target_id = $1", [
    code.id,
  ])) as {
    actor_email: string;
    metadata: Record<string, unknown>;
  }[];
  expect(entry).toEqual({ actor_email: 'system', metadata: { code: code.code, label: `Outreach ${tag}`, closed: true, guests: 2, backups: [backup] } });
}, 90_000);
