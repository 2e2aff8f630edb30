/**
 * Issue 24, scheduled backups of every home, on real Docker and PostgreSQL: the schedule's passes
 * (driven here with the time they run at) back up a home that has none yet, not again within the
 * interval nor while nobody used it since, again after it was used; keep the newest BACKUP_KEEP of
 * the schedule's own and remove older ones (file and manifest), never an operator's backup; a
 * failed backup is tried again after RETRY_AFTER_FAILURE_MS, not at every pass; a workspace that
 * never had a home is not backed up; nothing is backed up while a workspace or a run is starting,
 * for up to OPENING_WAIT_MS.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BackupSchedule, OPENING_WAIT_MS, RETRY_AFTER_FAILURE_MS } from '../../controllers/backup-schedule.ts';
import { Backups } from '../../src/backup/backups.ts';
import { categoryLogger } from '../../src/log.ts';
import type { Actor } from '../../src/store/audit.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { captureLogger, createHarness, removeEverything, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const HOUR = 3_600_000;
const tag = Date.now().toString(36);
const db = useTestDatabase({ truncate: false });
const coach: Actor = { id: null, email: 'coach@school.test' };
let harness: Harness;
let backups: Backups;
let ada: Student;
let bob: Student;
const log = captureLogger();

beforeAll(async () => {
  harness = createHarness(db.dataSource);
  await harness.controller.start();
  backups = new Backups({
    store: harness.store,
    runtime: harness.runtime,
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'cp-backup-schedule-')),
    image: TEST_IMAGE,
  });
  ada = await newStudent(harness.store, 'ada', tag);
  ada.workspace = await openAndWait(harness.store, ada.workspace);
  // Bob never opened his workspace: he has no home to back up.
  bob = await newStudent(harness.store, 'bob', tag);
}, 60_000);

afterAll(async () => {
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 60_000);

const schedule = (backupsOf: Pick<Backups, 'create' | 'remove'> = backups) =>
  new BackupSchedule({
    store: harness.store,
    backups: backupsOf,
    runtime: harness.runtime,
    metrics: harness.metrics,
    log: categoryLogger(log.root, 'backups'),
    intervalMs: HOUR,
    keep: 2,
  });
/** Ada worked in her workspace just now. */
const adaWorked = () => harness.store.workspaces.recordActivity(new Map([[ada.workspace.id, Date.now()]]));
const scheduledOfAda = async () =>
  (await db.dataSource.query('SELECT name FROM scheduled_backups WHERE workspace_id = $1 ORDER BY created_at', [ada.workspace.id])) as { name: string }[];
const counted = async (outcome: string) => (await harness.metrics.scheduledBackups.get()).values.find((value) => value.labels.outcome === outcome)?.value ?? 0;

it('backs up a home that has none, not again within the interval or while unused, again once used; keeps the newest BACKUP_KEEP of its own, never an operator backup', async () => {
  const passes = schedule();
  const start = Date.now();
  expect(await passes.pass(start)).toEqual([ada.workspace.slug]);
  const [first] = await scheduledOfAda();
  expect(existsSync(path.join(backups.dir, first!.name))).toBe(true);
  const [audited] = (await db.dataSource.query("SELECT actor_email, metadata FROM audit_log WHERE action = 'workspace.backup' AND target_id = $1", [
    ada.workspace.id,
  ])) as { actor_email: string; metadata: Record<string, unknown> }[];
  expect(audited).toMatchObject({ actor_email: 'system', metadata: { slug: ada.workspace.slug, backup: first!.name, scheduled: true } });

  // Within the interval: nothing. Past it, but nobody worked there since: nothing either.
  expect(await passes.pass(start + 60_000)).toEqual([]);
  expect(await passes.pass(start + 2 * HOUR)).toEqual([]);

  // An operator's backup, then two more days of work: the schedule keeps its newest two, and the operator's.
  const operators = (await backups.create(coach, ada.workspace)).name!;
  await adaWorked();
  expect(await passes.pass(Date.now() + 2 * HOUR)).toEqual([ada.workspace.slug]);
  await adaWorked();
  expect(await passes.pass(Date.now() + 4 * HOUR)).toEqual([ada.workspace.slug]);
  const kept = await scheduledOfAda();
  expect(kept).toHaveLength(2);
  expect(kept.map((row) => row.name)).not.toContain(first!.name);
  expect(existsSync(path.join(backups.dir, first!.name))).toBe(false);
  expect(existsSync(path.join(backups.dir, `${first!.name}.json`))).toBe(false);
  const stored = (await backups.list()).map((backup) => backup.name);
  expect(stored.toSorted()).toEqual([operators, ...kept.map((row) => row.name)].toSorted());
  expect((await harness.metrics.scheduledBackupsPruned.get()).values[0]?.value).toBe(1);
  expect(await scheduledOf(bob)).toEqual([]);
}, 120_000);

it('tries a home whose backup failed again after RETRY_AFTER_FAILURE_MS, not at every pass, and says why', async () => {
  let attempts = 0;
  const failing = schedule({
    create: async () => {
      attempts++;
      throw new Error('file changed as we read it');
    },
    remove: (name) => backups.remove(name),
  });
  await adaWorked();
  const at = Date.now() + 10 * HOUR;
  const failedBefore = await counted('failed');
  expect(await failing.pass(at)).toEqual([]);
  expect(await failing.pass(at + 60_000)).toEqual([]);
  expect(attempts).toBe(1);
  expect(await counted('failed')).toBe(failedBefore + 1);
  expect(log.records.at(-1)).toMatchObject({
    level: 'warning',
    category: 'control.backups',
    slug: ada.workspace.slug,
    message: `backing up ${ada.workspace.slug}'s home failed: trying again in 15 minutes`,
  });
  await failing.pass(at + RETRY_AFTER_FAILURE_MS);
  expect(attempts).toBe(2);
}, 60_000);

it('backs up nothing while a workspace is starting (a class opening), for up to OPENING_WAIT_MS', async () => {
  // Bob's workspace seen starting: wanted running, its editor not up yet.
  const bobStarting = (workspace: WorkspaceRecord): WorkspaceRecord =>
    workspace.id === bob.workspace.id
      ? { ...workspace, spec: { ...workspace.spec, desiredState: 'running' }, status: { ...workspace.status, observedState: 'starting' } }
      : workspace;
  const opening = new BackupSchedule({
    store: {
      workspaces: { list: async () => (await harness.store.workspaces.list()).map(bobStarting) },
      runs: harness.store.runs,
      scheduledBackups: harness.store.scheduledBackups,
    },
    backups,
    runtime: harness.runtime,
    metrics: harness.metrics,
    log: categoryLogger(log.root, 'backups'),
    intervalMs: HOUR,
    keep: 2,
  });
  await adaWorked();
  const at = Date.now() + 20 * HOUR;
  expect(await opening.pass(at)).toEqual([]);
  expect(await opening.pass(at + OPENING_WAIT_MS - 1)).toEqual([]);
  expect(await opening.pass(at + OPENING_WAIT_MS)).toEqual([ada.workspace.slug]);
  // Nobody starting: due homes are backed up at the next pass.
  await adaWorked();
  expect(await schedule().pass(Date.now() + 40 * HOUR)).toEqual([ada.workspace.slug]);
}, 60_000);

it('backs up nothing while a run is compiling and booting (a class pressing Run), and the due homes once it is ready', async () => {
  // Ada pressed Run: her run is queued (as the store writes one; nothing converges on it here).
  const [run] = (await db.dataSource.query("INSERT INTO runs (workspace_id, status, desired_state) VALUES ($1, 'queued', 'running') RETURNING id", [
    ada.workspace.id,
  ])) as { id: string }[];
  await adaWorked();
  const passes = schedule();
  const at = Date.now() + 60 * HOUR;
  expect(await passes.pass(at)).toEqual([]);
  await db.dataSource.query("UPDATE runs SET status = 'running', ready_at = now() WHERE id = $1", [run!.id]);
  expect(await passes.pass(at + 60_000)).toEqual([ada.workspace.slug]);
  await db.dataSource.query("UPDATE runs SET status = 'stopped', desired_state = 'stopped', ended_at = now() WHERE id = $1", [run!.id]);
}, 60_000);

async function scheduledOf(student: Student): Promise<{ name: string }[]> {
  return (await db.dataSource.query('SELECT name FROM scheduled_backups WHERE workspace_id = $1', [student.workspace.id])) as { name: string }[];
}
