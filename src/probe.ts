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
 * What the editor's readiness probe asks for: code-server's health check answers without rendering
 * the workbench's page (0.4 ms of its CPU a request, against 2.6–5.4 ms for `/`, measured on the
 * real image), and a workspace controller probes every starting editor every 250 ms: a class's 30
 * editors starting at once were asked for their page about 2,000 times while they started, on the
 * machine they start on. Any HTTP answer counts, so an image without it (a 404) is found ready too.
 */
export const EDITOR_PROBE_PATH = '/healthz';

/**
 * Probes a server at `host:port` with an HTTP GET of `path` (default `/`) and a 500 ms timeout: the
 * simulator's nt4 port, or the editor (EDITOR_PROBE_PATH). Any HTTP answer means the server is up (a NetworkTables server answers
 * plain GETs too, with an error status); a hang is `timeout`, a refused or broken connection `error`
 * (as is one `connect` refuses to make).
 */
export function probeHttp(endpoint: string, timeoutMs = PROBE_TIMEOUT_MS, connect?: () => Promise<net.Socket>, path = '/'): Promise<Probe> {
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
      { host: endpoint.slice(0, at), port: Number(endpoint.slice(at + 1)), path, agent: connect ? undefined : false, createConnection },
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
