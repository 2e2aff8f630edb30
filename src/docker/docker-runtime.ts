import readline from 'node:readline';
import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import Docker from 'dockerode';
import {
  LABELS,
  MANAGED_LABEL,
  names,
  type CodeContainerSpec,
  type ContainerExit,
  type ContainerRole,
  type EventSubscription,
  type ManagedContainer,
  type RuntimeEvent,
  type SimContainerSpec,
  type StatsSample,
  type WorkspaceRuntime,
} from './runtime.ts';

/** Label scoping one control plane's objects, so that two of them (or test runs) can share an engine. */
export const CONTROL_PLANE_LABEL = 'service.control-plane';

/** Where the home volume is mounted in workspace containers. */
export const HOME_PATH = '/home/student';

/** How often the events stream is checked with a ping; a failed ping drops and reconnects it. */
const PING_INTERVAL_MS = 5000;

/** The longest any single engine call may take (a stop waits up to its own timeout inside it): a hung daemon fails the reconcile, which is retried. */
const CALL_TIMEOUT_MS = 60_000;

/** The HTTP status of a dockerode error, if any. */
function statusOf(error: unknown): number | undefined {
  const status = (error as { statusCode?: unknown })?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** Runs `action`, treating the listed HTTP statuses (already there, already gone, not modified) as success. */
async function tolerate(action: () => Promise<unknown>, statuses: number[]): Promise<void> {
  try {
    await action();
  } catch (error) {
    if (!statuses.includes(statusOf(error) ?? -1)) throw error;
  }
}

/**
 * A dockerode client that opens a new connection for every call. Node's default agent keeps idle
 * sockets for 5 s, and a call made just as one of them times out fails with "socket hang up" (a
 * 5 s ping hit that every third time). A local socket's connect costs far less than any engine call.
 */
export function engineClient(options: Docker.DockerOptions = {}): Docker {
  const docker = new Docker(options);
  // docker-modem resolves the protocol (a socket, or DOCKER_HOST with TLS) and passes its `agent` on
  // to http.request or https.request, which each take only their own kind (SSH brings its own).
  const modem = docker.modem as { protocol?: string; agent?: http.Agent };
  modem.agent ??= modem.protocol === 'https' ? new https.Agent({ keepAlive: false }) : new http.Agent({ keepAlive: false });
  return docker;
}

export interface DockerRuntimeOptions {
  /** Value of the control-plane label on everything this instance creates and lists. */
  controlPlaneId: string;
  /** dockerode connection options; default: the local socket. */
  docker?: Docker.DockerOptions;
}

/** The WorkspaceRuntime over a Docker Engine, through dockerode. */
export class DockerRuntime implements WorkspaceRuntime {
  /** For calls: each bounded by CALL_TIMEOUT_MS. */
  readonly docker: Docker;
  /** For the events stream only, which is long-lived and may be quiet for long (a ping watches it instead). */
  private readonly events: Docker;
  private readonly controlPlaneId: string;

  constructor(options: DockerRuntimeOptions) {
    this.docker = engineClient({ ...options.docker, timeout: CALL_TIMEOUT_MS });
    this.events = engineClient(options.docker);
    this.controlPlaneId = options.controlPlaneId;
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

  async ensureVolume(workspace: { workspaceId: string; slug: string }): Promise<void> {
    // Creating an existing volume returns it: idempotent by name.
    await this.docker.createVolume({ Name: names.volume(workspace.slug), Labels: this.baseLabels(workspace) });
  }

  async removeVolume(slug: string): Promise<void> {
    await tolerate(() => this.docker.getVolume(names.volume(slug)).remove(), [404]);
  }

  async createCodeContainer(spec: CodeContainerSpec): Promise<ManagedContainer> {
    return this.createContainer(names.code(spec.slug), {
      Image: spec.image,
      Env: [`EDITOR_PORT=${spec.editorPort}`],
      Labels: {
        ...this.baseLabels(spec),
        [LABELS.role]: 'code',
        [LABELS.specHash]: spec.specHash,
        [LABELS.restartGeneration]: String(spec.restartGeneration),
      },
      HostConfig: this.hostConfig(spec),
    });
  }

  async createSimContainer(spec: SimContainerSpec): Promise<ManagedContainer> {
    return this.createContainer(names.sim(spec.slug, spec.runId), {
      Image: spec.image,
      Cmd: ['sh', '-c', spec.command],
      WorkingDir: HOME_PATH,
      Env: [`NT4_PORT=${spec.nt4Port}`],
      Labels: { ...this.baseLabels(spec), [LABELS.role]: 'sim', [LABELS.runId]: spec.runId },
      HostConfig: this.hostConfig(spec),
    });
  }

  private hostConfig(spec: { slug: string; memoryBytes: number; network: string }): Docker.HostConfig {
    return {
      Memory: spec.memoryBytes,
      MemorySwap: spec.memoryBytes,
      NetworkMode: spec.network,
      Mounts: [{ Type: 'volume', Source: names.volume(spec.slug), Target: HOME_PATH }],
      RestartPolicy: { Name: 'no' },
      // An init as PID 1 forwards SIGTERM to the command (a shell as PID 1 ignores it) and reaps zombies.
      Init: true,
    };
  }

  /** Creates a container by name; a name conflict means it is already there, and it is returned. */
  private async createContainer(name: string, options: Docker.ContainerCreateOptions): Promise<ManagedContainer> {
    try {
      await this.docker.createContainer({ name, ...options });
    } catch (error) {
      if (statusOf(error) !== 409) throw error;
    }
    const [container] = (await this.docker.listContainers({ all: true, filters: { name: [`^/${name}$`], label: this.labelFilters() } })).map(toManaged);
    if (!container) throw new Error(`container ${name} exists but is not managed by this control plane`);
    return container;
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
      const raw = (await this.docker.getContainer(id).logs({ stdout: true, stderr: true, tail: lines, follow: false })) as Buffer;
      return demultiplex(raw);
    } catch (error) {
      if (statusOf(error) === 404) return '';
      throw error;
    }
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

  watch(handlers: { onEvent(event: RuntimeEvent): void; onConnect(): void; onDisconnect(error: Error): void }): EventSubscription {
    const abort = new AbortController();
    let current: NodeJS.ReadableStream | undefined;
    const drop = () => (current as { destroy?: () => void } | undefined)?.destroy?.();
    // A daemon that stops answering may leave the stream open but silent: a failed or hung ping drops it.
    const ping = setInterval(() => {
      const hung = setTimeout(drop, PING_INTERVAL_MS);
      this.docker.ping().then(
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
    state: info.State,
    address: networks.find((network) => network.IPAddress)?.IPAddress || undefined,
    createdAt: info.Created * 1000,
  };
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
