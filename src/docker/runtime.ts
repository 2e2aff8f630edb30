/**
 * The container runtime as the controllers see it: narrow enough that another backend (Kubernetes
 * pods, Swarm services) could implement it. Only src/docker talks to an engine.
 */

import type { Readable } from 'node:stream';
import type { FirewallOutcome } from './firewall.ts';
import type { Reachability } from './reachability.ts';

// What the loops ask of an engine's reachability, from the runtime's own module (the one outside src/docker may import).
export { engineAway, EngineUnreachableError, type Reachability } from './reachability.ts';

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
  /** The home volume a code or sim container mounts (a restore points a workspace at a new one). */
  homeVolume: 'service.home-volume',
} as const;

/**
 * `backup`: a helper through which a volume is read or written: never started (exportVolume,
 * importVolume), or started for one look and removed by the engine as it ends (inspectHome).
 */
export type ContainerRole = 'code' | 'sim' | 'backup';

/**
 * Where a home volume is mounted in the containers of a workspace and in the helpers that archive
 * it: a path in the home reaches the engine as `/home/student/<path>`, which PATH_MAX bounds.
 */
export const HOME_PATH = '/home/student';

/**
 * The tar streams of exportVolume and importVolume hold one top directory that stands for the
 * volume's root: its own entry (`student/`) carries the root's owner, mode and mtime, and every file
 * of the volume is an entry under it (`student/<path>`, a hard link's target likewise). It is the
 * basename of the home mount point, as Docker names the entries of a directory it archives.
 */
export const VOLUME_ARCHIVE_ROOT = 'student';

/**
 * What a look asks of a home: one directory's entries, or the start of one file. `path` is relative
 * to the home ('' = the home), already checked by the caller (no leading '/', no '.' or '..'
 * segment, no NUL, at most 1024 characters).
 */
export type HomeRequest = { op: 'list'; path: string } | { op: 'read'; path: string; maxBytes: number };

/**
 * One entry of a directory: its name, kind (`link` for a symbolic link, never followed; `other`: a
 * FIFO, socket or device) and size in bytes (0 for a directory; a link's: the length of its target).
 */
export interface HomeEntry {
  name: string;
  kind: 'file' | 'dir' | 'link' | 'other';
  size: number;
}

/** The most entries a listing gives (`truncated` says there were more). */
export const HOME_LIST_MAX = 2000;

/** What a look found (WorkspaceRuntime.inspectHome). */
export type HomeAnswer =
  | { outcome: 'listed'; entries: HomeEntry[]; truncated: boolean }
  // bytes: the first maxBytes at most; size: the whole file's.
  | { outcome: 'read'; size: number; bytes: Buffer }
  | { outcome: 'missing' | 'outside' | 'not_a_directory' | 'not_a_file' };

/**
 * A look reached a folder or file of the home that its permissions keep from the workspace's user
 * (uid 1000: its student made it unreadable, or it is root's), which the look reads as: nothing of
 * it is shown, as the student's own editor could not show it.
 */
export class HomeUnreadableError extends Error {
  readonly path: string;
  constructor(path: string) {
    super(`${path === '' ? 'The home' : JSON.stringify(path)} cannot be read: its permissions keep it from the workspace's user.`);
    this.name = 'HomeUnreadableError';
    this.path = path;
  }
}

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
  /** The home volume it mounts (containers made before the label existed: the workspace's default). */
  homeVolume: string;
  /** Docker's state: created, running, paused, restarting, removing, exited, dead. */
  state: string;
  /** The container's address on the workspace network, when it runs. */
  address: string | undefined;
  /**
   * Ports published where the control plane reaches them instead (a swarm task's, on its node's
   * address): the container's port → `host:port`.
   */
  published?: Record<number, string>;
  /** The node it is placed on (a swarm's node name; undefined on one engine). */
  node?: string;
  /** When the container was created (ms since epoch). */
  createdAt: number;
  /** A swarm's: its newest task was refused or ended with an error (rejected or failed); absent otherwise and on one engine. */
  failure?: TaskFailure;
}

/**
 * Why a swarm node refused or ended a task, in a word (the label of `swarm_task_rejections_total`):
 * `network` (the workspace network on its node: left stale by an unclean death of the node's engine,
 * moby#37087, or its configuration missing), `image` (the image could not be had), `exit` (the
 * container exited with an error), `other`.
 */
export const TASK_FAILURE_REASONS = ['network', 'image', 'exit', 'other'] as const;
export type TaskFailureReason = (typeof TASK_FAILURE_REASONS)[number];

/** A swarm task refused or ended with an error: its id, why in a word, and the engine's own words. */
export interface TaskFailure {
  task: string;
  reason: TaskFailureReason;
  message: string;
}

/** The word for a task's error (TASK_FAILURE_REASONS), from the engine's message. */
export function taskFailureReason(message: string): TaskFailureReason {
  if (/^network \S+ exists$|^configuration network .* does not exist|^network \S+ not found$/.test(message)) return 'network';
  if (/no such image|pull access denied|manifest unknown|failed to resolve reference|error pulling image/i.test(message)) return 'image';
  if (message.startsWith('task: non-zero exit')) return 'exit';
  return 'other';
}

/** What repairNetwork did: the node, the workspace network its services join now, and whether that is a new one made there. */
export interface NetworkRepair {
  node: string;
  network: string;
  renewed: boolean;
}

/** The most processes and threads a workspace container holds at once unless configured (CONTAINER_PIDS_LIMIT): see docs/security.md. */
export const DEFAULT_PIDS_LIMIT = 1024;

/** The port a run's robot serves WPILib's HALSim WebSocket on unless configured (HALSIM_PORT): WPILib's own default. */
export const DEFAULT_HALSIM_PORT = 3300;

/** The path of a robot's HALSim WebSocket (`HALSIMWS_URI` in its container: WPILib's own default). */
export const HALSIM_URI = '/wpilibws';

/**
 * The environment of a run's simulator container: where its robot serves NetworkTables
 * (`NT4_PORT`) and WPILib's HALSim WebSocket (`HALSIMWS_PORT` and `HALSIMWS_URI`, the names WPILib's
 * `halsim_ws_server` reads).
 */
export function simEnvironment(spec: Pick<SimContainerSpec, 'nt4Port' | 'halsimPort'>): string[] {
  return [`NT4_PORT=${spec.nt4Port}`, `HALSIMWS_PORT=${spec.halsimPort}`, `HALSIMWS_URI=${HALSIM_URI}`];
}

/** What a workspace's code container should be. */
export interface CodeContainerSpec {
  workspaceId: string;
  slug: string;
  image: string;
  memoryBytes: number;
  network: string;
  editorPort: number;
  /** CPUs it may use, in billionths (CODE_CPUS); 0: no limit. */
  nanoCpus: number;
  /** The most processes and threads it may hold at once (CONTAINER_PIDS_LIMIT). */
  pidsLimit: number;
  restartGeneration: number;
  /** The home volume to mount at /home/student (the workspace's `homeVolume`, else names.volume(slug)). */
  homeVolume: string;
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
  /** CPUs it may use, in billionths (RUN_CPUS); 0: no limit. */
  nanoCpus: number;
  /** The most processes and threads it may hold at once (CONTAINER_PIDS_LIMIT). */
  pidsLimit: number;
  network: string;
  /** A shell command line: compile, then boot the simulator (SIM_COMMAND). */
  command: string;
  nt4Port: number;
  /** Where the robot serves WPILib's HALSim WebSocket (HALSIM_PORT): the Driver Station's way in, relayed by the proxy. */
  halsimPort: number;
  /** The home volume to mount at /home/student, the code container's. */
  homeVolume: string;
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

/** What ensureNetwork found and did. */
export interface NetworkState {
  /** Whether containers on it cannot reach each other. */
  isolated: boolean;
  created: boolean;
  /** One engine: whether its containers are kept from link-local addresses (src/docker/firewall.ts); a swarm's nodes' firewall does that instead. */
  firewall?: FirewallOutcome;
}

/** Whose container an address is checked against: a workspace's editor, or (with `runId`) a run's simulator. */
export interface ServingTarget {
  workspaceId: string;
  runId?: string;
}

/** The label filters (`key=value`) that find a target's container on an engine or a swarm. */
export function targetLabels(target: ServingTarget): string[] {
  return [`${LABELS.workspaceId}=${target.workspaceId}`, target.runId === undefined ? `${LABELS.role}=code` : `${LABELS.runId}=${target.runId}`];
}

/** Whether a container's labels name it the target's container (ServingTarget). */
export function isTargetOf(labels: Record<string, string> | undefined, target: ServingTarget): boolean {
  if (labels?.[LABELS.workspaceId] !== target.workspaceId) return false;
  return target.runId === undefined ? labels[LABELS.role] === 'code' : labels[LABELS.role] === 'sim' && labels[LABELS.runId] === target.runId;
}

/**
 * A live container as the engine reports it now, and where it serves a port: the proxy's proof of
 * whose an address is. `id` names the container to the runtime that answered (opaque); `startedAt`
 * changes whenever it starts again, so two readings with the same `id`, `endpoint` and `startedAt`
 * mean it served that endpoint all the time between them.
 */
export interface ServingContainer {
  id: string;
  endpoint: string;
  startedAt: string;
}

/** What a workspace's home holds, measured in a running container that mounts it (WorkspaceRuntime.homeUsage). */
export interface HomeUsage {
  /** The space its files take on disk, in bytes. */
  bytes: number;
  /**
   * Why part of it could not be measured (a folder its student made unreadable, the measure cut
   * short); `bytes` is then what could be. Undefined: all of it was.
   */
  problem?: string;
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

/** A machine workspaces run on: the one engine, or a swarm's node. */
export interface RuntimeNode {
  id: string;
  name: string;
  /** Where its published ports are reached (a swarm node's address; empty on one engine). */
  address: string;
  /** ready, down, unknown (Swarm's words; one engine that answers is ready). */
  state: string;
  /** active, pause or drain: whether new workspaces may be placed there (Swarm's words; one engine is active). */
  availability: string;
  memoryBytes: number;
  nanoCpus: number;
  /** Memory this control plane's running editors reserve there (a swarm's placement; 0 on one engine, which reserves nothing). */
  reservedMemoryBytes: number;
  /** Whether the control plane reaches its engine. */
  reachable: boolean;
}

/** What bounds every engine call of a scoped runtime (WorkspaceRuntime.scoped). */
export interface EngineScope {
  /**
   * Every call is aborted once it is: a controller's, so that a stopping control plane ends its
   * engine calls at once instead of waiting out their timeout.
   */
  signal?: AbortSignal;
  /**
   * Asked right before each engine request that may change something (every method but GET and
   * HEAD); when it throws, the request is never sent and the call fails with that error. A leader's
   * fence: a leader paused between two calls of one reconcile makes neither once it may no longer
   * lead (docs/architecture.md, "Fencing").
   */
  beforeChange?: () => void;
}

/** The containers of workspaces and runs (services, on a swarm): listed, made, started, stopped, removed, and read (exit, output, where one serves). A role of WorkspaceRuntime. */
export interface RuntimeWorkloads {
  /** Every managed container, optionally only those of one workspace. */
  listContainers(filter?: { workspaceId?: string }): Promise<ManagedContainer[]>;
  /** Creates the code container (not started); a name conflict returns the existing one. */
  createCodeContainer(spec: CodeContainerSpec): Promise<ManagedContainer>;
  /** Creates a run's simulator container (not started); a name conflict returns the existing one. */
  createSimContainer(spec: SimContainerSpec): Promise<ManagedContainer>;
  /** Starts a container; already running is success. */
  start(id: string): Promise<void>;
  /** Stops a container (SIGTERM, then SIGKILL after timeoutSeconds); already stopped or gone is success. */
  stop(id: string, timeoutSeconds?: number): Promise<void>;
  /** Removes a container, stopping it first; already gone is success. */
  remove(id: string): Promise<void>;
  /** Whether a container still runs, and its exit code when it does not; undefined when it is gone. */
  exitOf(id: string): Promise<ContainerExit | undefined>;
  /** The last `lines` lines of a container's output (stdout and stderr), oldest first. */
  logsTail(id: string, lines: number): Promise<string>;
  /**
   * A container's output (stdout and stderr, in the order written) from its start, followed as it
   * is written until the container stops: a byte stream that then ends. The caller reads it (the
   * engine waits while it does not) or destroys it; a container that is gone gives an empty stream.
   */
  followOutput(id: string): Promise<Readable>;
  /**
   * The running container of `target` (its labels name the workspace, the role and the run: whoever's
   * control plane made it, workspace and run ids are unique) and where it serves `port`, read fresh
   * from the engine; with `id` (a ServingContainer's), that container alone, and only while its labels
   * still name `target`. Undefined when none runs. A read: the proxy checks an address with it before
   * and after it connects (api/proxy/upstreams.ts).
   */
  serving(target: ServingTarget, port: number, id?: string): Promise<ServingContainer | undefined>;
}

/** The volumes of workspaces: homes made and removed, and files moved in and out of them (VolumeArchives). A role of WorkspaceRuntime. */
export interface RuntimeVolumes {
  /** Creates a workspace's home volume of this name (labelled with the workspace); already there is success. */
  ensureVolume(workspace: { workspaceId: string; slug: string }, volume: string): Promise<void>;
  /** Removes one of a workspace's volumes by name; already gone is success; still mounted by a container: false, left as it is. */
  removeVolume(volume: string): Promise<boolean>;
  /** Removes every volume labelled with this workspace (its home, and any a restore made); those still mounted are left. */
  removeVolumes(workspace: { workspaceId: string; slug: string }): Promise<void>;
  /** Every managed volume of this control plane: its name and the workspace it is labelled with. */
  listVolumes(): Promise<{ name: string; workspaceId: string }[]>;
  /** Whether a volume of this name exists (whoever made it). */
  volumeExists(volume: string): Promise<boolean>;
  /** Removes a volume by name (a staging volume); already gone is success; one not managed by this control plane is refused (`volume_not_managed`). */
  removeVolumeNamed(volume: string): Promise<void>;
  /**
   * A tar stream of the volume's contents (see VOLUME_ARCHIVE_ROOT), or with `path` (relative to the
   * home, no `.` or `..` parts) of that folder or file alone (its entries named from its own name:
   * `<last part of path>/...`), read through a helper container (role `backup`) that mounts it
   * read-only and is never started; the helper is removed once the stream ends (before it reports
   * its end), fails or is destroyed, so the caller must consume or destroy it. `image` is any local
   * image: nothing runs from it. Fails with `volume_not_found` when the volume does not exist, and
   * `home_path_not_found` when nothing is at `path`. A link on the way to `path` is followed inside
   * the helper's own file system (the engine's rule): at most the image's files, never the host's.
   */
  exportVolume(volume: string, workspace: { workspaceId: string; slug: string }, image: string, options?: { path?: string }): Promise<Readable>;
  /**
   * Extracts `tar` (see VOLUME_ARCHIVE_ROOT) into the volume, creating it first when missing
   * (labelled as ensureVolume labels a home volume), through a helper container (role `backup`)
   * that mounts it read-write and is never started, and is removed before this settles. Owners,
   * modes and mtimes are the tar's, the root's included; files already there are replaced, others
   * kept. With `then`, its tar is extracted next, into `then.path` (relative to the home, no `.` or
   * `..` parts: a folder `tar` made), its entries named from that folder (a lesson's own tar, sent
   * as it is kept). `tar` (and `then.tar`) is consumed, or destroyed on failure. Fails with
   * `volume_not_managed` when the volume exists but is not this control plane's.
   */
  importVolume(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    tar: Readable,
    then?: { path: string; tar: Readable },
  ): Promise<void>;
  /**
   * Reads a workspace's home for a coach's look, whether the workspace runs or not: one directory's
   * direct entries (at most HOME_LIST_MAX; the order is the engine's, the caller sorts), or a file's
   * size and first `maxBytes` bytes (a 2 GB file costs maxBytes of memory). Run in a helper
   * container (role `backup`, named `ws-<slug>-look-<hex>`) made for the request from `image` (the
   * workspace image: it needs sh, readlink -f, stat -c, find, xargs -0, head -c and timeout, as
   * busybox and coreutils have them): the volume read-only at HOME_PATH, user 1000:1000, no network,
   * no capabilities, a read-only root, a few processes, little memory and CPU, a fixed script of
   * ours that takes the path as an argument (never as part of a command line), and no log kept of
   * what it prints. It is removed before this settles, on failure and timeout too; should the
   * control plane die mid-look, it ends itself (timeout) and the engine removes it (AutoRemove);
   * dying between its creation and its start leaves it created, as an export's helper can be left.
   *
   * Answers: `outside` when the path leads out of the home once every link in it is resolved
   * (a link to /etc, or through one: `link/passwd`); `missing` when nothing is there (or a link
   * loop, or a folder on the way cannot be searched); `not_a_directory` for a listing of anything
   * but a folder (or a link to one in the home, which is listed); `not_a_file` for a read of
   * anything but a regular file: a link is never followed for a read, and a FIFO or a device is
   * refused before it is opened. A race with the running editor (a folder swapped for a link
   * between the check and the read) reaches at most the helper's own files: the image's, which the
   * student has anyway. Names are read as UTF-8 (bytes that are not become U+FFFD). A name holding a
   * newline comes out cut at it (its remainder is dropped: it can never pass for an entry, inside
   * the folder or out of it, nor for `.` or `..`), and may make `truncated` true a little early.
   *
   * Fails with `volume_not_found` when the volume does not exist, HomeUnreadableError when the
   * folder or file's permissions keep it from uid 1000, ImageMissingError when the image is not on
   * the engine, and an Error saying so when the look takes over 10 s (the helper is then removed).
   */
  inspectHome(volume: string, workspace: { workspaceId: string; slug: string }, image: string, request: HomeRequest): Promise<HomeAnswer>;
  /**
   * What is at each of `paths` (relative to the home, no `.` or `..` parts) in a workspace's home,
   * whether it runs or not, without following the last part: `dir`, `file`, `link`, `other`, or
   * `missing` (also under an earlier path of `paths` that is not a folder: list a folder before
   * what is in it). Read through the engine's archive stat of a helper container as exportVolume's (role
   * `backup`, the volume read-only, never started), removed before this settles: cheaper than
   * inspectHome's started helper. A link on the way to a path is followed inside the helper's own
   * file system (the engine's rule): at most the image's files. Fails with `volume_not_found`.
   */
  statHome(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    paths: readonly string[],
  ): Promise<Map<string, HomeEntry['kind'] | 'missing'>>;
  /**
   * Removes one folder (or file, or link) of a home, `relative` to it, whether the workspace runs or
   * not (a lesson folder reset: src/lessons/): in a helper container as inspectHome's, but with the
   * volume read-write, running a fixed script of ours that takes the path as an argument. The folder
   * it is in must resolve inside the home once every link is followed (else `outside`, nothing
   * removed); the last part is removed as it is, a link and not what it points at. Answers
   * `removed`, or `missing` when nothing was there. Fails as inspectHome does.
   */
  removeHomeFolder(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    relative: string,
  ): Promise<'removed' | 'missing' | 'outside'>;
}

/** The machines workspaces run on, and the leader's drain of one. A role of WorkspaceRuntime. */
export interface RuntimeNodes {
  /** The machines workspaces run on: one for a single engine, every node of a swarm. */
  nodes(): Promise<RuntimeNode[]>;
  /**
   * Pauses a node (nothing new is placed there; what runs stays) or makes it active again, by name:
   * the leader's step of a drain. A single engine has no nodes to drain: it refuses.
   */
  setNodeAvailability(node: string, availability: 'active' | 'pause'): Promise<void>;
}

/** What changes on the engine, as it happens. A role of WorkspaceRuntime. */
export interface RuntimeEvents {
  /**
   * Follows engine events on managed containers. `onConnect` is called on every (re)connect, when
   * the caller should list everything again; the subscription reconnects by itself until closed.
   */
  watch(handlers: { onEvent(event: RuntimeEvent): void; onConnect(): void; onDisconnect(error: Error): void }): EventSubscription;
}

/** What a running editor uses: its CPU and memory, and its home's disk. A role of WorkspaceRuntime. */
export interface RuntimeStats {
  /** One cheap stats sample (one-shot); undefined when the container is gone or not running. */
  stats(id: string): Promise<StatsSample | undefined>;
  /**
   * Measures the home volume mounted in a running container (`du` of it run inside, as the
   * container's user, bounded in time); undefined when the container is gone or not running. Fails
   * when the measure cannot be run at all (the engine refuses the exec).
   */
  homeUsage(id: string): Promise<HomeUsage | undefined>;
}

/** What workspaces need around them on the engine: that it answers, the workspace network, the image. A role of WorkspaceRuntime. */
export interface RuntimeEnvironment {
  /**
   * Whether its engines answer, which says when one cannot be reached and when it is back (its
   * calls then fail with an EngineUnreachableError it covers, and the loops stay quiet): one engine's
   * (EngineReachability), or a swarm's, said when no engine of it answers (SwarmReachability).
   */
  readonly reachability?: Reachability;
  /**
   * Makes sure the workspace network exists: created as a bridge on which containers cannot reach
   * each other (inter-container traffic off) when missing. Answers whether containers on it are
   * isolated from each other (an existing network, e.g. Docker's default `bridge`, may not be),
   * and, on one engine, whether the host's firewall keeps them from link-local addresses.
   */
  ensureNetwork(name: string): Promise<NetworkState>;
  /** Whether the image is on the engine (it is never pulled: the operator builds or pulls it). */
  imageExists(image: string): Promise<boolean>;
  /**
   * A swarm's alone: makes the workspace network `network` usable again for the service `id`,
   * whose node refused its task for it (a `network` failure). A node whose engine died uncleanly
   * keeps its bridge of the network, which makes the network impossible to create there again
   * (moby#37087): that node gets a new network of its own (its configuration and a swarm network
   * made from it), and the service joins the node's newest. Undefined when the service or its pin
   * is gone.
   */
  repairNetwork?(id: string, network: string): Promise<NetworkRepair | undefined>;
}

/**
 * The runtime a controller is given: every role, and its own scoped copies. Its roles apart
 * (RuntimeWorkloads, RuntimeVolumes, RuntimeNodes, RuntimeEvents, RuntimeStats, RuntimeEnvironment)
 * are what a part that needs less takes.
 */
export interface WorkspaceRuntime extends RuntimeWorkloads, RuntimeVolumes, RuntimeNodes, RuntimeEvents, RuntimeStats, RuntimeEnvironment {
  /**
   * The same runtime with every engine call bounded by `scope` (see EngineScope), on top of this
   * one's own scope: a leader's fence, then a controller's signal.
   */
  scoped(scope: EngineScope): WorkspaceRuntime;
}

/**
 * The methods of the roles a wrapper passes whole to the runtime it wraps (src/docker/informer.ts),
 * by name. A method added to one of these roles and not here leaves the wrapper short of it, which
 * fails to compile.
 */
export const ROLE_METHODS = {
  volumes: [
    'ensureVolume',
    'removeVolume',
    'removeVolumes',
    'listVolumes',
    'volumeExists',
    'removeVolumeNamed',
    'exportVolume',
    'importVolume',
    'inspectHome',
    'statHome',
    'removeHomeFolder',
  ],
  nodes: ['nodes', 'setNodeAvailability'],
  stats: ['stats', 'homeUsage'],
} as const satisfies {
  volumes: readonly (keyof RuntimeVolumes)[];
  nodes: readonly (keyof RuntimeNodes)[];
  stats: readonly (keyof RuntimeStats)[];
};

/**
 * What backups and restores may do on the engine: move files in and out of volumes. The one data
 * path where the CLI and the admin API reach Docker; starting, stopping and removing containers
 * stays the controllers'.
 */
export type VolumeArchives = Pick<RuntimeVolumes, 'exportVolume' | 'importVolume' | 'volumeExists' | 'removeVolumeNamed'>;

/** The workspace image is not on the engine: what a student's page and the operator's log say. */
export class ImageMissingError extends Error {
  readonly image: string;
  constructor(image: string) {
    super(
      `The workspace image ${image} is not on this server: the operator builds it (bash scripts/build-workspace-image.sh makes classroom-workspace:latest) or pulls it.`,
    );
    this.name = 'ImageMissingError';
    this.image = image;
  }
}

/** Where the control plane reaches a container's port: where it is published, else its address on the workspace network; undefined while it has neither. */
export function endpointOf(container: ManagedContainer, port: number): string | undefined {
  const published = container.published?.[port];
  if (published) return published;
  return container.address ? `${container.address}:${port}` : undefined;
}

/** No node has room for the workspace (a swarm: its reservations would not fit): what its page and the operator's log say; it waits, as at the cap. */
export class NoRoomError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NoRoomError';
  }
}

/** Deterministic names, so that creating twice is harmless. */
export const names = {
  code: (slug: string) => `ws-${slug}-code`,
  sim: (slug: string, runId: string) => `ws-${slug}-sim-${runId.slice(0, 8)}`,
  volume: (slug: string) => `ws-${slug}-home`,
  /** The volume a workspace's home is on: the one a restore put in, else the default by slug. */
  home: (workspace: { slug: string; spec: { homeVolume: string | null } }) => workspace.spec.homeVolume ?? `ws-${workspace.slug}-home`,
  /** A fresh volume a restore fills before the workspace is pointed at it. */
  restoreVolume: (slug: string, suffix: string) => `ws-${slug}-home-restore-${suffix}`,
};
