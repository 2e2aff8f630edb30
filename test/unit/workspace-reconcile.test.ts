/**
 * Each branch of the workspace controller's reconcile of a workspace's code container,
 * sample-controller style: a fixture preloads desired state (the real store on the test
 * PostgreSQL) and containers (the in-memory runtime), one reconcile runs, and the test compares the
 * engine actions and the recorded status with what it expects. Milliseconds each; the same
 * controller against the real engine is in test/integration/workspace-controller.test.ts. Its other
 * jobs' branches: workspace-garbage, workspace-environment, workspace-home-moves, node-lifecycle
 * and workspace-node-away (test/unit/).
 */
import { jest } from '@jest/globals';
import { names, NoRoomError, taskFailureReason } from '../../src/docker/runtime.ts';
import type { Probe } from '../../src/probe.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { onHeldClock } from '../helpers/clock.ts';
import { eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import {
  codeContainer,
  controller,
  editorsAnswer,
  HASH,
  metrics,
  probes,
  records,
  runtime,
  status,
  store,
  useWorkspaceFixture,
  workspace,
} from '../helpers/workspace-fixture.ts';

useWorkspaceFixture(useTestDatabase());

describe('WorkspaceController.reconcile', () => {
  it("finalizes a deleted workspace: containers, then every volume of it (a restore's too), then the row", async () => {
    const deleted = await workspace('deleted');
    codeContainer(deleted);
    runtime.volumes.add(names.volume(deleted.slug));
    runtime.volumes.add(names.restoreVolume(deleted.slug, 'a1b2'));
    runtime.volumes.add(names.volume('someone-else'));
    await controller().reconcile(deleted.id);
    expect(runtime.actions).toEqual([
      `remove ${names.code(deleted.slug)}`,
      `remove volume ${names.volume(deleted.slug)}`,
      `remove volume ${names.restoreVolume(deleted.slug, 'a1b2')}`,
    ]);
    expect([...runtime.volumes]).toEqual([names.volume('someone-else')]);
    expect(await store.workspaces.get(deleted.id)).toBeUndefined();
  });

  it('moves a stopped workspace whose home was replaced (a restore) off the old volume: its container and the old volume go', async () => {
    const stopped = await workspace('stopped');
    codeContainer(stopped, { state: 'exited' });
    runtime.volumes.add(names.volume(stopped.slug));
    const restored = names.restoreVolume(stopped.slug, 'c3d4');
    runtime.volumes.add(restored);
    await store.workspaces.replaceHome(SYSTEM_ACTOR, stopped.id, restored, {}, names.home);
    await controller().reconcile(stopped.id);
    expect(runtime.actions).toEqual([`remove ${names.code(stopped.slug)}`, `remove volume ${names.volume(stopped.slug)}`]);
    expect([...runtime.volumes]).toEqual([restored]);
    expect((await status(stopped.id)).observedState).toBe('stopped');
  });

  it('removes a stray code container of the workspace under another name', async () => {
    const stopped = await workspace('stopped');
    codeContainer(stopped, { state: 'exited' });
    codeContainer(stopped, { name: 'ws-old-name-code', state: 'exited' });
    await controller().reconcile(stopped.id);
    expect(runtime.actions).toEqual(['remove ws-old-name-code']);
  });

  it('stops the running container of a workspace wanted stopped, keeps it, and records stopped', async () => {
    const stopped = await workspace('stopped');
    codeContainer(stopped);
    await controller().reconcile(stopped.id);
    expect(runtime.actions).toEqual([`stop ${names.code(stopped.slug)}`]);
    expect(runtime.byName(names.code(stopped.slug))).toBeDefined();
    expect(await status(stopped.id)).toEqual({
      observedState: 'stopped',
      statusMessage: '',
      editorEndpoint: null,
      observedGeneration: stopped.spec.generation,
    });
  });

  it('records stopped, touching nothing, for a stopped workspace with nothing running', async () => {
    const stopped = await workspace('stopped');
    await controller().reconcile(stopped.id);
    expect(runtime.actions).toEqual([]);
    expect((await status(stopped.id)).observedState).toBe('stopped');
  });

  it('creates, starts and reports running a missing container, its volume first', async () => {
    const wanted = await workspace('running');
    await controller().reconcile(wanted.id);
    const name = names.code(wanted.slug);
    expect(runtime.actions).toEqual([`create volume ${names.volume(wanted.slug)}`, `create ${name}`, `start ${name}`]);
    const address = runtime.byName(name)!.address;
    expect(probes).toEqual([`${address}:8080`]);
    expect(await status(wanted.id)).toEqual({
      observedState: 'running',
      statusMessage: '',
      editorEndpoint: `${address}:8080`,
      observedGeneration: wanted.spec.generation,
    });
    expect((await metrics.containerStartDuration.get()).values.find((value) => value.metricName?.endsWith('_count'))?.value).toBe(1);
  });

  it('starts a stopped container again rather than creating another', async () => {
    const wanted = await workspace('running');
    runtime.volumes.add(names.volume(wanted.slug));
    codeContainer(wanted, { state: 'exited' });
    await controller().reconcile(wanted.id);
    expect(runtime.actions).toEqual([`start ${names.code(wanted.slug)}`]);
    expect((await status(wanted.id)).observedState).toBe('running');
  });

  it('logs a container started once, however often it is looked at before it runs (a swarm service whose task is scheduled)', async () => {
    const wanted = await workspace('running');
    runtime.volumes.add(names.volume(wanted.slug));
    codeContainer(wanted, { state: 'created' });
    runtime.startsPending = true;
    const workspaces = controller({ editorProbeMs: 250 });
    for (let look = 0; look < 3; look++) await expect(workspaces.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
    expect(runtime.actions).toEqual(Array.from({ length: 3 }, () => `start ${names.code(wanted.slug)} (pending)`));
    expect(records.filter((record) => record['message'] === 'code container started')).toHaveLength(1);
  });

  it('reports starting, and looks again shortly, while the editor does not answer', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted);
    editorsAnswer(false);
    await expect(controller({ editorProbeMs: 250 }).reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
    expect(runtime.actions).toEqual([]);
    expect(await status(wanted.id)).toMatchObject({ observedState: 'starting', editorEndpoint: null });
  });

  it('writes no status while its editor is still starting as recorded, and writes running once it answers', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted);
    editorsAnswer(false);
    await controller({ editorProbeMs: 250 }).reconcile(wanted.id);
    const writes = jest.spyOn(store.workspaces, 'writeStatus');
    // Probed again: the record says starting, with the same message, already.
    await expect(controller({ editorProbeMs: 250 }).reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
    expect(writes).not.toHaveBeenCalled();
    editorsAnswer(true);
    await controller().reconcile(wanted.id);
    expect(writes).toHaveBeenCalledTimes(1);
    expect(await status(wanted.id)).toMatchObject({ observedState: 'running' });
    writes.mockRestore();
  });

  /** A workspace wanted running whose editor does not answer yet, and a controller for it. */
  async function notAnswering() {
    const wanted = await workspace('running');
    codeContainer(wanted);
    editorsAnswer(false);
    return { wanted, workspaces: controller({ editorProbeMs: 250 }) };
  }

  it('probes an editor less often the longer it has not answered: a tenth of the wait, a second at most; afresh after a stop', async () => {
    const { wanted, workspaces } = await notAnswering();
    await onHeldClock(async (at) => {
      await expect(workspaces.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
      at(6000);
      await expect(workspaces.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 600 });
      at(30_000);
      await expect(workspaces.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 1000 });
      // Stopped before it ever answered, then opened again: asked often at first again.
      await store.workspaces.stop(SYSTEM_ACTOR, wanted.id, 'student');
      await workspaces.reconcile(wanted.id);
      await store.workspaces.open(wanted.id);
      await expect(workspaces.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
    });
  });

  it('probes an editor restarted after it answered as often as a new one at first', async () => {
    const { wanted, workspaces } = await notAnswering();
    await onHeldClock(async (at) => {
      await workspaces.reconcile(wanted.id);
      at(30_000);
      editorsAnswer(true);
      await workspaces.reconcile(wanted.id);
      expect(await status(wanted.id)).toMatchObject({ observedState: 'running' });
      await store.workspaces.restartCode(SYSTEM_ACTOR, wanted.id);
      editorsAnswer(false);
      await expect(workspaces.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
    });
  });

  it('does nothing (no probe either) for a workspace already confirmed running as specified', async () => {
    const wanted = await workspace('running');
    const container = codeContainer(wanted);
    await store.workspaces.writeStatus(wanted.id, {
      observedState: 'running',
      observedGeneration: wanted.spec.generation,
      statusMessage: '',
      editorEndpoint: `${container.address}:8080`,
    });
    await expect(controller().reconcile(wanted.id)).resolves.toBeUndefined();
    expect(runtime.actions).toEqual([]);
    expect(probes).toEqual([]);
  });

  it('recreates a container whose spec hash differs', async () => {
    const wanted = await workspace('running');
    runtime.volumes.add(names.volume(wanted.slug));
    codeContainer(wanted, { specHash: 'an-older-spec' });
    await controller().reconcile(wanted.id);
    const name = names.code(wanted.slug);
    expect(runtime.actions).toEqual([`remove ${name}`, `create ${name}`, `start ${name}`]);
    expect(runtime.byName(name)!.specHash).toBe(HASH);
    expect(records).toContainEqual(expect.objectContaining({ message: 'recreating code container', reason: 'spec changed' }));
  });

  it('recreates a container whose restart generation is behind (restart-code)', async () => {
    const wanted = await workspace('running');
    runtime.volumes.add(names.volume(wanted.slug));
    codeContainer(wanted);
    const restarted = await store.workspaces.restartCode(SYSTEM_ACTOR, wanted.id);
    await controller().reconcile(wanted.id);
    const name = names.code(wanted.slug);
    expect(runtime.actions).toEqual([`remove ${name}`, `create ${name}`, `start ${name}`]);
    expect(runtime.byName(name)!.restartGeneration).toBe(restarted.spec.restartGeneration);
    expect(records).toContainEqual(expect.objectContaining({ message: 'recreating code container', reason: 'restart requested' }));
  });

  it('waits (no engine action) when the running containers it found already fill the cap', async () => {
    const [a, b, c] = [await workspace('stopped'), await workspace('stopped'), await workspace('stopped')];
    // Two containers run already (a previous process started them): adopted, they fill the cap of 2.
    codeContainer(a);
    codeContainer(b);
    await store.workspaces.open(c.id);
    await expect(controller({ capacityRetryMs: 5000 }).reconcile(c.id)).resolves.toEqual({ requeueAfterMs: 5000 });
    expect(runtime.actions).toEqual([]);
    expect(await status(c.id)).toMatchObject({ observedState: 'waiting', statusMessage: 'waiting for capacity: 2 containers run' });
  });

  it('records failed with the engine message, and fails the reconcile (retried), when the engine refuses to create', async () => {
    const wanted = await workspace('running');
    runtime.failures.set('createCodeContainer', new Error('No such image: classroom-workspace:test'));
    await expect(controller().reconcile(wanted.id)).rejects.toThrow('No such image');
    expect(await status(wanted.id)).toMatchObject({ observedState: 'failed', statusMessage: 'No such image: classroom-workspace:test' });
  });

  it("waits, with the runtime's words, when no node has room for its editor (a swarm), and looks again shortly", async () => {
    const wanted = await workspace('running');
    runtime.failures.set('createCodeContainer', new NoRoomError('Waiting for room: no node of the swarm has 2.0 GiB of memory unreserved'));
    await expect(controller({ capacityRetryMs: 5000 }).reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 5000 });
    expect(await status(wanted.id)).toMatchObject({
      observedState: 'waiting',
      statusMessage: 'Waiting for room: no node of the swarm has 2.0 GiB of memory unreserved',
    });
    // Once there is room, the next look starts it.
    await controller().reconcile(wanted.id);
    expect(runtime.byName(names.code(wanted.slug))?.state).toBe('running');
  });

  it('starts nothing while the running containers cannot be counted (the cap count never starts at zero)', async () => {
    const wanted = await workspace('running');
    const subject = controller();
    // The first listing (the reconcile's own) succeeds; the count of running containers fails.
    const list = runtime.listContainers.bind(runtime);
    let calls = 0;
    runtime.listContainers = async (filter) => (++calls === 2 ? Promise.reject(new Error('engine down')) : list(filter));
    await expect(subject.reconcile(wanted.id)).rejects.toThrow('engine down');
    expect(runtime.actions).toEqual([]);
  });
});

describe('WorkspaceController.stop', () => {
  it("ends a reconcile's store calls with its queue: one under way when the controller stops writes no status after", async () => {
    const wanted = await workspace('running');
    const before = await status(wanted.id);
    let asked!: () => void;
    const probed = new Promise<void>((resolve) => (asked = resolve));
    let answer!: (probe: Probe) => void;
    const subject = controller({
      // An editor probe (an HTTP GET, no engine call) that answers only once the controller is stopping.
      probe: () => {
        asked();
        return new Promise<Probe>((resolve) => (answer = resolve));
      },
    });
    subject.queue.add(wanted.id);
    await probed;
    const stopped = subject.stop();
    answer({ outcome: 'ok', seconds: 0.001 });
    await stopped;
    // The editor answered, but its queue had stopped: `running` is not written (nor anything else).
    expect(await status(wanted.id)).toEqual(before);
    const aborted = (await metrics.reconcileTotal.get()).values.find((value) => value.labels.result === 'aborted');
    expect(aborted?.value).toBe(1);
  });
});

describe('WorkspaceController.start', () => {
  it('says when a resync or its look for orphan volumes fails, and says nothing when a stop aborted them', async () => {
    const subject = controller();
    await subject.start();
    const warnings = () => records.filter((record) => record.level === 'warning').map((record) => String(record.message));
    runtime.failures.set('listContainers', new Error('engine down'));
    runtime.failures.set('listVolumes', new Error('engine down'));
    await subject.resyncAll();
    await eventually('both failures said', async () => warnings().length === 2);
    expect(warnings()).toEqual(
      expect.arrayContaining(['looking for orphan volumes failed; the next resync looks again', 'workspaces resync failed; the next one will retry']),
    );
    // A resync under way when the controller stops: the engine calls end with the stop (aborted).
    const aborted: ((error: Error) => void)[] = [];
    const pending = () => new Promise<never>((_, reject) => aborted.push(reject));
    runtime.listContainers = pending;
    runtime.listVolumes = pending;
    const resync = subject.resyncAll();
    await eventually('both engine calls under way', async () => aborted.length === 2);
    await subject.stop();
    for (const reject of aborted) reject(new DOMException('The operation was aborted', 'AbortError'));
    await resync;
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings()).toHaveLength(2);
  });

  it("looks at the database's workspaces in a resync while the engine does not answer (their reconciles fail and retry)", async () => {
    // Opened before the controller followed the changes: only a resync can find it.
    const wanted = await workspace('running');
    runtime.listContainers = () => Promise.reject(new Error('engine down'));
    const subject = controller();
    await subject.start();
    try {
      await subject.resyncAll();
      await eventually('its reconcile tried and failed', async () =>
        records.some((record) => record.message === 'workspaces reconcile failed, retrying' && record['key'] === wanted.id),
      );
      expect(records).toContainEqual(
        expect.objectContaining({ level: 'warning', message: 'workspaces resync failed; the next one will retry', error: 'engine down' }),
      );
    } finally {
      await subject.stop();
    }
  });

  it('logs instead of starting its cap count at zero when the engine does not answer, and follows its triggers anyway', async () => {
    runtime.failures.set('listContainers', new Error('engine down'));
    const subject = controller();
    await subject.start();
    try {
      expect(records).toContainEqual(
        expect.objectContaining({ level: 'warning', message: 'listing running containers failed; retrying before the first start', error: 'engine down' }),
      );
      // A change reaches the queue: the workspace is reconciled (and started, the engine being back).
      const wanted = await workspace('running');
      await subject.queue.idle();
      expect(runtime.byName(names.code(wanted.slug))?.state).toBe('running');
    } finally {
      await subject.stop();
    }
  });
});

describe('editor tasks a swarm node refused', () => {
  const refused = (task: string, message = 'network 8ht8zz1o8gv6b2ckyweu1556u exists') => ({
    task,
    reason: taskFailureReason(message),
    message,
  });
  const counted = async () => Object.fromEntries((await metrics.swarmTaskRejections.get()).values.map((value) => [value.labels.reason, value.value]));
  const said = () => records.filter((record) => String(record.message).startsWith('the editor of '));

  /** A wanted workspace whose editor service's newest task its node refused (pending, as Swarm keeps it). */
  async function refusedEditor(failure: ReturnType<typeof refused>) {
    const wanted = await workspace('running');
    runtime.volumes.add(names.volume(wanted.slug));
    runtime.startsPending = true;
    const container = codeContainer(wanted, { state: 'restarting', node: 'node-2', failure });
    return { wanted, container };
  }

  it('counts each refused task once, says it once per error, has the runtime repair the network it was refused for, and tells the student', async () => {
    const { wanted, container } = await refusedEditor(refused('t1'));
    const subject = controller();
    await expect(subject.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
    await subject.reconcile(wanted.id);
    expect(runtime.actions.filter((action) => action.startsWith('repair'))).toEqual([`repair network bridge for ${names.code(wanted.slug)}`]);
    expect(await counted()).toEqual({ network: 1, image: 0, exit: 0, other: 0 });
    expect(said()).toEqual([
      expect.objectContaining({
        level: 'warning',
        workspaceId: wanted.id,
        node: 'node-2',
        task: 't1',
        reason: 'network',
        error: 'network 8ht8zz1o8gv6b2ckyweu1556u exists',
      }),
    ]);
    expect(records.filter((record) => String(record.message).startsWith('repaired the workspace network on node node-2'))).toHaveLength(1);
    expect(await status(wanted.id)).toMatchObject({
      observedState: 'starting',
      statusMessage:
        'The server node-2 had stopped without shutting down, which left its network for editors broken; it was repaired, and your editor is starting again.',
    });

    // Swarm's next task, refused the same way: counted and repaired, not said again.
    runtime.containers.get(container.id)!.failure = refused('t2');
    await subject.reconcile(wanted.id);
    expect(runtime.actions.filter((action) => action.startsWith('repair'))).toHaveLength(2);
    expect(await counted()).toMatchObject({ network: 2 });
    expect(said()).toHaveLength(1);
  });

  it('counts, says and tells the student of a task refused for another reason, and repairs nothing', async () => {
    const { wanted } = await refusedEditor(refused('t1', 'No such image: registry:5000/classroom-workspace@sha256:0'));
    await controller().reconcile(wanted.id);
    expect(runtime.actions.filter((action) => action.startsWith('repair'))).toEqual([]);
    expect(await counted()).toEqual({ network: 0, image: 1, exit: 0, other: 0 });
    expect(said()).toEqual([expect.objectContaining({ reason: 'image' })]);
    expect((await status(wanted.id)).statusMessage).toBe(
      'The server node-2 could not start your editor (No such image: registry:5000/classroom-workspace@sha256:0); it tries again every few seconds.',
    );
  });

  it('says on the page and once at error level what is wrong when the network cannot be repaired, and tries again with the next task', async () => {
    const { wanted, container } = await refusedEditor(refused('t1'));
    runtime.failures.set('repairNetwork', new Error('could not find an available, non-overlapping IPv4 address pool'));
    const subject = controller();
    await expect(subject.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
    expect(await status(wanted.id)).toMatchObject({
      observedState: 'starting',
      statusMessage:
        'The server node-2 cannot start your editor: its network for editors was left broken when it stopped without shutting down, and repairing it failed (could not find an available, non-overlapping IPv4 address pool). Your files are kept there; the operator has been told.',
    });
    expect(records.filter((record) => record.level === 'error')).toEqual([
      expect.objectContaining({ node: 'node-2', repairError: 'could not find an available, non-overlapping IPv4 address pool' }),
    ]);
    runtime.containers.get(container.id)!.failure = refused('t2');
    await subject.reconcile(wanted.id);
    expect(runtime.actions.filter((action) => action.startsWith('repair'))).toHaveLength(1);
    expect((await status(wanted.id)).statusMessage).toMatch(/^The server node-2 had stopped without shutting down/);
  });

  it('says a refusal again once the editor ran in between', async () => {
    const { wanted, container } = await refusedEditor(refused('t1'));
    const subject = controller();
    await subject.reconcile(wanted.id);
    Object.assign(runtime.containers.get(container.id)!, { state: 'running', address: '10.0.0.9', failure: undefined });
    await subject.reconcile(wanted.id);
    expect(await status(wanted.id)).toMatchObject({ observedState: 'running', statusMessage: '' });
    Object.assign(runtime.containers.get(container.id)!, { state: 'restarting', address: undefined, failure: refused('t2') });
    await subject.reconcile(wanted.id);
    expect(said()).toHaveLength(2);
  });
});

describe('taskFailureReason', () => {
  it.each([
    ['network 8ht8zz1o8gv6b2ckyweu1556u exists', 'network'],
    ['configuration network "classroom-workspaces-config" does not exist', 'network'],
    ['No such image: classroom-workspace:latest', 'image'],
    ['task: non-zero exit (255)', 'exit'],
    ['starting container failed: OCI runtime create failed', 'other'],
  ])('%s: %s', (message, reason) => {
    expect(taskFailureReason(message)).toBe(reason);
  });
});
