import http from 'node:http';
import type net from 'node:net';

/** The nt4 alive probe's timeout (spec: 500 ms); the editor's readiness probe uses the same. */
export const PROBE_TIMEOUT_MS = 500;

/** What one HTTP probe found. */
export interface Probe {
  outcome: 'ok' | 'timeout' | 'error';
  /** The HTTP status when the simulator answered. */
  status?: number;
  seconds: number;
}

/**
 * Probes a server at `host:port` with an HTTP GET of `/` and a 500 ms timeout: the simulator's nt4
 * port, or the editor. Any HTTP answer means the server is up (a NetworkTables server answers
 * plain GETs too, with an error status); a hang is `timeout`, a refused or broken connection `error`
 * (as is one `connect` refuses to make).
 */
export function probeHttp(endpoint: string, timeoutMs = PROBE_TIMEOUT_MS, connect?: () => Promise<net.Socket>): Promise<Probe> {
  const started = performance.now();
  const at = endpoint.lastIndexOf(':');
  const seconds = () => (performance.now() - started) / 1000;
  return new Promise((resolve) => {
    // A fresh connection each time (no agent): containers come and go and their addresses are
    // reused, so a pooled keep-alive socket could belong to one that is gone.
    // `connect`, when given, makes the connection (a verified one: the proxy's Upstreams).
    const createConnection: http.ClientRequestArgs['createConnection'] =
      connect &&
      ((_options, done) => {
        void (async () => {
          let socket: net.Socket;
          try {
            socket = await connect();
          } catch (error) {
            return done(error as Error, undefined as never);
          }
          done(null, socket);
        })();
        return undefined;
      });
    const request = http.get(
      { host: endpoint.slice(0, at), port: Number(endpoint.slice(at + 1)), path: '/', agent: connect ? undefined : false, createConnection },
      (answer) => {
        clearTimeout(timer);
        answer.resume();
        request.destroy();
        resolve({ outcome: 'ok', status: answer.statusCode, seconds: seconds() });
      },
    );
    const timer = setTimeout(() => {
      request.destroy();
      resolve({ outcome: 'timeout', seconds: seconds() });
    }, timeoutMs);
    request.on('error', () => {
      clearTimeout(timer);
      resolve({ outcome: 'error', seconds: seconds() });
    });
  });
}

/**
 * How long to wait before probing again something that has not answered for `waitedMs`: a tenth of
 * that wait, no less than `baseMs` and no more than `maxMs`. What answers within a second or two is
 * seen as soon as before; what takes half a minute (a class of editors starting on a busy server, a
 * robot program's build) is asked a few dozen times instead of a hundred or more, and seen at most a
 * tenth of its wait later.
 */
export function probeInterval(waitedMs: number, baseMs: number, maxMs: number): number {
  return Math.round(Math.min(maxMs, Math.max(baseMs, waitedMs / 10)));
}

/**
 * When each thing probed (a workspace's editor, a run's simulator, by key) was first found not
 * answering, for probeInterval: in memory, as the probes are (a new leader starts afresh).
 */
export class ProbeWaits {
  private readonly since = new Map<string, number>();

  /** The wait before probing `key` again, which has just not answered. */
  next(key: string, baseMs: number, maxMs: number): number {
    const now = Date.now();
    let since = this.since.get(key);
    if (since === undefined) this.since.set(key, (since = now));
    return probeInterval(now - since, baseMs, maxMs);
  }

  /** `key` answered, or is probed no more. */
  forget(key: string): void {
    this.since.delete(key);
  }
}
