import { randomBytes } from 'node:crypto';
import readline from 'node:readline';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { PassThrough, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';
import { inspect as formatValue } from 'node:util';
import type Docker from 'dockerode';
import { ConflictError, NotFoundError } from '../errors.ts';
import { blockLinkLocal } from './firewall.ts';
import { EngineReachability, isConnectionFailure } from './reachability.ts';
import {
  HOME_LIST_MAX,
  HOME_PATH,
  HomeUnreadableError,
  type EngineScope,
  ImageMissingError,
  LABELS,
  isTargetOf,
  MANAGED_LABEL,
  names,
  simEnvironment,
  targetLabels,
  VOLUME_ARCHIVE_ROOT,
  type CodeContainerSpec,
  type ContainerExit,
  type ContainerRole,
  type EventSubscription,
  type HomeAnswer,
  type HomeEntry,
  type HomeRequest,
  type HomeUsage,
  type ManagedContainer,
  type RuntimeEvent,
  type NetworkState,
  type RuntimeNode,
  type ServingContainer,
  type ServingTarget,
  type SimContainerSpec,
  type StatsSample,
  type WorkspaceRuntime,
} from './runtime.ts';

/** Label scoping one control plane's objects, so that two of them (or test runs) can share an engine. */
export const CONTROL_PLANE_LABEL = 'service.control-plane';

/**
 * Where a backup helper mounts the volume: the home mount point, whose basename is
 * VOLUME_ARCHIVE_ROOT. Docker names the entries of an archive of it `student/...`, and an archive
 * put at its parent applies the `student/` entry to the mount point itself, the volume's root (one
 * put at the mount point leaves the root's owner and mode alone).
 */
const HELPER_MOUNT_PARENT = path.posix.dirname(HOME_PATH);
const HELPER_MOUNT = path.posix.join(HELPER_MOUNT_PARENT, VOLUME_ARCHIVE_ROOT);

/** How often the events stream is checked with a ping; a failed ping drops and reconnects it. */
const PING_INTERVAL_MS = 5000;

/** The bridge option that, set to false, drops traffic between the network's containers. */
const ICC_OPTION = 'com.docker.network.bridge.enable_icc';

/** How long measuring a home may take in its container (below CALL_TIMEOUT_MS, the exec's own): then it is cut short. */
const HOME_MEASURE_SECONDS = 45;

/** How long a look at a home may take (inspectHome), from its helper's creation to its removal: then the helper is removed and the look fails. */
const LOOK_TIMEOUT_MS = 10_000;

/** A look's helper ends itself this long after it starts, should the control plane die mid-look (the engine then removes it: AutoRemove). */
const LOOK_HELPER_SECONDS = 30;

/** What a look's helper may use: a few processes (an init, timeout, sh, find, xargs, stat, head), little memory, half a CPU. */
const LOOK_HELPER_LIMITS = { PidsLimit: 32, Memory: 64 * 1024 * 1024, NanoCpus: 500_000_000 };

/** The longest line of a listing: a mode in hex, a size, `./` and a name (NAME_MAX, 255 bytes), with room to spare. */
const LOOK_LINE_BYTES = 320;

/**
 * The script of a look's helper (`sh -c`): its arguments are the home, the op (`list` or `read`),
 * the path in the home and a limit (lines of a listing, bytes of a read), never part of the script.
 * It prints one line first (the outcome: `listed`, `read <size>`, `missing`, `outside`,
 * `not_a_directory`, `not_a_file` or `unreadable`), then a listing's lines (`<mode in hex> <size>
 * ./<name>`) or a read's bytes. Only what busybox and coreutils both have: `readlink -f` resolves
 * every link (the last component may be missing), `stat -c` (lstat: links are not followed), `head -c`.
 * A read checks the kind of the file with test(1) (a stat) before anything opens it.
 */
const LOOK_SCRIPT = `home=$1 op=$2 rel=$3 limit=$4
path=$home\${rel:+/$rel}
real=$(readlink -f -- "$path") || { echo missing; exit 0; }
case $real in "$home" | "$home"/*) ;; *) echo outside; exit 0 ;; esac
if [ "$op" = read ]; then
  if [ -L "$path" ]; then echo not_a_file; exit 0; fi
  [ -e "$real" ] || { echo missing; exit 0; }
  [ -f "$real" ] || { echo not_a_file; exit 0; }
  [ -r "$real" ] || { echo unreadable; exit 0; }
  size=$(stat -c %s -- "$real") || exit 1
  echo "read $size"
  exec head -c "$limit" -- "$real"
fi
[ -e "$real" ] || { echo missing; exit 0; }
[ -d "$real" ] || { echo not_a_directory; exit 0; }
{ cd -- "$real" && [ -r . ]; } 2>/dev/null || { echo unreadable; exit 0; }
echo listed
find . -mindepth 1 -maxdepth 1 -print0 | xargs -0 -r stat -c '%f %s %n' | head -n "$limit"
`;

/**
 * The script of a helper that removes one folder (or file, or link) of a home (`sh -c`; arguments:
 * the home and the path in it, never part of the script): the folder it is in must resolve inside
 * the home once every link is followed; the last component is removed as it is (a link, not what it
 * points at). Prints `removed`, `missing` or `outside`.
 */
const REMOVE_SCRIPT = `home=$1 rel=$2
path=$home/$rel
{ [ -e "$path" ] || [ -L "$path" ]; } || { echo missing; exit 0; }
parent=$(readlink -f -- "$(dirname -- "$path")") || { echo missing; exit 0; }
case $parent in "$home" | "$home"/*) ;; *) echo outside; exit 0 ;; esac
rm -rf -- "$parent/$(basename -- "$path")" && echo removed
`;

/** The longest any single engine call may take (a stop waits up to its own timeout inside it): a hung daemon fails the reconcile, which is retried. */
export const CALL_TIMEOUT_MS = 60_000;

/** The HTTP status of a dockerode error, if any. */
export function statusOf(error: unknown): number | undefined {
  const status = (error as { statusCode?: unknown })?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** Runs `action`, treating the listed HTTP statuses (already there, already gone, not modified) as success. */
export async function tolerate(action: () => Promise<unknown>, statuses: number[]): Promise<void> {
  try {
    await action();
  } catch (error) {
    if (!statuses.includes(statusOf(error) ?? -1)) throw error;
  }
}

/**
 * dockerode, loaded at its first client: it loads gRPC, protobuf.js and ssh2 as well (about 200
 * modules, a seventh of a second of CPU), which the server's start does not wait for (its first
 * engine call comes after it listens) and a CLI command that only reads the database never needs.
 */
let dockerode: typeof Docker | undefined;
const Dockerode = (): typeof Docker => (dockerode ??= createRequire(import.meta.url)('dockerode') as typeof Docker);

/**
 * A dockerode client that opens a new connection for every call. Node's default agent keeps idle
 * sockets for 5 s, and a call made just as one of them times out fails with "socket hang up" (a
 * 5 s ping hit that every third time). A local socket's connect costs far less than any engine call.
 */
export function engineClient(options: Docker.DockerOptions = {}, reachability?: EngineReachability): Docker {
  const docker = new (Dockerode())(options);
  if (reachability) reportTo(docker.modem, reachability);
  // docker-modem resolves the protocol (a socket, or DOCKER_HOST with TLS) and passes its `agent` on
  // to http.request or https.request, which each take only their own kind (SSH brings its own).
  const modem = docker.modem as { protocol?: string; agent?: http.Agent };
  if (!modem.agent) {
    const agent = modem.protocol === 'https' ? new https.Agent({ keepAlive: false }) : new http.Agent({ keepAlive: false });
    // docker-modem formats every request's options, this agent among them, with util.inspect (all
    // hidden properties, no depth limit) for a debug line, whether debugging is on or not. Through the
    // agent that walks every open socket (the event stream, each run's output followed): with 30 runs
    // followed it was half the control plane's CPU and stalled its event loop for up to a second.
    Object.defineProperty(agent, formatValue.custom, { value: () => `[${modem.protocol ?? 'http'} agent]` });
    modem.agent = agent;
  }
  return docker;
}

/** What docker-modem knows of where the engine is (its own fields, set from the options or DOCKER_HOST). */
type ModemAddress = { socketPath?: unknown; socketPathCache?: unknown; protocol?: string; host?: string; port?: string | number };

/**
 * Where a client looks for the engine, as DOCKER_HOST spells it: `unix:///path`, `tcp://host:port`,
 * `ssh://host:port`. The default socket (DOCKER_HOST unset) is found by docker-modem as it dials: the
 * socket a failed connection names, then.
 */
export function engineAddress(modem: Docker['modem'], failure?: Error): string {
  const { socketPath, socketPathCache, protocol, host, port } = modem as ModemAddress;
  const socket = [socketPathCache, socketPath, (failure as { address?: unknown } | undefined)?.address].find((candidate) => typeof candidate === 'string');
  if (host !== undefined) return `${protocol === 'ssh' ? 'ssh' : 'tcp'}://${host}${port === undefined || port === '' ? '' : `:${String(port)}`}`;
  return socket === undefined ? 'the default socket (DOCKER_HOST unset)' : `unix://${socket}`;
}

/**
 * Reports the outcome of every request the modem dials to `reachability` (an answer of any status,
 * or a connection failure), and fails a request that could not reach the engine with its
 * EngineUnreachableError instead of the connection's error. Scoped clients (scopedClient) dial
 * through it too.
 */
function reportTo(modem: Docker['modem'], reachability: EngineReachability): void {
  // docker-modem's own dial, from a fresh client's prototype (scopedClient's modems dial through this one).
  const base = Object.getPrototypeOf(modem) as typeof modem;
  modem.dial = function (this: typeof modem, options, callback) {
    base.dial.call(this, options, (error, result) => {
      if (!error || statusOf(error) !== undefined) reachability.answered();
      else if (isConnectionFailure(error)) return callback?.(reachability.failed(error), null);
      callback?.(error, result);
    });
  };
}

/**
 * A client of the same engine, through the same connection settings, whose every request keeps to
 * `scope` (see EngineScope): aborted when its signal is (dockerode's abortSignal, set on each
 * request its modem dials, beside any the request has), and never sent when it may change
 * something and `beforeChange` throws.
 */
export function scopedClient(docker: Docker, scope: EngineScope): Docker {
  const base = docker.modem;
  const modem = Object.create(base) as typeof base;
  modem.dial = function (this: typeof base, options, callback) {
    if (scope.beforeChange && options.method !== 'GET' && options.method !== 'HEAD') {
      try {
        scope.beforeChange();
      } catch (error) {
        callback?.(error as Error, null);
        return;
      }
    }
    const signals = [options.abortSignal, scope.signal].filter((signal) => signal !== undefined);
    base.dial.call(this, { ...options, abortSignal: signals.length > 1 ? AbortSignal.any(signals) : signals[0] }, callback);
  };
  return new (Dockerode())({ modem } as Docker.DockerOptions);
}

/** Both scopes at once: `outer`'s bounds, then `inner`'s. */
export function bothScopes(outer: EngineScope | undefined, inner: EngineScope): EngineScope {
  if (!outer) return inner;
  const signals = [outer.signal, inner.signal].filter((signal) => signal !== undefined);
  const checks = [outer.beforeChange, inner.beforeChange].filter((check) => check !== undefined);
  return {
    signal: signals.length > 1 ? AbortSignal.any(signals) : signals[0],
    beforeChange: checks.length === 0 ? undefined : () => checks.forEach((check) => check()),
  };
}

export interface DockerRuntimeOptions {
  /** Value of the control-plane label on everything this instance creates and lists. */
  controlPlaneId: string;
  /** dockerode connection options; default: the local socket. */
  docker?: Docker.DockerOptions;
}

/** The WorkspaceRuntime over a Docker Engine, through dockerode. */
export class DockerRuntime implements WorkspaceRuntime {
  /** The two clients, made at their first use (dockerode is loaded then); shared with scoped copies. */
  private readonly clients: { docker?: Docker; events?: Docker } = {};
  private readonly connection: Docker.DockerOptions | undefined;
  private readonly controlPlaneId: string;
  /** Networks made sure of, by name (see ensureNetwork). */
  private readonly networks = new Map<string, Promise<NetworkState>>();
  /** Whether the engine answers: every call of both clients reports to it (see EngineReachability). */
  readonly reachability: EngineReachability;

  constructor(options: DockerRuntimeOptions) {
    this.reachability = new EngineReachability((failure) => engineAddress(this.docker.modem, failure));
    this.connection = options.docker;
    this.controlPlaneId = options.controlPlaneId;
  }

  /** For calls: each bounded by CALL_TIMEOUT_MS. */
  get docker(): Docker {
    return (this.clients.docker ??= engineClient({ ...this.connection, timeout: CALL_TIMEOUT_MS }, this.reachability));
  }

  /** For the events stream only, which is long-lived and may be quiet for long (a ping watches it instead). */
  private get events(): Docker {
    return (this.clients.events ??= engineClient(this.connection, this.reachability));
  }

  /** This runtime with every engine call kept to `scope` as well (its client's requests: scopedClient). */
  scoped(scope: EngineScope): WorkspaceRuntime {
    const bound = Object.create(this) as DockerRuntime;
    // Made at its first call too: a leader's term is begun before any engine call.
    let client: Docker | undefined;
    Object.defineProperty(bound, 'docker', { get: () => (client ??= scopedClient(this.docker, scope)) });
    return bound;
  }

  /** This engine as the one node: its name, memory and CPUs (Docker's `/info`). */
  async nodes(): Promise<RuntimeNode[]> {
    const info = (await this.docker.info()) as { ID?: string; Name?: string; MemTotal?: number; NCPU?: number };
    return [
      {
        id: info.ID ?? '',
        name: info.Name ?? '',
        address: '',
        state: 'ready',
        availability: 'active',
        memoryBytes: info.MemTotal ?? 0,
        nanoCpus: (info.NCPU ?? 0) * 1e9,
        reservedMemoryBytes: 0,
        reachable: true,
      },
    ];
  }

  setNodeAvailability(): Promise<void> {
    return Promise.reject(new Error('one Docker Engine has no nodes to drain: draining is for RUNTIME=swarm'));
  }

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

  async listContainers(filter: { workspaceId?: string } = {}): Promise<ManagedContainer[]> {
    const extra = filter.workspaceId !== undefined ? [`${LABELS.workspaceId}=${filter.workspaceId}`] : [];
    const list = await this.docker.listContainers({ all: true, filters: { label: this.labelFilters(extra) } });
    return list.map((info) => toManaged(info));
  }

  async ensureVolume(workspace: { workspaceId: string; slug: string }, volume: string): Promise<void> {
    // Creating an existing volume returns it: idempotent by name.
    await this.docker.createVolume({ Name: volume, Labels: this.baseLabels(workspace) });
  }

  async removeVolume(volume: string): Promise<boolean> {
    try {
      await this.docker.getVolume(volume).remove();
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return true;
      // Still mounted by a container (a stopped one, or a run's): left for later.
      if (statusOf(error) === 409) return false;
      throw error;
    }
  }

  async removeVolumes(workspace: { workspaceId: string; slug: string }): Promise<void> {
    const { Volumes } = await this.docker.listVolumes({ filters: { label: this.labelFilters([`${LABELS.workspaceId}=${workspace.workspaceId}`]) } });
    for (const volume of Volumes ?? []) await this.removeVolume(volume.Name);
  }

  async listVolumes(): Promise<{ name: string; workspaceId: string }[]> {
    const { Volumes } = await this.docker.listVolumes({ filters: { label: this.labelFilters() } });
    return (Volumes ?? []).map((volume) => ({ name: volume.Name, workspaceId: volume.Labels?.[LABELS.workspaceId] ?? '' }));
  }

  ensureNetwork(name: string): Promise<NetworkState> {
    let ready = this.networks.get(name);
    if (!ready) {
      ready = this.network(name);
      this.networks.set(name, ready);
      // A failure is not remembered: the next container creation asks the engine again.
      ready.catch(() => this.networks.delete(name));
    }
    return ready;
  }

  /**
   * Inspects the network, creating it isolated when missing (two creators at once: one wins, both
   * see it), then keeps its containers from link-local addresses (src/docker/firewall.ts).
   */
  private async network(name: string): Promise<NetworkState> {
    const inspect = async () => {
      try {
        const info = (await this.docker.getNetwork(name).inspect()) as { Options?: Record<string, string>; IPAM?: { Config?: { Subnet?: string }[] } };
        // IPv4 subnets only: the rules are iptables' (Docker's networks here have no IPv6).
        const subnets = (info.IPAM?.Config ?? []).map((config) => config.Subnet ?? '').filter((subnet) => subnet !== '' && !subnet.includes(':'));
        return { isolated: name === 'none' || info.Options?.[ICC_OPTION] === 'false', subnets };
      } catch (error) {
        if (statusOf(error) === 404) return undefined;
        throw error;
      }
    };
    let created = false;
    let found = await inspect();
    if (!found) {
      try {
        await this.docker.createNetwork({
          Name: name,
          Driver: 'bridge',
          CheckDuplicate: true,
          Options: { [ICC_OPTION]: 'false' },
          Labels: { [MANAGED_LABEL]: 'true' },
        });
        created = true;
      } catch (error) {
        if (statusOf(error) !== 409) throw error;
      }
      found = await inspect();
    }
    if (!found) return { isolated: false, created };
    return { isolated: found.isolated, created, firewall: name === 'none' ? { applied: true } : await blockLinkLocal(found.subnets) };
  }

  async imageExists(image: string): Promise<boolean> {
    try {
      await this.docker.getImage(image).inspect();
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw error;
    }
  }

  async createCodeContainer(spec: CodeContainerSpec): Promise<ManagedContainer> {
    await this.ensureNetwork(spec.network);
    return this.createContainer(names.code(spec.slug), {
      Image: spec.image,
      Env: [`EDITOR_PORT=${spec.editorPort}`],
      Labels: {
        ...this.baseLabels(spec),
        [LABELS.role]: 'code',
        [LABELS.specHash]: spec.specHash,
        [LABELS.restartGeneration]: String(spec.restartGeneration),
        [LABELS.homeVolume]: spec.homeVolume,
      },
      HostConfig: this.hostConfig(spec),
    });
  }

  async createSimContainer(spec: SimContainerSpec): Promise<ManagedContainer> {
    await this.ensureNetwork(spec.network);
    return this.createContainer(names.sim(spec.slug, spec.runId), {
      Image: spec.image,
      Cmd: ['sh', '-c', spec.command],
      WorkingDir: HOME_PATH,
      Env: simEnvironment(spec),
      Labels: { ...this.baseLabels(spec), [LABELS.role]: 'sim', [LABELS.runId]: spec.runId, [LABELS.homeVolume]: spec.homeVolume },
      HostConfig: this.hostConfig(spec),
    });
  }

  private hostConfig(spec: { homeVolume: string; memoryBytes: number; nanoCpus: number; pidsLimit: number; network: string }): Docker.HostConfig {
    return {
      Memory: spec.memoryBytes,
      MemorySwap: spec.memoryBytes,
      ...(spec.nanoCpus > 0 && { NanoCpus: spec.nanoCpus }),
      // Processes and threads together (the pids cgroup): a fork bomb stops there, short of the host's PIDs.
      PidsLimit: spec.pidsLimit,
      NetworkMode: spec.network,
      Mounts: [{ Type: 'volume', Source: spec.homeVolume, Target: HOME_PATH }],
      RestartPolicy: { Name: 'no' },
      // What a container prints is the student's to choose: the engine keeps at most 10 MB of it on disk.
      LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '1' } },
      // An init as PID 1 forwards SIGTERM to the command (a shell as PID 1 ignores it) and reaps zombies.
      Init: true,
      // No capabilities at all, and none to gain through a setuid file: the editor and the simulator
      // run as uid 1000 and need none, and a root process (from an image that runs as root, or a
      // restored setuid file) gets no raw sockets (ARP spoofing a classmate's traffic), no chown, no mounts.
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
    };
  }

  /**
   * Creates a container by name and returns it as a listing would (made as asked: no second call to
   * the engine on a class's Open or Run); a name conflict means it is already there, and it is
   * returned as the engine lists it.
   */
  private async createContainer(name: string, options: Docker.ContainerCreateOptions): Promise<ManagedContainer> {
    try {
      const { id } = await this.docker.createContainer({ name, ...options });
      // Created, not started: no address yet.
      return toManaged({
        Id: id,
        Names: [`/${name}`],
        Labels: options.Labels ?? {},
        State: 'created',
        Created: Math.floor(Date.now() / 1000),
      } as Docker.ContainerInfo);
    } catch (error) {
      if (statusOf(error) === 404 && /no such image/i.test((error as Error).message)) throw new ImageMissingError(options.Image!);
      if (statusOf(error) !== 409) throw error;
    }
    const [container] = (await this.docker.listContainers({ all: true, filters: { name: [`^/${name}$`], label: this.labelFilters() } })).map(toManaged);
    if (!container) throw new Error(`container ${name} exists but is not managed by this control plane`);
    return container;
  }

  async serving(target: ServingTarget, port: number, id?: string): Promise<ServingContainer | undefined> {
    const candidates =
      id !== undefined
        ? [id]
        : (await this.docker.listContainers({ filters: { label: [`${MANAGED_LABEL}=true`, ...targetLabels(target)], status: ['running'] } })).map(
            (container) => container.Id,
          );
    for (const candidate of candidates) {
      let info: Docker.ContainerInspectInfo;
      try {
        info = await this.docker.getContainer(candidate).inspect();
      } catch (error) {
        if (statusOf(error) === 404) continue;
        throw error;
      }
      if (!info.State.Running || !isTargetOf(info.Config.Labels, target)) continue;
      const address = Object.values(info.NetworkSettings.Networks ?? {}).find((network) => network.IPAddress)?.IPAddress;
      if (address) return { id: info.Id, endpoint: `${address}:${port}`, startedAt: info.State.StartedAt };
    }
    return undefined;
  }

  async exitOf(id: string): Promise<ContainerExit | undefined> {
    try {
      const { State } = await this.docker.getContainer(id).inspect();
      return { running: State.Running || State.Restarting, exitCode: State.Running ? null : State.ExitCode, oomKilled: State.OOMKilled };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  async logsTail(id: string, lines: number): Promise<string> {
    try {
      const raw = await this.docker.getContainer(id).logs({ stdout: true, stderr: true, tail: lines, follow: false });
      return demultiplex(raw);
    } catch (error) {
      if (statusOf(error) === 404) return '';
      throw error;
    }
  }

  async followOutput(id: string): Promise<Readable> {
    const output = new PassThrough();
    let raw: NodeJS.ReadableStream;
    try {
      // The events client: no call timeout on a stream that lives as long as the container.
      raw = await this.events.getContainer(id).logs({ stdout: true, stderr: true, follow: true });
    } catch (error) {
      if (statusOf(error) === 404) return (output.end(), output);
      throw error;
    }
    const source = raw as NodeJS.ReadableStream & { destroy(): void };
    this.events.modem.demuxStream(source, output, output);
    source.once('end', () => output.end());
    source.once('error', (error: Error) => output.destroy(error));
    output.once('close', () => source.destroy());
    return output;
  }

  async start(id: string): Promise<void> {
    await tolerate(() => this.docker.getContainer(id).start(), [304]);
  }

  async stop(id: string, timeoutSeconds = 10): Promise<void> {
    await tolerate(() => this.docker.getContainer(id).stop({ t: timeoutSeconds }), [304, 404]);
  }

  async remove(id: string): Promise<void> {
    await tolerate(() => this.docker.getContainer(id).remove({ force: true }), [404, 409]);
  }

  async stats(id: string): Promise<StatsSample | undefined> {
    try {
      const stats = await this.docker.getContainer(id).stats({ stream: false, 'one-shot': true });
      const limit = stats.memory_stats?.limit;
      if (!stats.cpu_stats?.system_cpu_usage || !limit) return undefined;
      const memoryStats = (stats.memory_stats.stats ?? {}) as Record<string, number | undefined>;
      // Docker's CLI subtracts the page cache (cgroup v1: total_inactive_file) from usage.
      const cache = memoryStats.total_inactive_file ?? memoryStats.inactive_file ?? 0;
      return {
        cpuTotalNs: stats.cpu_stats.cpu_usage.total_usage,
        systemNs: stats.cpu_stats.system_cpu_usage,
        onlineCpus: stats.cpu_stats.online_cpus || stats.cpu_stats.cpu_usage.percpu_usage?.length || 1,
        memoryUsageBytes: Math.max(0, (stats.memory_stats.usage ?? 0) - cache),
        memoryLimitBytes: limit,
      };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  async homeUsage(id: string): Promise<HomeUsage | undefined> {
    let exec: Docker.Exec;
    try {
      // -s: one total; -k: KiB of space taken (what fills a disk, not apparent sizes); -x: the home's own filesystem.
      exec = await this.docker.getContainer(id).exec({
        Cmd: ['timeout', String(HOME_MEASURE_SECONDS), 'du', '-skx', HOME_PATH],
        AttachStdout: true,
        AttachStderr: true,
      });
    } catch (error) {
      // Gone (404), or not running (409).
      if (statusOf(error) === 404 || statusOf(error) === 409) return undefined;
      throw error;
    }
    const stream = (await exec.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream;
    const stdout = new BoundedText(4096);
    const stderr = new BoundedText(4096);
    this.docker.modem.demuxStream(stream, stdout, stderr);
    await new Promise<void>((resolve, reject) => {
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', reject);
    });
    // The exit code is set as the stream ends; a moment later at most.
    let exitCode: number | null = null;
    for (let attempt = 0; attempt < 20 && exitCode === null; attempt++) {
      const info = await exec.inspect();
      if (!info.Running) exitCode = info.ExitCode;
      else await sleep(50);
    }
    return duUsage(stdout.text, stderr.text, exitCode);
  }

  async exportVolume(volume: string, workspace: { workspaceId: string; slug: string }, image: string, options: { path?: string } = {}): Promise<Readable> {
    // A volume mount of a missing volume would create it, and an empty archive would look like a backup.
    if (!(await this.volumeExists(volume))) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    if (options.path !== undefined && (options.path === '' || options.path.split('/').some((part) => part === '' || part === '.' || part === '..')))
      throw new Error(`an export names a plain relative path, not ${JSON.stringify(options.path)}`);
    const helper = await this.createHelper(volume, workspace, image, { readOnly: true });
    let archive: Readable;
    try {
      archive = (await helper.getArchive({ path: options.path === undefined ? HELPER_MOUNT : path.posix.join(HELPER_MOUNT, options.path) })) as Readable;
    } catch (error) {
      await this.remove(helper.id).catch(() => undefined);
      if (options.path !== undefined && statusOf(error) === 404) throw NotFoundError('home_path_not_found', `Nothing is at ${options.path} in the home.`);
      throw error;
    }
    // The helper goes before the stream reports its end, so a finished export has left nothing behind.
    const removal = () => this.remove(helper.id);
    const out = new PassThrough();
    const removeAtEnd = async function* (chunks: AsyncIterable<Buffer>) {
      for await (const chunk of chunks) yield chunk;
      await removal();
    };
    // Destroying `out` (the caller gave up) aborts the engine's response too.
    pipeline(archive, removeAtEnd, out).catch(() => removal().catch(() => undefined));
    return out;
  }

  async importVolume(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    tar: Readable,
    then?: { path: string; tar: Readable },
  ): Promise<void> {
    if (then && (then.path === '' || then.path.split('/').some((part) => part === '' || part === '.' || part === '..')))
      throw new Error(`an import names a plain relative path, not ${JSON.stringify(then.path)}`);
    try {
      await this.docker.createVolume({ Name: volume, Labels: this.baseLabels(workspace) });
      await this.checkManaged(volume);
      const helper = await this.createHelper(volume, workspace, image, { readOnly: false });
      try {
        // A stream its writer gave up on while the volume and helper were made would never end the
        // upload, which would then wait out the call's timeout.
        if (tar.destroyed) throw tar.errored ?? new Error('The archive stream ended before its upload began.');
        // No copyUIDGID: with it the engine chowns every entry to the container's user (the image's
        // USER, when it has one); without it, as here, the owners in the tar are kept.
        await helper.putArchive(tar, { path: HELPER_MOUNT_PARENT });
        if (then) {
          if (then.tar.destroyed) throw then.tar.errored ?? new Error('The archive stream ended before its upload began.');
          await helper.putArchive(then.tar, { path: path.posix.join(HELPER_MOUNT, then.path) });
        }
      } catch (error) {
        await this.remove(helper.id).catch(() => undefined);
        throw error;
      }
      await this.remove(helper.id);
    } catch (error) {
      tar.destroy();
      then?.tar.destroy();
      throw error;
    }
  }

  async inspectHome(volume: string, workspace: { workspaceId: string; slug: string }, image: string, request: HomeRequest): Promise<HomeAnswer> {
    if (request.op === 'read' && !(Number.isSafeInteger(request.maxBytes) && request.maxBytes >= 0))
      throw new Error(`a look reads a whole number of bytes, not ${request.maxBytes}`);
    // A volume mount of a missing volume would create it, and its empty home would answer.
    if (!(await this.volumeExists(volume))) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    const limit = request.op === 'read' ? request.maxBytes : HOME_LIST_MAX + 1;
    // The path is an argument of our script, never part of it.
    const helper = await this.homeHelper(
      volume,
      workspace,
      image,
      ['sh', '-c', LOOK_SCRIPT, 'inspect-home', HOME_PATH, request.op, request.path, String(limit)],
      {
        readOnly: true,
      },
    );
    const stdout = new BoundedText(limit * (request.op === 'read' ? 1 : LOOK_LINE_BYTES) + LOOK_LINE_BYTES);
    const stderr = new BoundedText(4096);
    const exitCode = await this.runLook(helper, stdout, stderr);
    return lookAnswer(request, stdout.bytes, exitCode, stderr.text);
  }

  async statHome(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    paths: readonly string[],
  ): Promise<Map<string, HomeEntry['kind'] | 'missing'>> {
    if (!(await this.volumeExists(volume))) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    for (const each of paths)
      if (each === '' || each.split('/').some((part) => part === '' || part === '.' || part === '..'))
        throw new Error(`a home's stat names plain relative paths, not ${JSON.stringify(each)}`);
    const helper = await this.createHelper(volume, workspace, image, { readOnly: true });
    try {
      const kinds = new Map<string, HomeEntry['kind'] | 'missing'>();
      for (const each of paths) {
        // Under something stat'd here that is not a folder, nothing is there (the engine would answer 500).
        if ([...kinds].some(([above, kind]) => kind !== 'dir' && each.startsWith(`${above}/`))) {
          kinds.set(each, 'missing');
          continue;
        }
        let answer: { headers: Record<string, string | string[] | undefined>; resume(): void };
        try {
          answer = (await helper.infoArchive({ path: path.posix.join(HELPER_MOUNT, each) })) as typeof answer;
        } catch (error) {
          if (statusOf(error) !== 404) throw error;
          kinds.set(each, 'missing');
          continue;
        }
        answer.resume();
        const header = answer.headers['x-docker-container-path-stat'];
        const stat = JSON.parse(Buffer.from(String(header), 'base64').toString('utf8')) as { mode: number };
        // Go's os.FileMode: the type bits are the high ones (ModeDir 1<<31, ModeSymlink 1<<27, and the others above the permissions).
        const mode = stat.mode >>> 0;
        kinds.set(each, mode & 0x80000000 ? 'dir' : mode & 0x08000000 ? 'link' : (mode & 0xfff00000) === 0 ? 'file' : 'other');
      }
      return kinds;
    } finally {
      await this.remove(helper.id).catch(() => undefined);
    }
  }

  async removeHomeFolder(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    relative: string,
  ): Promise<'removed' | 'missing' | 'outside'> {
    if (!(await this.volumeExists(volume))) throw NotFoundError('volume_not_found', `Volume ${volume} does not exist.`);
    const helper = await this.homeHelper(volume, workspace, image, ['sh', '-c', REMOVE_SCRIPT, 'remove-home-folder', HOME_PATH, relative], { readOnly: false });
    const stdout = new BoundedText(LOOK_LINE_BYTES);
    const stderr = new BoundedText(4096);
    const exitCode = await this.runLook(helper, stdout, stderr);
    const said = stdout.bytes.toString('utf8').trim();
    if (exitCode !== 0 || !(said === 'removed' || said === 'missing' || said === 'outside'))
      throw new Error(`removing ${relative} from the home failed (exit code ${exitCode}): ${stderr.text.trim().slice(0, 300) || said || 'no answer'}`);
    return said;
  }

  /**
   * A helper container for one look at (or one change of) a home: made from `image` with the volume
   * at HOME_PATH (read-only unless asked), user 1000:1000, no network, no capabilities, a read-only
   * root, LOOK_HELPER_LIMITS, no log kept of what it prints, removed by the engine as it ends, and
   * `command` run under timeout(1) (LOOK_HELPER_SECONDS). Not started (runLook starts it).
   */
  private async homeHelper(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    command: string[],
    options: { readOnly: boolean },
  ): Promise<Docker.Container> {
    try {
      return await this.docker.createContainer({
        name: `ws-${workspace.slug}-look-${randomBytes(4).toString('hex')}`,
        Image: image,
        User: '1000:1000',
        WorkingDir: '/',
        Entrypoint: ['timeout', String(LOOK_HELPER_SECONDS), ...command],
        Cmd: [],
        Labels: { ...this.baseLabels(workspace), [LABELS.role]: 'backup' },
        NetworkDisabled: true,
        HostConfig: {
          NetworkMode: 'none',
          // Removed by the engine as it ends, whether or not the control plane is there to see it.
          AutoRemove: true,
          RestartPolicy: { Name: 'no' },
          // timeout(1) must not be PID 1, which ignores the SIGTERM it sends.
          Init: true,
          ReadonlyRootfs: true,
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges:true'],
          ...LOOK_HELPER_LIMITS,
          MemorySwap: LOOK_HELPER_LIMITS.Memory,
          // What it prints is the student's file: it goes to us alone, never to the engine's logs.
          LogConfig: { Type: 'none', Config: {} },
          Mounts: [
            {
              Type: 'volume',
              Source: volume,
              Target: HOME_PATH,
              ReadOnly: options.readOnly,
              VolumeOptions: { NoCopy: true } as Docker.MountSettings['VolumeOptions'],
            },
          ],
        },
      });
    } catch (error) {
      if (statusOf(error) === 404 && /no such image/i.test((error as Error).message)) throw new ImageMissingError(image);
      throw error;
    }
  }

  /**
   * Starts a look's helper and collects what it prints until it is gone (its output attached and
   * the wait for its removal registered before it starts, so that neither misses its end), within
   * LOOK_TIMEOUT_MS, and answers its exit code. On failure or timeout it is removed, and this throws.
   */
  private async runLook(helper: Docker.Container, stdout: Writable, stderr: Writable): Promise<number> {
    const streams: Readable[] = [];
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new Error(`looking at the home took over ${LOOK_TIMEOUT_MS / 1000} s (the engine or its disk is slow); the look was ended`)),
        LOOK_TIMEOUT_MS,
      );
    });
    const run = async () => {
      const output = (await helper.attach({ stream: true, stdout: true, stderr: true })) as unknown as Readable;
      streams.push(output);
      this.docker.modem.demuxStream(output, stdout, stderr);
      const printed = new Promise<void>((resolve, reject) => {
        output.once('end', resolve);
        output.once('close', resolve);
        output.once('error', reject);
      });
      // Its answer's header comes once the wait is registered; its body once the helper is removed.
      const waiting = await new Promise<Readable>((resolve, reject) =>
        this.docker.modem.dial(
          {
            path: `/containers/${helper.id}/wait?`,
            method: 'POST',
            isStream: true,
            statusCodes: { 200: true, 400: 'bad parameter', 404: 'no such container', 500: 'server error' },
            options: { condition: 'removed' },
          },
          (error, stream) => (error ? reject(error) : resolve(stream as Readable)),
        ),
      );
      streams.push(waiting);
      await helper.start();
      const chunks: Buffer[] = [];
      for await (const chunk of waiting) chunks.push(chunk as Buffer);
      await printed;
      const answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { StatusCode?: number; Error?: { Message?: string } | null };
      if (answer.Error?.Message) throw new Error(`the look's helper failed: ${answer.Error.Message}`);
      return answer.StatusCode ?? -1;
    };
    const running = run();
    // Past the timeout, its end (a failure, once its streams are destroyed) is nobody's.
    running.catch(() => undefined);
    try {
      return await Promise.race([running, timeout]);
    } catch (error) {
      for (const stream of streams) stream.destroy();
      await this.remove(helper.id).catch(() => undefined);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  async volumeExists(volume: string): Promise<boolean> {
    try {
      await this.docker.getVolume(volume).inspect();
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw error;
    }
  }

  async removeVolumeNamed(volume: string): Promise<void> {
    if (!(await this.volumeExists(volume))) return;
    await this.checkManaged(volume);
    await tolerate(() => this.docker.getVolume(volume).remove(), [404]);
  }

  /** Throws `volume_not_managed` unless the volume carries this control plane's labels. */
  private async checkManaged(volume: string): Promise<void> {
    const { Labels } = await this.docker.getVolume(volume).inspect();
    if (Labels?.[MANAGED_LABEL] === 'true' && Labels[CONTROL_PLANE_LABEL] === this.controlPlaneId) return;
    throw ConflictError('volume_not_managed', `Volume ${volume} is not managed by this control plane; it was left alone.`);
  }

  /**
   * Creates (never starts) a backup helper: the volume at the home mount point, no network. Copying
   * the image's home into an empty volume (Docker's default for a new volume) is turned off: a
   * restore brings exactly the backup's files, and an export of an empty volume stays empty.
   */
  private async createHelper(
    volume: string,
    workspace: { workspaceId: string; slug: string },
    image: string,
    { readOnly }: { readOnly: boolean },
  ): Promise<Docker.Container> {
    return this.docker.createContainer({
      name: `ws-${workspace.slug}-backup-${randomBytes(4).toString('hex')}`,
      Image: image,
      // Never started; should anything start it anyway, this runs nothing of the image's or the student's.
      Entrypoint: ['/nonexistent/backup-helper-never-runs'],
      Cmd: [],
      Labels: { ...this.baseLabels(workspace), [LABELS.role]: 'backup' },
      NetworkDisabled: true,
      HostConfig: {
        NetworkMode: 'none',
        RestartPolicy: { Name: 'no' },
        Mounts: [
          {
            Type: 'volume',
            Source: volume,
            Target: HELPER_MOUNT,
            ReadOnly: readOnly,
            // The engine needs only NoCopy; the type lists every volume option as required.
            VolumeOptions: { NoCopy: true } as Docker.MountSettings['VolumeOptions'],
          },
        ],
      },
    });
  }

  watch(handlers: { onEvent(event: RuntimeEvent): void; onConnect(): void; onDisconnect(error: Error): void }): EventSubscription {
    const abort = new AbortController();
    let current: NodeJS.ReadableStream | undefined;
    const drop = () => (current as { destroy?: () => void } | undefined)?.destroy?.();
    // A daemon that stops answering may leave the stream open but silent: a failed or hung ping drops it.
    const ping = setInterval(() => {
      const hung = setTimeout(drop, PING_INTERVAL_MS);
      // Ended with the subscription: a ping to a hung engine is not left open for its whole timeout.
      // (dockerode takes the options its types leave out.)
      (this.docker.ping as (options: { abortSignal: AbortSignal }) => Promise<unknown>).call(this.docker, { abortSignal: abort.signal }).then(
        () => clearTimeout(hung),
        () => (clearTimeout(hung), drop()),
      );
    }, PING_INTERVAL_MS);
    ping.unref();
    const run = async () => {
      let delay = 250;
      while (!abort.signal.aborted) {
        try {
          const stream = await this.events.getEvents({ filters: { type: ['container'], label: this.labelFilters() }, abortSignal: abort.signal });
          current = stream;
          delay = 250;
          handlers.onConnect();
          const lines = readline.createInterface({ input: stream });
          // readline re-emits the stream's errors (the daemon going away: "aborted"); the close below handles them.
          lines.on('error', () => undefined);
          const ended = new Promise<void>((resolve) => {
            stream.once('end', resolve);
            stream.once('close', resolve);
            stream.once('error', () => resolve());
          });
          lines.on('line', (line) => {
            const event = parseEvent(line);
            if (event) handlers.onEvent(event);
          });
          await ended;
          lines.close();
          if (!abort.signal.aborted) handlers.onDisconnect(new Error('the Docker events stream ended'));
        } catch (error) {
          if (abort.signal.aborted) break;
          handlers.onDisconnect(error as Error);
        }
        await sleep(delay, undefined, { signal: abort.signal }).catch(() => undefined);
        delay = Math.min(delay * 2, 5000);
      }
    };
    void run();
    return {
      close: () => {
        clearInterval(ping);
        abort.abort();
        drop();
      },
    };
  }
}

function toManaged(info: Docker.ContainerInfo): ManagedContainer {
  const labels = info.Labels ?? {};
  const networks = Object.values(info.NetworkSettings?.Networks ?? {});
  return {
    id: info.Id,
    name: (info.Names?.[0] ?? '').replace(/^\//, ''),
    role: (labels[LABELS.role] ?? 'code') as ContainerRole,
    workspaceId: labels[LABELS.workspaceId] ?? '',
    slug: labels[LABELS.workspaceSlug] ?? '',
    runId: labels[LABELS.runId],
    specHash: labels[LABELS.specHash] ?? '',
    restartGeneration: Number(labels[LABELS.restartGeneration] ?? 0),
    homeVolume: labels[LABELS.homeVolume] ?? names.volume(labels[LABELS.workspaceSlug] ?? ''),
    state: info.State,
    address: networks.find((network) => network.IPAddress)?.IPAddress || undefined,
    createdAt: info.Created * 1000,
  };
}

/** A writable that keeps the first `limit` bytes written to it and drops the rest (it never holds up its writer). */
class BoundedText extends Writable {
  private readonly chunks: Buffer[] = [];
  private readonly limit: number;
  private kept = 0;
  constructor(limit: number) {
    super();
    this.limit = limit;
  }
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    if (this.kept < this.limit) {
      this.chunks.push(chunk.subarray(0, this.limit - this.kept));
      this.kept += Math.min(chunk.length, this.limit - this.kept);
    }
    done();
  }
  get bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
  get text(): string {
    return this.bytes.toString('utf8');
  }
}

/**
 * A home's usage from what `timeout … du -sk <home>` said: its total (KiB), and why part of the
 * home was not counted: a folder it could not read (made unreadable by its student; named, under
 * the home), or the measure cut short or killed (no total). Files that vanish while it walks (a
 * build cleaning up) are no problem. An image without `du` or `timeout` (exit 126 or 127, "not
 * found") is the operator's problem, not the student's: it throws, saying so; so does a start that
 * failed otherwise (126 or 127 with nothing of the kind said: seen on a machine busy with a class's
 * 30 editors starting), without blaming the image.
 */
export function duUsage(stdout: string, stderr: string, exitCode: number | null): HomeUsage {
  if (exitCode === 126 || exitCode === 127) {
    const said = stderr.trim().slice(0, 200);
    // Only a program that is not there is the image's fault; a start that failed on a busy machine (126 with nothing said) is tried again.
    if (/not found|no such file/i.test(stderr)) throw new Error(`cannot measure homes: the workspace image has no du or timeout (${said})`);
    throw new Error(`du could not be started in the editor's container (exit code ${exitCode}${said ? `: ${said}` : ''}); the next measure tries again`);
  }
  const total = /^(\d+)\s/m.exec(stdout);
  if (!total)
    return {
      bytes: 0,
      problem: `measuring it was cut short (exit code ${exitCode ?? 'unknown'}): it may hold too many files to count within ${HOME_MEASURE_SECONDS} s`,
    };
  const bytes = Number(total[1]) * 1024;
  if (!/Permission denied/.test(stderr)) return { bytes };
  const unreadable = /'([^'\n]*)': Permission denied/.exec(stderr)?.[1];
  // The student's own folder name, for their message and the operator's log: no control character (a forged log line, a terminal's escape).
  const where = unreadable?.startsWith(`${HOME_PATH}/`)
    ? unreadable
        .slice(HOME_PATH.length + 1)
        .slice(0, 200)
        .replaceAll(/\p{Cc}/gu, '?')
    : undefined;
  return { bytes, problem: where ? `the folder ${where} cannot be read` : 'a folder in it cannot be read' };
}

/**
 * What a look's helper printed (LOOK_SCRIPT), as its answer. A listing's line that is not one of
 * its entries is dropped: the rest of a name that held a newline, which cannot hold the `./` every
 * entry's line has (a name holds no slash); so is `.` or `..`. Names are read as UTF-8.
 */
function lookAnswer(request: HomeRequest, printed: Buffer, exitCode: number, stderr: string): HomeAnswer {
  const newline = printed.indexOf(0x0a);
  const header = newline < 0 ? '' : printed.subarray(0, newline).toString('utf8');
  const body = printed.subarray(newline + 1);
  const failed = () => new Error(`looking at the home failed (exit code ${exitCode}): ${stderr.trim().slice(0, 300) || 'no answer'}`);
  if (exitCode !== 0) throw failed();
  if (header === 'missing' || header === 'outside' || header === 'not_a_directory' || header === 'not_a_file') return { outcome: header };
  if (header === 'unreadable') throw new HomeUnreadableError(request.path);
  const read = /^read (\d+)$/.exec(header);
  if (request.op === 'read' && read) return { outcome: 'read', size: Number(read[1]), bytes: body.subarray(0, request.maxBytes) };
  if (request.op !== 'list' || header !== 'listed') throw failed();
  const lines = body.toString('utf8').split('\n');
  // The last line ends the output, with nothing after it.
  lines.pop();
  const entries: HomeEntry[] = [];
  for (const line of lines.slice(0, HOME_LIST_MAX)) {
    const entry = /^([0-9a-f]+) (\d+) \.\/([^/]+)$/.exec(line);
    if (!entry || entry[3] === '.' || entry[3] === '..') continue;
    const kind = entryKind(parseInt(entry[1]!, 16));
    entries.push({ name: entry[3]!, kind, size: kind === 'dir' ? 0 : Number(entry[2]) });
  }
  return { outcome: 'listed', entries, truncated: lines.length > HOME_LIST_MAX };
}

/** A directory entry's kind, from its mode's file type bits (S_IFMT). */
function entryKind(mode: number): HomeEntry['kind'] {
  switch (mode & 0o170000) {
    case 0o100000:
      return 'file';
    case 0o040000:
      return 'dir';
    case 0o120000:
      return 'link';
    default:
      return 'other';
  }
}

/** The text of a non-TTY container log: 8-byte frame headers (stream, size) stripped. */
function demultiplex(raw: Buffer): string {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= raw.length) {
    const size = raw.readUInt32BE(offset + 4);
    parts.push(raw.subarray(offset + 8, offset + 8 + size));
    offset += 8 + size;
  }
  return Buffer.concat(parts).toString('utf8');
}

function parseEvent(line: string): RuntimeEvent | undefined {
  try {
    const event = JSON.parse(line) as { Action?: string; Actor?: { Attributes?: Record<string, string> } };
    const attributes = event.Actor?.Attributes ?? {};
    const workspaceId = attributes[LABELS.workspaceId];
    return workspaceId ? { workspaceId, runId: attributes[LABELS.runId], action: event.Action ?? '' } : undefined;
  } catch {
    return undefined;
  }
}
