/**
 * Observed state from a cache, informer style (client-go's shared informer): a WorkspaceRuntime
 * over another whose per-workspace listings (what each reconcile asks) come from memory once the
 * cache is in sync, so that a resync of N workspaces costs one listing of the engine, not N + 1.
 *
 * - A full listing (no filter: every resync, the controllers' adoption, the stats sampler) goes to
 *   the engine and replaces the cache.
 * - The engine's events keep it current: an event of a workspace refreshes that workspace's entry
 *   from the engine before the event is passed on, so the reconcile it wakes reads what the event
 *   announced. The subscription is one for every controller.
 * - A change this control plane makes (create, start, stop, remove, a network repaired) refreshes
 *   that workspace's entry before the call returns: a reconcile reads its own writes.
 * - In sync means: the events stream is connected and a full listing began after it connected.
 *   Until then, and for a workspace whose refresh failed, a listing goes to the engine as before.
 *   The periodic resync (a full listing) stays the guarantee for what no event announces (a swarm
 *   task that never got a container).
 *
 * Every refresh takes a ticket when it begins; an entry is replaced only by a refresh that began
 * after the one it holds, so a slow answer never overwrites a newer one.
 */
import type { Reachability } from './reachability.ts';
import {
  ROLE_METHODS,
  type CodeContainerSpec,
  type EngineScope,
  type EventSubscription,
  type ManagedContainer,
  type NetworkRepair,
  type RuntimeEvent,
  type SimContainerSpec,
  type WorkspaceRuntime,
} from './runtime.ts';

type Handlers = { onEvent(event: RuntimeEvent): void; onConnect(): void; onDisconnect(error: Error): void };

/** What every view of one informer shares. */
class Cache {
  readonly byWorkspace = new Map<string, ManagedContainer[]>();
  /** The ticket of the refresh each entry holds (kept for workspaces with no container too). */
  readonly applied = new Map<string, number>();
  /** Workspaces whose last refresh failed: read from the engine until one succeeds. */
  readonly stale = new Set<string>();
  ticket = 0;
  /** The ticket at the events stream's last connect; undefined while it is not connected. */
  connectedAt: number | undefined;
  /** Whether a full listing that began after the connect has been applied. */
  synced = false;
  readonly handlers = new Set<Handlers>();
  subscription: EventSubscription | undefined;

  apply(workspaceId: string, ticket: number, containers: ManagedContainer[]): void {
    if ((this.applied.get(workspaceId) ?? 0) > ticket) return;
    this.applied.set(workspaceId, ticket);
    if (containers.length > 0) this.byWorkspace.set(workspaceId, containers);
    else this.byWorkspace.delete(workspaceId);
  }

  applyAll(ticket: number, containers: ManagedContainer[]): void {
    const grouped = new Map<string, ManagedContainer[]>();
    for (const container of containers) grouped.set(container.workspaceId, [...(grouped.get(container.workspaceId) ?? []), container]);
    for (const workspaceId of new Set([...this.byWorkspace.keys(), ...grouped.keys()])) this.apply(workspaceId, ticket, grouped.get(workspaceId) ?? []);
    if (this.connectedAt !== undefined && ticket > this.connectedAt) this.synced = true;
  }

  workspaceOf(id: string): string | undefined {
    for (const [workspaceId, containers] of this.byWorkspace) if (containers.some((container) => container.id === id)) return workspaceId;
    return undefined;
  }
}

/** What the informer passes to the runtime it wraps unchanged: whole roles, the environment's and the workloads' reads. */
const PASSED = [
  ...ROLE_METHODS.volumes,
  ...ROLE_METHODS.nodes,
  ...ROLE_METHODS.stats,
  'ensureNetwork',
  'imageExists',
  'serving',
  'exitOf',
  'logsTail',
  'followOutput',
] as const;

/**
 * A base class whose instances have `members` of the runtime they are made with, bound to it: a
 * wrapper extends it and writes only what it changes (a method it writes that is also passed is a
 * compile error, TS2425, not a silent shadow).
 */
function passing<K extends keyof WorkspaceRuntime>(members: readonly K[]): new (inner: WorkspaceRuntime) => Pick<WorkspaceRuntime, K> {
  // A constructor function, not a class: it has nothing but its constructor.
  return function (this: object, inner: WorkspaceRuntime) {
    for (const member of members) Object.defineProperty(this, member, { value: (inner[member] as (...args: unknown[]) => unknown).bind(inner) });
  } as unknown as new (inner: WorkspaceRuntime) => Pick<WorkspaceRuntime, K>;
}

/** A WorkspaceRuntime whose per-workspace listings come from a cache fed by the engine's events (see the file's comment). */
export class InformedRuntime extends passing(PASSED) implements WorkspaceRuntime {
  private readonly inner: WorkspaceRuntime;
  private readonly cache: Cache;
  /** The runtime the shared event subscription refreshes through (never a stopping controller's). */
  private readonly base: WorkspaceRuntime;

  constructor(inner: WorkspaceRuntime, shared?: { cache: Cache; base: WorkspaceRuntime }) {
    super(inner);
    this.inner = inner;
    this.cache = shared?.cache ?? new Cache();
    this.base = shared?.base ?? inner;
  }

  /** The inner engine's (calls are made through it). */
  get reachability(): Reachability | undefined {
    return this.inner.reachability;
  }

  /** Whether per-workspace listings are served from memory now. */
  get inSync(): boolean {
    return this.cache.synced;
  }

  scoped(scope: EngineScope): WorkspaceRuntime {
    return new InformedRuntime(this.inner.scoped(scope), { cache: this.cache, base: this.base });
  }

  async listContainers(filter: { workspaceId?: string } = {}): Promise<ManagedContainer[]> {
    const { workspaceId } = filter;
    if (workspaceId === undefined) {
      const ticket = ++this.cache.ticket;
      const all = await this.inner.listContainers();
      this.cache.applyAll(ticket, all);
      return all;
    }
    if (this.cache.synced && !this.cache.stale.has(workspaceId)) return (this.cache.byWorkspace.get(workspaceId) ?? []).map((container) => ({ ...container }));
    return this.refresh(workspaceId, this.inner);
  }

  /** Lists one workspace's containers from the engine into the cache. */
  private async refresh(workspaceId: string, through: WorkspaceRuntime): Promise<ManagedContainer[]> {
    const ticket = ++this.cache.ticket;
    try {
      const containers = await through.listContainers({ workspaceId });
      this.cache.apply(workspaceId, ticket, containers);
      this.cache.stale.delete(workspaceId);
      return containers;
    } catch (error) {
      this.cache.stale.add(workspaceId);
      throw error;
    }
  }

  /** After a change to a container: its workspace refreshed (a failure marks it stale: read from the engine next time). */
  private async changed(workspaceId: string | undefined): Promise<void> {
    if (workspaceId !== undefined) await this.refresh(workspaceId, this.inner).catch(() => undefined);
  }

  async createCodeContainer(spec: CodeContainerSpec): Promise<ManagedContainer> {
    const container = await this.inner.createCodeContainer(spec);
    await this.changed(spec.workspaceId);
    return container;
  }

  async createSimContainer(spec: SimContainerSpec): Promise<ManagedContainer> {
    const container = await this.inner.createSimContainer(spec);
    await this.changed(spec.workspaceId);
    return container;
  }

  async start(id: string): Promise<void> {
    await this.inner.start(id);
    await this.changed(this.cache.workspaceOf(id));
  }

  async stop(id: string, timeoutSeconds?: number): Promise<void> {
    await this.inner.stop(id, timeoutSeconds);
    await this.changed(this.cache.workspaceOf(id));
  }

  async remove(id: string): Promise<void> {
    const workspaceId = this.cache.workspaceOf(id);
    await this.inner.remove(id);
    await this.changed(workspaceId);
  }

  async repairNetwork(id: string, network: string): Promise<NetworkRepair | undefined> {
    const repaired = await this.inner.repairNetwork?.(id, network);
    await this.changed(this.cache.workspaceOf(id));
    return repaired;
  }

  /**
   * One subscription to the engine for every watcher: an event refreshes its workspace, then is
   * passed on; a connect is passed on once a full listing after it is in the cache (and to a
   * watcher that joins later, at once).
   */
  watch(handlers: Handlers): EventSubscription {
    const cache = this.cache;
    cache.handlers.add(handlers);
    // A watcher that joins a stream already in sync hears of the connect as the first ones did (its controller resyncs).
    if (cache.subscription && cache.synced) queueMicrotask(() => cache.handlers.has(handlers) && handlers.onConnect());
    cache.subscription ??= this.base.watch({
      onEvent: (event) => {
        void this.refresh(event.workspaceId, this.base)
          .catch(() => undefined)
          .then(() => cache.handlers.forEach((handler) => handler.onEvent(event)));
      },
      onConnect: () => {
        cache.connectedAt = ++cache.ticket;
        cache.synced = false;
        const ticket = ++cache.ticket;
        void this.base
          .listContainers()
          .then((all) => cache.applyAll(ticket, all))
          .catch(() => undefined)
          .then(() => cache.handlers.forEach((handler) => handler.onConnect()));
      },
      onDisconnect: (error) => {
        cache.connectedAt = undefined;
        cache.synced = false;
        cache.handlers.forEach((handler) => handler.onDisconnect(error));
      },
    });
    return {
      close: () => {
        cache.handlers.delete(handlers);
        if (cache.handlers.size > 0) return;
        cache.subscription?.close();
        cache.subscription = undefined;
        cache.connectedAt = undefined;
        cache.synced = false;
      },
    };
  }
}
