import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { WorkspaceController } from '../controllers/workspaces.ts';
import { ChangeFeed } from '../src/db/changes.ts';
import { createDataSource, migrate } from '../src/db/database.ts';
import { CONTROL_PLANE_LABEL, DockerRuntime } from '../src/docker/docker-runtime.ts';
import { createRootLogger, categoryLogger } from '../src/log.ts';
import { createMetrics } from '../src/metrics.ts';
import type { StoreContext } from '../src/store/workspaces.ts';

/** The PostgreSQL server of the tests (scripts/provision.sh starts it). */
export const SERVER_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:54329/postgres';
export const IMAGE = 'classroom-workspace:test';
export const MEMORY = 64 * 1024 * 1024;
export const docker = new Docker();

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

/** The control plane's pieces, wired as main.ts does, plus a hook called on every log record. */
export function controlPlane(dataSource: DataSource, onLog: (record: Record<string, unknown>) => void = () => undefined) {
  const controlPlaneId = `bench-${randomBytes(4).toString('hex')}`;
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

/** Ends the process if the benchmark runs longer than `ms`. */
export function deadline(ms: number): void {
  setTimeout(() => {
    console.error(`benchmark exceeded ${ms / 1000} s, aborting`);
    process.exit(1);
  }, ms).unref();
}
