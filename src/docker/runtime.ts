/**
 * The container runtime as the controllers see it: narrow enough that another backend (Kubernetes
 * pods, Swarm services) could implement it. Only src/docker talks to an engine.
 */

/** The marker label on every object the control plane manages. */
export const MANAGED_LABEL = 'service.managed';

/** Labels on managed containers and volumes. */
export const LABELS = {
  managed: MANAGED_LABEL,
  workspaceId: 'service.workspace-id',
  workspaceSlug: 'service.workspace-slug',
  role: 'service.role',
  runId: 'service.run-id',
  specHash: 'service.spec-hash',
  restartGeneration: 'service.restart-generation',
} as const;

export type ContainerRole = 'code' | 'sim';

/** A managed container as the runtime reports it. */
export interface ManagedContainer {
  id: string;
  name: string;
  role: ContainerRole;
  workspaceId: string;
  slug: string;
  runId: string | undefined;
  specHash: string;
  restartGeneration: number;
  /** Docker's state: created, running, paused, restarting, removing, exited, dead. */
  state: string;
  /** The container's address on the workspace network, when it runs. */
  address: string | undefined;
  /** When the container was created (ms since epoch). */
  createdAt: number;
}

/** What a workspace's code container should be. */
export interface CodeContainerSpec {
  workspaceId: string;
  slug: string;
  image: string;
  memoryBytes: number;
  network: string;
  editorPort: number;
  restartGeneration: number;
  /** Hash of every field that, when changed, means recreate (see codeSpecHash). */
  specHash: string;
}

/** What a run's simulator container should be: the workspace image and home volume, running the sim command. */
export interface SimContainerSpec {
  workspaceId: string;
  slug: string;
  runId: string;
  image: string;
  memoryBytes: number;
  network: string;
  /** A shell command line: compile, then boot the simulator (SIM_COMMAND). */
  command: string;
  nt4Port: number;
}

/** How a container ended, or that it has not. */
export interface ContainerExit {
  running: boolean;
  exitCode: number | null;
  /** Set when the engine killed it for lack of memory. */
  oomKilled: boolean;
}

/** One stats sample of a container. */
export interface StatsSample {
  /** Cumulative CPU time of the container (ns). */
  cpuTotalNs: number;
  /** Cumulative CPU time of the host (ns), the denominator of CPU percent. */
  systemNs: number;
  onlineCpus: number;
  memoryUsageBytes: number;
  memoryLimitBytes: number;
}

/** A change seen on the engine: the workspace whose containers changed. */
export interface RuntimeEvent {
  workspaceId: string;
  /** Set for a run's simulator container. */
  runId: string | undefined;
  action: string;
}

/** An open subscription to runtime events. */
export interface EventSubscription {
  close(): void;
}

export interface WorkspaceRuntime {
  /** Every managed container, optionally only those of one workspace. */
  listContainers(filter?: { workspaceId?: string }): Promise<ManagedContainer[]>;
  /** Creates the workspace's home volume; already there is success. */
  ensureVolume(workspace: { workspaceId: string; slug: string }): Promise<void>;
  /** Removes the workspace's home volume; already gone is success. */
  removeVolume(slug: string): Promise<void>;
  /** Creates the code container (not started); a name conflict returns the existing one. */
  createCodeContainer(spec: CodeContainerSpec): Promise<ManagedContainer>;
  /** Creates a run's simulator container (not started); a name conflict returns the existing one. */
  createSimContainer(spec: SimContainerSpec): Promise<ManagedContainer>;
  /** Whether a container still runs, and its exit code when it does not; undefined when it is gone. */
  exitOf(id: string): Promise<ContainerExit | undefined>;
  /** The last `lines` lines of a container's output (stdout and stderr), oldest first. */
  logsTail(id: string, lines: number): Promise<string>;
  /** Starts a container; already running is success. */
  start(id: string): Promise<void>;
  /** Stops a container (SIGTERM, then SIGKILL after timeoutSeconds); already stopped or gone is success. */
  stop(id: string, timeoutSeconds?: number): Promise<void>;
  /** Removes a container, stopping it first; already gone is success. */
  remove(id: string): Promise<void>;
  /** One cheap stats sample (one-shot); undefined when the container is gone or not running. */
  stats(id: string): Promise<StatsSample | undefined>;
  /**
   * Follows engine events on managed containers. `onConnect` is called on every (re)connect, when
   * the caller should list everything again; the subscription reconnects by itself until closed.
   */
  watch(handlers: { onEvent(event: RuntimeEvent): void; onConnect(): void; onDisconnect(error: Error): void }): EventSubscription;
}

/** Deterministic names, so that creating twice is harmless. */
export const names = {
  code: (slug: string) => `ws-${slug}-code`,
  sim: (slug: string, runId: string) => `ws-${slug}-sim-${runId.slice(0, 8)}`,
  volume: (slug: string) => `ws-${slug}-home`,
};
