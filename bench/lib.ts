import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { loadConfig } from '../src/config.ts';
import { createControlPlane, type ControlPlaneOptions, type PartName } from '../bin/control-plane.ts';
import { createDataSource, migrate } from '../src/db/database.ts';
import { CONTROL_PLANE_LABEL, engineClient } from '../src/docker/docker-runtime.ts';
import { createRootLogger } from '../src/log.ts';
import { SessionStore } from '../src/store/sessions.ts';
import { sessionFor } from '../test/helpers/session.ts';
import { TEST_ENV } from '../test/helpers/controllers.ts';
import { freePort as freeLoopbackPort } from '../test/helpers/server.ts';

/** The PostgreSQL server of the tests (scripts/provision.sh starts it). */
export const SERVER_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:54329/postgres';
export const IMAGE = 'classroom-workspace:test';
export const MEMORY = 64 * 1024 * 1024;
export const docker = engineClient();

/** Creates (dropping first) a benchmark database with the real migrations and returns a data source on it. */
export async function benchDatabase(name: string): Promise<{ dataSource: DataSource; drop: () => Promise<void> }> {
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: SERVER_URL });
    await client.connect();
    await client.query(sql).finally(() => void client.end());
  };
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(SERVER_URL);
  url.pathname = `/${name}`;
  const dataSource = createDataSource(url.toString(), 20);
  await dataSource.initialize();
  await migrate(dataSource);
  return {
    dataSource,
    drop: async () => {
      await dataSource.destroy();
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** The URL of benchmark database `name` on the benchmark server. */
export function benchDatabaseUrl(name: string): string {
  const url = new URL(SERVER_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops benchmark database `name` (closing its connections), e.g. after a child process that used it died. */
export async function dropBenchDatabase(name: string): Promise<void> {
  const client = new pg.Client({ connectionString: SERVER_URL });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => void client.end());
}

/** How a benchmark's control plane differs from the default one. */
export interface BenchPlaneOptions extends Partial<ControlPlaneOptions> {
  /** Called on every log record. */
  onLog?: (record: Record<string, unknown>) => void;
  /** Scopes its containers (default: a fresh `bench-<hex>`). */
  controlPlaneId?: string;
  /** Environment beside the benchmark's own (the test image, small containers, the default bridge). */
  env?: Record<string, string>;
}

/**
 * A control plane on a benchmark database, made through the composition root with the given parts
 * (default: none). `newController()` makes another plane's workspace controller on the same store
 * and change feed (a restart, for adoption).
 */
export function controlPlane(
  dataSource: DataSource,
  { onLog = () => undefined, controlPlaneId = `bench-${randomBytes(4).toString('hex')}`, env = {}, ...options }: BenchPlaneOptions = {},
) {
  const sink = { write: (line: string) => onLog(JSON.parse(line) as Record<string, unknown>) };
  const log = createRootLogger({ level: 'info', format: 'json', colour: false, sinks: { out: sink, err: sink } });
  const config = loadConfig({
    WORKSPACE_IMAGE: IMAGE,
    CODE_MEMORY_LIMIT: String(MEMORY),
    WORKSPACE_NETWORK: 'bridge',
    EDITOR_PORT: '8080',
    NT4_PORT: '5810',
    CONTROL_PLANE_ID: controlPlaneId,
    MAX_ACTIVE_CONTAINERS: '1000',
    LOG_LEVEL: 'info',
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'cp-bench-')),
    ...env,
  });
  // The benchmark owns its data source: planes leave it open.
  const open = (parts: readonly PartName[], extra: Partial<ControlPlaneOptions> = {}) =>
    createControlPlane({
      config,
      log,
      database: { dataSource, embedded: false, close: async () => undefined },
      parts,
      tuning: { workspaces: { orphanStartupGraceMs: 3_600_000 } },
      ...options,
      ...extra,
    });
  const plane = open(options.parts ?? []);
  const newController = () => open(['workspaces'], { changes: plane.changes }).workspaces!;
  return { controlPlaneId, plane, store: plane.store, runtime: plane.runtime, metrics: plane.metrics, newController };
}

/** Removes every container and volume carrying `label=value`. */
/**
 * The control plane of a benchmark's child process (`<bench>.ts serve`, forked with BENCH_DATABASE,
 * BENCH_CONTROL_PLANE_ID and BENCH_SESSION_SECRET in its environment), so that its CPU and memory
 * are the server's alone: by default the change listener, activity, HTTP (with the proxy) and the
 * workspace controller (`parts`), on a loopback port, admitting everyone, its warnings and errors on stderr. It stops
 * (and the process exits) on `stop()` or when the parent goes.
 */
export async function serveControlPlane(
  env: Record<string, string> = {},
  parts: PartName[] = ['changes', 'activity', 'http', 'workspaces'],
): Promise<{
  plane: ReturnType<typeof controlPlane>['plane'];
  dataSource: DataSource;
  secret: string;
  stop: () => Promise<void>;
}> {
  const secret = process.env.BENCH_SESSION_SECRET!;
  const url = benchDatabaseUrl(process.env.BENCH_DATABASE!);
  const toStderr = (record: Record<string, unknown>) => {
    if (['warning', 'error', 'fatal'].includes(String(record.level))) process.stderr.write(`control plane: ${JSON.stringify(record)}\n`);
  };
  const dataSource = createDataSource(url);
  await dataSource.initialize();
  const { plane } = controlPlane(dataSource, {
    onLog: toStderr,
    controlPlaneId: process.env.BENCH_CONTROL_PLANE_ID!,
    env: { DATABASE_URL: url, ...env },
    parts,
    listen: { port: 0, host: '127.0.0.1' },
    allowlist: { isAllowed: () => true },
    sessionSecret: secret,
  });
  await plane.start();
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      plane.http!.server.closeAllConnections();
      await plane.stop();
      await dataSource.destroy().catch(() => undefined);
      process.exit(0);
    })());
  // The parent gone (crashed or killed): stop too, leaving its cleanup of Docker to its finally or the next run.
  process.on('disconnect', () => void stop());
  return { plane, dataSource, secret, stop };
}

export async function removeLabelled(label: string, value: string): Promise<void> {
  const filters = { label: [`${label}=${value}`] };
  const containers = await docker.listContainers({ all: true, filters });
  await Promise.all(
    containers.map((info) =>
      docker
        .getContainer(info.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  );
  const { Volumes } = await docker.listVolumes({ filters });
  await Promise.all(
    (Volumes ?? []).map((volume) =>
      docker
        .getVolume(volume.Name)
        .remove()
        .catch(() => undefined),
    ),
  );
}

/** A plain dockerode create+start of a container like a code container (the baseline). */
export async function plainCreateStart(name: string, baselineId: string): Promise<string> {
  const labels = { 'bench.baseline': baselineId };
  await docker.createVolume({ Name: `${name}-home`, Labels: labels });
  const container = await docker.createContainer({
    name,
    Image: IMAGE,
    Env: ['EDITOR_PORT=8080'],
    Labels: labels,
    HostConfig: { Memory: MEMORY, MemorySwap: MEMORY, NetworkMode: 'bridge', Mounts: [{ Type: 'volume', Source: `${name}-home`, Target: '/home/student' }] },
  });
  await container.start();
  return container.id;
}

export { CONTROL_PLANE_LABEL };

export const median = (values: number[]) => {
  const sorted = values.toSorted((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
};
export const percentile = (values: number[], p: number) => {
  const sorted = values.toSorted((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

/** Ends the process if the benchmark runs longer than `ms`, after `cleanup` (given at most 30 s) when there is one. */
export function deadline(ms: number, cleanup?: () => Promise<void>): void {
  setTimeout(() => {
    console.error(`benchmark exceeded ${ms / 1000} s, aborting`);
    if (!cleanup) process.exit(1);
    setTimeout(() => process.exit(1), 30_000).unref();
    void cleanup()
      .catch((error: unknown) => console.error('cleanup failed:', error))
      .finally(() => process.exit(1));
  }, ms).unref();
}

/** What a benchmark must undo (last first: `cleanup()`), and the control-plane id its containers carry. */
export interface BenchScope {
  cleanups: (() => Promise<unknown>)[];
  cleanup: () => Promise<void>;
  controlPlaneId: string;
}

/**
 * A benchmark's scope: clean-up steps run last first (a failing one said and passed over), run by the
 * deadline too when the benchmark runs past `minutes`; a control-plane id of its own, whose
 * containers and volumes the first step removes.
 */
export function benchScope(minutes: number): BenchScope {
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanup = async () => {
    for (const step of cleanups.splice(0).toReversed()) await step().catch((error: unknown) => console.error('cleanup step failed:', error));
  };
  deadline(minutes * 60_000, cleanup);
  const controlPlaneId = `bench-${randomBytes(4).toString('hex')}`;
  cleanups.push(() => removeLabelled(CONTROL_PLANE_LABEL, controlPlaneId));
  return { cleanups, cleanup, controlPlaneId };
}

/** The machine's load averages (1, 5 and 15 minutes), for a benchmark's figures. */
export const loadAverage = (): string =>
  os
    .loadavg()
    .map((each) => each.toFixed(2))
    .join(', ');

/**
 * A scratch directory and bench database `database` (migrated: benchDatabase) for a benchmark that
 * runs the programs themselves, both removed by `cleanup()`, or when it runs past `minutes` (deadline).
 */
export async function scratchBench(database: string, minutes = 10): Promise<{ scratch: string; cleanup: () => Promise<void> }> {
  const { drop } = await benchDatabase(database);
  const scratch = mkdtempSync(path.join(os.tmpdir(), `${database.replaceAll('_', '-')}-`));
  const cleanup = async () => {
    rmSync(scratch, { recursive: true, force: true });
    await drop();
  };
  deadline(minutes * 60_000, cleanup);
  return { scratch, cleanup };
}

/**
 * What a benchmark of replicas stands on: a fresh bench database, a data directory, a control-plane
 * id of its own, and its cleanup steps (added by the benchmark as it goes), run in reverse order at
 * `cleanup()` or when it runs past `minutes` (deadline). Undone: the database, the directory, and
 * every container and volume of that control-plane id.
 */
export interface ReplicaBench {
  controlPlaneId: string;
  dataSource: DataSource;
  dataDir: string;
  cleanups: (() => Promise<unknown>)[];
  cleanup: () => Promise<void>;
}

export async function replicaBench(database: string, minutes: number): Promise<ReplicaBench> {
  const { cleanups, cleanup, controlPlaneId } = benchScope(minutes);
  const { dataSource, drop } = await benchDatabase(database);
  cleanups.push(drop);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `${database.replaceAll('_', '-')}-`));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  return { controlPlaneId, dataSource, dataDir, cleanups, cleanup };
}

/** The Cookie header of a signed-in session for `userId` (made as koa-session makes one; see test/helpers/session.ts). */
export async function signedSessionCookie(db: DataSource, userId: string, secret: string): Promise<string> {
  return (await sessionFor(new SessionStore(db), userId, secret)).cookie;
}

export { freePort } from '../test/helpers/server.ts';

/** A signed-in student as the benchmarks hold one: their workspace's slug and their session's Cookie header. */
export interface SignedIn {
  slug: string;
  cookie: string;
}

/** Presses Run as the student does (`POST /u/<slug>/api/runs` with their cookie and the site's Origin); the new run's id. */
export async function startRun(origin: string, student: SignedIn): Promise<string> {
  const answer = await fetch(`${origin}/u/${student.slug}/api/runs`, { method: 'POST', headers: { cookie: student.cookie, origin } });
  if (answer.status !== 202) throw new Error(`Run answered ${answer.status}: ${await answer.text()}`);
  return ((await answer.json()) as { run: { id: string } }).run.id;
}

/** Presses Stop as the student does, and waits (30 s at most) until the run is no longer queued or running. */
export async function stopRun(origin: string, student: SignedIn, runId: string): Promise<void> {
  await fetch(`${origin}/u/${student.slug}/api/runs/${runId}/stop`, { method: 'POST', headers: { cookie: student.cookie, origin } });
  for (const until = Date.now() + 30_000; Date.now() < until; await sleep(100)) {
    const answer = await fetch(`${origin}/u/${student.slug}/api/runs/${runId}`, { headers: { cookie: student.cookie } });
    const { run } = (await answer.json()) as { run: { status: string } };
    if (run.status !== 'queued' && run.status !== 'running') return;
  }
}

/** Follows a run's live output; calls `onLine` with each whole line as it arrives. Resolves once the stream is open. */
export async function followRunOutput(origin: string, student: SignedIn, runId: string, onLine: (line: string) => void, signal: AbortSignal): Promise<void> {
  const answer = await fetch(`${origin}/u/${student.slug}/api/runs/${runId}/output`, { headers: { cookie: student.cookie }, signal });
  if (answer.status !== 200) throw new Error(`output stream answered ${answer.status}`);
  void (async () => {
    let buffered = '';
    let partial = '';
    try {
      for await (const chunk of answer.body!.pipeThrough(new TextDecoderStream())) {
        buffered += chunk;
        for (let end = buffered.indexOf('\n\n'); end !== -1; end = buffered.indexOf('\n\n')) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          if (!block.startsWith('id: ') || !block.includes('event: output')) continue;
          const data = JSON.parse(block.slice(block.indexOf('data: ') + 6)) as { text: string };
          const lines = (partial + data.text).split('\n');
          partial = lines.pop()!;
          for (const line of lines) onLine(line);
        }
      }
    } catch {
      // Aborted.
    }
  })();
}

/** A Cookie header (`a=1; b=2`) as Playwright's cookies for `origin`. */
export function browserCookies(cookie: string, origin: string): { name: string; value: string; url: string }[] {
  return cookie.split(';').map((pair) => {
    const at = pair.indexOf('=');
    return { name: pair.slice(0, at).trim(), value: pair.slice(at + 1).trim(), url: origin };
  });
}

/** Resident set size of process `pid` in bytes (VmRSS of /proc/<pid>/status). */
export function processRssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : NaN;
}

let clockTicks: number | undefined;
/** CPU time (user + system) process `pid` has used so far, in seconds (/proc/<pid>/stat). */
export function processCpuSeconds(pid: number): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name (which may contain spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}

/** CPU time (seconds) used so far by every process of the cgroup of `pid`, e.g. a whole container (cgroup v1 cpuacct or v2). */
export function cgroupCpuSeconds(pid: number): number {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((line) => /^\d+:[^:]*\bcpuacct\b[^:]*:/.test(line));
  if (v1) return Number(readFileSync(`/sys/fs/cgroup/cpuacct${v1.slice(v1.lastIndexOf(':') + 1)}/cpuacct.usage`, 'utf8')) / 1e9;
  const v2 = lines.find((line) => line.startsWith('0::'));
  const stat = readFileSync(`/sys/fs/cgroup${v2!.slice(3)}/cpu.stat`, 'utf8');
  return Number(/^usage_usec (\d+)$/m.exec(stat)?.[1]) / 1e6;
}

/** Where the machine's CPU time went so far (seconds): all of it, and by who. */
export interface CpuSplit {
  /** Every CPU's busy time (/proc/stat). */
  machine: number;
  /** The Docker Engine's containers (their cgroups; cgroup v1's `docker` cpuacct group, else NaN). */
  containers: number;
  /** dockerd, containerd and the containers' shims. */
  engine: number;
  /** PostgreSQL's processes. */
  postgres: number;
}

/** A snapshot of where the machine's CPU time went (cpuSplitSince takes a phase's from it). */
export interface CpuSnapshot {
  machine: number;
  containers: number;
  /** The engine's and PostgreSQL's processes alive at the snapshot, by pid: what each had used. */
  processes: Map<number, { of: 'engine' | 'postgres'; seconds: number }>;
}

export function cpuSnapshot(): CpuSnapshot {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const machine = (fields.reduce((sum, value) => sum + value, 0) - fields[3]! - (fields[4] ?? 0)) / clockTicks;
  let containers = Number.NaN;
  try {
    containers = Number(readFileSync('/sys/fs/cgroup/cpuacct/docker/cpuacct.usage', 'utf8')) / 1e9;
  } catch {
    // Not cgroup v1 with Docker's group: unknown.
  }
  const processes: CpuSnapshot['processes'] = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      const of = comm === 'dockerd' || comm.startsWith('containerd') ? 'engine' : comm === 'postgres' ? 'postgres' : undefined;
      if (of) processes.set(Number(entry), { of, seconds: processCpuSeconds(Number(entry)) });
    } catch {
      // Gone meanwhile.
    }
  }
  return { machine, containers, processes };
}

/**
 * The CPU seconds used between two snapshots, by who: a process's from its first snapshot (or its
 * start, when it started since); one that ended between them is counted in `machine` only (a
 * PostgreSQL connection's backend, a `runc`).
 */
export function cpuSplitSince(before: CpuSnapshot, after: CpuSnapshot): CpuSplit {
  const used = { engine: 0, postgres: 0 };
  for (const [pid, { of, seconds }] of after.processes) used[of] += seconds - (before.processes.get(pid)?.seconds ?? 0);
  return { machine: after.machine - before.machine, containers: after.containers - before.containers, ...used };
}

/** How busy the whole machine is over `ms` (0–100 % of all CPUs), from /proc/stat. */
export async function machineBusyPercent(ms = 1000): Promise<number> {
  const sample = () => {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = fields[3]! + (fields[4] ?? 0);
    return { idle, total: fields.reduce((sum, value) => sum + value, 0) };
  };
  const a = sample();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const b = sample();
  return 100 * (1 - (b.idle - a.idle) / (b.total - a.total));
}

/** Open file descriptors of process `pid`. */
export function processOpenFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/**
 * SQL that loads `rows` audit entries, ids ascending with time over `spanDays` (a year) that end
 * `endDaysAgo` days ago. Actions are skewed as a class's admin work is (container stops and restarts dominate,
 * deletions are rare); actors are 20 coaches doing most of it, 180 assistants, the `system` actor
 * (idle sweep, bootstrap) and the `cli`. Run it on one connection after `SELECT setseed(...)` for
 * the same rows every run.
 */
export function auditRowsSql(rows: number, endDaysAgo = 0, spanDays = 365): string {
  return `
  INSERT INTO audit_log (timestamp, actor_id, actor_email, action, target_kind, target_id, metadata)
  SELECT now() - interval '${endDaysAgo} days' - interval '${spanDays} days' + (g * (interval '${spanDays} days' / ${rows})),
         CASE WHEN email IN ('system', 'cli') THEN NULL ELSE md5(email) END,
         email, action,
         CASE split_part(action, '.', 1) WHEN 'container' THEN 'workspace' WHEN 'config' THEN 'config' ELSE split_part(action, '.', 1) END,
         CASE WHEN action LIKE 'allowlist.%' THEN 'student' || (g % 900) || '@school.example'
              WHEN action LIKE 'config.%' THEN 'max_active_containers'
              ELSE md5('target' || (g % 5000)) END,
         CASE WHEN action LIKE 'config.%' THEN jsonb_build_object('from', g % 40, 'to', (g + 7) % 40)
              WHEN action = 'workspace.restore' THEN jsonb_build_object('backup', 'ws-' || (g % 300) || '.tar.gz')
              ELSE NULL END
  FROM (
    SELECT g,
           CASE WHEN ra < 0.35 THEN 'container.stop'
                WHEN ra < 0.60 THEN 'container.restart-code'
                WHEN ra < 0.72 THEN 'allowlist.add'
                WHEN ra < 0.82 THEN 'workspace.backup'
                WHEN ra < 0.87 THEN 'user.promote'
                WHEN ra < 0.92 THEN 'allowlist.remove'
                WHEN ra < 0.96 THEN 'config.max-active-containers'
                WHEN ra < 0.98 THEN 'user.demote'
                WHEN ra < 0.995 THEN 'workspace.restore'
                ELSE 'user.delete' END AS action,
           CASE WHEN rb < 0.15 THEN 'system'
                WHEN rb < 0.20 THEN 'cli'
                WHEN rb < 0.80 THEN 'coach' || lpad((1 + floor(20 * rc * rc))::int::text, 2, '0') || '@school.example'
                ELSE 'ta' || lpad((1 + floor(180 * rc * rc))::int::text, 3, '0') || '@school.example' END AS email
    FROM (SELECT g, random() AS ra, random() AS rb, random() AS rc FROM generate_series(1, ${rows}) AS g) AS draws
  ) AS rows
  ORDER BY g`;
}

/**
 * SQL that makes the class mid-session, as the sampler and controllers leave it: a mix of desired
 * and observed states, status messages and activity, by each workspace's place in slug order.
 */
export const MID_SESSION_SQL = `
  UPDATE workspaces SET
    desired_state = CASE WHEN n % 3 = 0 THEN 'stopped' ELSE 'running' END,
    observed_state = (ARRAY['running', 'running', 'starting', 'stopped', 'failed', 'waiting'])[1 + n % 6],
    status_message = CASE WHEN n % 6 = 4 THEN 'the editor did not answer its health check' ELSE '' END,
    last_activity_at = now() - n * interval '1 minute'
  FROM (SELECT id AS wid, row_number() OVER (ORDER BY slug) AS n FROM workspaces) AS numbered WHERE workspaces.id = wid`;

/** A replica of the deployed server (bin/server.ts) in a process of its own, on a loopback port. */
export interface Replica {
  child: ChildProcess;
  url: string;
}

/**
 * Starts `bin/server.ts` (every part; LOG_LEVEL warning; the test image's settings) on a free
 * loopback port (or `env.PORT`: a replica started again where a balancer expects it) with `env` (its database, data directory, secrets, control-plane id), its
 * warnings on this process's stderr, and resolves once `ready(replica)` says so (polled every 50 ms,
 * at most 60 s).
 */
export async function startReplica(env: Record<string, string>, ready: (replica: Replica) => Promise<boolean>): Promise<Replica> {
  const port = env.PORT ? Number(env.PORT) : await freeLoopbackPort();
  const child = fork(path.join(import.meta.dirname, '../bin/server.ts'), [], {
    execArgv: ['--no-warnings=ExperimentalWarning'],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warning', ...TEST_ENV, ...env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const replica = { child, url: `http://127.0.0.1:${port}` };
  const until = Date.now() + 60_000;
  while (!(await ready(replica))) {
    if (Date.now() > until) {
      child.kill('SIGKILL');
      throw new Error(`the replica on ${replica.url} was not ready within 60 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return replica;
}
