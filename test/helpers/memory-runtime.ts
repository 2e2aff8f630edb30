import { Readable } from 'node:stream';
import { NotFoundError } from '../../src/errors.ts';
import type { FirewallOutcome } from '../../src/docker/firewall.ts';
import {
  endpointOf,
  HOME_LIST_MAX,
  HOME_PATH,
  ImageMissingError,
  isTargetOf,
  LABELS,
  names,
  type CodeContainerSpec,
  type ContainerExit,
  type EventSubscription,
  type HomeAnswer,
  type HomeRequest,
  type HomeUsage,
  type ManagedContainer,
  type NetworkRepair,
  type NetworkState,
  type RuntimeEvent,
  type RuntimeNode,
  type ServingContainer,
  type ServingTarget,
  type SimContainerSpec,
  type StatsSample,
  type WorkspaceRuntime,
} from '../../src/docker/runtime.ts';

/** A container as the in-memory engine keeps it: what the runtime reports, plus how it ended and what it printed. */
interface MemoryContainer extends ManagedContainer {
  exit: ContainerExit | undefined;
  output: string;
  /** Which start of the engine's this container's last was (a start again changes it, as Docker's StartedAt). */
  startedAt: number;
}

/**
 * What is at a path of a home in memory (MemoryRuntime.homes): a file and its bytes, a folder, a
 * symbolic link to a path in the home (`src/Main.java`) or anywhere else (`/etc`), or anything else
 * (a FIFO, a device).
 */
export type MemoryHomeNode = { kind: 'file'; bytes: Buffer } | { kind: 'dir' } | { kind: 'link'; target: string } | { kind: 'other' };

/**
 * An in-memory WorkspaceRuntime for fast unit tests of reconcile branches, in the manner of
 * sample-controller's fake clientset: a test preloads containers and volumes, runs one reconcile,
 * and compares `actions` (every call that changes something, in order, e.g. `create ws-ada-code`)
 * with what it expects. It never stands in for Docker in an integration test: the real-engine
 * tests of the same controllers run beside these.
 */
export class MemoryRuntime implements WorkspaceRuntime {
  readonly containers = new Map<string, MemoryContainer>();
  readonly volumes = new Set<string>();
  /** The workspace a volume is labelled with (those made by ensureVolume or importVolume; a test may set others). */
  readonly volumeOwners = new Map<string, string>();
  /** A volume's contents: the last tar stream imported into it (VOLUME_ARCHIVE_ROOT format); none is an empty volume. */
  readonly volumeArchives = new Map<string, Buffer>();
  /** The second archive of a volume's last import (`then`: extracted into a folder of the home), and that folder. */
  readonly importedInto = new Map<string, { path: string; tar: Buffer }>();
  /**
   * What inspectHome reads of a volume: each path in its home (`src/Main.java`) and what is there.
   * The folders on the way to a path are there too without being named; the home is a folder.
   */
  readonly homes = new Map<string, Map<string, MemoryHomeNode>>();
  readonly actions: string[] = [];
  /** Calls that fail once, by method name (e.g. `createCodeContainer`), with this error. */
  readonly failures = new Map<keyof WorkspaceRuntime, Error>();
  private readonly watchers = new Set<{ onEvent(event: RuntimeEvent): void; onConnect(): void; onDisconnect(error: Error): void }>();
  private nextId = 1;
  private nextAddress = 2;
  private starts = 1;

  /** Adds a container as if it had been there before the test (no action recorded). */
  preload(container: Partial<MemoryContainer> & Pick<ManagedContainer, 'name' | 'role' | 'workspaceId' | 'slug'>): MemoryContainer {
    const made: MemoryContainer = {
      id: `c${this.nextId++}`,
      runId: undefined,
      specHash: '',
      restartGeneration: 0,
      state: 'running',
      address: undefined,
      createdAt: Date.now(),
      exit: undefined,
      output: '',
      startedAt: this.starts++,
      ...container,
      homeVolume: container.homeVolume ?? names.volume(container.slug),
    };
    if (made.state === 'running') made.address ??= this.address();
    this.containers.set(made.id, made);
    return made;
  }

  /** The container named `name`, if any. */
  byName(name: string): MemoryContainer | undefined {
    return [...this.containers.values()].find((container) => container.name === name);
  }

  /** Ends a running container as its process would: exit code, out-of-memory kill, last output. */
  exit(id: string, exitCode: number, options: { oomKilled?: boolean; output?: string } = {}): void {
    const container = this.containers.get(id)!;
    container.state = 'exited';
    container.address = undefined;
    container.exit = { running: false, exitCode, oomKilled: options.oomKilled ?? false };
    if (options.output !== undefined) container.output = options.output;
  }

  /** Delivers an engine event to every watcher. */
  emit(event: RuntimeEvent): void {
    for (const watcher of this.watchers) watcher.onEvent(event);
  }

  /** The events stream lost (`error`), or back (no error), as every watcher hears it. */
  connection(error?: Error): void {
    for (const watcher of this.watchers) {
      if (error) watcher.onDisconnect(error);
      else watcher.onConnect();
    }
  }

  /** The nodes it reports: one, as one engine is, unless a test sets others (a swarm's). */
  nodeList: RuntimeNode[] = [
    {
      id: 'memory',
      name: 'memory',
      address: '',
      state: 'ready',
      availability: 'active',
      memoryBytes: 8 * 1024 ** 3,
      nanoCpus: 4e9,
      reservedMemoryBytes: 0,
      reachable: true,
    },
  ];

  async nodes(): Promise<RuntimeNode[]> {
    return this.nodeList.map((node) => ({ ...node }));
  }

  async setNodeAvailability(name: string, availability: 'active' | 'pause'): Promise<void> {
    const node = this.nodeList.find((candidate) => candidate.name === name);
    if (node) node.availability = availability;
    this.actions.push(`node ${name} ${availability}`);
  }

  /** The same runtime: in memory, no engine request to abort or to refuse. */
  scoped(): WorkspaceRuntime {
    return this;
  }

  async listContainers(filter: { workspaceId?: string } = {}): Promise<ManagedContainer[]> {
    this.fail('listContainers');
    return [...this.containers.values()]
      .filter((container) => filter.workspaceId === undefined || container.workspaceId === filter.workspaceId)
      .map((container) => ({ ...container }));
  }

  async ensureVolume(workspace: { workspaceId: string; slug: string }, volume: string): Promise<void> {
    this.fail('ensureVolume');
    if (this.volumes.has(volume)) return;
    this.volumes.add(volume);
    this.volumeOwners.set(volume, workspace.workspaceId);
    this.actions.push(`create volume ${volume}`);
  }

  async removeVolume(volume: string): Promise<boolean> {
    this.fail('removeVolume');
    if ([...this.containers.values()].some((container) => container.homeVolume === volume)) return false;
    this.volumeArchives.delete(volume);
    if (this.volumes.delete(volume)) this.actions.push(`remove volume ${volume}`);
    return true;
  }

  async listVolumes(): Promise<{ name: string; workspaceId: string }[]> {
    this.fail('listVolumes');
    return [...this.volumes].map((name) => ({ name, workspaceId: this.volumeOwners.get(name) ?? '' }));
  }

  async removeVolumes(workspace: { workspaceId: string; slug: string }): Promise<void> {
    this.fail('removeVolumes');
    // The engine finds them by the workspace's label; here, by the names the control plane gives them.
    const home = names.volume(workspace.slug);
    for (const volume of [...this.volumes]) if (volume === home || volume.startsWith(`${home}-`)) await this.removeVolume(volume);
  }

  /** Networks as the engine would have them: name → whether its containers are isolated from each other. */
  readonly networks = new Map<string, boolean>([['bridge', false]]);

  /** What ensureNetwork says of the host's firewall (one engine's link-local rules); unset: nothing, as a swarm. */
  firewall: FirewallOutcome | undefined;
  /** A start leaves the container as it was (a swarm service whose task is scheduled and not running yet). */
  startsPending = false;

  async ensureNetwork(name: string): Promise<NetworkState> {
    this.fail('ensureNetwork');
    const known = this.networks.get(name);
    if (known !== undefined) return { isolated: known, created: false, firewall: this.firewall };
    this.networks.set(name, true);
    this.actions.push(`create network ${name}`);
    return { isolated: true, created: true, firewall: this.firewall };
  }

  /** Images on the engine (every image is, unless a test takes it away). */
  readonly missingImages = new Set<string>();

  async imageExists(image: string): Promise<boolean> {
    this.fail('imageExists');
    return !this.missingImages.has(image);
  }

  async createCodeContainer(spec: CodeContainerSpec): Promise<ManagedContainer> {
    this.fail('createCodeContainer');
    if (this.missingImages.has(spec.image)) throw new ImageMissingError(spec.image);
    return this.create(names.code(spec.slug), {
      role: 'code',
      workspaceId: spec.workspaceId,
      slug: spec.slug,
      specHash: spec.specHash,
      restartGeneration: spec.restartGeneration,
      homeVolume: spec.homeVolume,
    });
  }

  async createSimContainer(spec: SimContainerSpec): Promise<ManagedContainer> {
    this.fail('createSimContainer');
    return this.create(names.sim(spec.slug, spec.runId), {
      role: 'sim',
      workspaceId: spec.workspaceId,
      slug: spec.slug,
      runId: spec.runId,
      homeVolume: spec.homeVolume,
    });
  }

  async serving(target: ServingTarget, port: number, id?: string): Promise<ServingContainer | undefined> {
    this.fail('serving');
    const candidates = id !== undefined ? [this.containers.get(id)] : [...this.containers.values()];
    const container = candidates.find(
      (candidate) =>
        candidate?.state === 'running' &&
        isTargetOf({ [LABELS.workspaceId]: candidate.workspaceId, [LABELS.role]: candidate.role, [LABELS.runId]: candidate.runId ?? '' }, target),
    );
    const endpoint = container && endpointOf(container, port);
    return endpoint ? { id: container.id, endpoint, startedAt: String(container.startedAt) } : undefined;
  }

  async exitOf(id: string): Promise<ContainerExit | undefined> {
    this.fail('exitOf');
    const container = this.containers.get(id);
    if (!container) return undefined;
    return container.state === 'running'
      ? { running: true, exitCode: null, oomKilled: false }
      : (container.exit ?? { running: false, exitCode: 0, oomKilled: false });
  }

  async followOutput(id: string): Promise<Readable> {
    this.fail('followOutput');
    const container = this.containers.get(id);
    return Readable.from(container ? [Buffer.from(container.output)] : []);
  }

  async logsTail(id: string, lines: number): Promise<string> {
    this.fail('logsTail');
    return (this.containers.get(id)?.output ?? '').split('\n').slice(-lines).join('\n');
  }

  async start(id: string): Promise<void> {
    this.fail('start');
    const container = this.containers.get(id);
    if (!container) throw new Error(`no such container: ${id}`);
    if (container.state === 'running') return;
    // A swarm service's task: scheduled, not running yet.
    if (this.startsPending) return void this.actions.push(`start ${container.name} (pending)`);
    container.state = 'running';
    container.address = this.address();
    container.startedAt = this.starts++;
    container.exit = undefined;
    this.actions.push(`start ${container.name}`);
  }

  async stop(id: string): Promise<void> {
    this.fail('stop');
    const container = this.containers.get(id);
    if (!container || container.state !== 'running') return;
    container.state = 'exited';
    container.address = undefined;
    container.exit ??= { running: false, exitCode: 143, oomKilled: false };
    this.actions.push(`stop ${container.name}`);
  }

  /** What repairNetwork answers (a swarm's: the node's workspace network made anew). */
  repair: NetworkRepair | undefined = { node: 'node-2', network: 'bridge-r1', renewed: true };

  async repairNetwork(id: string, network: string): Promise<NetworkRepair | undefined> {
    this.fail('repairNetwork');
    this.actions.push(`repair network ${network} for ${this.containers.get(id)?.name ?? id}`);
    return this.repair;
  }

  async remove(id: string): Promise<void> {
    this.fail('remove');
    const container = this.containers.get(id);
    if (!container) return;
    this.containers.delete(id);
    this.actions.push(`remove ${container.name}`);
  }

  async stats(id: string): Promise<StatsSample | undefined> {
    this.fail('stats');
    return this.containers.get(id)?.state === 'running' ? { cpuTotalNs: 0, systemNs: 1, onlineCpus: 1, memoryUsageBytes: 0, memoryLimitBytes: 1 } : undefined;
  }

  /** A running container's home holds what its volume's archive holds (nothing measured: 0 bytes). */
  async homeUsage(id: string): Promise<HomeUsage | undefined> {
    this.fail('homeUsage');
    const container = this.containers.get(id);
    return container?.state === 'running' ? { bytes: this.volumeArchives.get(container.homeVolume)?.length ?? 0 } : undefined;
  }

  watch(handlers: { onEvent(event: RuntimeEvent): void; onConnect(): void; onDisconnect(error: Error): void }): EventSubscription {
    this.watchers.add(handlers);
    queueMicrotask(() => handlers.onConnect());
    return { close: () => void this.watchers.delete(handlers) };
  }

  async exportVolume(volume: string): Promise<Readable> {
    this.fail('exportVolume');
    if (!this.volumes.has(volume)) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    this.actions.push(`export volume ${volume}`);
    // An empty volume is an empty archive: its two end-of-archive blocks.
    return Readable.from([this.volumeArchives.get(volume) ?? Buffer.alloc(1024)], { objectMode: false });
  }

  /**
   * Keeps the whole stream as the volume's contents, replacing what was there (the engine would
   * merge; tests import into fresh volumes). An injected failure strikes once the volume exists, as
   * an engine failing midway would leave it.
   */
  async importVolume(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    _image: string,
    tar: Readable,
    then?: { path: string; tar: Readable },
  ): Promise<void> {
    try {
      if (!this.volumes.has(volume)) {
        this.volumes.add(volume);
        this.volumeOwners.set(volume, workspace.workspaceId);
        this.actions.push(`create volume ${volume}`);
      }
      this.fail('importVolume');
      const chunks: Buffer[] = [];
      for await (const chunk of tar) chunks.push(chunk as Buffer);
      this.volumeArchives.set(volume, Buffer.concat(chunks));
      this.actions.push(`import volume ${volume}`);
      if (then) {
        const more: Buffer[] = [];
        for await (const chunk of then.tar) more.push(chunk as Buffer);
        this.importedInto.set(volume, { path: then.path, tar: Buffer.concat(more) });
      }
    } catch (error) {
      tar.destroy();
      then?.tar.destroy();
      throw error;
    }
  }

  /** Reads `homes` as the engine reads a home (see RuntimeVolumes.inspectHome): links resolved, never followed for a read. */
  async inspectHome(volume: string, _workspace: { workspaceId: string; slug: string }, _image: string, request: HomeRequest): Promise<HomeAnswer> {
    this.fail('inspectHome');
    if (!this.volumes.has(volume)) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    const home = this.homes.get(volume) ?? new Map<string, MemoryHomeNode>();
    const at = (path: string): MemoryHomeNode | undefined =>
      path === '' || [...home.keys()].some((key) => key.startsWith(`${path}/`)) ? (home.get(path) ?? { kind: 'dir' }) : home.get(path);
    const segments = request.path === '' ? [] : request.path.split('/');
    const resolved = resolveHomePath(at, segments, 0);
    if (resolved === 'outside' || resolved === 'missing') return { outcome: resolved };
    if (request.op === 'read') {
      // A read never follows the last component: the folders on the way only (they resolve: the whole path did).
      const folder = resolveHomePath(at, segments.slice(0, -1), 0) as string[];
      const node = at([...folder, ...segments.slice(-1)].join('/'));
      if (!node) return { outcome: 'missing' };
      if (node.kind !== 'file') return { outcome: 'not_a_file' };
      return { outcome: 'read', size: node.bytes.length, bytes: node.bytes.subarray(0, request.maxBytes) };
    }
    const folder = resolved.join('/');
    const node = at(folder);
    if (!node) return { outcome: 'missing' };
    if (node.kind !== 'dir') return { outcome: 'not_a_directory' };
    const prefix = folder === '' ? '' : `${folder}/`;
    const children = new Set([...home.keys()].filter((key) => key.startsWith(prefix)).map((key) => key.slice(prefix.length).split('/')[0]!));
    const entries = [...children].map((name) => {
      const entry = at(prefix + name)!;
      return { name, kind: entry.kind, size: entry.kind === 'file' ? entry.bytes.length : entry.kind === 'link' ? entry.target.length : 0 };
    });
    return { outcome: 'listed', entries: entries.slice(0, HOME_LIST_MAX), truncated: entries.length > HOME_LIST_MAX };
  }

  /** What `homes` holds at each path (a folder when a path under it is there), the last part not followed. */
  async statHome(
    volume: string,
    _workspace: { workspaceId: string; slug: string },
    _image: string,
    paths: readonly string[],
  ): Promise<Map<string, MemoryHomeNode['kind'] | 'missing'>> {
    this.fail('statHome');
    if (!this.volumes.has(volume)) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    const home = this.homes.get(volume) ?? new Map<string, MemoryHomeNode>();
    const kindAt = (path: string) => home.get(path)?.kind ?? ([...home.keys()].some((key) => key.startsWith(`${path}/`)) ? 'dir' : 'missing');
    return new Map(paths.map((path) => [path, kindAt(path)]));
  }

  /** Removes a path of `homes` and everything under it (links on the way are not resolved here: tests name plain paths). */
  async removeHomeFolder(
    volume: string,
    _workspace: { workspaceId: string; slug: string },
    _image: string,
    relative: string,
  ): Promise<'removed' | 'missing' | 'outside'> {
    this.fail('removeHomeFolder');
    if (!this.volumes.has(volume)) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    const home = this.homes.get(volume) ?? new Map<string, MemoryHomeNode>();
    const under = [...home.keys()].filter((key) => key === relative || key.startsWith(`${relative}/`));
    if (under.length === 0) return 'missing';
    for (const key of under) home.delete(key);
    this.actions.push(`remove ${relative} from ${volume}`);
    return 'removed';
  }

  async volumeExists(volume: string): Promise<boolean> {
    this.fail('volumeExists');
    return this.volumes.has(volume);
  }

  async removeVolumeNamed(volume: string): Promise<void> {
    this.fail('removeVolumeNamed');
    this.volumeArchives.delete(volume);
    if (this.volumes.delete(volume)) this.actions.push(`remove volume ${volume}`);
  }

  private create(name: string, fields: Pick<ManagedContainer, 'role' | 'workspaceId' | 'slug'> & Partial<ManagedContainer>): ManagedContainer {
    const existing = this.byName(name);
    if (existing) return { ...existing };
    const container = this.preload({ name, state: 'created', ...fields });
    this.actions.push(`create ${name}`);
    return { ...container };
  }

  private address(): string {
    return `172.30.0.${this.nextAddress++}`;
  }

  /** Throws the failure injected for `method`, once. */
  private fail(method: keyof WorkspaceRuntime): void {
    const error = this.failures.get(method);
    if (!error) return;
    this.failures.delete(method);
    throw error;
  }
}

/**
 * The segments of a path in a memory home with every link in them resolved, as `readlink -f` would:
 * `outside` when one leads out of the home, `missing` when a folder on the way is not there (or
 * links loop). The last component may be missing.
 */
function resolveHomePath(at: (path: string) => MemoryHomeNode | undefined, segments: string[], depth: number): string[] | 'outside' | 'missing' {
  const resolved: string[] = [];
  for (const [index, segment] of segments.entries()) {
    if (segment === '..') {
      if (resolved.pop() === undefined) return 'outside';
      continue;
    }
    const node = at([...resolved, segment].join('/'));
    if (node?.kind === 'link') {
      if (depth > 40) return 'missing';
      const inside = node.target === HOME_PATH || node.target.startsWith(`${HOME_PATH}/`);
      if (node.target.startsWith('/') && !inside) return 'outside';
      const target = inside ? node.target.slice(HOME_PATH.length) : `${resolved.join('/')}/${node.target}`;
      const followed = resolveHomePath(
        at,
        target.split('/').filter((part) => part !== '' && part !== '.'),
        depth + 1,
      );
      if (typeof followed === 'string') return followed;
      resolved.splice(0, resolved.length, ...followed);
    } else {
      if (index < segments.length - 1 && node?.kind !== 'dir') return 'missing';
      resolved.push(segment);
    }
  }
  return resolved;
}
