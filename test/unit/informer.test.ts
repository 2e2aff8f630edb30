import { InformedRuntime } from '../../src/docker/informer.ts';
import { names, type RuntimeEvent } from '../../src/docker/runtime.ts';
import { MemoryRuntime } from '../helpers/memory-runtime.ts';

/** The in-memory engine, counting its listings: `all` (no filter) and `one` (of one workspace). */
function countingEngine(): MemoryRuntime & { listings: { all: number; one: number } } {
  const engine = new MemoryRuntime() as MemoryRuntime & { listings: { all: number; one: number } };
  engine.listings = { all: 0, one: 0 };
  const list = engine.listContainers.bind(engine);
  engine.listContainers = (filter) => {
    if (filter?.workspaceId === undefined) engine.listings.all++;
    else engine.listings.one++;
    return list(filter);
  };
  return engine;
}

const code = (engine: MemoryRuntime, workspaceId: string, state = 'running') =>
  engine.preload({ name: names.code(workspaceId), role: 'code', workspaceId, slug: workspaceId, state });

/** Watches `runtime` (as a controller does) and resolves once it is in sync; records what reaches the watcher. */
async function watching(runtime: InformedRuntime): Promise<{ events: RuntimeEvent[]; connects: number; close(): void }> {
  const seen = { events: [] as RuntimeEvent[], connects: 0, close: () => undefined as void };
  const subscription = runtime.watch({
    onEvent: (event) => seen.events.push(event),
    onConnect: () => seen.connects++,
    onDisconnect: () => undefined,
  });
  seen.close = () => subscription.close();
  while (seen.connects === 0) await new Promise((resolve) => setImmediate(resolve));
  return seen;
}

describe('observed state from a cache (InformedRuntime)', () => {
  it('asks the engine for each workspace while nothing watches it, as before', async () => {
    const engine = countingEngine();
    code(engine, 'a');
    const runtime = new InformedRuntime(engine);
    expect(await runtime.listContainers({ workspaceId: 'a' })).toHaveLength(1);
    expect(await runtime.listContainers({ workspaceId: 'a' })).toHaveLength(1);
    expect(engine.listings).toEqual({ all: 0, one: 2 });
    expect(runtime.inSync).toBe(false);
  });

  it('once in sync (connected, then one full listing), serves every workspace from memory: a resync of N costs one listing', async () => {
    const engine = countingEngine();
    for (const id of ['a', 'b', 'c']) code(engine, id);
    const runtime = new InformedRuntime(engine);
    const watcher = await watching(runtime);
    expect(runtime.inSync).toBe(true);
    engine.listings = { all: 0, one: 0 };
    // A resync: the controller lists everything once, then reconciles each workspace.
    await runtime.listContainers();
    for (const id of ['a', 'b', 'c', 'none']) await runtime.listContainers({ workspaceId: id });
    expect(engine.listings).toEqual({ all: 1, one: 0 });
    expect((await runtime.listContainers({ workspaceId: 'a' })).map((container) => container.name)).toEqual([names.code('a')]);
    expect(await runtime.listContainers({ workspaceId: 'none' })).toEqual([]);
    // Copies: a caller's change does not reach the cache.
    (await runtime.listContainers({ workspaceId: 'a' }))[0]!.state = 'changed by a caller';
    expect((await runtime.listContainers({ workspaceId: 'a' }))[0]!.state).toBe('running');
    watcher.close();
  });

  it("refreshes an event's workspace before passing the event on, so the reconcile it wakes reads what it announced", async () => {
    const engine = countingEngine();
    const container = code(engine, 'a');
    const runtime = new InformedRuntime(engine);
    let seenByWatcher: string | undefined;
    const subscription = runtime.watch({
      onEvent: () => void runtime.listContainers({ workspaceId: 'a' }).then(([first]) => (seenByWatcher = first?.state)),
      onConnect: () => undefined,
      onDisconnect: () => undefined,
    });
    while (!runtime.inSync) await new Promise((resolve) => setImmediate(resolve));
    engine.exit(container.id, 1);
    engine.emit({ workspaceId: 'a', runId: undefined, action: 'die' });
    while (seenByWatcher === undefined) await new Promise((resolve) => setImmediate(resolve));
    expect(seenByWatcher).toBe('exited');
    subscription.close();
  });

  it('reads its own writes: create, start, stop and remove refresh their workspace', async () => {
    const engine = countingEngine();
    const runtime = new InformedRuntime(engine);
    const watcher = await watching(runtime);
    const spec = {
      workspaceId: 'a',
      slug: 'a',
      image: 'i',
      memoryBytes: 1,
      network: 'n',
      editorPort: 8080,
      nanoCpus: 0,
      pidsLimit: 1024,
      restartGeneration: 0,
      homeVolume: 'v',
      specHash: 'h',
    };
    const created = await runtime.createCodeContainer(spec);
    const state = async () => (await runtime.listContainers({ workspaceId: 'a' }))[0]?.state;
    expect(await state()).toBe('created');
    await runtime.start(created.id);
    expect(await state()).toBe('running');
    await runtime.stop(created.id);
    expect(await state()).toBe('exited');
    await runtime.remove(created.id);
    expect(await state()).toBeUndefined();
    watcher.close();
  });

  it('asks the engine again while the events stream is lost, and serves from memory again after a reconnect and a full listing', async () => {
    const engine = countingEngine();
    code(engine, 'a');
    const runtime = new InformedRuntime(engine);
    const watcher = await watching(runtime);
    engine.connection(new Error('the Docker events stream ended'));
    expect(runtime.inSync).toBe(false);
    engine.listings = { all: 0, one: 0 };
    await runtime.listContainers({ workspaceId: 'a' });
    expect(engine.listings.one).toBe(1);
    engine.connection();
    while (watcher.connects < 2) await new Promise((resolve) => setImmediate(resolve));
    expect(runtime.inSync).toBe(true);
    engine.listings = { all: 0, one: 0 };
    await runtime.listContainers({ workspaceId: 'a' });
    expect(engine.listings.one).toBe(0);
    watcher.close();
  });

  it('asks the engine for a workspace whose refresh failed, until one succeeds', async () => {
    const engine = countingEngine();
    const container = code(engine, 'a');
    const runtime = new InformedRuntime(engine);
    const watcher = await watching(runtime);
    engine.failures.set('listContainers', new Error('engine busy'));
    engine.exit(container.id, 0);
    engine.emit({ workspaceId: 'a', runId: undefined, action: 'die' });
    while (watcher.events.length === 0) await new Promise((resolve) => setImmediate(resolve));
    // The event's refresh failed: the cache still says running, so it is not trusted.
    engine.listings = { all: 0, one: 0 };
    expect((await runtime.listContainers({ workspaceId: 'a' }))[0]!.state).toBe('exited');
    expect(engine.listings.one).toBe(1);
    await runtime.listContainers({ workspaceId: 'a' });
    expect(engine.listings.one).toBe(1);
    watcher.close();
  });

  it('never lets a slow answer overwrite a newer one', async () => {
    const engine = countingEngine();
    const container = code(engine, 'a');
    const runtime = new InformedRuntime(engine);
    const watcher = await watching(runtime);
    // A full listing that begins now but answers late, with the state of now (running).
    const list = engine.listContainers.bind(engine);
    let release: () => void = () => undefined;
    engine.listContainers = async (filter) => {
      const answer = await list(filter);
      if (filter?.workspaceId === undefined) await new Promise<void>((resolve) => (release = resolve));
      return answer;
    };
    const slow = runtime.listContainers();
    await new Promise((resolve) => setImmediate(resolve));
    // Meanwhile the container stops, and this control plane hears of it.
    engine.listContainers = list;
    await runtime.stop(container.id);
    release();
    await slow;
    expect((await runtime.listContainers({ workspaceId: 'a' }))[0]!.state).toBe('exited');
    watcher.close();
  });

  it('shares one subscription to the engine among every watcher and every view (scoped), and closes it with the last', async () => {
    const engine = countingEngine();
    const runtime = new InformedRuntime(engine);
    const subscribe = engine.watch.bind(engine);
    let subscriptions = 0;
    let closed = 0;
    engine.watch = (handlers) => {
      subscriptions++;
      const subscription = subscribe(handlers);
      return { close: () => (closed++, subscription.close()) };
    };
    const first = await watching(runtime);
    const view = runtime.scoped({ signal: new AbortController().signal }) as InformedRuntime;
    const second = await watching(view);
    expect(subscriptions).toBe(1);
    first.close();
    expect(closed).toBe(0);
    second.close();
    expect(closed).toBe(1);
    expect(runtime.inSync).toBe(false);
  });

  it('passes what it does not cache (volumes, nodes, stats, the network, the image, output) to the runtime it wraps, a scoped view to its scoped copy', async () => {
    const engine = new MemoryRuntime();
    const container = code(engine, 'a');
    const runtime = new InformedRuntime(engine);
    await runtime.ensureVolume({ workspaceId: 'a', slug: 'a' }, names.volume('a'));
    expect(await engine.volumeExists(names.volume('a'))).toBe(true);
    expect(await runtime.volumeExists(names.volume('a'))).toBe(true);
    expect(await runtime.nodes()).toEqual(await engine.nodes());
    expect(await runtime.stats(container.id)).toEqual(await engine.stats(container.id));
    expect(await runtime.exitOf(container.id)).toEqual(await engine.exitOf(container.id));
    let asked = 0;
    engine.scoped = () => Object.assign(Object.create(engine) as MemoryRuntime, { nodes: () => (asked++, engine.nodes()) });
    await runtime.scoped({}).nodes();
    expect(asked).toBe(1);
  });
});
