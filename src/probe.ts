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
 * plain GETs too, with an error status); a hang is `timeout`, a refused or broken connection `error`.
 */
export async function probeHttp(endpoint: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<Probe> {
  const started = performance.now();
  try {
    const answer = await fetch(`http://${endpoint}/`, { signal: AbortSignal.timeout(timeoutMs) });
    await answer.body?.cancel();
    return { outcome: 'ok', status: answer.status, seconds: (performance.now() - started) / 1000 };
  } catch (error) {
    return { outcome: (error as Error).name === 'TimeoutError' ? 'timeout' : 'error', seconds: (performance.now() - started) / 1000 };
  }
}
