/**
 * The node lifecycle of a swarm, one job of the workspace controller (controllers/node-lifecycle.ts),
 * branch by branch and trigger by trigger: the real store on the test PostgreSQL, the in-memory
 * runtime's nodes. What the workspace reconcile then does with the workspaces it sends:
 * test/unit/workspace-node-away.test.ts and workspace-home-moves.test.ts.
 */
import { NodeLifecycle } from '../../controllers/node-lifecycle.ts';
import { names, type RuntimeNode } from '../../src/docker/runtime.ts';
import { categoryLogger } from '../../src/log.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { MemoryRuntime } from '../helpers/memory-runtime.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
let store: Store;
let runtime: MemoryRuntime;
let records: Record<string, unknown>[];
let enqueued: string[];
let stopping: AbortController;

const node = (name: string, state = 'ready', availability = 'active'): RuntimeNode => ({
  id: name,
  name,
  address: '10.0.0.2',
  state,
  availability,
  memoryBytes: 8 * 1024 ** 3,
  nanoCpus: 4e9,
  reservedMemoryBytes: 0,
  reachable: state === 'ready',
});

beforeEach(() => {
  store = testStore(db.dataSource);
  runtime = new MemoryRuntime();
  runtime.nodeList = [node('n1'), node('n2')];
  enqueued = [];
  stopping = new AbortController();
});

function lifecycle(options: { nodeLostMs?: number; nodeCheckMs?: number } = {}): NodeLifecycle {
  const logger = captureLogger();
  records = logger.records;
  return new NodeLifecycle({
    store,
    runtime,
    log: categoryLogger(logger.root, 'containers'),
    nodeLostMs: options.nodeLostMs ?? 60_000,
    nodeCheckMs: options.nodeCheckMs ?? 60_000,
    enqueue: (key) => enqueued.push(key),
    signal: stopping.signal,
  });
}

/** A workspace's editor on `nodeName`. */
function editorOn(nodeName: string, workspaceId: string, slug: string) {
  return runtime.preload({ name: names.code(slug), role: 'code', workspaceId, slug, node: nodeName });
}

const W1 = '00000000-0000-4000-8000-000000000001';
const W2 = '00000000-0000-4000-8000-000000000002';

describe('NodeLifecycle.check', () => {
  it('records the nodes for the operator, and sends no workspace while every node is ready and none drained', async () => {
    editorOn('n2', W1, 'one');
    expect(await lifecycle().check()).toEqual([]);
    expect((await store.nodes.list()).map((each) => each.name)).toEqual(['n1', 'n2']);
    expect(runtime.actions).toEqual([]);
  });

  it('says once that a node is not ready, and again only after it was ready in between', async () => {
    const subject = lifecycle();
    runtime.nodeList = [node('n1'), node('n2', 'down')];
    await subject.check();
    await subject.check();
    runtime.nodeList = [node('n1'), node('n2')];
    await subject.check();
    runtime.nodeList = [node('n1'), node('n2', 'down')];
    await subject.check();
    expect(records.filter((record) => record.node === 'n2').map((record) => record.message)).toEqual([
      'node n2 is down; its workspaces move if it is not back within 60 s',
      'node n2 is down; its workspaces move if it is not back within 60 s',
    ]);
  });

  it('pauses a drained node once and sends the workspaces on it (drained: they leave it); the others stay', async () => {
    editorOn('n2', W1, 'one');
    editorOn('n1', W2, 'two');
    await store.nodes.drain(SYSTEM_ACTOR, 'n2');
    const subject = lifecycle();
    expect(await subject.check()).toEqual([W1]);
    runtime.nodeList = [node('n1'), node('n2', 'ready', 'pause')];
    expect(await subject.check()).toEqual([W1]);
    expect(runtime.actions).toEqual(['node n2 pause']);
    expect(subject.leaving('n2')).toBe('drained');
    expect(subject.leaving('n1')).toBeUndefined();
    expect(records).toContainEqual(
      expect.objectContaining({ level: 'info', node: 'n2', message: 'node n2 drained: nothing new is placed there, and its workspaces move off it' }),
    );
  });

  it('makes a node active again only when its own drain was taken back, not one paused by someone else', async () => {
    await store.nodes.drain(SYSTEM_ACTOR, 'n2');
    runtime.nodeList = [node('n1', 'ready', 'pause'), node('n2')];
    const subject = lifecycle();
    await subject.check();
    runtime.nodeList = [node('n1', 'ready', 'pause'), node('n2', 'ready', 'pause')];
    await store.nodes.undrain(SYSTEM_ACTOR, 'n2');
    await subject.check();
    expect(runtime.actions).toEqual(['node n2 pause', 'node n2 active']);
    expect(records).toContainEqual(expect.objectContaining({ node: 'n2', message: 'node n2 taken back: workspaces may be placed there again' }));
  });

  it('has a node down past NODE_LOST_SECONDS lost (its workspaces sent), and down for less not (only marked down)', async () => {
    editorOn('n2', W1, 'one');
    const subject = lifecycle({ nodeLostMs: 0 });
    runtime.nodeList = [node('n1'), node('n2', 'down')];
    expect(await subject.check()).toEqual([W1]);
    expect(subject.leaving('n2')).toBe('lost');
    expect(subject.isDown('n2')).toBe(true);
    const patient = lifecycle({ nodeLostMs: 60_000 });
    expect(await patient.check()).toEqual([]);
    expect(patient.leaving('n2')).toBeUndefined();
    expect(patient.isDown('n2')).toBe(true);
  });

  it('says whether a node is not ready now, asking the runtime (false when it cannot tell)', async () => {
    runtime.nodeList = [node('n1'), node('n2', 'unknown')];
    const subject = lifecycle();
    expect(await subject.notReady('n2')).toBe(true);
    expect(await subject.notReady('n1')).toBe(false);
    expect(await subject.notReady('n9')).toBe(false);
    runtime.nodes = () => Promise.reject(new Error('engine down'));
    expect(await subject.notReady('n2')).toBe(false);
  });
});

describe('NodeLifecycle triggers', () => {
  it('looks at the nodes on a drain asked for (the change feed), and on no other kind of change', async () => {
    editorOn('n2', W1, 'one');
    await store.nodes.drain(SYSTEM_ACTOR, 'n2');
    const subject = lifecycle();
    expect(await subject.keysOfChange({ kind: 'workspaces', id: W1 })).toEqual([]);
    expect(runtime.actions).toEqual([]);
    expect(await subject.keysOfChange({ kind: 'nodes', id: 'n2' })).toEqual([W1]);
    expect(runtime.actions).toEqual(['node n2 pause']);
  });

  it('looks at once when started and then on its timer, sending what it finds to the queue; a failed look is said', async () => {
    editorOn('n2', W1, 'one');
    await store.nodes.drain(SYSTEM_ACTOR, 'n2');
    const subject = lifecycle({ nodeCheckMs: 20 });
    subject.start();
    try {
      await eventually('two looks', async () => enqueued.length >= 2);
      expect(new Set(enqueued)).toEqual(new Set([W1]));
      runtime.nodes = () => Promise.reject(new Error('engine down'));
      await eventually('a failed look said', async () =>
        records.some((record) => record.message === 'looking at the nodes failed; the next look tries again' && record.error === 'engine down'),
      );
    } finally {
      await subject.stop();
    }
  });

  it('says nothing of a look that the stop of the workspace controller aborted', async () => {
    let lookedAt!: () => void;
    const looking = new Promise<void>((resolve) => (lookedAt = resolve));
    let fail!: (error: Error) => void;
    runtime.nodes = () => {
      lookedAt();
      return new Promise<RuntimeNode[]>((_, reject) => (fail = reject));
    };
    const subject = lifecycle();
    subject.start();
    await looking;
    stopping.abort();
    fail(new DOMException('The operation was aborted', 'AbortError'));
    await subject.stop();
    expect(records).toEqual([]);
  });
});
