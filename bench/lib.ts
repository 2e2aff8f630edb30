import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { WorkspaceController } from '../controllers/workspaces.ts';
import { ChangeFeed } from '../src/db/changes.ts';
import { createDataSource, migrate } from '../src/db/database.ts';
import { CONTROL_PLANE_LABEL, DockerRuntime, engineClient } from '../src/docker/docker-runtime.ts';
import { createRootLogger, categoryLogger } from '../src/log.ts';
import { sessionFor } from '../test/helpers/session.ts';
import { createMetrics } from '../src/metrics.ts';
import type { StoreContext } from '../src/store/workspaces.ts';

/** The PostgreSQL server of the tests (scripts/provision.sh starts it). */
export const SERVER_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:54329/postgres';
export const IMAGE = 'classroom-workspace:test';
export const MEMORY = 64 * 1024 * 1024;
export const docker = engineClient();

/** Creates (dropping first) a benchmark database with the real migrations and returns a data source on it. */
export async function benchDatabase(name: string): Promise<{ dataSource: DataSource; drop(): Promise<void> }> {
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: SERVER_URL });
    await client.connect();
    await client.query(sql).finally(() => client.end());
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
  await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => client.end());
}

/**
 * The control plane's pieces, wired as main.ts does, plus a hook called on every log record.
 * `controlPlaneId` scopes its containers (default: a fresh `bench-<hex>`).
 */
export function controlPlane(dataSource: DataSource, onLog: (record: Record<string, unknown>) => void = () => undefined, controlPlaneId = `bench-${randomBytes(4).toString('hex')}`) {
  const sink = { write: (line: string) => onLog(JSON.parse(line) as Record<string, unknown>) };
  const root = createRootLogger({ level: 'info', format: 'json', colour: false, sinks: { out: sink, err: sink } });
  const metrics = createMetrics();
  const changes = new ChangeFeed();
  const log = categoryLogger(root, 'containers');
  const runtime = new DockerRuntime({ controlPlaneId });
  const store: StoreContext = { db: dataSource, changes, environmentCap: 1000, metrics, log };
  const newController = () =>
    new WorkspaceController({ db: dataSource, runtime, changes, metrics, log, environmentCap: 1000, template: { image: IMAGE, memoryBytes: MEMORY, network: 'bridge', editorPort: 8080 }, orphanStartupGraceMs: 3_600_000 });
  return { controlPlaneId, store, runtime, newController };
}

/** Removes every container and volume carrying `label=value`. */
export async function removeLabelled(label: string, value: string): Promise<void> {
  const filters = { label: [`${label}=${value}`] };
  const containers = await docker.listContainers({ all: true, filters });
  await Promise.all(containers.map((info) => docker.getContainer(info.Id).remove({ force: true }).catch(() => undefined)));
  const { Volumes } = await docker.listVolumes({ filters });
  await Promise.all((Volumes ?? []).map((volume) => docker.getVolume(volume.Name).remove().catch(() => undefined)));
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
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
};
export const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
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

/** The Cookie header of a signed-in session for `userId` (made as koa-session makes one; see test/helpers/session.ts). */
export async function signedSessionCookie(db: DataSource, userId: string, secret: string): Promise<string> {
  return (await sessionFor(db, userId, secret)).cookie;
}

export { freePort } from '../test/helpers/server.ts';

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
