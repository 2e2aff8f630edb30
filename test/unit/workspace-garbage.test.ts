/**
 * Garbage collection, one job of the workspace controller (controllers/garbage-collection.ts), branch
 * by branch as test/unit/workspace-reconcile.test.ts does the code container: orphan containers (a
 * key whose row is gone), orphan volumes (the resync's sweep) and the homes a restore retired (the
 * workspace's reconcile), over the real store and the in-memory runtime.
 */
import { names } from '../../src/docker/runtime.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { codeContainer, controller, metrics, ORPHAN, records, runtime, status, store, useWorkspaceFixture, workspace } from '../helpers/workspace-fixture.ts';

useWorkspaceFixture(useTestDatabase());

describe('orphans and retired homes', () => {
  it('does nothing for an id with neither a row nor containers', async () => {
    await expect(controller().reconcile(ORPHAN)).resolves.toBeUndefined();
    expect(runtime.actions).toEqual([]);
  });

  it('leaves orphans alone in the first minutes after start', async () => {
    runtime.preload({ name: 'ws-gone-code', role: 'code', workspaceId: ORPHAN, slug: 'gone' });
    await expect(controller({ orphanStartupGraceMs: 60_000 }).reconcile(ORPHAN)).resolves.toEqual({ requeueAfterMs: expect.any(Number) });
    expect(runtime.actions).toEqual([]);
    expect(records).toEqual([]);
  });

  it('logs and counts orphans when first seen, and removes them only after the grace period', async () => {
    runtime.preload({ name: 'ws-gone-code', role: 'code', workspaceId: ORPHAN, slug: 'gone' });
    const subject = controller({ orphanGraceMs: 60_000 });
    await expect(subject.reconcile(ORPHAN)).resolves.toEqual({ requeueAfterMs: 60_000 });
    expect(runtime.actions).toEqual([]);
    expect(records).toEqual([expect.objectContaining({ level: 'warning', workspaceId: ORPHAN, containers: ['ws-gone-code'] })]);
    expect((await metrics.orphanContainers.get()).values[0]?.value).toBe(1);
  });

  it('removes orphan containers after the grace period and keeps their home volume', async () => {
    runtime.volumes.add(names.volume('gone'));
    runtime.preload({ name: 'ws-gone-code', role: 'code', workspaceId: ORPHAN, slug: 'gone' });
    await controller().reconcile(ORPHAN);
    expect(runtime.actions).toEqual(['remove ws-gone-code']);
    expect(runtime.volumes.has(names.volume('gone'))).toBe(true);
  });

  it("counts and logs, once, the volumes that are no workspace's home nor a replaced one (a crashed restore's staging volume, a home whose row is gone), and removes none", async () => {
    const kept = await workspace('stopped');
    runtime.volumes.add(names.home(kept));
    const staging = names.restoreVolume(kept.slug, 'dead');
    runtime.volumes.add(staging);
    runtime.volumeOwners.set(staging, kept.id);
    runtime.volumes.add(names.volume('gone'));
    runtime.volumeOwners.set(names.volume('gone'), ORPHAN);
    const subject = controller();
    await subject.garbage.sweepVolumes();
    await subject.garbage.sweepVolumes();
    expect(runtime.actions).toEqual([]);
    expect((await metrics.orphanVolumes.get()).values[0]?.value).toBe(2);
    expect(records).toEqual([expect.objectContaining({ level: 'warning', volumes: [staging, names.volume('gone')], workspaceIds: [kept.id, ORPHAN] })]);
  });

  it('reports an unaccounted volume only once it has been there for the grace period (a restore in progress has its staging volume for a while)', async () => {
    const restoring = await workspace('stopped');
    runtime.volumes.add(names.home(restoring));
    runtime.volumes.add(names.restoreVolume(restoring.slug, 'busy'));
    await controller({ orphanGraceMs: 60_000 }).garbage.sweepVolumes();
    expect((await metrics.orphanVolumes.get()).values[0]?.value).toBe(0);
    expect(records).toEqual([]);
  });

  it('accounts for the homes a restore replaced until the controller removes them', async () => {
    const stopped = await workspace('stopped');
    const restored = names.restoreVolume(stopped.slug, 'f00d');
    runtime.volumes.add(names.volume(stopped.slug));
    runtime.volumes.add(restored);
    await store.workspaces.replaceHome(SYSTEM_ACTOR, stopped.id, restored, {}, names.home);
    await controller().garbage.sweepVolumes();
    expect((await metrics.orphanVolumes.get()).values[0]?.value).toBe(0);
  });

  it('removes every home that restores replaced, two restores in a row with no container started between them included, and forgets them', async () => {
    const stopped = await workspace('stopped');
    runtime.volumes.add(names.volume(stopped.slug));
    const first = names.restoreVolume(stopped.slug, 'a1a1');
    const second = names.restoreVolume(stopped.slug, 'b2b2');
    runtime.volumes.add(first);
    await store.workspaces.replaceHome(SYSTEM_ACTOR, stopped.id, first, {}, names.home);
    runtime.volumes.add(second);
    await store.workspaces.replaceHome(SYSTEM_ACTOR, stopped.id, second, {}, names.home);
    expect((await store.workspaces.get(stopped.id))!.spec.retiredVolumes).toEqual([names.volume(stopped.slug), first]);
    await controller().reconcile(stopped.id);
    expect(runtime.actions).toEqual([`remove volume ${names.volume(stopped.slug)}`, `remove volume ${first}`]);
    expect([...runtime.volumes]).toEqual([second]);
    expect((await store.workspaces.get(stopped.id))!.spec.retiredVolumes).toEqual([]);
  });

  it('starts a workspace on its replaced home, keeps an old volume a run still mounts (logged), and removes it once the run is gone', async () => {
    const wanted = await workspace('stopped');
    codeContainer(wanted, { state: 'exited' });
    runtime.preload({ name: names.sim(wanted.slug, ORPHAN), role: 'sim', workspaceId: wanted.id, slug: wanted.slug, runId: ORPHAN, state: 'exited' });
    runtime.volumes.add(names.volume(wanted.slug));
    const restored = names.restoreVolume(wanted.slug, 'e5f6');
    runtime.volumes.add(restored);
    await store.workspaces.replaceHome(SYSTEM_ACTOR, wanted.id, restored, {}, names.home);
    await store.workspaces.open(wanted.id);
    await controller().reconcile(wanted.id);
    const name = names.code(wanted.slug);
    expect(runtime.actions).toEqual([`remove ${name}`, `create ${name}`, `start ${name}`]);
    expect(runtime.byName(name)!.homeVolume).toBe(restored);
    expect(runtime.volumes.has(names.volume(wanted.slug))).toBe(true);
    expect(records).toContainEqual(expect.objectContaining({ message: 'a replaced home volume is still mounted (a run): removed once it is not' }));
    expect((await status(wanted.id)).observedState).toBe('running');
    await runtime.remove(runtime.byName(names.sim(wanted.slug, ORPHAN))!.id);
    await controller().reconcile(wanted.id);
    expect(runtime.volumes.has(names.volume(wanted.slug))).toBe(false);
    expect((await store.workspaces.get(wanted.id))!.spec.retiredVolumes).toEqual([]);
  });
});
