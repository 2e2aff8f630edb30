import { readFileSync } from 'node:fs';

/** The fewest descriptors kept for the control plane's own use (its database, the engine, logs, files, admin traffic). */
const MIN_RESERVE = 256;

/** How the process's descriptors are shared out (see descriptorBudget). */
export interface DescriptorBudget {
  /** The process's open-file limit; undefined where it cannot be read (not Linux). */
  limit: number | undefined;
  /** Kept for the control plane's own use: never taken by clients' connections or tunnels. */
  reserve: number;
  /** The most client connections the HTTP server holds at once (Node's server.maxConnections); Infinity without a limit. */
  maxConnections: number;
  /** The most WebSocket tunnels open at once (each holds its client's connection and one to its upstream). */
  maxTunnels: number;
}

/** The process's soft open-file limit (RLIMIT_NOFILE), from /proc/self/limits; undefined where there is none. */
export function descriptorLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return line ? Number(line[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Shares out `limit` descriptors so that clients can never take the last of them: a tenth (at least
 * MIN_RESERVE) is kept for the control plane's own use; of the rest, each client connection may
 * hold one more to an editor or simulator, so at most half are client connections; and of those,
 * at most half are WebSocket tunnels (or `tunnels`, PROXY_MAX_TUNNELS, when set and smaller), so
 * that a flood of WebSockets leaves at least as many connections for plain requests (the admin API
 * and sign-in among them).
 */
export function descriptorBudget(limit: number | undefined, tunnels: number | undefined): DescriptorBudget {
  if (limit === undefined) return { limit, reserve: MIN_RESERVE, maxConnections: Infinity, maxTunnels: tunnels ?? 4096 };
  const reserve = Math.max(MIN_RESERVE, Math.ceil(limit / 10));
  const maxConnections = Math.max(1, Math.floor((limit - reserve) / 2));
  const fair = Math.max(1, Math.floor(maxConnections / 2));
  return { limit, reserve, maxConnections, maxTunnels: tunnels === undefined ? fair : Math.min(tunnels, maxConnections) };
}
