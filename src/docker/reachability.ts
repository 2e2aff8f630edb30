import type { Logger } from '../log.ts';

/**
 * What to do when the engine cannot be reached, said with the address tried: start the project's
 * own engine, or any Docker, or point DOCKER_HOST at one; with no permission on its socket, run as
 * a user who may use it.
 */
function whatToDo(code: string): string {
  if (code === 'EACCES' || code === 'EPERM')
    return 'the control plane may not use its socket: run it as root or as a member of the docker group, or set DOCKER_HOST to an engine it may use';
  return "start it (bash scripts/provision.sh starts the project's engine), or start Docker, or set DOCKER_HOST to where it listens";
}

/** Node's codes for a connection that is cut or never answered once made (a call's timeout ends in ECONNRESET). */
const CUT = new Set(['ECONNRESET', 'EPIPE']);

/**
 * The Docker Engine could not be reached by a call: no socket at the address (ENOENT), nothing
 * listening (ECONNREFUSED), no permission on the socket (EACCES), no route, no answer in time, or
 * the connection cut. Thrown by the runtime instead of the connection's own error (its `cause`),
 * so that the loops can tell an engine away (said once, by EngineReachability) from a failure.
 */
export class EngineUnreachableError extends Error {
  /** Where the engine was looked for, as DOCKER_HOST spells it (`unix:///var/run/docker.sock`, `tcp://host:2375`). */
  readonly address: string;
  /** The connection's code (ENOENT, ECONNREFUSED, ...). */
  readonly code: string;
  /** What to do about it, for the line that says it (the server's log line, the CLI's failure line): see whatToDo. */
  readonly remedy: string;

  constructor(address: string, cause: Error & { code: string }, remedy = whatToDo(cause.code)) {
    super(`Docker Engine cannot be reached at ${address} (${cause.message})`, { cause });
    this.name = 'EngineUnreachableError';
    this.address = address;
    this.code = cause.code;
    this.remedy = remedy;
  }
}

/**
 * Whether a call's error means the engine was not reached, as opposed to an answer (an HTTP status)
 * or a call given up (aborted): a connection refused, missing or not permitted (`syscall` connect),
 * a name not found (getaddrinfo), every address refused (AggregateError), or a connection cut.
 */
export function isConnectionFailure(error: unknown): error is Error & { code: string } {
  // By shape, not instanceof: Node's own errors may come from another realm (a vm context, as under a test runner).
  const candidate = error as { message?: unknown; code?: unknown; syscall?: unknown; statusCode?: unknown; errors?: unknown } | null | undefined;
  if (typeof candidate !== 'object' || candidate === null) return false;
  if (typeof candidate.message !== 'string' || typeof candidate.code !== 'string' || candidate.statusCode !== undefined) return false;
  return candidate.syscall === 'connect' || candidate.syscall === 'getaddrinfo' || Array.isArray(candidate.errors) || CUT.has(candidate.code);
}

/**
 * The one place that knows whether a Docker Engine answers, fed by the outcome of every call made
 * to it (src/docker's client reports each one: an answer of any status, or a connection failure).
 * It says the transitions, each once, through the first logger attached (a loop that needs the
 * engine): an error line when calls start failing (the address, the reason, what to do), an info
 * line when one is answered again; the loops themselves stay quiet about an EngineUnreachableError
 * it covers (debug at most) and retry with their own backoff. Nothing is said while nothing is
 * attached: a down engine is said once something that needs it runs.
 */
export class EngineReachability implements Reachability {
  /** Where the engine is looked for (DOCKER_HOST's spelling), as the client knows it when a call failed (`failure`). */
  readonly address: (failure?: Error) => string;
  /** The outage now: since when, its first error, its failed calls, whether it was said. */
  private outage: { since: number; error: EngineUnreachableError; failedCalls: number; said: boolean } | undefined;
  private readonly loggers: Logger[] = [];
  /** The errors this reachability made (see covers). */
  private readonly made = new WeakSet<EngineUnreachableError>();

  /** What to do, when it is not the one engine's usual (whatToDo): a swarm's. */
  private readonly remedy: string | undefined;

  constructor(address: (failure?: Error) => string, remedy?: string) {
    this.address = address;
    this.remedy = remedy;
  }

  /** Whether calls are failing to reach it now (an outage under way). */
  get away(): boolean {
    return this.outage !== undefined;
  }

  /** Records a call that got an answer (whatever its status): after an outage that was said, says the engine is back. */
  answered(): void {
    const outage = this.outage;
    this.outage = undefined;
    if (!outage?.said) return;
    const seconds = Math.round((Date.now() - outage.since) / 1000);
    const { address } = outage.error;
    this.loggers[0]?.info(
      { address, seconds, failedCalls: outage.failedCalls },
      `Docker Engine reachable again at ${address} (after ${seconds} s): converging workspaces`,
    );
  }

  /** Records a call that could not reach the engine and answers the error to throw in its place; the first of an outage is said. */
  failed(cause: Error & { code: string }): EngineUnreachableError {
    const error = new EngineUnreachableError(this.address(cause), cause, this.remedy);
    this.made.add(error);
    this.outage ??= { since: Date.now(), error, failedCalls: 0, said: false };
    this.outage.failedCalls++;
    this.say();
    return error;
  }

  /** Whether `error` is this engine's EngineUnreachableError: said here, so the loop that met it stays quiet. */
  covers(error: unknown): error is EngineUnreachableError {
    return error instanceof EngineUnreachableError && this.made.has(error);
  }

  /**
   * Says the transitions through `log` from now on (through the first attached, when several are);
   * an outage not yet said is said at once. Answers the detach.
   */
  attach(log: Logger): () => void {
    this.loggers.push(log);
    this.say();
    return () => {
      const index = this.loggers.indexOf(log);
      if (index >= 0) this.loggers.splice(index, 1);
    };
  }

  /** Says the outage under way, once. */
  private say(): void {
    const outage = this.outage;
    const log = this.loggers[0];
    if (!outage || outage.said || !log) return;
    outage.said = true;
    const { address, code, message, remedy } = outage.error;
    const reason = (outage.error.cause as Error).message;
    log.error({ address, code, error: reason }, `${message}: ${remedy}; workspaces start once it answers (retrying quietly)`);
  }
}

/** What the loops ask of a runtime's reachability: to say its outages through a logger, and whether an error is one it said. */
export interface Reachability {
  /** Says the transitions through `log` from now on; answers the detach. */
  attach(log: Logger): () => void;
  /** Whether `error` is an EngineUnreachableError said here, so the loop that met it stays quiet. */
  covers(error: unknown): error is EngineUnreachableError;
}

/**
 * A swarm's: whether any of its engines answers as a manager (`swarm`, fed by the swarm runtime's
 * calls to a manager), said once through the logger attached, with the engines' addresses. While
 * none does, what failed on a node's own engine is covered too (every node is away, not one): the
 * loops stay quiet and give up their pass, as on one engine. One node away while a manager answers
 * is not an outage of the swarm: the node check says what it means for its workspaces, and a loop
 * that meets it says so as before (and goes on with the other nodes' workspaces).
 */
export class SwarmReachability implements Reachability {
  /** The swarm's managers, as one engine: failed when no engine answers, answered when a manager does. */
  readonly swarm: EngineReachability;
  private readonly nodes: readonly EngineReachability[];

  constructor(addresses: readonly string[], nodes: readonly EngineReachability[]) {
    this.swarm = new EngineReachability(() => `SWARM_ENGINES (${addresses.join(', ')})`, SWARM_REMEDY);
    this.nodes = nodes;
  }

  attach(log: Logger): () => void {
    return this.swarm.attach(log);
  }

  covers(error: unknown): error is EngineUnreachableError {
    return this.swarm.covers(error) || (this.swarm.away && this.nodes.some((node) => node.covers(error)));
  }
}

/** What to do when no engine of a swarm answers. */
const SWARM_REMEDY = "start the swarm's engines, or set SWARM_ENGINES to where they listen";

/**
 * Whether `error` is the engine of `runtime` found unreachable, which its EngineReachability says
 * once: the loop that met it stays quiet (a debug line at most) and retries as it would anyway.
 */
export function engineAway(runtime: { readonly reachability?: Reachability }, error: unknown): boolean {
  return runtime.reachability?.covers(error) === true;
}
