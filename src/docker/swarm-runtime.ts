/**
 * The WorkspaceRuntime over a Docker Swarm: each workspace's editor and each run's simulator is a
 * Swarm service of one task, pinned to the node that holds the workspace's home volume. The
 * control plane reaches every node's engine (SWARM_ENGINES): the services through a manager's, and
 * through each node's own engine what Swarm keeps per node (volumes, a container's output, exit
 * and stats, backups' helper containers, events).
 *
 * How the container-shaped interface maps onto services:
 * - a "container" is a service, its id the service's id; create makes it with no replica (not
 *   started), start scales it to one, stop to none, remove removes it;
 * - its state is its newest task's: `running`; `restarting` while a task is on its way (pending,
 *   being prepared, or an editor that ended and is restarted by Swarm after a delay); `exited` once
 *   it ended for good (a simulator, which Swarm never restarts) or the service was scaled to none;
 *   `created` before its first task;
 * - its endpoint is its published port (host mode, a port the node picks) on the node's address:
 *   without IPVS (these machines' kernels) there is no routing mesh, so services use DNS round robin
 *   and are reached on the node that runs them.
 *
 * Placement, decided from facts by src/docker/placement.ts (this file gathers them and carries the
 * decision out): a workspace's home is made on the ready, active node with the most memory left
 * unreserved (its editor reserves CODE_MEMORY_LIMIT and CODE_CPUS, and is limited to them), so
 * workspaces spread; a workspace then stays on its home's node. When no node has room, creating or
 * starting its editor fails with NoRoomError (it waits, as at the cap). A home whose node does not
 * answer is never made again elsewhere: that would be an empty home in place of a student's files.
 */
import { createHash } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import { NotFoundError } from '../errors.ts';
import { CALL_TIMEOUT_MS, CONTROL_PLANE_LABEL, DockerRuntime, bothScopes, engineClient, scopedClient, statusOf, tolerate } from './docker-runtime.ts';
import { isConnectionFailure, SwarmReachability } from './reachability.ts';
import * as placement from './placement.ts';
import type { Claim, PlacedService, PlacementNode } from './placement.ts';
import {
  HOME_PATH,
  type EngineScope,
  ImageMissingError,
  LABELS,
  MANAGED_LABEL,
  names,
  simEnvironment,
  targetLabels,
  taskFailureReason,
  type CodeContainerSpec,
  type ContainerExit,
  type ContainerRole,
  type EventSubscription,
  type HomeAnswer,
  type HomeEntry,
  type HomeRequest,
  type HomeUsage,
  type ManagedContainer,
  type NetworkRepair,
  type RuntimeEvent,
  type RuntimeNode,
  type ServingContainer,
  type ServingTarget,
  type SimContainerSpec,
  type StatsSample,
  type TaskFailure,
  type WorkspaceRuntime,
} from './runtime.ts';

/** The prefix of the bridge interface the workspace network has on every node (a node's firewall matches it: deploy/swarm-node-firewall.sh). */
export const WORKSPACE_BRIDGE_PREFIX = 'cpws';

/** The bridge option that, set to false, drops traffic between the network's containers. */
const ICC_OPTION = 'com.docker.network.bridge.enable_icc';

/** How often the manager's tasks are looked at for one a node refused or ended with an error (Swarm has no task events). */
const TASK_POLL_MS = 5000;

/** Task states before a task runs. */
const ON_ITS_WAY = new Set(['new', 'allocated', 'pending', 'assigned', 'accepted', 'preparing', 'ready', 'starting']);

/** One node's engine, as the control plane reaches it. */
interface Engine {
  /** For messages: how it is reached. */
  name: string;
  docker: Docker;
  /** Its containers and volumes, as on a single engine. */
  runtime: DockerRuntime;
}

/** A swarm node: what placement sees of it (src/docker/placement.ts), and what the adapter needs. */
export interface SwarmNode extends PlacementNode {
  /** Where its published ports are reached. */
  address: string;
  /** Swarm's words: ready, down, unknown, disconnected. */
  state: string;
  /** Swarm's words: active, pause, drain. */
  availability: string;
  nanoCpus: number;
  /** Its engine, when SWARM_ENGINES names it and it has answered. */
  engine: Engine | undefined;
}

export interface SwarmRuntimeOptions {
  /** Value of the control-plane label on everything this instance creates and lists. */
  controlPlaneId: string;
  /** Every node's engine (SWARM_ENGINES); at least one a manager. */
  engines: Docker.DockerOptions[];
  /** What each workspace's editor reserves on its node (CODE_MEMORY_LIMIT, CODE_CPUS). */
  reservation: { memoryBytes: number; nanoCpus: number };
}

type Service = Docker.Service;
interface Task {
  ID: string;
  ServiceID: string;
  NodeID?: string;
  CreatedAt: string;
  DesiredState: string;
  Spec?: { ContainerSpec?: { Labels?: Record<string, string> } };
  Status: {
    State: string;
    Err?: string;
    ContainerStatus?: { ContainerID?: string; ExitCode?: number };
    PortStatus?: { Ports?: { TargetPort?: number; PublishedPort?: number }[] };
  };
}

/** The WorkspaceRuntime over a Docker Swarm (see the file's comment). */
export class SwarmRuntime implements WorkspaceRuntime {
  private readonly engines: Engine[];
  private readonly controlPlaneId: string;
  private readonly reservation: { memoryBytes: number; nanoCpus: number };
  /** Set on a copy made by scoped: what bounds every engine call of that copy. */
  private scope: EngineScope | undefined;
  /** Whether a manager answers: said once when no engine does, and again when one is back (see SwarmReachability). */
  readonly reachability: SwarmReachability;
  /** Each engine's swarm node id, once it has said. */
  private readonly nodeOfEngine = new Map<Engine, string>();
  /** The engine of a manager, once found (forgotten when it stops answering). */
  private managerEngine: Engine | undefined;
  /** Where each volume is (name → node id), as last seen or placed. */
  private readonly volumeNodes = new Map<string, string>();
  /** Memory promised by placements whose editor does not reserve it yet (workspace id → node and when). */
  private readonly claims = new Map<string, Claim>();
  /** Placements one at a time, so that concurrent ones see each other's claims. */
  private placing: Promise<unknown> = Promise.resolve();
  /** The workspace network (and each repair's network) made sure of on the manager, by name. */
  private readonly networks = new Map<string, Promise<{ isolated: boolean; created: boolean }>>();
  /** The repair of each node's workspace network under way (node id → its promise): one at a time per node. */
  private readonly repairs = new Map<string, Promise<unknown>>();

  constructor(options: SwarmRuntimeOptions) {
    if (options.engines.length === 0) throw new Error('a swarm runtime needs at least one engine (SWARM_ENGINES)');
    this.controlPlaneId = options.controlPlaneId;
    this.reservation = options.reservation;
    this.engines = options.engines.map((engine) => {
      const runtime = new DockerRuntime({ controlPlaneId: options.controlPlaneId, docker: engine });
      return {
        name: 'socketPath' in engine && engine.socketPath ? `unix://${engine.socketPath}` : `tcp://${engine.host}:${engine.port}`,
        // Its calls report to the node's own reachability, as the node's runtime's do.
        docker: engineClient({ ...engine, timeout: CALL_TIMEOUT_MS }, runtime.reachability),
        runtime,
      };
    });
    this.reachability = new SwarmReachability(
      this.engines.map((engine) => engine.name),
      this.engines.map((engine) => engine.runtime.reachability),
    );
  }

  scoped(scope: EngineScope): WorkspaceRuntime {
    const bound = Object.create(this) as SwarmRuntime;
    bound.scope = bothScopes(this.scope, scope);
    return bound;
  }

  // ---- engines and nodes ------------------------------------------------------------------------

  private client(engine: Engine): Docker {
    return this.scope ? scopedClient(engine.docker, this.scope) : engine.docker;
  }

  private on(engine: Engine): WorkspaceRuntime {
    return this.scope ? engine.runtime.scoped(this.scope) : engine.runtime;
  }

  /** Runs a call on a manager's engine; a manager that does not answer is forgotten (the next call looks for another). */
  private async manager<T>(call: (docker: Docker) => Promise<T>): Promise<T> {
    if (!this.managerEngine) {
      const away: unknown[] = [];
      for (const engine of this.engines) {
        const info = (await this.client(engine)
          .info()
          .catch((error: unknown) => void away.push(error))) as { Swarm?: { NodeID?: string; ControlAvailable?: boolean } } | undefined;
        if (info?.Swarm?.NodeID) this.nodeOfEngine.set(engine, info.Swarm.NodeID);
        if (info?.Swarm?.ControlAvailable) {
          this.managerEngine = engine;
          break;
        }
      }
      // No engine reached at all: the swarm's outage, which its reachability says once.
      const cause = (away[0] as Error | undefined)?.cause ?? away[0];
      if (!this.managerEngine && away.length === this.engines.length && isConnectionFailure(cause)) throw this.reachability.swarm.failed(cause);
      if (!this.managerEngine) throw new Error(`no swarm manager answers among SWARM_ENGINES (${this.engines.map((engine) => engine.name).join(', ')})`);
    }
    const engine = this.managerEngine;
    try {
      const answer = await call(this.client(engine));
      this.reachability.swarm.answered();
      return answer;
    } catch (error) {
      const status = statusOf(error);
      // Not an answer of the engine (connection refused, reset, timed out): look for another manager next time.
      if (status === undefined) this.managerEngine = undefined;
      else this.reachability.swarm.answered();
      // A node that is no longer a manager answers 503.
      if (status === 503) this.managerEngine = undefined;
      throw error;
    }
  }

  /** The swarm's nodes as the operator sees them, with the memory this control plane's editors reserve on each. */
  async nodes(): Promise<RuntimeNode[]> {
    const [nodes, reserved] = await Promise.all([this.swarmNodes(), this.reservedByNode()]);
    return nodes.map((node) => ({
      id: node.id,
      name: node.name,
      address: node.address,
      state: node.state,
      availability: node.availability,
      memoryBytes: node.memoryBytes,
      nanoCpus: node.nanoCpus,
      reservedMemoryBytes: reserved.get(node.id) ?? 0,
      reachable: node.reachable,
    }));
  }

  async setNodeAvailability(name: string, availability: 'active' | 'pause'): Promise<void> {
    const node = (await this.swarmNodes()).find((candidate) => candidate.name === name);
    if (!node) throw NotFoundError('node_not_found', `No node of the swarm is named ${name}.`);
    for (let attempt = 0; ; attempt++) {
      const info = (await this.manager((docker) => docker.getNode(node.id).inspect())) as { Version?: { Index?: number }; Spec?: Record<string, unknown> };
      if (info.Spec?.Availability === availability) return;
      const version = info.Version?.Index;
      try {
        await this.manager((docker) => docker.getNode(node.id).update({ ...info.Spec, Availability: availability, version, _query: { version } }));
        return;
      } catch (error) {
        if (attempt < 3 && /out of sequence/i.test((error as Error).message)) continue;
        throw error;
      }
    }
  }

  /** The swarm's nodes, each with its engine when known. */
  private async swarmNodes(): Promise<SwarmNode[]> {
    const list = (await this.manager((docker) => docker.listNodes())) as {
      ID: string;
      Spec?: { Availability?: string };
      Status?: { State?: string; Addr?: string };
      Description?: { Hostname?: string; Resources?: { MemoryBytes?: number; NanoCPUs?: number } };
    }[];
    const unknown = this.engines.filter((engine) => !this.nodeOfEngine.has(engine));
    await Promise.all(
      unknown.map(async (engine) => {
        const info = (await this.client(engine)
          .info()
          .catch(() => undefined)) as { Swarm?: { NodeID?: string } } | undefined;
        if (info?.Swarm?.NodeID) this.nodeOfEngine.set(engine, info.Swarm.NodeID);
      }),
    );
    const engineOf = new Map([...this.nodeOfEngine].map(([engine, id]) => [id, engine]));
    return list
      .map((node) => ({
        id: node.ID,
        name: node.Description?.Hostname ?? node.ID,
        address: node.Status?.Addr ?? '',
        ready: node.Status?.State === 'ready',
        active: (node.Spec?.Availability ?? 'active') === 'active',
        state: node.Status?.State ?? 'unknown',
        availability: node.Spec?.Availability ?? 'active',
        memoryBytes: node.Description?.Resources?.MemoryBytes ?? 0,
        nanoCpus: node.Description?.Resources?.NanoCPUs ?? 0,
        engine: engineOf.get(node.ID),
        reachable: engineOf.has(node.ID),
      }))
      .toSorted((a, b) => a.name.localeCompare(b.name));
  }

  /** The node of this id, with its engine, or an error that says why it cannot be used. */
  private usable(nodes: SwarmNode[], id: string, what: string): SwarmNode & { engine: Engine } {
    // Reachable is having an engine (swarmNodes).
    return placement.usableNode(nodes, id, what) as SwarmNode & { engine: Engine };
  }

  // ---- labels, services and tasks ---------------------------------------------------------------

  private labelFilters(extra: string[] = []): string[] {
    return [`${MANAGED_LABEL}=true`, `${CONTROL_PLANE_LABEL}=${this.controlPlaneId}`, ...extra];
  }

  private baseLabels(workspace: { workspaceId: string; slug: string }): Record<string, string> {
    return {
      [MANAGED_LABEL]: 'true',
      [CONTROL_PLANE_LABEL]: this.controlPlaneId,
      [LABELS.workspaceId]: workspace.workspaceId,
      [LABELS.workspaceSlug]: workspace.slug,
    };
  }

  private async services(extra: string[] = []): Promise<Service[]> {
    return this.manager((docker) => docker.listServices({ filters: { label: this.labelFilters(extra) } }));
  }

  private async tasks(filters: Record<string, string[]>): Promise<Task[]> {
    return (await this.manager((docker) => docker.listTasks({ filters }))) as Task[];
  }

  private async service(id: string): Promise<Service | undefined> {
    try {
      return (await this.manager((docker) => docker.getService(id).inspect())) as Service;
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  /** The newest task of a service, if it has any. */
  private async newestTask(serviceId: string): Promise<Task | undefined> {
    return newest(await this.tasks({ service: [serviceId] }));
  }

  async listContainers(filter: { workspaceId?: string } = {}): Promise<ManagedContainer[]> {
    const extra = filter.workspaceId !== undefined ? [`${LABELS.workspaceId}=${filter.workspaceId}`] : [];
    const [services, tasks, nodes] = await Promise.all([this.services(extra), this.tasks({ label: this.labelFilters(extra) }), this.swarmNodes()]);
    const byService = new Map<string, Task[]>();
    for (const task of tasks) byService.set(task.ServiceID, [...(byService.get(task.ServiceID) ?? []), task]);
    const nodesById = new Map(nodes.map((node) => [node.id, node]));
    this.forgetClaims(services);
    return services.map((service) => toManaged(service, newest(byService.get(service.ID) ?? []), nodesById));
  }

  // ---- volumes and placement ----------------------------------------------------------------------

  /**
   * The node that holds a volume: as last seen, else asked of every ready node's engine. A node
   * that is down is not asked (what it holds cannot be used until it is back: a home there is known
   * by its editor's pin, see ensureVolume). Undefined when no ready node has it; an error when a
   * ready node does not answer (it may be there).
   */
  private async volumeNode(volume: string, nodes: SwarmNode[]): Promise<SwarmNode | undefined> {
    const known = this.volumeNodes.get(volume);
    if (known) {
      const node = nodes.find((candidate) => candidate.id === known);
      if (node) return node;
    }
    const silent: string[] = [];
    for (const node of nodes.filter((candidate) => candidate.ready)) {
      try {
        if (!node.engine) throw new Error('no engine');
        if (await this.on(node.engine).volumeExists(volume)) {
          this.volumeNodes.set(volume, node.id);
          return node;
        }
      } catch {
        silent.push(node.name);
      }
    }
    if (silent.length > 0) throw new Error(`cannot tell where volume ${volume} is: node ${silent.join(', ')} does not answer, and it may be there`);
    return undefined;
  }

  /** Memory reserved on each node: editors that run or are on their way, and placements not yet seen reserving. */
  private async reservedByNode(): Promise<Map<string, number>> {
    const editors = await this.services([`${LABELS.role}=code`]);
    this.forgetClaims(editors);
    return placement.reservedByNode(editors.map(placedService), this.claims.values(), this.reservation.memoryBytes);
  }

  /** Claims seen through (their editor reserves now) or expired are dropped. */
  private forgetClaims(services: Service[]): void {
    for (const workspaceId of placement.spentClaims(this.claims, services.map(placedService), Date.now())) this.claims.delete(workspaceId);
  }

  /** Chooses the node for a new home: ready, active, with an engine, and the most memory left; claims the workspace's reservation there. */
  private place(workspace: { workspaceId: string; slug: string }): Promise<SwarmNode & { engine: Engine }> {
    const placed = this.placing.then(async () => {
      const nodes = await this.swarmNodes();
      const reserved = await this.reservedByNode();
      // Reachable is having an engine (swarmNodes).
      const chosen = placement.chooseHome(nodes, reserved, this.reservation.memoryBytes) as SwarmNode & { engine: Engine };
      this.claims.set(workspace.workspaceId, { node: chosen.id, at: Date.now() });
      return chosen;
    });
    this.placing = placed.catch(() => undefined);
    return placed;
  }

  /** Whether the workspace's editor fits on its node now (its own claim aside); NoRoomError when not. */
  private async checkRoom(node: SwarmNode, workspace: { workspaceId: string; slug: string }): Promise<void> {
    const reserved = await this.reservedByNode();
    placement.checkRoom(node, reserved, this.claims.get(workspace.workspaceId)?.node === node.id, this.reservation.memoryBytes, workspace.slug);
  }

  /**
   * Makes sure of a workspace's home: where it is, else (on no ready node) where its editor is
   * pinned when that editor mounts it (a node that is down: an error, never an empty home
   * elsewhere), else on a node placement chooses.
   */
  async ensureVolume(workspace: { workspaceId: string; slug: string }, volume: string): Promise<void> {
    const nodes = await this.swarmNodes();
    const node = await this.volumeNode(volume, nodes);
    if (node) return this.on(this.usable(nodes, node.id, `the home of ${workspace.slug}`).engine).ensureVolume(workspace, volume);
    const editors = await this.services([`${LABELS.workspaceId}=${workspace.workspaceId}`, `${LABELS.role}=code`]);
    const pinned = editors.find((editor) => editor.Spec?.Labels?.[LABELS.homeVolume] === volume);
    if (pinned) {
      const home = this.usable(nodes, pinnedNode(pinned) ?? '', `the home of ${workspace.slug}`);
      await this.on(home.engine).ensureVolume(workspace, volume);
      this.volumeNodes.set(volume, home.id);
      return;
    }
    const chosen = await this.place(workspace);
    await this.on(chosen.engine).ensureVolume(workspace, volume);
    this.volumeNodes.set(volume, chosen.id);
  }

  async removeVolume(volume: string): Promise<boolean> {
    const nodes = await this.swarmNodes();
    // Where it is cannot be told while a node does not answer: left for later.
    const node = await this.volumeNode(volume, nodes).catch(() => null);
    if (node === null) return false;
    if (!node) return true;
    // On a node that does not answer: left for later, like a volume still mounted.
    if (!node.ready || !node.engine) return false;
    const removed = await this.on(node.engine).removeVolume(volume);
    if (removed) this.volumeNodes.delete(volume);
    return removed;
  }

  async removeVolumes(workspace: { workspaceId: string; slug: string }): Promise<void> {
    const nodes = await this.swarmNodes();
    for (const node of nodes) {
      if (!node.engine) throw new Error(`cannot remove the volumes of ${workspace.slug}: node ${node.name} does not answer`);
      await this.on(node.engine).removeVolumes(workspace);
    }
    for (const [volume] of this.volumeNodes)
      if (volume === names.volume(workspace.slug) || volume.startsWith(`${names.volume(workspace.slug)}-`)) this.volumeNodes.delete(volume);
  }

  async listVolumes(): Promise<{ name: string; workspaceId: string }[]> {
    const nodes = await this.swarmNodes();
    // A node that does not answer lists nothing (its volumes are neither orphans nor gone).
    const lists = await Promise.all(
      nodes.map(async (node) =>
        node.engine
          ? await this.on(node.engine)
              .listVolumes()
              .catch(() => [])
          : [],
      ),
    );
    return lists.flat();
  }

  async volumeExists(volume: string): Promise<boolean> {
    return (await this.volumeNode(volume, await this.swarmNodes())) !== undefined;
  }

  async removeVolumeNamed(volume: string): Promise<void> {
    const nodes = await this.swarmNodes();
    const node = await this.volumeNode(volume, nodes);
    if (!node) return;
    await this.on(this.usable(nodes, node.id, `volume ${volume}`).engine).removeVolumeNamed(volume);
    this.volumeNodes.delete(volume);
  }

  async exportVolume(volume: string, workspace: { workspaceId: string; slug: string }, image: string, options: { path?: string } = {}): Promise<Readable> {
    return (await this.helperEngine(volume, image)).exportVolume(volume, workspace, image, options);
  }

  async inspectHome(volume: string, workspace: { workspaceId: string; slug: string }, image: string, request: HomeRequest): Promise<HomeAnswer> {
    return (await this.helperEngine(volume, image)).inspectHome(volume, workspace, image, request);
  }

  async statHome(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    paths: readonly string[],
  ): Promise<Map<string, HomeEntry['kind'] | 'missing'>> {
    return (await this.helperEngine(volume, image)).statHome(volume, workspace, image, paths);
  }

  async removeHomeFolder(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    relative: string,
  ): Promise<'removed' | 'missing' | 'outside'> {
    return (await this.helperEngine(volume, image)).removeHomeFolder(volume, workspace, image, relative);
  }

  /**
   * The engine of the node where the volume is, with `image` there (a helper that reads the volume
   * is made from it on that node): `volume_not_found` when no node has the volume, and a clear
   * error when its node cannot be used (down, or not answering).
   */
  private async helperEngine(volume: string, image: string): Promise<WorkspaceRuntime> {
    const nodes = await this.swarmNodes();
    const node = await this.volumeNode(volume, nodes);
    if (!node) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    const usable = this.usable(nodes, node.id, `volume ${volume}`);
    await this.ensureImage(usable, image);
    return this.on(usable.engine);
  }

  /**
   * Into the volume where it is; a new one goes where the workspace's home is when that node is
   * usable and active (a restore beside it), else where placement chooses (a home moved off a
   * paused or lost node).
   */
  async importVolume(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    tar: Readable,
    then?: { path: string; tar: Readable },
  ): Promise<void> {
    try {
      const nodes = await this.swarmNodes();
      let node = await this.volumeNode(volume, nodes);
      if (!node) {
        const [code] = await this.services([`${LABELS.workspaceId}=${workspace.workspaceId}`, `${LABELS.role}=code`]);
        node = placement.besideHome(nodes, code && pinnedNode(code)) ?? (await this.place(workspace));
      }
      const usable = this.usable(nodes, node.id, `volume ${volume}`);
      await this.ensureImage(usable, image);
      await this.on(usable.engine).importVolume(volume, workspace, image, tar, then);
      this.volumeNodes.set(volume, usable.id);
    } catch (error) {
      tar.destroy();
      then?.tar.destroy();
      throw error;
    }
  }

  // ---- networks and images ----------------------------------------------------------------------

  /**
   * The workspace network: on every node a configuration (a bridge whose containers cannot reach
   * each other, named WORKSPACE_BRIDGE_PREFIX + a hash of the name), and on the manager a
   * swarm-scoped network made from it, which services join. (An overlay has no such switch.)
   * Isolated when the swarm network is made from that configuration. A node repaired after an
   * unclean death has a newer network of its own (see repairNetwork and nodeNetwork).
   */
  ensureNetwork(name: string): Promise<{ isolated: boolean; created: boolean }> {
    return this.once(name, async () => {
      for (const node of await this.swarmNodes()) if (node.engine && node.ready) await this.makeNodeConfig(node as SwarmNode & { engine: Engine }, name);
      return this.makeSwarmNetwork(name);
    });
  }

  /** The swarm-scoped network `name` on the manager, made from the nodes' configuration `<name>-config` when missing. */
  private async makeSwarmNetwork(name: string): Promise<{ isolated: boolean; created: boolean }> {
    const inspect = async () => {
      try {
        const info = (await this.manager((docker) => docker.getNetwork(name).inspect())) as { ConfigFrom?: { Network?: string } };
        return { isolated: info.ConfigFrom?.Network === configName(name), created: false };
      } catch (error) {
        if (statusOf(error) === 404) return undefined;
        throw error;
      }
    };
    const existing = await inspect();
    if (existing) return existing;
    try {
      await this.manager((docker) =>
        docker.createNetwork({
          Name: name,
          Driver: 'bridge',
          Scope: 'swarm',
          ConfigFrom: { Network: configName(name) },
          CheckDuplicate: true,
        }),
      );
    } catch (error) {
      if (statusOf(error) !== 409) throw error;
      return (await inspect()) ?? { isolated: false, created: false };
    }
    return { isolated: true, created: true };
  }

  /** A network's configuration on one node (already there is success). */
  private async makeNodeConfig(node: SwarmNode & { engine: Engine }, network: string): Promise<void> {
    try {
      await this.client(node.engine).createNetwork({
        Name: configName(network),
        ConfigOnly: true,
        Options: { [ICC_OPTION]: 'false', 'com.docker.network.bridge.name': bridgeName(network) },
        CheckDuplicate: true,
      });
    } catch (error) {
      if (statusOf(error) !== 409) throw error;
    }
  }

  /**
   * The workspace network a node's services join: its newest generation on that node, as the
   * node's engine has their configurations (`<name>-config`, then `<name>-r<n>-config` for each
   * repair), asked each time (a node whose engine lost its state gets its configuration again). A
   * node with none gets the first; the swarm network of a newer one is made when missing.
   */
  private async nodeNetwork(node: SwarmNode & { engine: Engine }, name: string): Promise<{ network: string; generation: number }> {
    const listed = (await this.client(node.engine).listNetworks({ filters: { name: [name] } })) as { Name: string }[];
    const generation = Math.max(-1, ...listed.map((network) => generationOf(name, network.Name)));
    if (generation < 0) {
      await this.makeNodeConfig(node, name);
      return { network: name, generation: 0 };
    }
    const network = generationName(name, generation);
    if (generation > 0) await this.once(network, () => this.makeSwarmNetwork(network));
    return { network, generation };
  }

  async repairNetwork(id: string, name: string): Promise<NetworkRepair | undefined> {
    const service = await this.service(id);
    const pinned = service && pinnedNode(service);
    if (!pinned) return undefined;
    const node = this.usable(await this.swarmNodes(), pinned, `service ${service.Spec?.Name ?? id}`);
    // One repair of a node at a time: its other services' repairs then find the new network made.
    const repair = (this.repairs.get(node.id) ?? Promise.resolve()).then(async () => {
      let { network, generation } = await this.nodeNetwork(node, name);
      // The node refused the very network its services join now: it holds a dead bridge of it (moby#37087).
      const refused = /^network (\S+) exists$/.exec((await this.newestTask(id))?.Status.Err ?? '')?.[1];
      const idOf = async (of: string) => ((await this.manager((docker) => docker.getNetwork(of).inspect())) as { Id: string }).Id;
      let joined = await idOf(network);
      const renewed = refused !== undefined && refused === joined;
      if (renewed) {
        network = generationName(name, generation + 1);
        await this.makeNodeConfig(node, network);
        await this.once(network, () => this.makeSwarmNetwork(network));
        joined = await idOf(network);
      }
      await this.update(id, (spec) => {
        const targets = spec.TaskTemplate?.Networks?.map((attached) => attached.Target) ?? [];
        if (targets.length === 1 && (targets[0] === joined || targets[0] === network)) return undefined;
        return { ...spec, TaskTemplate: { ...spec.TaskTemplate, Networks: [{ Target: network }] } };
      });
      return { node: node.name, network, renewed };
    });
    const settled = repair.catch(() => undefined);
    this.repairs.set(node.id, settled);
    return repair;
  }

  /** Runs `make` once per key; a failure is not remembered. */
  private once(key: string, make: () => Promise<{ isolated: boolean; created: boolean }>): Promise<{ isolated: boolean; created: boolean }> {
    let ready = this.networks.get(key);
    if (!ready) {
      ready = make();
      this.networks.set(key, ready);
      ready.catch(() => this.networks.delete(key));
    }
    return ready;
  }

  /**
   * Whether every ready node can run the image: an image of a registry (docs/swarm.md, "Images on
   * every node") when the registry has it (a manager asks it, as a node's pull would); any other
   * when every ready node has it already (it is never pulled from elsewhere).
   */
  async imageExists(image: string): Promise<boolean> {
    if (fromRegistry(image)) {
      try {
        await this.manager((docker) => docker.getImage(image).distribution());
        return true;
      } catch (error) {
        if (statusOf(error) !== undefined && statusOf(error)! < 500) return false;
        throw error;
      }
    }
    const nodes = (await this.swarmNodes()).filter((node) => node.ready && node.engine);
    const answers = await Promise.all(nodes.map((node) => this.on(node.engine!).imageExists(image)));
    return answers.every(Boolean);
  }

  /**
   * Makes sure a node has the image before a service is pinned there: an image of a registry is
   * pulled by that node's engine when it lacks it (the task would otherwise fail its pull on its
   * own, later and with less to say); any other must be there already.
   */
  private async ensureImage(node: SwarmNode & { engine: Engine }, image: string): Promise<void> {
    const engine = this.on(node.engine);
    if (await engine.imageExists(image)) return;
    if (!fromRegistry(image)) throw new ImageMissingError(image);
    const client = this.client(node.engine);
    try {
      const stream = await client.pull(image);
      await new Promise<void>((resolve, reject) => client.modem.followProgress(stream, (error: Error | null) => (error ? reject(error) : resolve())));
    } catch (error) {
      throw new Error(`node ${node.name} could not pull ${image}: ${(error as Error).message}`, { cause: error });
    }
  }

  // ---- editors and simulators -------------------------------------------------------------------

  async createCodeContainer(spec: CodeContainerSpec): Promise<ManagedContainer> {
    const labels = {
      ...this.baseLabels(spec),
      [LABELS.role]: 'code',
      [LABELS.specHash]: spec.specHash,
      [LABELS.restartGeneration]: String(spec.restartGeneration),
      [LABELS.homeVolume]: spec.homeVolume,
    };
    const { node, network } = await this.homeOf(spec, spec.image, spec.network);
    await this.checkRoom(node, spec);
    const cpus = this.reservation.nanoCpus > 0 ? { NanoCPUs: this.reservation.nanoCpus } : {};
    return this.createService(names.code(spec.slug), node, {
      labels,
      container: { Image: spec.image, Env: [`EDITOR_PORT=${spec.editorPort}`], StopGracePeriod: 10e9 },
      resources: { Limits: limits(spec), Reservations: { MemoryBytes: spec.memoryBytes, ...cpus } },
      // An editor that ends is started again by Swarm (a single engine's controller does the same).
      restart: { Condition: 'any', Delay: 5e9 },
      network,
      ports: [spec.editorPort],
    });
  }

  async createSimContainer(spec: SimContainerSpec): Promise<ManagedContainer> {
    const { node, network } = await this.homeOf(spec, spec.image, spec.network);
    return this.createService(names.sim(spec.slug, spec.runId), node, {
      labels: { ...this.baseLabels(spec), [LABELS.role]: 'sim', [LABELS.runId]: spec.runId, [LABELS.homeVolume]: spec.homeVolume },
      container: { Image: spec.image, Args: ['sh', '-c', spec.command], Dir: HOME_PATH, Env: simEnvironment(spec), StopGracePeriod: 5e9 },
      // Limited, not reserved: a run never waits for room (on one engine, runs are not capped either).
      resources: { Limits: limits(spec) },
      restart: { Condition: 'none' },
      network,
      // NetworkTables (the run's recorded endpoint) and HALSim, each published on the node.
      ports: [spec.nt4Port, spec.halsimPort],
    });
  }

  /** The usable node of a workspace's home volume, with the image there, and the workspace network its services join (nodeNetwork). */
  private async homeOf(
    spec: { workspaceId: string; slug: string; homeVolume: string },
    image: string,
    network: string,
  ): Promise<{ node: SwarmNode & { engine: Engine }; network: string }> {
    const nodes = await this.swarmNodes();
    const found = await this.volumeNode(spec.homeVolume, nodes);
    if (!found) throw new Error(`the home volume ${spec.homeVolume} of ${spec.slug} is on no node`);
    const node = this.usable(nodes, found.id, `the home of ${spec.slug}`);
    await this.ensureNetwork(network);
    const joins = await this.nodeNetwork(node, network);
    await this.ensureImage(node, image);
    return { node, network: joins.network };
  }

  /** Creates a service of no replica pinned to `node`; a name conflict returns the existing one. */
  private async createService(
    name: string,
    node: SwarmNode,
    parts: {
      labels: Record<string, string>;
      container: Docker.ContainerSpec;
      resources: Docker.ResourceRequirements;
      restart: Docker.TaskRestartPolicy;
      network: string;
      /** The container ports published on the node (host mode, a port the node picks for each). */
      ports: number[];
    },
  ): Promise<ManagedContainer> {
    const home = parts.labels[LABELS.homeVolume]!;
    const spec: Docker.CreateServiceOptions = {
      Name: name,
      Labels: parts.labels,
      TaskTemplate: {
        ContainerSpec: {
          ...parts.container,
          Labels: parts.labels,
          Mounts: [{ Type: 'volume', Source: home, Target: HOME_PATH }],
          // An init as PID 1 forwards SIGTERM and reaps zombies; no capabilities at all (see DockerRuntime).
          Init: true,
          CapabilityDrop: ['ALL'],
        },
        Resources: parts.resources,
        RestartPolicy: parts.restart,
        Placement: { Constraints: [`node.id==${node.id}`] },
        Networks: [{ Target: parts.network }],
        LogDriver: { Name: 'json-file', Options: { 'max-size': '10m', 'max-file': '1' } },
      },
      Mode: { Replicated: { Replicas: 0 } },
      // No routing mesh here (no IPVS): DNS round robin, and the port published on the node itself.
      EndpointSpec: { Mode: 'dnsrr', Ports: parts.ports.map((port) => ({ Protocol: 'tcp', TargetPort: port, PublishMode: 'host' })) },
    };
    try {
      // The registry-auth slot left empty: with one argument dockerode sends the spec as that header.
      await this.manager((docker) => docker.createService(undefined as unknown as Docker.AuthConfig, spec));
    } catch (error) {
      if (statusOf(error) !== 409) throw error;
    }
    this.volumeNodes.set(home, node.id);
    const [service] = (await this.services()).filter((candidate) => candidate.Spec?.Name === name);
    if (!service) throw new Error(`service ${name} exists but is not managed by this control plane`);
    const nodes = await this.swarmNodes();
    return toManaged(service, await this.newestTask(service.ID), new Map(nodes.map((candidate) => [candidate.id, candidate])));
  }

  /**
   * Updates a service's spec to what `change` makes of it (undefined: nothing to change), as a
   * compare-and-set on its version: retried when another update came between. A service gone is
   * left so.
   */
  private async update(
    id: string,
    change: (spec: Docker.ServiceSpec, service: Service) => Promise<Docker.ServiceSpec | undefined> | Docker.ServiceSpec | undefined,
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const service = await this.service(id);
      if (!service?.Spec) return;
      const spec = await change(service.Spec, service);
      if (!spec) return;
      const version = service.Version?.Index;
      try {
        await this.manager((docker) => docker.getService(id).update({ ...spec, version, _query: { version } }));
        return;
      } catch (error) {
        if (statusOf(error) === 404) return;
        if (attempt < 3 && /out of sequence/i.test((error as Error).message)) continue;
        throw error;
      }
    }
  }

  /** Scales the service to `replicas` (after `before`, when it changes anything). */
  private scale(id: string, replicas: number, before?: (service: Service) => Promise<void>): Promise<void> {
    return this.update(id, async (spec, service) => {
      if ((spec.Mode?.Replicated?.Replicas ?? 0) === replicas) return undefined;
      await before?.(service);
      return { ...spec, Mode: { Replicated: { Replicas: replicas } } };
    });
  }

  async start(id: string): Promise<void> {
    await this.scale(id, 1, async (service) => {
      // An editor reserves its memory: it starts only where that fits (Swarm would leave it pending).
      if (service.Spec?.Labels?.[LABELS.role] !== 'code') return;
      const nodeId = pinnedNode(service);
      const node = (await this.swarmNodes()).find((candidate) => candidate.id === nodeId);
      if (node)
        await this.checkRoom(node, { workspaceId: service.Spec.Labels[LABELS.workspaceId] ?? '', slug: service.Spec.Labels[LABELS.workspaceSlug] ?? '' });
    });
  }

  /**
   * Stops a service's task and waits until it has ended. An editor's service is scaled to none
   * (Swarm would start it again otherwise; the service, its placement and its home stay). A
   * simulator's task, which Swarm never restarts, is stopped through its node's engine, as on one
   * engine: the container stays, with its output, until the service is removed.
   */
  async stop(id: string, timeoutSeconds = 10): Promise<void> {
    const service = await this.service(id);
    if (!service) return;
    if (service.Spec?.TaskTemplate?.RestartPolicy?.Condition === 'none') {
      const where = await this.containerOf(id);
      if (where) await where.runtime.stop(where.containerId, timeoutSeconds);
      else await this.scale(id, 0);
    } else {
      await this.scale(id, 0);
    }
    const deadline = Date.now() + (timeoutSeconds + 20) * 1000;
    for (;;) {
      const task = await this.newestTask(id);
      if (!task || !(task.Status.State === 'running' || ON_ITS_WAY.has(task.Status.State))) return;
      if (Date.now() > deadline) throw new Error(`the task of service ${id} did not stop within ${timeoutSeconds + 20} s`);
      await sleep(250, undefined, this.scope?.signal ? { signal: this.scope.signal } : undefined);
    }
  }

  async remove(id: string): Promise<void> {
    await tolerate(() => this.manager((docker) => docker.getService(id).remove()), [404]);
  }

  // ---- what runs: through the node's engine -----------------------------------------------------

  /** The engine and container id of the service's newest task, once it has a container. */
  private async containerOf(id: string): Promise<{ runtime: WorkspaceRuntime; containerId: string; task: Task } | undefined> {
    const task = await this.newestTask(id);
    const containerId = task?.Status.ContainerStatus?.ContainerID;
    if (!task || !containerId || !task.NodeID) return undefined;
    const engine =
      [...this.nodeOfEngine].find(([, node]) => node === task.NodeID)?.[0] ?? (await this.swarmNodes()).find((node) => node.id === task.NodeID)?.engine;
    return engine ? { runtime: this.on(engine), containerId, task } : undefined;
  }

  /**
   * The target's service's running task: its container (inspected on its node's engine, labels
   * included) and the port its task publishes on the node. Its id is `<service id>/<container id>`.
   */
  async serving(target: ServingTarget, port: number, id?: string): Promise<ServingContainer | undefined> {
    const [known, knownContainer] = id?.split('/') ?? [];
    const serviceId = known ?? (await this.services(targetLabels(target)))[0]?.ID;
    if (serviceId === undefined) return undefined;
    const where = await this.containerOf(serviceId);
    if (!where || where.task.Status.State !== 'running' || (knownContainer !== undefined && where.containerId !== knownContainer)) return undefined;
    const published = where.task.Status.PortStatus?.Ports?.find((candidate) => candidate.TargetPort === port)?.PublishedPort;
    const [container, nodes] = await Promise.all([where.runtime.serving(target, port, where.containerId), this.swarmNodes()]);
    const address = nodes.find((node) => node.id === where.task.NodeID)?.address;
    if (!container || !published || !address) return undefined;
    return { id: `${serviceId}/${where.containerId}`, endpoint: `${address}:${published}`, startedAt: container.startedAt };
  }

  async exitOf(id: string): Promise<ContainerExit | undefined> {
    if (!(await this.service(id))) return undefined;
    const task = await this.newestTask(id);
    if (!task || ON_ITS_WAY.has(task.Status.State) || task.Status.State === 'running') return { running: true, exitCode: null, oomKilled: false };
    const where = await this.containerOf(id);
    const exit = where ? await where.runtime.exitOf(where.containerId).catch(() => undefined) : undefined;
    return { running: false, exitCode: task.Status.ContainerStatus?.ExitCode ?? exit?.exitCode ?? null, oomKilled: exit?.oomKilled ?? false };
  }

  async logsTail(id: string, lines: number): Promise<string> {
    const where = await this.containerOf(id);
    return where ? where.runtime.logsTail(where.containerId, lines) : '';
  }

  /** Waits for the service's task to have a container (at most CALL_TIMEOUT_MS), then follows it; a service gone gives an empty stream. */
  async followOutput(id: string): Promise<Readable> {
    const deadline = Date.now() + CALL_TIMEOUT_MS;
    for (;;) {
      const where = await this.containerOf(id);
      if (where) return where.runtime.followOutput(where.containerId);
      if (!(await this.service(id)) || Date.now() > deadline) {
        const empty = new PassThrough();
        empty.end();
        return empty;
      }
      await sleep(250, undefined, this.scope?.signal ? { signal: this.scope.signal } : undefined);
    }
  }

  async stats(id: string): Promise<StatsSample | undefined> {
    const where = await this.containerOf(id);
    if (!where || where.task.Status.State !== 'running') return undefined;
    return where.runtime.stats(where.containerId);
  }

  /** Measured in the service's running task's container, through its node's engine. */
  async homeUsage(id: string): Promise<HomeUsage | undefined> {
    const where = await this.containerOf(id);
    if (!where || where.task.Status.State !== 'running') return undefined;
    return where.runtime.homeUsage(where.containerId);
  }

  /**
   * Every node's container events; a (re)connect of any node asks for a full look. Swarm has no
   * task events, and a task a node refuses never has a container: the manager's tasks are looked
   * at every TASK_POLL_MS, and each service's newest task found refused or failed with an error is
   * announced once, as an event of its workspace (and run).
   */
  watch(handlers: { onEvent(event: RuntimeEvent): void; onConnect(): void; onDisconnect(error: Error): void }): EventSubscription {
    const subscriptions = this.engines.map((engine) => engine.runtime.watch(handlers));
    const announced = new Set<string>();
    // A manager that does not answer: the nodes' streams say so; the next look tries again.
    const poll = setInterval(() => void this.announceFailures(announced, handlers).catch(() => undefined), TASK_POLL_MS);
    poll.unref();
    return {
      close: () => {
        clearInterval(poll);
        subscriptions.forEach((subscription) => subscription.close());
      },
    };
  }

  /** Announces each service's newest task that failed (taskFailure) and is not in `announced` yet; forgets those no longer newest and failed. */
  private async announceFailures(announced: Set<string>, handlers: { onEvent(event: RuntimeEvent): void }): Promise<void> {
    const newestOf = new Map<string, Task>();
    for (const task of await this.tasks({ label: this.labelFilters() })) {
      const known = newestOf.get(task.ServiceID);
      if (!known || task.CreatedAt > known.CreatedAt) newestOf.set(task.ServiceID, task);
    }
    const failed = [...newestOf.values()].filter((task) => taskFailure(task) !== undefined);
    const current = new Set(failed.map((task) => task.ID));
    for (const id of announced) if (!current.has(id)) announced.delete(id);
    for (const task of failed) {
      const labels = task.Spec?.ContainerSpec?.Labels ?? {};
      const workspaceId = labels[LABELS.workspaceId];
      if (announced.has(task.ID) || !workspaceId) continue;
      announced.add(task.ID);
      handlers.onEvent({ workspaceId, runId: labels[LABELS.runId], action: `task ${task.Status.State}` });
    }
  }
}

/** Whether an image reference names a registry (`host:port/…`, `host.domain/…`, `localhost/…`), which nodes pull from. */
export function fromRegistry(image: string): boolean {
  const first = image.split('/')[0]!;
  return image.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
}

/**
 * A task's limits: memory, CPUs when set, and processes and threads (`Pids`, taken by services since
 * API 1.41, Docker 20.10; swarmkit gives it to the task's container as its PidsLimit).
 */
function limits(spec: { memoryBytes: number; nanoCpus: number; pidsLimit: number }): Docker.ResourceLimits {
  return { MemoryBytes: spec.memoryBytes, ...(spec.nanoCpus > 0 && { NanoCPUs: spec.nanoCpus }), Pids: spec.pidsLimit };
}

/** The node a service is pinned to (its `node.id==` constraint). */
function pinnedNode(service: Service): string | undefined {
  const constraints = service.Spec?.TaskTemplate?.Placement?.Constraints ?? [];
  for (const constraint of constraints) {
    const match = /^node\.id\s*==\s*(\S+)$/.exec(constraint);
    if (match) return match[1];
  }
  return undefined;
}

function newest(tasks: Task[]): Task | undefined {
  let found: Task | undefined;
  for (const task of tasks) if (!found || task.CreatedAt > found.CreatedAt) found = task;
  return found;
}

/** A service as the controllers see a container (see the file's comment for the states). */
function toManaged(service: Service, task: Task | undefined, nodes: Map<string, SwarmNode>): ManagedContainer {
  const labels = service.Spec?.Labels ?? {};
  const replicas = service.Spec?.Mode?.Replicated?.Replicas ?? 0;
  const restarts = service.Spec?.TaskTemplate?.RestartPolicy?.Condition !== 'none';
  let state: string;
  if (!task) state = replicas > 0 ? 'restarting' : 'created';
  else if (task.Status.State === 'running') state = 'running';
  else if (ON_ITS_WAY.has(task.Status.State)) state = task.DesiredState === 'running' && replicas > 0 ? 'restarting' : 'exited';
  else state = replicas > 0 && restarts ? 'restarting' : 'exited';
  const node = nodes.get(task?.NodeID ?? pinnedNode(service) ?? '');
  const failure = task && taskFailure(task);
  const published: Record<number, string> = {};
  if (state === 'running' && node?.address) {
    for (const port of task?.Status.PortStatus?.Ports ?? [])
      if (port.TargetPort && port.PublishedPort) published[port.TargetPort] = `${node.address}:${port.PublishedPort}`;
  }
  return {
    id: service.ID,
    name: service.Spec?.Name ?? '',
    role: (labels[LABELS.role] ?? 'code') as ContainerRole,
    workspaceId: labels[LABELS.workspaceId] ?? '',
    slug: labels[LABELS.workspaceSlug] ?? '',
    runId: labels[LABELS.runId],
    specHash: labels[LABELS.specHash] ?? '',
    restartGeneration: Number(labels[LABELS.restartGeneration] ?? 0),
    homeVolume: labels[LABELS.homeVolume] ?? names.volume(labels[LABELS.workspaceSlug] ?? ''),
    state,
    address: undefined,
    published,
    node: node?.name,
    createdAt: Date.parse(service.CreatedAt ?? '') || 0,
    ...(failure && { failure }),
  };
}

/** A task's failure: refused (rejected) or ended (failed) with an error; undefined for any other task. */
function taskFailure(task: Task): TaskFailure | undefined {
  const message = task.Status.Err;
  if (!message || !['rejected', 'failed'].includes(task.Status.State)) return undefined;
  return { task: task.ID, reason: taskFailureReason(message), message };
}

/** The per-node configuration network of a workspace network. */
function configName(network: string): string {
  return `${network}-config`;
}

/** The workspace network `name` of a node after `generation` repairs: `name`, then `name-r1`, `name-r2`… */
function generationName(name: string, generation: number): string {
  return generation === 0 ? name : `${name}-r${generation}`;
}

/** Of which generation of the workspace network `name` a network on a node is the configuration; -1: none. */
function generationOf(name: string, network: string): number {
  if (network === configName(name)) return 0;
  if (!network.startsWith(`${name}-r`)) return -1;
  const generation = /^(\d+)-config$/.exec(network.slice(name.length + 2))?.[1];
  return generation === undefined ? -1 : Number(generation);
}

/** The bridge interface of a workspace network on each node (at most 15 characters). */
export function bridgeName(network: string): string {
  return WORKSPACE_BRIDGE_PREFIX + createHash('sha256').update(network).digest('hex').slice(0, 10);
}

/** A service as placement counts it (src/docker/placement.ts). */
function placedService(service: Service): PlacedService {
  return {
    workspaceId: service.Spec?.Labels?.[LABELS.workspaceId],
    node: pinnedNode(service),
    scaledUp: (service.Spec?.Mode?.Replicated?.Replicas ?? 0) > 0,
    reservedMemoryBytes: service.Spec?.TaskTemplate?.Resources?.Reservations?.MemoryBytes ?? 0,
  };
}
