/**
 * Home moves, one job of the workspace controller (controllers/home-moves.ts): workspaces on nodes
 * drained or lost, which the node lifecycle sends to the queue, have their homes moved before
 * anything else; over the real store and the in-memory runtime, as
 * test/unit/workspace-reconcile.test.ts does the code container.
 */
import { names } from '../../src/docker/runtime.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { codeContainer, controller, records, runtime, status, store, useWorkspaceFixture, workspace } from '../helpers/workspace-fixture.ts';

useWorkspaceFixture(useTestDatabase());

describe('homes on nodes that are drained or lost (a swarm)', () => {
  const node = (name: string, state = 'ready', availability = 'active') => ({
    id: name,
    name,
    address: '10.0.0.1',
    state,
    availability,
    memoryBytes: 8 * 1024 ** 3,
    nanoCpus: 4e9,
    reservedMemoryBytes: 0,
    reachable: state === 'ready',
  });
  /** What the controller asked of the home mover, and what it answers. */
  let moved: string[];
  let latest: { volume: string; backup: string; backupAt: Date } | null;
  const homes = {
    moveOff: async (_actor: unknown, of: WorkspaceRecord) => {
      moved.push(`moveOff ${of.slug}`);
      return { volume: `${names.volume(of.slug)}-restore-fresh`, backup: `${of.slug}-fresh.tar.gz` };
    },
    recoverLatest: async (of: WorkspaceRecord) => {
      moved.push(`recoverLatest ${of.slug}`);
      return latest;
    },
  };
  beforeEach(() => {
    moved = [];
    latest = null;
    runtime.nodeList = [node('n1'), node('n2')];
  });

  it('pauses a drained node, stops the editor on it, moves its home with a fresh backup (the old one retired), then makes the editor where the new home is', async () => {
    const wanted = await workspace('running');
    const editor = codeContainer(wanted, { node: 'n2' });
    await store.nodes.drain(SYSTEM_ACTOR, 'n2');
    const subject = controller({ homes });
    expect(await subject.nodes.check()).toEqual([wanted.id]);
    expect(runtime.actions).toEqual(['node n2 pause']);
    await expect(subject.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 0 });
    expect(runtime.actions).toEqual(['node n2 pause', `stop ${editor.name}`]);
    expect(moved).toEqual([`moveOff ${wanted.slug}`]);
    const after = (await store.workspaces.get(wanted.id))!;
    expect(after.spec.homeVolume).toBe(`${names.volume(wanted.slug)}-restore-fresh`);
    expect(after.spec.retiredVolumes).toEqual([names.volume(wanted.slug)]);
    expect(after.status.homeRestore).toBeNull();
    // The next look: the editor on the old home goes, and one is made on the new.
    runtime.actions.length = 0;
    await subject.reconcile(wanted.id);
    expect(runtime.actions).toEqual([
      `remove ${editor.name}`,
      `create volume ${names.volume(wanted.slug)}-restore-fresh`,
      `create ${editor.name}`,
      `start ${editor.name}`,
    ]);
    expect(runtime.byName(editor.name)!.homeVolume).toBe(`${names.volume(wanted.slug)}-restore-fresh`);
  });

  it('moves no home when the controller stops while the backup for the move is made: the queue stopped, the store changes nothing more', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted, { node: 'n2' });
    await store.nodes.drain(SYSTEM_ACTOR, 'n2');
    let backingUp!: () => void;
    const asked = new Promise<void>((resolve) => (backingUp = resolve));
    let backedUp!: (moved: { volume: string; backup: string }) => void;
    const slow = {
      ...homes,
      moveOff: () => {
        backingUp();
        return new Promise<{ volume: string; backup: string }>((resolve) => (backedUp = resolve));
      },
    };
    const subject = controller({ homes: slow });
    await subject.nodes.check();
    subject.queue.add(wanted.id);
    await asked;
    const stopped = subject.stop();
    backedUp({ volume: `${names.volume(wanted.slug)}-restore-fresh`, backup: `${wanted.slug}-fresh.tar.gz` });
    await stopped;
    const after = (await store.workspaces.get(wanted.id))!;
    expect(after.spec.homeVolume).toBeNull();
    expect(after.spec.retiredVolumes).toEqual([]);
    expect((await store.audit.list({ action: 'workspace.restore', limit: 10 })).entries).toEqual([]);
    expect(records.filter((record) => String(record.message).startsWith('moved the home of'))).toEqual([]);
  });

  it('makes a node active again when its drain is taken back, and moves nothing more off it', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted, { node: 'n2' });
    await store.nodes.drain(SYSTEM_ACTOR, 'n2');
    const subject = controller({ homes });
    await subject.nodes.check();
    await store.nodes.undrain(SYSTEM_ACTOR, 'n2');
    expect(await subject.nodes.check()).toEqual([]);
    expect(runtime.actions).toEqual(['node n2 pause', 'node n2 active']);
    await subject.reconcile(wanted.id);
    expect(moved).toEqual([]);
  });

  it('moves nothing while a node has been down for less than NODE_LOST_SECONDS', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted, { node: 'n2' });
    runtime.nodeList = [node('n1'), node('n2', 'down')];
    const subject = controller({ homes, nodeLostMs: 60_000 });
    expect(await subject.nodes.check()).toEqual([]);
    await subject.reconcile(wanted.id);
    expect(moved).toEqual([]);
    expect(records).toContainEqual(
      expect.objectContaining({ level: 'warning', node: 'n2', message: 'node n2 is down; its workspaces move if it is not back within 60 s' }),
    );
  });

  it('brings the home of a workspace on a lost node back from its latest backup, the old home kept (it may hold newer files), and records from when for its page', async () => {
    const wanted = await workspace('stopped');
    codeContainer(wanted, { node: 'n2', state: 'exited' });
    runtime.nodeList = [node('n1'), node('n2', 'down')];
    latest = { volume: `${names.volume(wanted.slug)}-restore-latest`, backup: `${wanted.slug}-old.tar.gz`, backupAt: new Date('2026-11-26T10:00:00Z') };
    const subject = controller({ homes, nodeLostMs: 0 });
    expect(await subject.nodes.check()).toEqual([wanted.id]);
    await expect(subject.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 0 });
    expect(moved).toEqual([`recoverLatest ${wanted.slug}`]);
    const after = (await store.workspaces.get(wanted.id))!;
    expect(after.spec.homeVolume).toBe(latest.volume);
    expect(after.spec.retiredVolumes).toEqual([]);
    expect(after.status.homeRestore).toEqual({ at: expect.any(Date), from: latest.backupAt, reason: 'the server n2 that held your files stopped answering' });
    const [entry] = (await store.audit.list({ action: 'workspace.restore', limit: 10 })).entries;
    expect(entry!.metadata).toEqual(expect.objectContaining({ node: 'n2', reason: 'node lost', backup: latest.backup }));
  });

  it('waits for a lost node that holds the only copy of a home, saying so once', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted, { node: 'n2' });
    runtime.nodeList = [node('n1'), node('n2', 'down')];
    const subject = controller({ homes, nodeLostMs: 0 });
    await subject.nodes.check();
    await expect(subject.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 0 });
    await subject.reconcile(wanted.id);
    expect(await status(wanted.id)).toMatchObject({
      observedState: 'waiting',
      statusMessage: 'Waiting for the server n2, which holds your files: it stopped answering, and no backup of them exists.',
    });
    expect(records.filter((record) => String(record.message).includes('no backup of the home'))).toHaveLength(1);
    expect((await store.workspaces.get(wanted.id))!.spec.homeVolume).toBeNull();
  });
});
