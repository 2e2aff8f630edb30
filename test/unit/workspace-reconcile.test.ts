// @lane local
/**
 * Each branch of the workspace controller's reconcile, sample-controller style: a fixture preloads
 * desired state (the real store on the test PostgreSQL) and containers (the in-memory runtime), one
 * reconcile runs, and the test compares the engine actions and the recorded status with what it
 * expects. Milliseconds each; the same controller against the real engine is in
 * test/integration/workspace-controller.test.ts.
 */
import { codeSpecHash, WorkspaceController, type WorkspaceControllerOptions } from '../../controllers/workspaces.ts';
import { TerminalError } from '../../controllers/workqueue.ts';
import { ImageMissingError, names, NoRoomError, taskFailureReason } from '../../src/docker/runtime.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import type { Probe } from '../../src/probe.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { MemoryRuntime } from '../helpers/memory-runtime.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
const TEMPLATE = { image: 'classroom-workspace:test', memoryBytes: 64 * 1024 * 1024, network: 'bridge', editorPort: 8080, nanoCpus: 0 };
const HASH = codeSpecHash(TEMPLATE);
const ORPHAN = '00000000-0000-4000-8000-0000000000aa';

let store: Store;
let runtime: MemoryRuntime;
let metrics: Metrics;
let records: Record<string, unknown>[];
let probes: string[];
let editorAnswers: boolean;
let counter = 0;

beforeEach(() => {
  store = testStore(db.dataSource, { environmentCap: 2 });
  runtime = new MemoryRuntime();
  metrics = createMetrics();
  probes = [];
  editorAnswers = true;
});

/** A controller over the fixture's store and runtime; its editor probe answers while `editorAnswers`. */
function controller(options: Partial<WorkspaceControllerOptions> = {}): WorkspaceController {
  const logger = captureLogger();
  records = logger.records;
  const probe = async (endpoint: string): Promise<Probe> => {
    probes.push(endpoint);
    return { outcome: editorAnswers ? 'ok' : 'error', seconds: 0.001 };
  };
  return new WorkspaceController({
    store,
    runtime,
    metrics,
    log: categoryLogger(logger.root, 'containers'),
    template: TEMPLATE,
    probe,
    orphanStartupGraceMs: 0,
    orphanGraceMs: 0,
    ...options,
  });
}

/** A workspace wanted `desired`, made through the store as the API makes it. */
async function workspace(desired: 'running' | 'stopped' | 'deleted'): Promise<WorkspaceRecord> {
  const { user, workspace: made } = await store.users.create({ email: `s${counter++}@school.test` });
  if (desired === 'running') await store.workspaces.open(made.id);
  if (desired === 'deleted') await store.users.delete(SYSTEM_ACTOR, user.id);
  return (await store.workspaces.get(made.id))!;
}

/** Its code container, as the controller would have made it, preloaded in the engine. */
function codeContainer(of: WorkspaceRecord, overrides: Partial<Parameters<MemoryRuntime['preload']>[0]> = {}) {
  return runtime.preload({
    name: names.code(of.slug),
    role: 'code',
    workspaceId: of.id,
    slug: of.slug,
    specHash: HASH,
    restartGeneration: of.restartGeneration,
    ...overrides,
  });
}

const status = async (id: string) => {
  const current = (await store.workspaces.get(id))!;
  return {
    observedState: current.observedState,
    statusMessage: current.statusMessage,
    editorEndpoint: current.editorEndpoint,
    observedGeneration: current.observedGeneration,
  };
};

describe('WorkspaceController.reconcile', () => {
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
    await subject.sweepVolumes();
    await subject.sweepVolumes();
    expect(runtime.actions).toEqual([]);
    expect((await metrics.orphanVolumes.get()).values[0]?.value).toBe(2);
    expect(records).toEqual([expect.objectContaining({ level: 'warning', volumes: [staging, names.volume('gone')], workspaceIds: [kept.id, ORPHAN] })]);
  });

  it('reports an unaccounted volume only once it has been there for the grace period (a restore in progress has its staging volume for a while)', async () => {
    const restoring = await workspace('stopped');
    runtime.volumes.add(names.home(restoring));
    runtime.volumes.add(names.restoreVolume(restoring.slug, 'busy'));
    await controller({ orphanGraceMs: 60_000 }).sweepVolumes();
    expect((await metrics.orphanVolumes.get()).values[0]?.value).toBe(0);
    expect(records).toEqual([]);
  });

  it('accounts for the homes a restore replaced until the controller removes them', async () => {
    const stopped = await workspace('stopped');
    const restored = names.restoreVolume(stopped.slug, 'f00d');
    runtime.volumes.add(names.volume(stopped.slug));
    runtime.volumes.add(restored);
    await store.workspaces.replaceHome(SYSTEM_ACTOR, stopped.id, restored, {}, names.home);
    await controller().sweepVolumes();
    expect((await metrics.orphanVolumes.get()).values[0]?.value).toBe(0);
  });

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

  it('removes every home that restores replaced, two restores in a row with no container started between them included, and forgets them', async () => {
    const stopped = await workspace('stopped');
    runtime.volumes.add(names.volume(stopped.slug));
    const first = names.restoreVolume(stopped.slug, 'a1a1');
    const second = names.restoreVolume(stopped.slug, 'b2b2');
    runtime.volumes.add(first);
    await store.workspaces.replaceHome(SYSTEM_ACTOR, stopped.id, first, {}, names.home);
    runtime.volumes.add(second);
    await store.workspaces.replaceHome(SYSTEM_ACTOR, stopped.id, second, {}, names.home);
    expect((await store.workspaces.get(stopped.id))!.retiredVolumes).toEqual([names.volume(stopped.slug), first]);
    await controller().reconcile(stopped.id);
    expect(runtime.actions).toEqual([`remove volume ${names.volume(stopped.slug)}`, `remove volume ${first}`]);
    expect([...runtime.volumes]).toEqual([second]);
    expect((await store.workspaces.get(stopped.id))!.retiredVolumes).toEqual([]);
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
    expect((await store.workspaces.get(wanted.id))!.retiredVolumes).toEqual([]);
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
    expect(await status(stopped.id)).toEqual({ observedState: 'stopped', statusMessage: '', editorEndpoint: null, observedGeneration: stopped.generation });
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
      observedGeneration: wanted.generation,
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
    editorAnswers = false;
    await expect(controller({ editorProbeMs: 250 }).reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 250 });
    expect(runtime.actions).toEqual([]);
    expect(await status(wanted.id)).toMatchObject({ observedState: 'starting', editorEndpoint: null });
  });

  it('does nothing (no probe either) for a workspace already confirmed running as specified', async () => {
    const wanted = await workspace('running');
    const container = codeContainer(wanted);
    await store.workspaces.writeStatus(wanted.id, {
      observedState: 'running',
      observedGeneration: wanted.generation,
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
    expect(runtime.byName(name)!.restartGeneration).toBe(restarted.restartGeneration);
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

describe('the workspace network and image', () => {
  it('makes a missing network isolated before the first container, once, and says so', async () => {
    const subject = controller({ template: { ...TEMPLATE, network: 'classroom-workspaces' } });
    const first = await workspace('running');
    const second = await workspace('running');
    await subject.reconcile(first.id);
    await subject.reconcile(second.id);
    expect(runtime.actions.filter((action) => action.includes('network'))).toEqual(['create network classroom-workspaces']);
    expect(runtime.actions.indexOf('create network classroom-workspaces')).toBeLessThan(runtime.actions.indexOf(`create ${names.code(first.slug)}`));
    expect(records.filter((record) => record.network === 'classroom-workspaces')).toEqual([
      expect.objectContaining({ level: 'info', message: 'created the workspace network (containers on it cannot reach each other)' }),
    ]);
  });

  it('warns once when workspaces on the configured network can reach each other', async () => {
    const subject = controller();
    await subject.reconcile((await workspace('running')).id);
    await subject.reconcile((await workspace('running')).id);
    expect(records.filter((record) => record.level === 'warning')).toEqual([
      expect.objectContaining({ network: 'bridge', message: expect.stringContaining("workspaces on the network bridge can reach each other's editors") }),
    ]);
  });

  it('warns once, naming the commands to run, when the firewall rules that keep workspaces from link-local addresses could not be written', async () => {
    runtime.firewall = {
      applied: false,
      reason: 'Permission denied (you must be root)',
      commands: ['iptables -S CLASSROOM-LINK-LOCAL 2>/dev/null || iptables -N CLASSROOM-LINK-LOCAL'],
    };
    const subject = controller({ template: { ...TEMPLATE, network: 'classroom-workspaces' } });
    await subject.reconcile((await workspace('running')).id);
    await subject.reconcile((await workspace('running')).id);
    expect(records.filter((record) => record.level === 'warning')).toEqual([
      expect.objectContaining({
        network: 'classroom-workspaces',
        reason: 'Permission denied (you must be root)',
        message: expect.stringContaining('run these as root on the host: iptables -S CLASSROOM-LINK-LOCAL 2>/dev/null || iptables -N CLASSROOM-LINK-LOCAL'),
      }),
    ]);
  });

  it('says in the page and once in the log how to get a missing workspace image, a terminal failure that creates nothing again until the image is there', async () => {
    runtime.missingImages.add(TEMPLATE.image);
    const subject = controller();
    const first = await workspace('running');
    const failure = await subject.reconcile(first.id).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TerminalError);
    expect((failure as Error).cause).toBeInstanceOf(ImageMissingError);
    // Looked at again (a resync): the image is still missing, so nothing is tried.
    const tried = runtime.actions.length;
    await expect(subject.reconcile(first.id)).resolves.toBeUndefined();
    expect(runtime.actions.slice(tried)).toEqual([]);
    const message = `The workspace image ${TEMPLATE.image} is not on this server: the operator builds it (bash scripts/build-workspace-image.sh makes classroom-workspace:latest) or pulls it.`;
    expect(await status(first.id)).toMatchObject({ observedState: 'failed', statusMessage: message });
    expect(records.filter((record) => record.level === 'error')).toEqual([expect.objectContaining({ image: TEMPLATE.image, message })]);
    // The operator builds it: the next look starts the workspace.
    runtime.missingImages.delete(TEMPLATE.image);
    await subject.reconcile(first.id);
    expect(runtime.actions.slice(tried)).toEqual([`create ${names.code(first.slug)}`, `start ${names.code(first.slug)}`]);
    expect((await status(first.id)).observedState).toBe('running');
  });

  it('says at start, in one line, that the workspace image is missing', async () => {
    runtime.missingImages.add(TEMPLATE.image);
    const subject = controller();
    await subject.start();
    try {
      expect(records.filter((record) => record.level === 'error')).toEqual([
        expect.objectContaining({ image: TEMPLATE.image, message: expect.stringContaining('is not on this server') }),
      ]);
    } finally {
      await subject.stop();
    }
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
    expect(await subject.checkNodes()).toEqual([wanted.id]);
    expect(runtime.actions).toEqual(['node n2 pause']);
    await expect(subject.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 0 });
    expect(runtime.actions).toEqual(['node n2 pause', `stop ${editor.name}`]);
    expect(moved).toEqual([`moveOff ${wanted.slug}`]);
    const after = (await store.workspaces.get(wanted.id))!;
    expect(after.homeVolume).toBe(`${names.volume(wanted.slug)}-restore-fresh`);
    expect(after.retiredVolumes).toEqual([names.volume(wanted.slug)]);
    expect(after.homeRestore).toBeNull();
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

  it('makes a node active again when its drain is taken back, and moves nothing more off it', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted, { node: 'n2' });
    await store.nodes.drain(SYSTEM_ACTOR, 'n2');
    const subject = controller({ homes });
    await subject.checkNodes();
    await store.nodes.undrain(SYSTEM_ACTOR, 'n2');
    expect(await subject.checkNodes()).toEqual([]);
    expect(runtime.actions).toEqual(['node n2 pause', 'node n2 active']);
    await subject.reconcile(wanted.id);
    expect(moved).toEqual([]);
  });

  it('moves nothing while a node has been down for less than NODE_LOST_SECONDS', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted, { node: 'n2' });
    runtime.nodeList = [node('n1'), node('n2', 'down')];
    const subject = controller({ homes, nodeLostMs: 60_000 });
    expect(await subject.checkNodes()).toEqual([]);
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
    expect(await subject.checkNodes()).toEqual([wanted.id]);
    await expect(subject.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 0 });
    expect(moved).toEqual([`recoverLatest ${wanted.slug}`]);
    const after = (await store.workspaces.get(wanted.id))!;
    expect(after.homeVolume).toBe(latest.volume);
    expect(after.retiredVolumes).toEqual([]);
    expect(after.homeRestore).toEqual({ at: expect.any(Date), from: latest.backupAt, reason: 'the server n2 that held your files stopped answering' });
    const [entry] = (await store.audit.list({ action: 'workspace.restore', limit: 10 })).entries;
    expect(entry!.metadata).toEqual(expect.objectContaining({ node: 'n2', reason: 'node lost', backup: latest.backup }));
  });

  it('waits for a lost node that holds the only copy of a home, saying so once', async () => {
    const wanted = await workspace('running');
    codeContainer(wanted, { node: 'n2' });
    runtime.nodeList = [node('n1'), node('n2', 'down')];
    const subject = controller({ homes, nodeLostMs: 0 });
    await subject.checkNodes();
    await expect(subject.reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 0 });
    await subject.reconcile(wanted.id);
    expect(await status(wanted.id)).toMatchObject({
      observedState: 'waiting',
      statusMessage: 'Waiting for the server n2, which holds your files: it stopped answering, and no backup of them exists.',
    });
    expect(records.filter((record) => String(record.message).includes('no backup of the home'))).toHaveLength(1);
    expect((await store.workspaces.get(wanted.id))!.homeVolume).toBeNull();
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
