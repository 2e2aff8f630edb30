/**
 * Connections to editors and simulators, each made only to an address verified to be the live
 * container it is meant for. A recorded endpoint (`workspaces.editor_endpoint`, `runs.sim_endpoint`)
 * is only where a container was: once it is gone, Docker gives its address (or a swarm node its
 * published port) to the next container, which may be another student's; a record that could not
 * be brought up to date (its writer failed, or has not run yet) would then lead one student's
 * browser into another's editor or simulator. So before a connection is used, the engine is asked
 * which container of that workspace (or run) runs and where it serves (`serving`: its labels, its
 * address, when it started), and after the TCP handshake it is asked again: the same container,
 * at the same address, not started again since, means that the handshake reached it. Any other
 * answer closes the connection unused.
 *
 * The first reading is kept (per workspace editor, per run) and reused while the record names the
 * same endpoint; the reading after a handshake is always fresh, and shared by the handshakes that
 * completed before it began (a burst of connections costs one engine call, not one each).
 */
import net from 'node:net';
import type { RuntimeWorkloads, ServingContainer, ServingTarget } from '../../src/docker/runtime.ts';
import type { Logger } from '../../src/log.ts';
import type { Metrics } from '../../src/metrics.ts';
import { Fold } from '../../src/fold.ts';

/** The most readings kept (editors and runs of this process's life): past it they are read again. */
const MAX_KNOWN = 10_000;

/** Which upstream a connection is for (the metric's label): the editor, the simulator's NetworkTables, or its robot's HALSim WebSocket. */
export type UpstreamKind = 'vscode' | 'nt4' | 'halsim';

export interface UpstreamsDeps {
  /** The engine, for reads only. */
  runtime: Pick<RuntimeWorkloads, 'serving'>;
  /** The container ports the editor (EDITOR_PORT), the simulator's NetworkTables (NT4_PORT) and its robot's HALSim WebSocket (HALSIM_PORT) listen on. */
  ports: Record<UpstreamKind, number>;
  /** How long a TCP handshake may take. */
  connectTimeoutMs: number;
  metrics: Metrics;
  log: Logger;
}

/** The address is not (or no longer) where the live container of the workspace or run serves: nothing was sent there. */
export class UnverifiedUpstreamError extends Error {
  readonly code = 'UPSTREAM_UNVERIFIED';
  constructor(endpoint: string) {
    super(`${endpoint} is not the live container's address`);
    this.name = 'UnverifiedUpstreamError';
  }
}

/** A reading after handshakes: valid for every handshake that completed before `tick`. */
interface Confirmation {
  tick: number;
  reading: Promise<ServingContainer | undefined>;
}

/** Verified connections to editors and simulators (see the file comment). */
export class Upstreams {
  private readonly deps: UpstreamsDeps;
  /** The last verified reading of each target (`code:<workspace id>`, `run:<run id>:<upstream>`). */
  private readonly known = new Map<string, ServingContainer>();
  /** Readings in flight before a connection, by target (concurrent connections share one). */
  private readonly lookups = new Map<string, Promise<ServingContainer | undefined>>();
  /** The newest reading after handshakes, by target. */
  private readonly confirmations = new Map<string, Confirmation>();
  /** Orders handshakes and readings (see Confirmation). */
  private tick = 0;
  /** One log line a minute per target refused. */
  private readonly fold = new Fold();

  constructor(deps: UpstreamsDeps) {
    this.deps = deps;
  }

  /**
   * A TCP connection to `endpoint`, connected, for `target` (`upstream` says which port of its
   * container), once the engine says that the target's live container serves there and still did
   * after the handshake. Fails with UnverifiedUpstreamError when it does not (the connection, if
   * made, is closed unused), or with the connection's own error.
   *
   * `endpoint` is what is recorded of the target: the editor's endpoint, or a run's (its
   * NetworkTables port). The robot's HALSim port is recorded nowhere: for `halsim` the connection
   * goes where the engine says that port is served, on the recorded host (the same container's
   * address; on a swarm, its node's), and to no other.
   */
  async connect(target: ServingTarget, upstream: UpstreamKind, endpoint: string): Promise<net.Socket> {
    const key = keyOf(target, upstream);
    const before = await this.reading(key, target, upstream, endpoint);
    if (!before || !recordedAt(before.endpoint, endpoint, upstream)) throw this.unverified(key, target, upstream, endpoint);
    const socket = await tcpConnect(before.endpoint, this.deps.connectTimeoutMs);
    const connectedAt = ++this.tick;
    const after = await this.confirm(key, target, upstream, before.id, connectedAt).catch((error: unknown) => {
      socket.destroy();
      throw error;
    });
    if (after?.endpoint !== before.endpoint || after.startedAt !== before.startedAt) {
      socket.destroy();
      throw this.unverified(key, target, upstream, endpoint);
    }
    if (socket.destroyed) throw Object.assign(new Error(`the connection to ${endpoint} was closed while it was verified`), { code: 'ECONNRESET' });
    return socket;
  }

  /** Forgets what is known of a workspace's editor (it was stopped, restarted or deleted): the next connection reads afresh. */
  forget(workspaceId: string): void {
    this.known.delete(keyOf({ workspaceId }, 'vscode'));
  }

  /** The kept reading of a target when it matches the recorded `endpoint`, else a fresh one (shared by concurrent callers). */
  private async reading(key: string, target: ServingTarget, upstream: UpstreamKind, endpoint: string): Promise<ServingContainer | undefined> {
    const known = this.known.get(key);
    if (known && recordedAt(known.endpoint, endpoint, upstream)) return known;
    let lookup = this.lookups.get(key);
    if (!lookup) {
      lookup = this.deps.runtime.serving(target, this.deps.ports[upstream]).finally(() => this.lookups.delete(key));
      this.lookups.set(key, lookup);
    }
    const found = await lookup;
    if (found) this.remember(key, found);
    else this.known.delete(key);
    return found;
  }

  /** A reading of container `id` begun after the handshake numbered `connectedAt` (one in flight or done is shared). */
  private async confirm(key: string, target: ServingTarget, upstream: UpstreamKind, id: string, connectedAt: number): Promise<ServingContainer | undefined> {
    let confirmation = this.confirmations.get(key);
    if (!confirmation || confirmation.tick <= connectedAt) {
      confirmation = { tick: ++this.tick, reading: this.deps.runtime.serving(target, this.deps.ports[upstream], id) };
      this.confirmations.set(key, confirmation);
      // Kept only while it is the newest: a target never connected to again leaves nothing behind.
      const settled = () => this.confirmations.get(key) === confirmation && this.confirmations.delete(key);
      confirmation.reading.then(settled, settled);
    }
    const after = await confirmation.reading;
    if (after?.id === id) this.remember(key, after);
    else this.known.delete(key);
    return after?.id === id ? after : undefined;
  }

  /**
   * Keeps a target's reading. A run's key is never asked for again once it ended, so the map is
   * emptied past MAX_KNOWN (only a cost: every reading is checked again after a handshake anyway).
   */
  private remember(key: string, reading: ServingContainer): void {
    if (this.known.size >= MAX_KNOWN && !this.known.has(key)) this.known.clear();
    this.known.set(key, reading);
  }

  /** Counts and logs a refused address, and forgets the target's reading. */
  private unverified(key: string, target: ServingTarget, upstream: UpstreamKind, endpoint: string): UnverifiedUpstreamError {
    this.known.delete(key);
    this.deps.metrics.proxyUpstreamUnverified.inc({ upstream });
    const repeats = this.fold.take(key);
    if (repeats !== undefined)
      this.deps.log.warning(
        { workspaceId: target.workspaceId, runId: target.runId, upstream, endpoint, repeats },
        'refused to connect to a recorded address that is not where the live container serves (its record is out of date)',
      );
    return new UnverifiedUpstreamError(endpoint);
  }
}

/** A reading's key: a workspace's editor, or one port of a run's simulator (each port is read on its own). */
function keyOf(target: ServingTarget, upstream: UpstreamKind): string {
  return target.runId === undefined ? `code:${target.workspaceId}` : `run:${target.runId}:${upstream}`;
}

/**
 * Whether the engine's `served` endpoint is the one `recorded`: the same for the port the record is
 * of, the same host for the robot's HALSim port, which is recorded nowhere (see Upstreams.connect).
 */
function recordedAt(served: string, recorded: string, upstream: UpstreamKind): boolean {
  if (upstream !== 'halsim') return served === recorded;
  return served.slice(0, served.lastIndexOf(':')) === recorded.slice(0, recorded.lastIndexOf(':'));
}

/** A TCP connection to `host:port`, once connected (Nagle off), or its error; it fails after `timeoutMs`. */
function tcpConnect(endpoint: string, timeoutMs: number): Promise<net.Socket> {
  const at = endpoint.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: endpoint.slice(0, at), port: Number(endpoint.slice(at + 1)), noDelay: true, timeout: timeoutMs });
    const fail = (error: Error) => {
      socket.destroy();
      reject(error);
    };
    socket.once('error', fail);
    socket.once('timeout', () => fail(Object.assign(new Error(`connecting to ${endpoint} timed out`), { code: 'ETIMEDOUT' })));
    socket.once('connect', () => {
      socket.off('error', fail);
      // Until its user listens: an error (a reset while the connection is being verified) closes it
      // rather than going unheard, which would end the process; connect() then refuses it.
      socket.on('error', () => socket.destroy());
      socket.setTimeout(0);
      resolve(socket);
    });
  });
}
