import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import type { DataSource } from 'typeorm';
import { WorkspaceController, type WorkspaceControllerOptions } from '../../controllers/workspaces.ts';
import { ChangeFeed } from '../../src/db/changes.ts';
import { CONTROL_PLANE_LABEL, DockerRuntime, engineClient } from '../../src/docker/docker-runtime.ts';
import { categoryLogger, createRootLogger, type Logger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import type { StoreContext } from '../../src/store/workspaces.ts';

/** The test workspace image built by scripts/build-test-image.sh. */
export const TEST_IMAGE = 'classroom-workspace:test';

export const docker = engineClient();

/** A unique control-plane id, so a test touches only what it made. */
export const newControlPlaneId = () => `test-${randomBytes(4).toString('hex')}`;

/** A JSON logger capturing its records. */
export function captureLogger(): { root: Logger; records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const sink = { write: (line: string) => records.push(JSON.parse(line) as Record<string, unknown>) };
  return { root: createRootLogger({ level: 'debug', format: 'json', colour: false, sinks: { out: sink, err: sink } }), records };
}

/** Everything a controller test needs, wired as main.ts wires it, on a test database and the real engine. */
export interface Harness {
  controlPlaneId: string;
  runtime: DockerRuntime;
  changes: ChangeFeed;
  metrics: Metrics;
  store: StoreContext;
  records: Record<string, unknown>[];
  controller: WorkspaceController;
  /** Stops the controller (containers stay). */
  stop(): Promise<void>;
}

/** Builds (does not start) a workspace controller for `db`, with test-friendly defaults. */
export function createHarness(
  db: DataSource,
  overrides: Partial<WorkspaceControllerOptions> & { controlPlaneId?: string; environmentCap?: number } = {},
): Harness {
  const controlPlaneId = overrides.controlPlaneId ?? newControlPlaneId();
  const { root, records } = captureLogger();
  const metrics = overrides.metrics ?? createMetrics();
  const changes = overrides.changes ?? new ChangeFeed();
  const runtime = (overrides.runtime as DockerRuntime | undefined) ?? new DockerRuntime({ controlPlaneId });
  const log = categoryLogger(root, 'containers');
  const environmentCap = overrides.environmentCap ?? 10;
  const store: StoreContext = { db, changes, environmentCap, metrics, log };
  const controller = new WorkspaceController({
    db,
    runtime,
    changes,
    metrics,
    log,
    environmentCap,
    template: { image: TEST_IMAGE, memoryBytes: 64 * 1024 * 1024, network: 'bridge', editorPort: 8080 },
    resyncIntervalMs: 60_000,
    orphanStartupGraceMs: 0,
    orphanGraceMs: 0,
    capacityRetryMs: 200,
    ...overrides,
  });
  return { controlPlaneId, runtime, changes, metrics, store, records, controller, stop: () => controller.stop() };
}

/** Removes every container and volume labelled with this control-plane id. */
export async function removeEverything(controlPlaneId: string): Promise<void> {
  const filters = { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`] };
  for (const info of await docker.listContainers({ all: true, filters })) await docker.getContainer(info.Id).remove({ force: true }).catch(() => undefined);
  const { Volumes } = await docker.listVolumes({ filters });
  for (const volume of Volumes ?? []) await docker.getVolume(volume.Name).remove().catch(() => undefined);
}

/**
 * Polls `probe` every 50 ms until it returns a truthy value or `timeoutMs` passes (then throws with
 * `what`). It always probes once more after the deadline, so one stall of the test process at the
 * wrong moment cannot fail a condition that holds.
 */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (let final = false; ; ) {
    final = Date.now() >= deadline;
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (final) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

/** Inspects a container by name; undefined when it does not exist. */
export async function inspectByName(name: string): Promise<Docker.ContainerInspectInfo | undefined> {
  try {
    return await docker.getContainer(name).inspect();
  } catch {
    return undefined;
  }
}
