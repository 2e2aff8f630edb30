/** The nt4 alive probe's timeout (spec: 500 ms). */
export const NT4_PROBE_TIMEOUT_MS = 500;

/** What one probe of a simulator's nt4 port found. */
export interface Nt4Probe {
  outcome: 'ok' | 'timeout' | 'error';
  /** The HTTP status when the simulator answered. */
  status?: number;
  seconds: number;
}

/**
 * Probes a simulator's nt4 port (`host:port`) over HTTP with a 500 ms timeout. Any HTTP answer
 * means its server is up (a NetworkTables server answers plain GETs too, with an error status);
 * a hang is `timeout`, a refused or broken connection `error`.
 */
export async function probeNt4(endpoint: string, timeoutMs = NT4_PROBE_TIMEOUT_MS): Promise<Nt4Probe> {
  const started = performance.now();
  try {
    const answer = await fetch(`http://${endpoint}/`, { signal: AbortSignal.timeout(timeoutMs) });
    await answer.body?.cancel();
    return { outcome: 'ok', status: answer.status, seconds: (performance.now() - started) / 1000 };
  } catch (error) {
    return { outcome: (error as Error).name === 'TimeoutError' ? 'timeout' : 'error', seconds: (performance.now() - started) / 1000 };
  }
}
