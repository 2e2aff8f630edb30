/**
 * The workspace controller while the swarm node of a workspace's editor is away (down, not yet
 * lost): its page says starting, with why, and nothing is asked of the node until it is back, as
 * test/unit/workspace-reconcile.test.ts does each other branch (the real store, the in-memory
 * runtime). The same on a real swarm: test/integration/swarm.test.ts, a node paused for 25 s.
 */
import { codeSpecHash, WorkspaceController } from '../../controllers/workspaces.ts';
import { names, type RuntimeNode } from '../../src/docker/runtime.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import type { Store } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { captureLogger } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { MemoryRuntime } from '../helpers/memory-runtime.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
const TEMPLATE = { image: 'classroom-workspace:test', memoryBytes: 64 * 1024 * 1024, network: 'bridge', editorPort: 8080, nanoCpus: 0 };
const AWAY = 'The server n2 that holds your files is not answering; your editor starts again there once it is back.';

let store: Store;
let runtime: MemoryRuntime;
let counter = 0;

const node = (name: string, state: string): RuntimeNode => ({
  id: name,
  name,
  address: '10.0.0.2',
  state,
  availability: 'active',
  memoryBytes: 8 * 1024 ** 3,
  nanoCpus: 4e9,
  reservedMemoryBytes: 0,
  reachable: true,
});

beforeEach(() => {
  store = testStore(db.dataSource, { environmentCap: 2 });
  runtime = new MemoryRuntime();
  runtime.nodeList = [node('n1', 'ready'), node('n2', 'ready')];
});

const controller = () =>
  new WorkspaceController({
    store,
    runtime,
    metrics: createMetrics(),
    log: categoryLogger(captureLogger().root, 'containers'),
    template: TEMPLATE,
    probe: async () => ({ outcome: 'ok', seconds: 0.001 }),
    nodeLostMs: 60_000,
    nodeCheckMs: 5000,
  });

/** A workspace wanted running whose editor (its service) is on node n2, in `state`. */
async function onN2(state: string): Promise<WorkspaceRecord> {
  const { workspace } = await store.users.create({ email: `away${counter++}@school.test` });
  await store.workspaces.open(workspace.id);
  runtime.preload({
    name: names.code(workspace.slug),
    role: 'code',
    workspaceId: workspace.id,
    slug: workspace.slug,
    specHash: codeSpecHash(TEMPLATE),
    state,
    node: 'n2',
  });
  runtime.volumes.add(names.volume(workspace.slug));
  return (await store.workspaces.get(workspace.id))!;
}

const shown = async (id: string) => {
  const record = (await store.workspaces.get(id))!;
  return `${record.status.observedState}: ${record.status.statusMessage}`;
};

it('says on the page that the editor waits for its server while Swarm has its node down, asks nothing of the engine, and starts it again once the node is back', async () => {
  const wanted = await onN2('running');
  const subject = controller();
  await subject.reconcile(wanted.id);
  expect(await shown(wanted.id)).toBe('running: ');
  expect(await subject.nodes.check()).toEqual([]);

  // Marked down (its task replaced, pending on the node): looked at at once.
  runtime.nodeList = [node('n1', 'ready'), node('n2', 'down')];
  runtime.byName(names.code(wanted.slug))!.state = 'restarting';
  expect(await subject.nodes.check()).toEqual([wanted.id]);
  runtime.actions.length = 0;
  await expect(subject.reconcile(wanted.id)).resolves.toBeUndefined();
  expect(await shown(wanted.id)).toBe(`starting: ${AWAY}`);
  expect((await store.workspaces.get(wanted.id))!.status.editorEndpoint).toBeNull();
  expect(runtime.actions).toEqual([]);
  expect(await subject.nodes.check()).toEqual([]);

  // Back: looked at at once, and its editor runs there again.
  runtime.nodeList = [node('n1', 'ready'), node('n2', 'ready')];
  expect(await subject.nodes.check()).toEqual([wanted.id]);
  await subject.reconcile(wanted.id);
  expect(runtime.actions).toEqual([`start ${names.code(wanted.slug)}`]);
  expect(await shown(wanted.id)).toBe('running: ');
});

it('says starting, not failed, when its editor cannot be started because its node is not ready yet (before the controller looked at the nodes), and looks again at the next look', async () => {
  const wanted = await onN2('restarting');
  runtime.nodeList = [node('n1', 'ready'), node('n2', 'unknown')];
  runtime.failures.set('ensureVolume', new Error(`the home of ${wanted.slug} is on node n2, which is down`));
  await expect(controller().reconcile(wanted.id)).resolves.toEqual({ requeueAfterMs: 5000 });
  expect(await shown(wanted.id)).toBe(`starting: ${AWAY}`);
});

it('still says failed, with the engine words, when a start fails on a node that is ready', async () => {
  const wanted = await onN2('restarting');
  runtime.failures.set('ensureVolume', new Error('disk full'));
  await expect(controller().reconcile(wanted.id)).rejects.toThrow('disk full');
  expect(await shown(wanted.id)).toBe('failed: disk full');
});
