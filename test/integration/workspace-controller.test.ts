import { LABELS, names } from '../../src/docker/runtime.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { CALL_TIMEOUT_MS, DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { createHarness, docker, eventually, inspectByName, newControlPlaneId, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { behindProxy, TcpProxy } from '../helpers/tcp-proxy.ts';

const db = useTestDatabase();
let harness: Harness;
const ids: string[] = [];

afterEach(async () => {
  await harness?.stop();
  await removeEverything(harness.controlPlaneId);
});

let counter = 0;
/** A new student with a workspace, slug unique on this engine. */
async function newWorkspace(): Promise<WorkspaceRecord> {
  const tag = `${Date.now().toString(36)}${counter++}`;
  const { workspace } = await harness.store.users.create({ email: `student-${tag}@school.test` });
  ids.push(workspace.id);
  return workspace;
}

const running = (slug: string) =>
  eventually(`${slug} code container running`, async () => {
    const info = await inspectByName(names.code(slug));
    return info?.State.Running ? info : undefined;
  });

const observed = (id: string, state: string) =>
  eventually(`observed_state ${state}`, async () => {
    const workspace = await harness.store.workspaces.get(id);
    return workspace?.status.observedState === state ? workspace : undefined;
  });

describe('the workspace controller', () => {
  it('creates and starts the code container with its volume, labels and memory limit when a workspace is opened', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    const info = await running(workspace.slug);
    expect(info.Config.Labels).toEqual(
      expect.objectContaining({
        [LABELS.managed]: 'true',
        [LABELS.workspaceId]: workspace.id,
        [LABELS.workspaceSlug]: workspace.slug,
        [LABELS.role]: 'code',
        [LABELS.restartGeneration]: '0',
      }),
    );
    expect(info.HostConfig.Memory).toBe(64 * 1024 * 1024);
    expect(info.HostConfig.NanoCpus).toBe(0);
    expect(info.Mounts).toEqual([expect.objectContaining({ Type: 'volume', Name: names.volume(workspace.slug), Destination: '/home/student' })]);
    const status = await observed(workspace.id, 'running');
    expect(status.status.observedGeneration).toBe(status.spec.generation);
    expect(status.status.lastTransitionAt).not.toBeNull();
    const starts = await harness.metrics.containerStartDuration.get();
    expect(starts.values.find((value) => value.metricName === 'container_start_duration_seconds_count')?.value).toBe(1);
  });

  it('limits the editor to CODE_CPUS when set (no limit by default, as above)', async () => {
    harness = createHarness(db.dataSource, { env: { CODE_CPUS: '0.5' } });
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    expect((await running(workspace.slug)).HostConfig.NanoCpus).toBe(500_000_000);
  });

  it('does nothing to a container that runs as specified', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    const before = await running(workspace.slug);
    await observed(workspace.id, 'running');
    const transition = (await harness.store.workspaces.get(workspace.id))!.status.lastTransitionAt;
    await harness.controller.reconcile(workspace.id);
    await harness.controller.reconcile(workspace.id);
    const after = (await inspectByName(names.code(workspace.slug)))!;
    expect(after.Id).toBe(before.Id);
    expect(after.State.StartedAt).toBe(before.State.StartedAt);
    expect((await harness.store.workspaces.get(workspace.id))!.status.lastTransitionAt).toEqual(transition);
  });

  it('recreates a container whose spec drifted', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    const before = await running(workspace.slug);
    await harness.stop();
    harness = createHarness(db.dataSource, {
      controlPlaneId: harness.controlPlaneId,
      template: { image: 'classroom-workspace:test', memoryBytes: 96 * 1024 * 1024, network: 'bridge', editorPort: 8080, nanoCpus: 0 },
    });
    await harness.controller.start();
    const after = await eventually('recreated container', async () => {
      const info = await inspectByName(names.code(workspace.slug));
      return info && info.Id !== before.Id && info.State.Running ? info : undefined;
    });
    expect(after.HostConfig.Memory).toBe(96 * 1024 * 1024);
    expect(after.Config.Labels[LABELS.specHash]).not.toBe(before.Config.Labels[LABELS.specHash]);
  });

  it('recreates the code container when restart-code bumps the restart generation', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    const before = await running(workspace.slug);
    await harness.store.workspaces.restartCode(SYSTEM_ACTOR, workspace.id);
    const after = await eventually('restarted container', async () => {
      const info = await inspectByName(names.code(workspace.slug));
      return info && info.Id !== before.Id && info.State.Running ? info : undefined;
    });
    expect(after.Config.Labels[LABELS.restartGeneration]).toBe('1');
  });

  it('stops the code container of a workspace set to stopped', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    await running(workspace.slug);
    await harness.store.workspaces.stop(SYSTEM_ACTOR, workspace.id, 'coach');
    await eventually('stopped container', async () => (await inspectByName(names.code(workspace.slug)))?.State.Running === false);
    await observed(workspace.id, 'stopped');
  });

  it('removes the containers and the volume of a deleted workspace, then the row (finalizer)', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    await running(workspace.slug);
    await harness.store.users.delete(SYSTEM_ACTOR, workspace.userId!);
    await eventually('row gone', async () => (await harness.store.workspaces.get(workspace.id)) === undefined);
    expect(await inspectByName(names.code(workspace.slug))).toBeUndefined();
    await expect(docker.getVolume(names.volume(workspace.slug)).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });

  it('recreates a container removed behind its back (seen through the events stream)', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    const before = await running(workspace.slug);
    await docker.getContainer(before.Id).remove({ force: true });
    const after = await eventually('recreated container', async () => {
      const info = await inspectByName(names.code(workspace.slug));
      return info && info.Id !== before.Id && info.State.Running ? info : undefined;
    });
    expect(after.Id).not.toBe(before.Id);
  });

  it('starts again a container stopped behind its back while wanted running', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.store.workspaces.open(workspace.id);
    const before = await running(workspace.slug);
    await docker.getContainer(before.Id).stop({ t: 1 });
    const after = await eventually('restarted container', async () => {
      const info = await inspectByName(names.code(workspace.slug));
      return info?.State.Running && info.State.StartedAt !== before.State.StartedAt ? info : undefined;
    });
    expect(after.Id).toBe(before.Id);
  });

  it('removes an orphan (a managed container matching no workspace) after the grace period, keeping its volume, which the sweep counts', async () => {
    harness = createHarness(db.dataSource);
    const orphanId = '00000000-0000-4000-8000-000000000001';
    const slug = `orphan-${Date.now().toString(36)}`;
    await harness.runtime.ensureVolume({ workspaceId: orphanId, slug }, names.volume(slug));
    const orphan = await harness.runtime.createCodeContainer({
      workspaceId: orphanId,
      slug,
      homeVolume: names.volume(slug),
      image: 'classroom-workspace:test',
      memoryBytes: 64 * 1024 * 1024,
      network: 'bridge',
      editorPort: 8080,
      nanoCpus: 0,
      pidsLimit: 1024,
      restartGeneration: 0,
      specHash: 'x',
    });
    await harness.controller.start();
    await eventually('orphan removed', async () => (await inspectByName(orphan.name)) === undefined);
    expect(harness.records).toContainEqual(
      expect.objectContaining({ level: 'warning', workspaceId: orphanId, message: expect.stringContaining('orphan containers') }),
    );
    expect((await harness.metrics.orphanContainers.get()).values[0]?.value).toBe(1);
    await expect(docker.getVolume(names.volume(slug)).inspect()).resolves.toBeDefined();
    // The home it leaves is counted by the orphan sweep, by name, and kept.
    await eventually('orphan volume counted', async () => (await harness.metrics.orphanVolumes.get()).values[0]?.value === 1);
    expect(harness.records).toContainEqual(expect.objectContaining({ level: 'warning', volumes: [names.volume(slug)], workspaceIds: [orphanId] }));
  });

  it('leaves orphans alone during the start-up grace period', async () => {
    harness = createHarness(db.dataSource, { orphanStartupGraceMs: 60_000 });
    const slug = `orphan-${Date.now().toString(36)}`;
    // Created first, with our labels, so that the cleanup finds it (a volume Docker makes for a mount has none).
    await harness.runtime.ensureVolume({ workspaceId: '00000000-0000-4000-8000-000000000002', slug }, names.volume(slug));
    const orphan = await harness.runtime.createCodeContainer({
      workspaceId: '00000000-0000-4000-8000-000000000002',
      slug,
      homeVolume: names.volume(slug),
      image: 'classroom-workspace:test',
      memoryBytes: 64 * 1024 * 1024,
      network: 'bridge',
      editorPort: 8080,
      nanoCpus: 0,
      pidsLimit: 1024,
      restartGeneration: 0,
      specHash: 'x',
    });
    await harness.controller.start();
    await harness.controller.queue.idle();
    await harness.controller.reconcile('00000000-0000-4000-8000-000000000002');
    expect(await inspectByName(orphan.name)).toBeDefined();
  });

  it('never starts more code containers than the cap, even when more are wanted running', async () => {
    harness = createHarness(db.dataSource);
    await harness.store.settings.setCap(SYSTEM_ACTOR, 1);
    const first = await newWorkspace();
    const second = await newWorkspace();
    // Both wanted running behind admission's back (as after lowering the cap).
    await db.dataSource.query("UPDATE workspaces SET desired_state = 'running' WHERE id = ANY($1)", [[first.id, second.id]]);
    await harness.controller.start();
    const states = await eventually('one running, one waiting', async () => {
      const a = await harness.store.workspaces.get(first.id);
      const b = await harness.store.workspaces.get(second.id);
      const pair = [a!.status.observedState, b!.status.observedState].toSorted();
      return pair[0] === 'running' && pair[1] === 'waiting' ? pair : undefined;
    });
    expect(states).toEqual(['running', 'waiting']);
    const runningCount = (await harness.runtime.listContainers()).filter((container) => container.state === 'running').length;
    expect(runningCount).toBe(1);
  });

  it('keeps a restarted workspace running after the cap was lowered below the running count', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const first = await newWorkspace();
    const second = await newWorkspace();
    await harness.store.workspaces.open(first.id);
    await harness.store.workspaces.open(second.id);
    const before = await running(first.slug);
    await running(second.slug);
    await harness.store.settings.setCap(SYSTEM_ACTOR, 1);
    await harness.store.workspaces.restartCode(SYSTEM_ACTOR, first.id);
    await eventually('recreated and running', async () => {
      const info = await inspectByName(names.code(first.slug));
      return info && info.Id !== before.Id && info.State.Running ? info : undefined;
    });
    await observed(first.id, 'running');
    expect((await inspectByName(names.code(second.slug)))!.State.Running).toBe(true);
  });

  it('sees another process edit at once through LISTEN/NOTIFY, without waiting for the resync', async () => {
    harness = createHarness(db.dataSource);
    harness.changes.listen(db.url, harness.log);
    await harness.controller.start();
    const workspace = await newWorkspace();
    await harness.controller.queue.idle();
    // Another process: its own data source and change feed, no in-process publish reaches us.
    const other = createHarness(db.dataSource, { controlPlaneId: harness.controlPlaneId });
    try {
      await eventually('listener connected', async () => harness.records.some((record) => record.message === 'change listener connected'));
      await other.store.workspaces.open(workspace.id);
      await running(workspace.slug);
    } finally {
      await harness.changes.close();
    }
  });

  it('stops at once while an engine call hangs: the call is aborted, not waited out to its own timeout', async () => {
    // The engine through a loopback proxy that, once stalled, accepts connections and answers nothing.
    const proxy = await new TcpProxy({ path: '/var/run/docker.sock' }).listen();
    const controlPlaneId = newControlPlaneId();
    const runtime = new DockerRuntime({ controlPlaneId, docker: { host: '127.0.0.1', port: proxy.port, protocol: 'http' } });
    harness = createHarness(db.dataSource, { controlPlaneId, runtime });
    try {
      await harness.controller.start();
      await harness.controller.queue.idle();
      proxy.stall();
      const workspace = await newWorkspace();
      await harness.store.workspaces.open(workspace.id);
      // Its reconcile is waiting on the engine.
      await eventually('a reconcile waiting on the engine', async () => harness.controller.queue.running > 0);
      const stopping = performance.now();
      await harness.controller.stop();
      expect(performance.now() - stopping).toBeLessThan(CALL_TIMEOUT_MS / 4);
      // The stalled requests were ended by the control plane, not left to time out.
      await eventually('the stalled connections closed', async () => proxy.openConnections === 0, 5000);
    } finally {
      await proxy.close();
    }
  });

  it('LISTENs again after the database connection drops, and resyncs', async () => {
    harness = createHarness(db.dataSource);
    const { proxy, url: viaProxy } = await behindProxy(db.url);
    harness.changes.listen(viaProxy, harness.log);
    await harness.controller.start();
    try {
      const workspace = await newWorkspace();
      await eventually('listener connected', async () => harness.records.some((record) => record.message === 'change listener connected'));
      proxy.dropConnections();
      await eventually('listener reconnected', async () => harness.records.some((record) => record.message === 'change listener reconnected'));
      const other = createHarness(db.dataSource, { controlPlaneId: harness.controlPlaneId });
      await other.store.workspaces.open(workspace.id);
      await running(workspace.slug);
    } finally {
      await harness.changes.close();
      await proxy.close();
    }
  });
});
