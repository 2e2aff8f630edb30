import { isIP } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseByteSize } from './bytes.ts';
import { DEFAULT_HALSIM_PORT, DEFAULT_PIDS_LIMIT } from './docker/runtime.ts';

/** Log levels of the spec, lowest first. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warning', 'error', 'fatal'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The project's root folder (where package.json lives), whatever the working directory. */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** How the control plane reaches one Docker Engine: its Unix socket, or a TCP address (plain, on a trusted network). */
export type EngineEndpoint = { socketPath: string } | { host: string; port: number };

/** Validated configuration of the control plane; the only view of the environment the rest of the code gets. */
export interface Config {
  nodeEnv: string;
  host: string;
  port: number;
  databaseUrl: string | undefined;
  /**
   * DATABASE_DIRECT_URL (default DATABASE_URL): the same database without a pooler in between, for
   * what needs a session of its own: LISTEN (the change feed) and the migrations' advisory lock.
   */
  databaseDirectUrl: string | undefined;
  dataDir: string;
  sessionSecret: string | undefined;
  logLevel: LogLevel;
  logFormat: 'json' | 'human';
  noColor: boolean;
  maxActiveContainers: number;
  idleStopMinutes: number;
  codeMemoryLimitBytes: number;
  serviceAdminEmails: string[];
  adminToken: string | undefined;
  metricsToken: string | undefined;
  workspaceImage: string;
  editorPort: number;
  nt4Port: number;
  /** HALSIM_PORT: where a run's robot serves WPILib's HALSim WebSocket (HALSIMWS_PORT in its container). */
  halsimPort: number;
  workspaceNetwork: string;
  controlPlaneId: string;
  /** Where browsers reach the control plane (OAuth redirect URIs, cookie Secure flag, CSRF origin). */
  publicUrl: string | undefined;
  /** Trust X-Forwarded-* from a reverse proxy in front (Koa's app.proxy). */
  trustProxy: boolean;
  /** REUSE_PORT: listen with SO_REUSEPORT, so that several server processes of this host share PORT (the kernel spreads connections). */
  reusePort: boolean;
  /** Enabled sign-in providers (at most two), in a stable order. */
  providers: ProviderConfig[];
  /** How long the proxy waits for an upstream's response headers. */
  proxyTimeoutMs: number;
  /**
   * The most WebSocket tunnels open at once to one workspace (PROXY_MAX_TUNNELS_PER_WORKSPACE), and
   * in all (PROXY_MAX_TUNNELS; undefined: what the process's descriptor limit leaves, see src/descriptors.ts).
   */
  proxyTunnels: { perWorkspace: number; total: number | undefined };
  /** The compile-and-boot command of a run, run by `sh -c` in the sim container. */
  simCommand: string;
  /** How long a run may compile and boot before it fails. */
  runBuildTimeoutMs: number;
  /** How long a run may be running (after its build) before it is stopped. */
  runMaxMs: number;
  /** How long before an idle stop the student is warned (in the editor and on the workspace page). */
  idleWarningMinutes: number;
  /** WORKSPACE_HOST: host mode, each workspace on an origin of its own; undefined: path mode (`/u/<slug>/` on PUBLIC_URL). */
  workspaceHost: WorkspaceHostConfig | undefined;
  /** The reconciler's lease (LEASE_*): one replica at a time runs the controllers. */
  lease: LeaseConfig;
  /** Scheduled backups of every home (BACKUP_*): at most one per interval, of a home used since its last; undefined: none. */
  backupSchedule: { intervalMs: number; keep: number } | undefined;
  /** CODE_CPUS in billionths of a CPU: what a workspace's editor may use (and, on a swarm, reserves); 0: no limit. */
  codeNanoCpus: number;
  /** RUN_CPUS (else CODE_CPUS) in billionths of a CPU: what a run's simulator may use; 0: no limit. */
  runNanoCpus: number;
  /** RUN_MEMORY_LIMIT (else CODE_MEMORY_LIMIT): a run's simulator's memory (and memory+swap) limit. */
  runMemoryLimitBytes: number;
  /** CONTAINER_PIDS_LIMIT: the most processes and threads at once in each editor and each simulator (the pids cgroup). */
  containerPidsLimit: number;
  /** The bound on each home (HOME_DISK_LIMIT; 0: none) and how often running homes are measured (HOME_DISK_CHECK_SECONDS). */
  homeDisk: { limitBytes: number; checkMs: number };
  /** LESSON_MAX_SIZE: the most a lesson's files may hold, unpacked (an upload past it is refused), and what one student's collected lesson folder may (src/lessons/). */
  lessonMaxBytes: number;
  /** LOOK_CONSENT: whether a coach's look at a workspace begins at once or waits for the student to let it (src/store/looks.ts). */
  lookConsent: 'always' | 'ask';
  /** JOIN_CODES: whether coaches may open join codes that give guests a workspace without a provider or the allowlist (src/store/join-codes.ts). */
  joinCodes: boolean;
  /** Where workspaces run (RUNTIME): one Docker Engine, or a Docker Swarm reached through each node's engine (SWARM_ENGINES). */
  runtime: { kind: 'docker' } | { kind: 'swarm'; engines: EngineEndpoint[] };
  /** NODE_LOST_SECONDS: how long a swarm node is down before its workspaces' homes are brought back elsewhere from their latest backup. */
  nodeLostMs: number;
  /** The bounds on runs' output streams (OUTPUT_STREAM*): how many each user and each run may hold open, and how far a reader may fall behind. */
  outputStreams: OutputStreamLimits;
  /** Imports of a team's project (IMPORT_*): where from, how much, how long (docs/security.md, "Importing a team's project"). */
  imports: ImportLimits;
}

/**
 * What an import of a team's git repository may reach and take: the hosts it may name
 * (IMPORT_ALLOWED_HOSTS, lower-case), the networks it may connect to although they are loopback,
 * private, link-local or otherwise special (IMPORT_ALLOWED_ADDRESSES, CIDR), the most a clone may
 * put on disk (IMPORT_MAX_SIZE), how long the network part may take (IMPORT_TIMEOUT_SECONDS), and
 * the certificate authorities git and the check trust instead of the system's (IMPORT_CA_FILE).
 */
export interface ImportLimits {
  allowedHosts: string[];
  allowedAddresses: string[];
  maxBytes: number;
  timeoutMs: number;
  caFile: string | undefined;
}

/**
 * The bounds on runs' output streams of one replica: open streams per user and per run (past them a
 * new one is refused, 429), and each stream's buffer: what it holds for its reader at most, and how
 * long a full buffer may wait for the reader to take it before the stream is cut (the reader resumes
 * from its last event).
 */
export interface OutputStreamLimits {
  perUser: number;
  perRun: number;
  bufferBytes: number;
  stallMs: number;
}

/**
 * The reconciler's lease, as controller-runtime's leader election has it: a leader that has not
 * renewed for `renewDeadlineMs` stops acting; another may take the lease `durationMs` after its
 * last renewal; followers (and a leader, renewing) try every `retryMs`.
 */
export interface LeaseConfig {
  durationMs: number;
  renewDeadlineMs: number;
  retryMs: number;
}

/** Where host mode serves workspaces: workspace `<slug>` at `<PUBLIC_URL's scheme>://<slug>.<base>/`. */
export interface WorkspaceHostConfig {
  /** The domain every workspace's name goes before, lower-case, with its port when one was given: `ws.school.org`, `ws.localhost:8080`. */
  base: string;
  /** The domain alone, without the port. */
  hostname: string;
  port: number | undefined;
}

/** One configured identity provider. */
export interface ProviderConfig {
  name: 'github' | 'google' | 'oidc';
  /** Shown on the sign-in page. */
  label: string;
  clientId: string;
  clientSecret: string;
  /** OpenID Connect issuer, for `oidc` (its discovery document names the endpoints). */
  issuer?: string;
}

/** Thrown by loadConfig with one line per invalid variable. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/**
 * What a variable's text may be, in JSON Schema's words (the few keywords variables need). Numbers
 * are read from the text as JSON Schema validators coerce them (`Number(text)`, finite).
 */
type VariableSchema =
  | { enum: readonly string[] }
  | { type: 'string'; minLength?: number; maxLength?: number; pattern?: string }
  | { type: 'number' | 'integer'; minimum?: number; exclusiveMinimum?: number; maximum?: number };

interface VariableSpec {
  /** What the variable accepts, in the words of the error line. */
  accepts: string;
  schema: VariableSchema;
  default?: string | number;
  /** Whether the value is a secret that must never be echoed back. */
  secret?: boolean;
  /** A check beyond the schema; returns false when the value is unusable. */
  check?: (value: string) => boolean;
}

const port = (fallback: number): VariableSpec => ({
  accepts: 'a TCP port from 1 to 65535',
  schema: { type: 'integer', minimum: 1, maximum: 65535 },
  default: fallback,
});

/** ADMIN_TOKEN and METRICS_TOKEN: long enough that guessing is hopeless, since a right token is never throttled. */
const token: VariableSpec = {
  accepts: 'a secret of at least 32 characters',
  schema: { type: 'string', minLength: 32 },
  secret: true,
};

const EMAIL = /^[^\s@,]+@[^\s@,]+$/;

/** Every environment variable the control plane reads, with what it accepts and its default. */
export const VARIABLES: Record<string, VariableSpec> = {
  NODE_ENV: { accepts: 'development, production or test', schema: { enum: ['development', 'production', 'test'] }, default: 'development' },
  HOST: { accepts: 'an address to listen on, e.g. 127.0.0.1', schema: { type: 'string', minLength: 1 }, default: '127.0.0.1' },
  PORT: { accepts: 'a TCP port from 0 (any free port) to 65535', schema: { type: 'integer', minimum: 0, maximum: 65535 }, default: 8080 },
  DATABASE_URL: {
    accepts: 'a postgres:// or postgresql:// URL',
    schema: { type: 'string', pattern: '^postgres(ql)?://' },
    secret: true,
    check: (value) => URL.canParse(value),
  },
  DATABASE_DIRECT_URL: {
    accepts: 'a postgres:// or postgresql:// URL',
    schema: { type: 'string', pattern: '^postgres(ql)?://' },
    secret: true,
    check: (value) => URL.canParse(value),
  },
  DATA_DIR: { accepts: 'a directory path', schema: { type: 'string', minLength: 1 }, default: path.join(PROJECT_ROOT, 'data') },
  SESSION_SECRET: { accepts: 'a secret of at least 32 characters', schema: { type: 'string', minLength: 32 }, secret: true },
  LOG_LEVEL: { accepts: `one of ${LOG_LEVELS.join(', ')}`, schema: { enum: [...LOG_LEVELS] }, default: 'debug' },
  LOG_FORMAT: { accepts: '"json" for JSON lines; any other value means human-readable', schema: { type: 'string' }, default: 'human' },
  NO_COLOR: { accepts: 'any value (set: no ANSI colours)', schema: { type: 'string' } },
  MAX_ACTIVE_CONTAINERS: { accepts: 'an integer from 0 to 10000', schema: { type: 'integer', minimum: 0, maximum: 10000 }, default: 10 },
  IDLE_STOP_MINUTES: { accepts: 'minutes from 0.05 to 10080 (decimals allowed)', schema: { type: 'number', minimum: 0.05, maximum: 10080 }, default: 30 },
  IDLE_WARNING_MINUTES: {
    accepts: 'minutes from 0 (no warning) to 1440 (decimals allowed)',
    schema: { type: 'number', minimum: 0, maximum: 1440 },
    default: 5,
  },
  RUN_MAX_MINUTES: { accepts: 'minutes from 1 to 10080', schema: { type: 'number', minimum: 1, maximum: 10080 }, default: 60 },
  CODE_MEMORY_LIMIT: {
    accepts: 'a memory size of at least 6m: bytes, or a number with k, m or g (e.g. 512m, 2g)',
    schema: { type: 'string' },
    default: '2g',
    check: (value) => (parseByteSize(value) ?? 0) >= 6 * 1024 * 1024,
  },
  SERVICE_ADMIN_EMAIL: {
    accepts: 'a comma-separated list of email addresses',
    schema: { type: 'string' },
    check: (value) => splitList(value).every((email) => EMAIL.test(email)),
  },
  ADMIN_TOKEN: token,
  METRICS_TOKEN: token,
  WORKSPACE_IMAGE: {
    accepts: 'a Docker image reference',
    schema: { type: 'string', pattern: '^[a-z0-9][a-zA-Z0-9._/:@-]*$' },
    default: 'classroom-workspace:latest',
  },
  EDITOR_PORT: port(8080),
  NT4_PORT: port(5810),
  HALSIM_PORT: port(DEFAULT_HALSIM_PORT),
  WORKSPACE_NETWORK: { accepts: 'a Docker network name', schema: { type: 'string', pattern: '^[a-zA-Z0-9][a-zA-Z0-9_.-]*$' }, default: 'classroom-workspaces' },
  PUBLIC_URL: {
    accepts: 'an http:// or https:// URL without a path, e.g. https://robots.school.org',
    schema: { type: 'string', pattern: '^https?://[^/?#]+/?$' },
    check: (value) => URL.canParse(value),
  },
  TRUST_PROXY: { accepts: 'true or false', schema: { enum: ['true', 'false', '1', '0'] }, default: 'false' },
  REUSE_PORT: { accepts: 'true or false', schema: { enum: ['true', 'false', '1', '0'] }, default: 'false' },
  GITHUB_CLIENT_ID: { accepts: 'a GitHub OAuth app client id', schema: { type: 'string' } },
  GITHUB_CLIENT_SECRET: { accepts: 'a GitHub OAuth app client secret', schema: { type: 'string' }, secret: true },
  GOOGLE_CLIENT_ID: { accepts: 'a Google OAuth client id', schema: { type: 'string' } },
  GOOGLE_CLIENT_SECRET: { accepts: 'a Google OAuth client secret', schema: { type: 'string' }, secret: true },
  OIDC_ISSUER: {
    accepts: 'an OpenID Connect issuer URL (http:// only on loopback)',
    schema: { type: 'string', pattern: '^https?://' },
    check: (value) => URL.canParse(value),
  },
  OIDC_CLIENT_ID: { accepts: 'an OpenID Connect client id', schema: { type: 'string' } },
  OIDC_CLIENT_SECRET: { accepts: 'an OpenID Connect client secret', schema: { type: 'string' }, secret: true },
  OIDC_LABEL: { accepts: 'the name shown on the sign-in button', schema: { type: 'string', maxLength: 60 }, default: 'your school account' },
  PROXY_TIMEOUT_SECONDS: { accepts: 'seconds from 1 to 3600', schema: { type: 'number', exclusiveMinimum: 0, maximum: 3600 }, default: 60 },
  PROXY_MAX_TUNNELS_PER_WORKSPACE: {
    accepts: 'a whole number from 1 to 10000',
    schema: { type: 'integer', minimum: 1, maximum: 10000 },
    default: 32,
  },
  PROXY_MAX_TUNNELS: { accepts: 'a whole number from 1 to 1000000', schema: { type: 'integer', minimum: 1, maximum: 1_000_000 } },
  SIM_COMMAND: { accepts: 'a shell command line', schema: { type: 'string', minLength: 1 }, default: './gradlew simulateJava' },
  RUN_BUILD_TIMEOUT: {
    accepts: 'a duration: seconds, or a number with s, m or h (e.g. 90s, 10m), from 1 s to 24 h',
    schema: { type: 'string' },
    default: '10m',
    check: (value) => parseDurationMs(value) !== undefined,
  },
  WORKSPACE_HOST: {
    accepts:
      'a wildcard host: "*." then a domain of at least two labels, optionally with a port, no scheme or path (e.g. *.ws.school.org, *.ws.localhost:8080)',
    schema: { type: 'string' },
    check: (value) => parseWorkspaceHost(value) !== undefined,
  },
  LEASE_DURATION_SECONDS: { accepts: 'seconds from 1 to 600 (decimals allowed)', schema: { type: 'number', minimum: 1, maximum: 600 }, default: 15 },
  LEASE_RENEW_DEADLINE_SECONDS: {
    accepts: 'seconds from 0.5 to 600, less than LEASE_DURATION_SECONDS (decimals allowed)',
    schema: { type: 'number', minimum: 0.5, maximum: 600 },
    default: 10,
  },
  LEASE_RETRY_SECONDS: {
    accepts: 'seconds from 0.1 to 60, less than LEASE_RENEW_DEADLINE_SECONDS (decimals allowed)',
    schema: { type: 'number', minimum: 0.1, maximum: 60 },
    default: 2,
  },
  BACKUP_INTERVAL_HOURS: {
    accepts: 'hours from 0 (no scheduled backups) to 720 (decimals allowed)',
    schema: { type: 'number', minimum: 0, maximum: 720 },
    default: 24,
  },
  BACKUP_KEEP: { accepts: 'a whole number from 1 to 1000', schema: { type: 'integer', minimum: 1, maximum: 1000 }, default: 7 },
  CODE_CPUS: {
    accepts: 'a number of CPUs from 0 (no limit) to 256 (decimals allowed, e.g. 1.5)',
    schema: { type: 'number', minimum: 0, maximum: 256 },
    default: 0,
  },
  RUN_CPUS: {
    accepts: 'a number of CPUs from 0 (no limit) to 256 (decimals allowed, e.g. 1.5); unset: CODE_CPUS',
    schema: { type: 'number', minimum: 0, maximum: 256 },
  },
  RUN_MEMORY_LIMIT: {
    accepts: 'a memory size of at least 6m: bytes, or a number with k, m or g (e.g. 512m, 2g); unset: CODE_MEMORY_LIMIT',
    schema: { type: 'string' },
    check: (value) => (parseByteSize(value) ?? 0) >= 6 * 1024 * 1024,
  },
  CONTAINER_PIDS_LIMIT: {
    accepts: 'a whole number of processes and threads from 64 to 1000000',
    schema: { type: 'integer', minimum: 64, maximum: 1_000_000 },
    default: DEFAULT_PIDS_LIMIT,
  },
  HOME_DISK_LIMIT: {
    accepts: 'a size of at least 1m: bytes, or a number with k, m or g (e.g. 5g); 0: no bound',
    schema: { type: 'string' },
    default: '5g',
    check: (value) => {
      const bytes = parseByteSize(value);
      return bytes === 0 || (bytes ?? 0) >= 1024 * 1024;
    },
  },
  HOME_DISK_CHECK_SECONDS: { accepts: 'seconds from 1 to 3600', schema: { type: 'number', minimum: 1, maximum: 3600 }, default: 60 },
  LESSON_MAX_SIZE: {
    accepts: 'a size from 1m to 2g: bytes, or a number with k, m or g (e.g. 100m)',
    schema: { type: 'string' },
    default: '100m',
    check: (value) => {
      const bytes = parseByteSize(value) ?? 0;
      return bytes >= 1024 * 1024 && bytes <= 2 * 1024 ** 3;
    },
  },
  JOIN_CODES: {
    accepts: 'off (no join codes) or on (coaches may open join codes for guests)',
    schema: { enum: ['off', 'on'] },
    default: 'off',
  },
  LOOK_CONSENT: {
    accepts: "always (a coach's look begins at once) or ask (the student lets it happen first)",
    schema: { enum: ['always', 'ask'] },
    default: 'always',
  },
  NODE_LOST_SECONDS: {
    accepts: 'seconds from 10 to 86400',
    schema: { type: 'number', minimum: 10, maximum: 86_400 },
    default: 60,
  },
  OUTPUT_STREAMS_PER_USER: { accepts: 'a whole number from 1 to 1000', schema: { type: 'integer', minimum: 1, maximum: 1000 }, default: 8 },
  OUTPUT_STREAMS_PER_RUN: { accepts: 'a whole number from 1 to 1000', schema: { type: 'integer', minimum: 1, maximum: 1000 }, default: 16 },
  OUTPUT_STREAM_BUFFER: {
    accepts: 'a size from 64k to 64m: bytes, or a number with k, m or g (e.g. 128k)',
    schema: { type: 'string' },
    default: '128k',
    check: (value) => {
      const bytes = parseByteSize(value) ?? 0;
      return bytes >= 64 * 1024 && bytes <= 64 * 1024 * 1024;
    },
  },
  OUTPUT_STREAM_STALL_SECONDS: {
    accepts: 'seconds from 1 to 3600 (decimals allowed)',
    schema: { type: 'number', minimum: 1, maximum: 3600 },
    default: 30,
  },
  IMPORT_ALLOWED_HOSTS: {
    accepts: 'a comma-separated list of host names (e.g. github.com,gitlab.com,git.school.org)',
    schema: { type: 'string' },
    default: 'github.com,gitlab.com',
    check: (value) => splitList(value).every((host) => /^[a-z0-9.-]+$|^\[?[0-9a-f:.]+\]?$/.test(host)),
  },
  IMPORT_ALLOWED_ADDRESSES: {
    accepts: 'a comma-separated list of networks in CIDR form or addresses (e.g. 10.20.0.0/16, 192.168.1.5)',
    schema: { type: 'string' },
    check: (value) => splitList(value).every((network) => parseCidr(network) !== undefined),
  },
  IMPORT_MAX_SIZE: {
    accepts: 'a size from 1m to 10g: bytes, or a number with k, m or g (e.g. 100m)',
    schema: { type: 'string' },
    default: '100m',
    check: (value) => {
      const bytes = parseByteSize(value) ?? 0;
      return bytes >= 1024 * 1024 && bytes <= 10 * 1024 ** 3;
    },
  },
  IMPORT_TIMEOUT_SECONDS: { accepts: 'seconds from 1 to 3600', schema: { type: 'number', minimum: 1, maximum: 3600 }, default: 120 },
  IMPORT_CA_FILE: { accepts: 'the path of a PEM file of certificate authorities', schema: { type: 'string', minLength: 1 } },
  RUNTIME: { accepts: 'docker (one engine) or swarm (SWARM_ENGINES)', schema: { enum: ['docker', 'swarm'] }, default: 'docker' },
  SWARM_ENGINES: {
    accepts: "a comma-separated list of every swarm node's Docker Engine: unix:///path/to/docker.sock or tcp://host:port",
    schema: { type: 'string', minLength: 1 },
    check: (value) => engineList(value).length > 0 && engineList(value).every((entry) => parseEngineEndpoint(entry) !== undefined),
  },
  CONTROL_PLANE_ID: {
    accepts: 'a name of lower-case letters, digits and dashes (at most 40)',
    schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9-]{0,39}$' },
    default: 'default',
  },
};

/** Parses one SWARM_ENGINES entry: `unix:///path` (an absolute path) or `tcp://host:port`; undefined otherwise. */
export function parseEngineEndpoint(text: string): EngineEndpoint | undefined {
  if (text.startsWith('unix://')) {
    const socketPath = text.slice('unix://'.length);
    return socketPath.startsWith('/') ? { socketPath } : undefined;
  }
  const match = /^tcp:\/\/([^/:\s]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(text);
  if (!match || Number(match[2]) < 1 || Number(match[2]) > 65535) return undefined;
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port: Number(match[2]) };
}

/** Parses `600`, `90s`, `10m`, `1.5h` into milliseconds, between 1 s and 24 h; undefined otherwise. */
export function parseDurationMs(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)\s*(s|m|h)?$/i.exec(text.trim());
  if (!match) return undefined;
  const ms = Number(match[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[(match[2] ?? 's').toLowerCase() as 's' | 'm' | 'h'];
  return ms >= 1000 && ms <= 24 * 3_600_000 ? Math.round(ms) : undefined;
}

/** A DNS label of letters, digits and inner hyphens. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Parses WORKSPACE_HOST (`*.ws.school.org`, `*.ws.localhost:8080`, any case): `*.` then a domain of
 * at least two labels whose last is not all digits (no IP address), short enough that a 40-character
 * slug still makes a valid host name, and an optional port from 1 to 65535; undefined otherwise.
 */
export function parseWorkspaceHost(text: string): WorkspaceHostConfig | undefined {
  const match = /^\*\.([^:/?#@\\\s]+)(?::(\d{1,5}))?$/.exec(text.toLowerCase());
  if (!match) return undefined;
  const hostname = match[1]!;
  const portNumber = match[2] === undefined ? undefined : Number(match[2]);
  if (portNumber !== undefined && (portNumber < 1 || portNumber > 65535)) return undefined;
  const labels = hostname.split('.');
  if (labels.length < 2 || hostname.length > 200 || !labels.every((label) => LABEL.test(label)) || /^\d+$/.test(labels.at(-1)!)) return undefined;
  return { base: portNumber === undefined ? hostname : `${hostname}:${portNumber}`, hostname, port: portNumber };
}

/**
 * Why a valid WORKSPACE_HOST cannot serve beside the control plane at `publicHostname`, or
 * undefined when it can: its domain may not be that host, a parent of it, or under it, else a
 * workspace's pages could set cookies the control plane reads (a cookie for a parent domain, or for
 * the control plane's own host from below it), or a workspace's host would be the control plane's.
 */
function workspaceHostClash(workspaceHost: WorkspaceHostConfig, publicHostname: string): string | undefined {
  const base = workspaceHost.hostname;
  if (publicHostname !== base && !publicHostname.endsWith(`.${base}`) && !base.endsWith(`.${publicHostname}`)) return undefined;
  return `WORKSPACE_HOST=${JSON.stringify(`*.${workspaceHost.base}`)} is not valid: its domain must not be the control plane's host (${publicHostname}), a parent of it or under it, or workspaces' pages could set cookies the control plane reads; use a domain beside it, best a registrable domain of its own (e.g. *.school-workspaces.org), or at least *.ws.<your domain> beside <control plane>.<your domain>`;
}

/**
 * Parses a network of IMPORT_ALLOWED_ADDRESSES: `address/prefix` (IPv4 or IPv6), or an address
 * alone (all its bits); undefined otherwise.
 */
export function parseCidr(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [address = '', prefixText, ...rest] = text.split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return undefined;
  const bits = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? bits : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
  if (!(prefix >= 0 && prefix <= bits)) return undefined;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** SWARM_ENGINES' entries, as written (paths keep their case). */
function engineList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim().toLowerCase())
    .filter((item) => item !== '');
}

/**
 * The value a variable's text stands for under its schema, or undefined when the schema refuses it.
 * (Checked here rather than by a JSON Schema compiler: compiling took 70 ms of every start and of
 * every CLI command, for six keywords.)
 */
function valueOf(schema: VariableSchema, text: string): string | number | undefined {
  if ('enum' in schema) return schema.enum.includes(text) ? text : undefined;
  if (schema.type === 'string') {
    const length = Array.from(text).length; // in code points, as JSON Schema counts
    if (length < (schema.minLength ?? 0) || length > (schema.maxLength ?? Infinity)) return undefined;
    return schema.pattern === undefined || new RegExp(schema.pattern, 'u').test(text) ? text : undefined;
  }
  const value = Number(text);
  if (!Number.isFinite(value) || (schema.type === 'integer' && !Number.isInteger(value))) return undefined;
  if (value < (schema.minimum ?? -Infinity) || value > (schema.maximum ?? Infinity)) return undefined;
  return schema.exclusiveMinimum === undefined || value > schema.exclusiveMinimum ? value : undefined;
}

/**
 * Reads and validates the environment once. Empty values count as unset. Throws ConfigError listing
 * every invalid variable, one line each, naming the variable and what it accepts (secrets are not echoed).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const given: Record<string, string> = {};
  for (const name of Object.keys(VARIABLES)) {
    const text = env[name]?.trim();
    if (text !== undefined && text !== '') given[name] = text;
  }
  const values: Record<string, unknown> = {};
  const invalid = new Set<string>();
  for (const [name, spec] of Object.entries(VARIABLES)) {
    const text = given[name];
    const value = text === undefined ? spec.default : valueOf(spec.schema, text);
    if (text !== undefined && value === undefined) invalid.add(name);
    values[name] = value ?? text;
  }
  for (const [name, text] of Object.entries(given)) if (VARIABLES[name]!.check?.(text) === false) invalid.add(name);
  const problems = [...invalid].map((name) => {
    const spec = VARIABLES[name]!;
    return `${name}=${spec.secret ? '<hidden>' : JSON.stringify(given[name])} is not valid: expected ${spec.accepts}`;
  });
  if (typeof values.PUBLIC_URL === 'string' && values.PUBLIC_URL.startsWith('https:') && !['true', '1'].includes(String(values.TRUST_PROXY))) {
    problems.push('PUBLIC_URL is https but TRUST_PROXY is not true: TLS ends at a proxy in front, so set TRUST_PROXY=true (secure cookies need it)');
  }
  if (values.NODE_ENV === 'production' && values.SESSION_SECRET === undefined) {
    problems.push('SESSION_SECRET is required when NODE_ENV=production: expected a secret of at least 32 characters');
  }
  const workspaceHost = typeof values.WORKSPACE_HOST === 'string' && !invalid.has('WORKSPACE_HOST') ? parseWorkspaceHost(values.WORKSPACE_HOST) : undefined;
  if (workspaceHost && !invalid.has('PUBLIC_URL') && !invalid.has('HOST')) {
    // The host browsers reach the control plane at: PUBLIC_URL's, else the listening address's (a wildcard one is served as loopback).
    const listening = String(values.HOST);
    const publicHostname =
      typeof values.PUBLIC_URL === 'string'
        ? new URL(values.PUBLIC_URL).hostname
        : listening === '0.0.0.0' || listening === '::'
          ? '127.0.0.1'
          : listening.toLowerCase();
    const clash = workspaceHostClash(workspaceHost, publicHostname);
    if (clash) problems.push(clash);
  }
  if (values.DATABASE_DIRECT_URL !== undefined && values.DATABASE_URL === undefined)
    problems.push('DATABASE_DIRECT_URL is set but DATABASE_URL is not: set DATABASE_URL too (the direct URL is for LISTEN and migrations beside it)');
  const providers = providersOf(values, problems);
  const lease = {
    durationMs: Math.round((values.LEASE_DURATION_SECONDS as number) * 1000),
    renewDeadlineMs: Math.round((values.LEASE_RENEW_DEADLINE_SECONDS as number) * 1000),
    retryMs: Math.round((values.LEASE_RETRY_SECONDS as number) * 1000),
  };
  // A leader must give up before another may take over, and try more than once before it gives up.
  if (lease.renewDeadlineMs >= lease.durationMs)
    problems.push(
      `LEASE_RENEW_DEADLINE_SECONDS=${lease.renewDeadlineMs / 1000} is not valid: it must be less than LEASE_DURATION_SECONDS (${lease.durationMs / 1000}), so that a leader stops acting before another may take over`,
    );
  else if (lease.retryMs >= lease.renewDeadlineMs)
    problems.push(
      `LEASE_RETRY_SECONDS=${lease.retryMs / 1000} is not valid: it must be less than LEASE_RENEW_DEADLINE_SECONDS (${lease.renewDeadlineMs / 1000}), so that a leader tries to renew more than once before it gives up`,
    );
  if (values.RUNTIME === 'swarm' && values.SWARM_ENGINES === undefined)
    problems.push("RUNTIME=swarm needs SWARM_ENGINES: expected a comma-separated list of every swarm node's Docker Engine (unix:///path or tcp://host:port)");
  if (problems.length > 0) throw new ConfigError(problems);

  return {
    nodeEnv: values.NODE_ENV as string,
    host: values.HOST as string,
    port: values.PORT as number,
    databaseUrl: values.DATABASE_URL as string | undefined,
    databaseDirectUrl: (values.DATABASE_DIRECT_URL ?? values.DATABASE_URL) as string | undefined,
    dataDir: path.resolve(values.DATA_DIR as string),
    sessionSecret: values.SESSION_SECRET as string | undefined,
    logLevel: values.LOG_LEVEL as LogLevel,
    logFormat: String(values.LOG_FORMAT).toLowerCase() === 'json' ? 'json' : 'human',
    noColor: values.NO_COLOR !== undefined,
    maxActiveContainers: values.MAX_ACTIVE_CONTAINERS as number,
    idleStopMinutes: values.IDLE_STOP_MINUTES as number,
    codeMemoryLimitBytes: parseByteSize(values.CODE_MEMORY_LIMIT as string)!,
    serviceAdminEmails: values.SERVICE_ADMIN_EMAIL === undefined ? [] : splitList(values.SERVICE_ADMIN_EMAIL as string),
    adminToken: values.ADMIN_TOKEN as string | undefined,
    metricsToken: values.METRICS_TOKEN as string | undefined,
    workspaceImage: values.WORKSPACE_IMAGE as string,
    editorPort: values.EDITOR_PORT as number,
    nt4Port: values.NT4_PORT as number,
    halsimPort: values.HALSIM_PORT as number,
    workspaceNetwork: values.WORKSPACE_NETWORK as string,
    controlPlaneId: values.CONTROL_PLANE_ID as string,
    publicUrl: values.PUBLIC_URL === undefined ? undefined : String(values.PUBLIC_URL).replace(/\/$/, ''),
    trustProxy: values.TRUST_PROXY === 'true' || values.TRUST_PROXY === '1',
    reusePort: values.REUSE_PORT === 'true' || values.REUSE_PORT === '1',
    providers,
    proxyTimeoutMs: Math.round((values.PROXY_TIMEOUT_SECONDS as number) * 1000),
    proxyTunnels: { perWorkspace: values.PROXY_MAX_TUNNELS_PER_WORKSPACE as number, total: values.PROXY_MAX_TUNNELS as number | undefined },
    simCommand: values.SIM_COMMAND as string,
    runBuildTimeoutMs: parseDurationMs(String(values.RUN_BUILD_TIMEOUT))!,
    runMaxMs: Math.round((values.RUN_MAX_MINUTES as number) * 60_000),
    idleWarningMinutes: values.IDLE_WARNING_MINUTES as number,
    workspaceHost,
    lease,
    backupSchedule:
      (values.BACKUP_INTERVAL_HOURS as number) === 0
        ? undefined
        : { intervalMs: Math.round((values.BACKUP_INTERVAL_HOURS as number) * 3_600_000), keep: values.BACKUP_KEEP as number },
    codeNanoCpus: Math.round((values.CODE_CPUS as number) * 1e9),
    runNanoCpus: Math.round(((values.RUN_CPUS ?? values.CODE_CPUS) as number) * 1e9),
    runMemoryLimitBytes: parseByteSize((values.RUN_MEMORY_LIMIT ?? values.CODE_MEMORY_LIMIT) as string)!,
    containerPidsLimit: values.CONTAINER_PIDS_LIMIT as number,
    homeDisk: { limitBytes: parseByteSize(values.HOME_DISK_LIMIT as string)!, checkMs: Math.round((values.HOME_DISK_CHECK_SECONDS as number) * 1000) },
    lookConsent: values.LOOK_CONSENT as 'always' | 'ask',
    joinCodes: values.JOIN_CODES === 'on',
    lessonMaxBytes: parseByteSize(values.LESSON_MAX_SIZE as string)!,
    nodeLostMs: Math.round((values.NODE_LOST_SECONDS as number) * 1000),
    outputStreams: {
      perUser: values.OUTPUT_STREAMS_PER_USER as number,
      perRun: values.OUTPUT_STREAMS_PER_RUN as number,
      bufferBytes: parseByteSize(values.OUTPUT_STREAM_BUFFER as string)!,
      stallMs: Math.round((values.OUTPUT_STREAM_STALL_SECONDS as number) * 1000),
    },
    imports: {
      allowedHosts: splitList(values.IMPORT_ALLOWED_HOSTS as string).map((host) => host.replace(/^\[|\]$/g, '').replace(/\.$/, '')),
      allowedAddresses: values.IMPORT_ALLOWED_ADDRESSES === undefined ? [] : splitList(values.IMPORT_ALLOWED_ADDRESSES as string),
      maxBytes: parseByteSize(values.IMPORT_MAX_SIZE as string)!,
      timeoutMs: Math.round((values.IMPORT_TIMEOUT_SECONDS as number) * 1000),
      caFile: values.IMPORT_CA_FILE === undefined ? undefined : path.resolve(values.IMPORT_CA_FILE as string),
    },
    runtime:
      values.RUNTIME === 'swarm'
        ? { kind: 'swarm', engines: engineList(values.SWARM_ENGINES as string).map((entry) => parseEngineEndpoint(entry)!) }
        : { kind: 'docker' },
  };
}

/**
 * The enabled providers: each whose client id and secret are both set (an id without its secret, or
 * the reverse, is a problem). At most two may be enabled; `oidc` also needs OIDC_ISSUER.
 */
function providersOf(values: Record<string, unknown>, problems: string[]): ProviderConfig[] {
  const providers: ProviderConfig[] = [];
  const families = [
    { name: 'github', prefix: 'GITHUB', label: 'GitHub' },
    { name: 'google', prefix: 'GOOGLE', label: 'Google' },
    { name: 'oidc', prefix: 'OIDC', label: String(values.OIDC_LABEL) },
  ] as const;
  for (const { name, prefix, label } of families) {
    const clientId = values[`${prefix}_CLIENT_ID`] as string | undefined;
    const clientSecret = values[`${prefix}_CLIENT_SECRET`] as string | undefined;
    if (clientId === undefined && clientSecret === undefined) continue;
    if (clientId === undefined || clientSecret === undefined) {
      problems.push(`${prefix}_CLIENT_ID and ${prefix}_CLIENT_SECRET must be set together (one of them is missing)`);
      continue;
    }
    if (name === 'oidc' && values.OIDC_ISSUER === undefined) {
      problems.push('OIDC_ISSUER is required when OIDC_CLIENT_ID is set: expected an OpenID Connect issuer URL');
      continue;
    }
    providers.push({ name, label, clientId, clientSecret, ...(name === 'oidc' && { issuer: String(values.OIDC_ISSUER).replace(/\/$/, '') }) });
  }
  if (providers.length > 2) problems.push(`at most two sign-in providers may be configured; found ${providers.map((provider) => provider.name).join(', ')}`);
  return providers;
}

/** The origin browsers use for a server of this configuration: PUBLIC_URL, else its HOST and PORT (what the CLI prints links under). */
export function configuredOrigin(config: Config): string {
  return config.publicUrl ?? `http://${urlHost(config.host)}:${config.port}`;
}

/** The host part of a URL for a listening address (wildcards become loopback, IPv6 gets brackets). */
export function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
