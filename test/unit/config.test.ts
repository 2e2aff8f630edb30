import path from 'node:path';
import { ConfigError, loadConfig, PROJECT_ROOT } from '../../src/config.ts';
import { parseByteSize } from '../../src/bytes.ts';

/** The problems loadConfig reports for `env`, or [] when it accepts it. */
function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
}

describe('loadConfig', () => {
  it('applies the spec defaults when nothing is set', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      databaseUrl: undefined,
      dataDir: path.join(PROJECT_ROOT, 'data'),
      logLevel: 'debug',
      logFormat: 'human',
      noColor: false,
      maxActiveContainers: 10,
      idleStopMinutes: 30,
      codeMemoryLimitBytes: 2 * 1024 ** 3,
      serviceAdminEmails: [],
      adminToken: undefined,
      metricsToken: undefined,
      editorPort: 8080,
      nt4Port: 5810,
      halsimPort: 3300,
      workspaceNetwork: 'classroom-workspaces',
      controlPlaneId: 'default',
    });
  });

  it('reads every variable and coerces numbers', () => {
    const config = loadConfig({
      HOST: '0.0.0.0',
      PORT: '9000',
      DATABASE_URL: 'postgres://u:p@db:5432/cp',
      DATA_DIR: '/tmp/cp-data',
      LOG_LEVEL: 'warning',
      LOG_FORMAT: 'JSON',
      NO_COLOR: '1',
      MAX_ACTIVE_CONTAINERS: '25',
      IDLE_STOP_MINUTES: '10',
      CODE_MEMORY_LIMIT: '512m',
      SERVICE_ADMIN_EMAIL: ' Coach@School.org, head@school.org ,',
      ADMIN_TOKEN: 'a'.repeat(32),
      METRICS_TOKEN: 'm'.repeat(40),
      WORKSPACE_IMAGE: 'registry.local/ws:1.2',
      EDITOR_PORT: '8443',
      NT4_PORT: '5811',
      HALSIM_PORT: '3301',
      WORKSPACE_NETWORK: 'class-net',
      CONTROL_PLANE_ID: 'room-12',
    });
    expect(config).toMatchObject({
      host: '0.0.0.0',
      port: 9000,
      databaseUrl: 'postgres://u:p@db:5432/cp',
      dataDir: '/tmp/cp-data',
      logLevel: 'warning',
      logFormat: 'json',
      noColor: true,
      maxActiveContainers: 25,
      idleStopMinutes: 10,
      codeMemoryLimitBytes: 512 * 1024 ** 2,
      serviceAdminEmails: ['coach@school.org', 'head@school.org'],
      adminToken: 'a'.repeat(32),
      metricsToken: 'm'.repeat(40),
      workspaceImage: 'registry.local/ws:1.2',
      editorPort: 8443,
      nt4Port: 5811,
      halsimPort: 3301,
      workspaceNetwork: 'class-net',
      controlPlaneId: 'room-12',
    });
  });

  it('treats empty values as unset', () => {
    expect(loadConfig({ PORT: '', LOG_LEVEL: '  ', ADMIN_TOKEN: '' })).toMatchObject({ port: 8080, logLevel: 'debug', adminToken: undefined });
  });

  it('refuses LOG_LEVEL=loud and lists the six levels', () => {
    expect(problems({ LOG_LEVEL: 'loud' })).toEqual(['LOG_LEVEL="loud" is not valid: expected one of trace, debug, info, warning, error, fatal']);
  });

  it('reports one line per invalid variable, naming each', () => {
    const lines = problems({ PORT: '70000', MAX_ACTIVE_CONTAINERS: '-1', IDLE_STOP_MINUTES: '0', CODE_MEMORY_LIMIT: '12q', SERVICE_ADMIN_EMAIL: 'coach' });
    expect(lines).toHaveLength(5);
    expect(lines).toEqual(
      expect.arrayContaining([
        'PORT="70000" is not valid: expected a TCP port from 0 (any free port) to 65535',
        'MAX_ACTIVE_CONTAINERS="-1" is not valid: expected an integer from 0 to 10000',
        'IDLE_STOP_MINUTES="0" is not valid: expected minutes from 0.05 to 10080 (decimals allowed)',
        'CODE_MEMORY_LIMIT="12q" is not valid: expected a memory size of at least 6m: bytes, or a number with k, m or g (e.g. 512m, 2g)',
        'SERVICE_ADMIN_EMAIL="coach" is not valid: expected a comma-separated list of email addresses',
      ]),
    );
  });

  it('refuses what each kind of variable does not take: a fraction for a whole number, a number at an exclusive minimum, text that is not a number, a pattern missed, text too long', () => {
    expect(problems({ PORT: '80.5' })).toEqual(['PORT="80.5" is not valid: expected a TCP port from 0 (any free port) to 65535']);
    expect(problems({ PROXY_TIMEOUT_SECONDS: '0' })).toEqual(['PROXY_TIMEOUT_SECONDS="0" is not valid: expected seconds from 1 to 3600']);
    expect(problems({ IDLE_STOP_MINUTES: 'soon' })).toEqual(['IDLE_STOP_MINUTES="soon" is not valid: expected minutes from 0.05 to 10080 (decimals allowed)']);
    expect(problems({ WORKSPACE_NETWORK: '-net' })).toEqual(['WORKSPACE_NETWORK="-net" is not valid: expected a Docker network name']);
    expect(problems({ OIDC_LABEL: 'x'.repeat(61) })).toEqual([`OIDC_LABEL="${'x'.repeat(61)}" is not valid: expected the name shown on the sign-in button`]);
  });

  it('takes numbers as written, decimals where allowed, and a label at its longest', () => {
    expect(loadConfig({ PORT: '0', PROXY_TIMEOUT_SECONDS: '0.5', IDLE_STOP_MINUTES: '0.05', OIDC_LABEL: 'é'.repeat(60) })).toMatchObject({
      port: 0,
      proxyTimeoutMs: 500,
      idleStopMinutes: 0.05,
    });
  });

  it('takes a direct database URL for LISTEN and migrations, DATABASE_URL by default, and refuses one without DATABASE_URL', () => {
    const pooled = 'postgres://control:secret@pgbouncer:6432/control';
    const direct = 'postgres://control:secret@db:5432/control';
    expect(loadConfig({ DATABASE_URL: pooled }).databaseDirectUrl).toBe(pooled);
    expect(loadConfig({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: direct }).databaseDirectUrl).toBe(direct);
    expect(loadConfig({}).databaseDirectUrl).toBeUndefined();
    expect(problems({ DATABASE_DIRECT_URL: direct })).toEqual([
      'DATABASE_DIRECT_URL is set but DATABASE_URL is not: set DATABASE_URL too (the direct URL is for LISTEN and migrations beside it)',
    ]);
    expect(problems({ DATABASE_URL: pooled, DATABASE_DIRECT_URL: 'mysql://db' })).toEqual([
      'DATABASE_DIRECT_URL=<hidden> is not valid: expected a postgres:// or postgresql:// URL',
    ]);
  });

  it("takes the lease's timings in seconds, controller-runtime's by default, and refuses a renew deadline or retry that would let two lead", () => {
    expect(loadConfig({}).lease).toEqual({ durationMs: 15_000, renewDeadlineMs: 10_000, retryMs: 2000 });
    expect(loadConfig({ LEASE_DURATION_SECONDS: '3', LEASE_RENEW_DEADLINE_SECONDS: '2', LEASE_RETRY_SECONDS: '0.25' }).lease).toEqual({
      durationMs: 3000,
      renewDeadlineMs: 2000,
      retryMs: 250,
    });
    expect(problems({ LEASE_DURATION_SECONDS: '10' })).toEqual([
      'LEASE_RENEW_DEADLINE_SECONDS=10 is not valid: it must be less than LEASE_DURATION_SECONDS (10), so that a leader stops acting before another may take over',
    ]);
    expect(problems({ LEASE_RETRY_SECONDS: '10' })).toEqual([
      'LEASE_RETRY_SECONDS=10 is not valid: it must be less than LEASE_RENEW_DEADLINE_SECONDS (10), so that a leader tries to renew more than once before it gives up',
    ]);
  });

  it('schedules a backup of every home a day and keeps 7 by default; 0 hours turns it off; refuses what is no interval or count', () => {
    expect(loadConfig({}).backupSchedule).toEqual({ intervalMs: 24 * 3_600_000, keep: 7 });
    expect(loadConfig({ BACKUP_INTERVAL_HOURS: '0.5', BACKUP_KEEP: '30' }).backupSchedule).toEqual({ intervalMs: 1_800_000, keep: 30 });
    expect(loadConfig({ BACKUP_INTERVAL_HOURS: '0' }).backupSchedule).toBeUndefined();
    expect(problems({ BACKUP_INTERVAL_HOURS: '-1', BACKUP_KEEP: '0' })).toEqual([
      'BACKUP_INTERVAL_HOURS="-1" is not valid: expected hours from 0 (no scheduled backups) to 720 (decimals allowed)',
      'BACKUP_KEEP="0" is not valid: expected a whole number from 1 to 1000',
    ]);
  });

  it('runs workspaces on one Docker Engine by default, on a swarm through every node engine named in SWARM_ENGINES, and refuses a swarm without them', () => {
    expect(loadConfig({}).runtime).toEqual({ kind: 'docker' });
    expect(loadConfig({ RUNTIME: 'swarm', SWARM_ENGINES: 'unix:///run/Nodes/a.sock, tcp://10.0.0.2:2375,tcp://[fd00::3]:2376' }).runtime).toEqual({
      kind: 'swarm',
      engines: [{ socketPath: '/run/Nodes/a.sock' }, { host: '10.0.0.2', port: 2375 }, { host: 'fd00::3', port: 2376 }],
    });
    expect(problems({ RUNTIME: 'swarm' })).toEqual([
      "RUNTIME=swarm needs SWARM_ENGINES: expected a comma-separated list of every swarm node's Docker Engine (unix:///path or tcp://host:port)",
    ]);
    expect(problems({ RUNTIME: 'kubernetes', SWARM_ENGINES: 'unix://relative.sock,tcp://host' })).toEqual([
      'RUNTIME="kubernetes" is not valid: expected docker (one engine) or swarm (SWARM_ENGINES)',
      'SWARM_ENGINES="unix://relative.sock,tcp://host" is not valid: expected a comma-separated list of every swarm node\'s Docker Engine: unix:///path/to/docker.sock or tcp://host:port',
    ]);
  });

  it('limits no CPU by default; CODE_CPUS takes decimals, in billionths of a CPU', () => {
    expect(loadConfig({}).codeNanoCpus).toBe(0);
    expect(loadConfig({ CODE_CPUS: '1.5' }).codeNanoCpus).toBe(1_500_000_000);
    expect(problems({ CODE_CPUS: '-1' })).toEqual([
      'CODE_CPUS="-1" is not valid: expected a number of CPUs from 0 (no limit) to 256 (decimals allowed, e.g. 1.5)',
    ]);
  });
  it('limits a run as the editor unless RUN_CPUS and RUN_MEMORY_LIMIT say otherwise; 1024 processes a container; homes of 5 GiB measured every minute', () => {
    expect(loadConfig({})).toMatchObject({
      runNanoCpus: 0,
      runMemoryLimitBytes: 2 * 1024 ** 3,
      containerPidsLimit: 1024,
      homeDisk: { limitBytes: 5 * 1024 ** 3, checkMs: 60_000 },
    });
    expect(loadConfig({ CODE_CPUS: '2', CODE_MEMORY_LIMIT: '3g' })).toMatchObject({ runNanoCpus: 2e9, runMemoryLimitBytes: 3 * 1024 ** 3 });
    expect(
      loadConfig({
        CODE_CPUS: '2',
        RUN_CPUS: '0.5',
        RUN_MEMORY_LIMIT: '768m',
        CONTAINER_PIDS_LIMIT: '4096',
        HOME_DISK_LIMIT: '0',
        HOME_DISK_CHECK_SECONDS: '300',
      }),
    ).toMatchObject({
      codeNanoCpus: 2e9,
      runNanoCpus: 5e8,
      runMemoryLimitBytes: 768 * 1024 ** 2,
      containerPidsLimit: 4096,
      homeDisk: { limitBytes: 0, checkMs: 300_000 },
    });
    expect(problems({ RUN_CPUS: '-1', RUN_MEMORY_LIMIT: '1m', CONTAINER_PIDS_LIMIT: '10', HOME_DISK_LIMIT: '100k', HOME_DISK_CHECK_SECONDS: '0' })).toEqual([
      'RUN_CPUS="-1" is not valid: expected a number of CPUs from 0 (no limit) to 256 (decimals allowed, e.g. 1.5); unset: CODE_CPUS',
      'CONTAINER_PIDS_LIMIT="10" is not valid: expected a whole number of processes and threads from 64 to 1000000',
      'HOME_DISK_CHECK_SECONDS="0" is not valid: expected seconds from 1 to 3600',
      'RUN_MEMORY_LIMIT="1m" is not valid: expected a memory size of at least 6m: bytes, or a number with k, m or g (e.g. 512m, 2g); unset: CODE_MEMORY_LIMIT',
      'HOME_DISK_LIMIT="100k" is not valid: expected a size of at least 1m: bytes, or a number with k, m or g (e.g. 5g); 0: no bound',
    ]);
  });
  it('bounds output streams at 8 a user and 16 a run, with a 128 KiB buffer that may wait 30 s; refuses what is no bound', () => {
    expect(loadConfig({}).outputStreams).toEqual({ perUser: 8, perRun: 16, bufferBytes: 128 * 1024, stallMs: 30_000 });
    expect(
      loadConfig({ OUTPUT_STREAMS_PER_USER: '3', OUTPUT_STREAMS_PER_RUN: '40', OUTPUT_STREAM_BUFFER: '1m', OUTPUT_STREAM_STALL_SECONDS: '2.5' }).outputStreams,
    ).toEqual({ perUser: 3, perRun: 40, bufferBytes: 1024 * 1024, stallMs: 2500 });
    expect(problems({ OUTPUT_STREAMS_PER_USER: '0', OUTPUT_STREAMS_PER_RUN: '1.5', OUTPUT_STREAM_BUFFER: '1k', OUTPUT_STREAM_STALL_SECONDS: '0' })).toEqual([
      'OUTPUT_STREAMS_PER_USER="0" is not valid: expected a whole number from 1 to 1000',
      'OUTPUT_STREAMS_PER_RUN="1.5" is not valid: expected a whole number from 1 to 1000',
      'OUTPUT_STREAM_STALL_SECONDS="0" is not valid: expected seconds from 1 to 3600 (decimals allowed)',
      'OUTPUT_STREAM_BUFFER="1k" is not valid: expected a size from 64k to 64m: bytes, or a number with k, m or g (e.g. 128k)',
    ]);
  });

  it('never echoes a secret in its error line', () => {
    expect(problems({ ADMIN_TOKEN: 'short-secret' })).toEqual(['ADMIN_TOKEN=<hidden> is not valid: expected a secret of at least 32 characters']);
    expect(problems({ DATABASE_URL: 'mysql://root:hunter2@db' })).toEqual(['DATABASE_URL=<hidden> is not valid: expected a postgres:// or postgresql:// URL']);
  });

  it('refuses an ADMIN_TOKEN or METRICS_TOKEN shorter than 32 characters, which a throttle could not protect', () => {
    expect(problems({ ADMIN_TOKEN: 'a'.repeat(31), METRICS_TOKEN: 'm'.repeat(31) })).toEqual([
      'ADMIN_TOKEN=<hidden> is not valid: expected a secret of at least 32 characters',
      'METRICS_TOKEN=<hidden> is not valid: expected a secret of at least 32 characters',
    ]);
    expect(problems({ ADMIN_TOKEN: 'a'.repeat(32), METRICS_TOKEN: 'm'.repeat(32) })).toEqual([]);
  });

  it('requires TRUST_PROXY with an https PUBLIC_URL (TLS ends at a proxy in front)', () => {
    expect(problems({ PUBLIC_URL: 'https://robots.school.org' })).toEqual([
      'PUBLIC_URL is https but TRUST_PROXY is not true: TLS ends at a proxy in front, so set TRUST_PROXY=true (secure cookies need it)',
    ]);
    expect(loadConfig({ PUBLIC_URL: 'https://robots.school.org/', TRUST_PROXY: 'true' })).toMatchObject({
      publicUrl: 'https://robots.school.org',
      trustProxy: true,
    });
  });

  it('requires SESSION_SECRET in production', () => {
    expect(problems({ NODE_ENV: 'production' })).toEqual(['SESSION_SECRET is required when NODE_ENV=production: expected a secret of at least 32 characters']);
    expect(problems({ NODE_ENV: 'production', SESSION_SECRET: 's'.repeat(32) })).toEqual([]);
  });

  it('refuses a memory limit below Docker minimum of 6 MiB', () => {
    expect(problems({ CODE_MEMORY_LIMIT: '5m' })).toHaveLength(1);
    expect(problems({ CODE_MEMORY_LIMIT: '6m' })).toEqual([]);
  });

  it('treats any LOG_FORMAT other than json as human-readable, as the spec says', () => {
    expect(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat).toBe('human');
  });
});

describe('WORKSPACE_HOST (host mode)', () => {
  const accepts =
    'a wildcard host: "*." then a domain of at least two labels, optionally with a port, no scheme or path (e.g. *.ws.school.org, *.ws.localhost:8080)';

  it('is unset by default: path mode', () => {
    expect(loadConfig({}).workspaceHost).toBeUndefined();
  });

  it.each([
    ['*.ws.school.org', { base: 'ws.school.org', hostname: 'ws.school.org', port: undefined }],
    ['*.WS.School.org', { base: 'ws.school.org', hostname: 'ws.school.org', port: undefined }],
    ['*.ws.localhost:8080', { base: 'ws.localhost:8080', hostname: 'ws.localhost', port: 8080 }],
    ['*.xn--bcher-kva.example', { base: 'xn--bcher-kva.example', hostname: 'xn--bcher-kva.example', port: undefined }],
  ])('reads %s', (value, expected) => {
    expect(loadConfig({ WORKSPACE_HOST: value, PUBLIC_URL: 'http://robots.school.org' }).workspaceHost).toEqual(expected);
  });

  it.each([
    'ws.school.org',
    '*ws.school.org',
    '*.*.school.org',
    '**.school.org',
    'https://*.ws.school.org',
    '*.ws.school.org/',
    '*.ws.school.org/path',
    '*.ws.school.org?x',
    '*.localhost',
    '*.org',
    '*.ws..school.org',
    '*.ws.school.org.',
    '*.-ws.school.org',
    '*.ws_1.school.org',
    '*.ws.school.org:0',
    '*.ws.school.org:65536',
    '*.ws.school.org:port',
    '*.1.2.3.4',
    '*.[::1]',
    '*.user@ws.school.org',
    '*.bücher.example',
    `*.${'a'.repeat(64)}.org`,
  ])('refuses %s with one clear line', (value) => {
    expect(problems({ WORKSPACE_HOST: value })).toEqual([`WORKSPACE_HOST=${JSON.stringify(value)} is not valid: expected ${accepts}`]);
  });

  it("refuses the control plane's own host, a parent of it or a domain under it: its pages could set the control plane's cookies", () => {
    for (const value of ['*.robots.school.org', '*.school.org', '*.Robots.School.org:8443', '*.ws.robots.school.org', '*.a.b.robots.school.org']) {
      const lines = problems({ WORKSPACE_HOST: value, PUBLIC_URL: 'https://robots.school.org', TRUST_PROXY: 'true' });
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^WORKSPACE_HOST=".*" is not valid: its domain must not be the control plane's host \(robots\.school\.org\), a parent of it or under it/,
      );
    }
    // Without PUBLIC_URL, the listening host is the control plane's.
    expect(problems({ WORKSPACE_HOST: '*.school.org', HOST: 'cp.school.org' })).toHaveLength(1);
    expect(problems({ WORKSPACE_HOST: '*.ws.cp.school.org', HOST: 'cp.school.org' })).toHaveLength(1);
    // A sibling or a domain of its own is fine.
    expect(problems({ WORKSPACE_HOST: '*.ws.school.org', PUBLIC_URL: 'https://robots.school.org', TRUST_PROXY: 'true' })).toEqual([]);
    expect(problems({ WORKSPACE_HOST: '*.school-workspaces.org', PUBLIC_URL: 'https://robots.school.org', TRUST_PROXY: 'true' })).toEqual([]);
    // A name that merely ends like the control plane's is not under it.
    expect(problems({ WORKSPACE_HOST: '*.wsrobots.school.org', PUBLIC_URL: 'https://robots.school.org', TRUST_PROXY: 'true' })).toEqual([]);
    expect(problems({ WORKSPACE_HOST: '*.ws.localhost:8080', PUBLIC_URL: 'http://127.0.0.1:8080' })).toEqual([]);
    expect(problems({ WORKSPACE_HOST: '*.ws.localhost:8080' })).toEqual([]);
  });
});

describe('IMPORT_* (imports of a team project)', () => {
  it('allows github.com and gitlab.com, no special network, 100 MB and 120 s by default', () => {
    expect(loadConfig({}).imports).toEqual({
      allowedHosts: ['github.com', 'gitlab.com'],
      allowedAddresses: [],
      maxBytes: 100 * 1024 ** 2,
      timeoutMs: 120_000,
      caFile: undefined,
    });
  });

  it('reads hosts (any case, a trailing dot and IPv6 brackets dropped), networks, a size, seconds and a CA file', () => {
    const imports = loadConfig({
      IMPORT_ALLOWED_HOSTS: ' GitHub.com, git.school.org., [fd00::5] ',
      IMPORT_ALLOWED_ADDRESSES: '10.20.0.0/16, 192.168.1.5, fd00::/8',
      IMPORT_MAX_SIZE: '20m',
      IMPORT_TIMEOUT_SECONDS: '30',
      IMPORT_CA_FILE: '/etc/ssl/school-ca.pem',
    }).imports;
    expect(imports).toEqual({
      allowedHosts: ['github.com', 'git.school.org', 'fd00::5'],
      allowedAddresses: ['10.20.0.0/16', '192.168.1.5', 'fd00::/8'],
      maxBytes: 20 * 1024 ** 2,
      timeoutMs: 30_000,
      caFile: '/etc/ssl/school-ca.pem',
    });
  });

  it('refuses a network that is no CIDR, a host with a scheme or path, a size out of bounds', () => {
    expect(problems({ IMPORT_ALLOWED_ADDRESSES: '10.0.0.0/33' })).toEqual([
      'IMPORT_ALLOWED_ADDRESSES="10.0.0.0/33" is not valid: expected a comma-separated list of networks in CIDR form or addresses (e.g. 10.20.0.0/16, 192.168.1.5)',
    ]);
    expect(problems({ IMPORT_ALLOWED_ADDRESSES: 'school-lan' })).toHaveLength(1);
    expect(problems({ IMPORT_ALLOWED_HOSTS: 'https://github.com' })).toHaveLength(1);
    expect(problems({ IMPORT_ALLOWED_HOSTS: 'github.com/team' })).toHaveLength(1);
    expect(problems({ IMPORT_MAX_SIZE: '100k' })).toHaveLength(1);
    expect(problems({ IMPORT_MAX_SIZE: '20g' })).toHaveLength(1);
    expect(problems({ IMPORT_TIMEOUT_SECONDS: '0' })).toHaveLength(1);
  });
});

describe('parseByteSize', () => {
  it.each([
    ['536870912', 536870912],
    ['512m', 512 * 1024 ** 2],
    ['512M', 512 * 1024 ** 2],
    ['2g', 2 * 1024 ** 3],
    ['2gb', 2 * 1024 ** 3],
    ['64k', 64 * 1024],
  ])('parses %s', (text, bytes) => {
    expect(parseByteSize(text)).toBe(bytes);
  });

  it.each(['', 'm', '1.5g', '-1m', '2t', '12q', 'lots'])('refuses %j', (text) => {
    expect(parseByteSize(text)).toBeUndefined();
  });
});
