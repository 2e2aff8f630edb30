import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import type { DataSource } from 'typeorm';
import { RunController, type RunControllerOptions } from '../../controllers/runs.ts';
import type { WorkspaceController, WorkspaceControllerOptions } from '../../controllers/workspaces.ts';
import { loadConfig } from '../../src/config.ts';
import { createControlPlane } from '../../bin/control-plane.ts';
import type { ChangeFeed } from '../../src/db/changes.ts';
import { CONTROL_PLANE_LABEL, engineClient } from '../../src/docker/docker-runtime.ts';
import type { WorkspaceRuntime } from '../../src/docker/runtime.ts';
import { categoryLogger, createRootLogger, type Logger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import type { Store } from '../../src/store/index.ts';

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

/** The environment of test control planes: the test image, small containers, the default bridge. */
/**
 * The tests' settings: the test image, small containers, and a workspace network of their own that
 * the runtime makes isolated (inter-container traffic off) the first time, as it makes the default one.
 */
export const TEST_ENV = { WORKSPACE_IMAGE: TEST_IMAGE, CODE_MEMORY_LIMIT: '64m', WORKSPACE_NETWORK: 'classroom-test-workspaces', EDITOR_PORT: '8080' };

/** Everything a controller test needs: a control plane with only its workspace controller, on a test database and the real engine. */
export interface Harness {
  controlPlaneId: string;
  runtime: WorkspaceRuntime;
  changes: ChangeFeed;
  metrics: Metrics;
  store: Store;
  /** The `control.containers` logger. */
  log: Logger;
  records: Record<string, unknown>[];
  controller: WorkspaceController;
  /** Stops the controller (containers stay). */
  stop(): Promise<void>;
}

/** Builds (does not start) a control plane's workspace controller for `db`, with test-friendly timings. */
export function createHarness(
  db: DataSource,
  overrides: Partial<WorkspaceControllerOptions> & {
    controlPlaneId?: string;
    environmentCap?: number;
    changes?: ChangeFeed;
    runtime?: WorkspaceRuntime;
    /** Settings beside the test ones (e.g. the real workspace image and the memory it needs). */
    env?: Record<string, string>;
  } = {},
): Harness {
  const { controlPlaneId = newControlPlaneId(), environmentCap = 10, changes, runtime, env = {}, ...tuning } = overrides;
  const { root, records } = captureLogger();
  const config = loadConfig({
    ...TEST_ENV,
    CONTROL_PLANE_ID: controlPlaneId,
    MAX_ACTIVE_CONTAINERS: String(environmentCap),
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'cp-test-harness-')),
    ...env,
  });
  const plane = createControlPlane({
    config,
    log: root,
    database: { dataSource: db, embedded: false, close: async () => undefined },
    parts: ['workspaces'],
    changes,
    runtime,
    tuning: { workspaces: { resyncIntervalMs: 60_000, orphanStartupGraceMs: 0, orphanGraceMs: 0, capacityRetryMs: 200, ...tuning } },
  });
  const controller = plane.workspaces!;
  return {
    controlPlaneId,
    runtime: plane.runtime,
    changes: plane.changes,
    metrics: plane.metrics,
    store: plane.store,
    log: categoryLogger(root, 'containers'),
    records,
    controller,
    stop: () => controller.stop(),
  };
}

/**
 * A run controller over `harness`'s store and engine (not started) whose simulators run `command`
 * (a shell command line, e.g. `SIM_COMPILE_MS=100 node /app/sim.mjs`) in the test image on the test
 * workspace network, with test-friendly timings (`options` override them); with the records it logs.
 */
export function testRunController(
  harness: Pick<Harness, 'store' | 'runtime'>,
  command: string,
  options: Partial<RunControllerOptions> = {},
): { controller: RunController; records: Record<string, unknown>[] } {
  const logger = captureLogger();
  const controller = new RunController({
    store: harness.store,
    runtime: harness.runtime,
    metrics: createMetrics(),
    log: categoryLogger(logger.root, 'runs'),
    buildTimeoutMs: 30_000,
    probeIntervalMs: 100,
    runningCheckMs: 300,
    template: { image: TEST_IMAGE, memoryBytes: 64 * 1024 * 1024, network: TEST_ENV.WORKSPACE_NETWORK, nt4Port: 5810, command },
    ...options,
  });
  return { controller, records: logger.records };
}

/**
 * A run controller over `harness` (not started) whose simulators run the real workspace image's
 * `./gradlew simulateJava` (the stand-in robot), as the end-to-end tests of the real editor run
 * them: 1 GiB, three minutes to build, its state looked at every second; with the records it logs.
 */
export function workspaceImageRunController(
  harness: Pick<Harness, 'store' | 'runtime'>,
  metrics: Metrics,
): { controller: RunController; records: Record<string, unknown>[] } {
  const command = './gradlew simulateJava';
  return testRunController(harness, command, {
    metrics,
    buildTimeoutMs: 180_000,
    runningCheckMs: 1000,
    template: { image: 'classroom-workspace:latest', memoryBytes: 1024 * 1024 * 1024, network: TEST_ENV.WORKSPACE_NETWORK, nt4Port: 5810, command },
  });
}

/** Removes every container and volume labelled with this control-plane id. */
export async function removeEverything(controlPlaneId: string): Promise<void> {
  const filters = { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`] };
  for (const info of await docker.listContainers({ all: true, filters }))
    await docker
      .getContainer(info.Id)
      .remove({ force: true })
      .catch(() => undefined);
  const { Volumes } = await docker.listVolumes({ filters });
  for (const volume of Volumes ?? [])
    await docker
      .getVolume(volume.Name)
      .remove()
      .catch(() => undefined);
}

/**
 * Polls `probe` until it returns a truthy value or `timeoutMs` passes (then throws with `what`): every
 * 50 ms, or four times as long as the last probe took when that is longer (at most every second), so
 * that a costly probe (a `docker` command, a listing on a busy engine) keeps the machine busy a fifth
 * of the time at most while the test waits: the suite is bound by CPU. It always probes once more
 * after the deadline, so one stall of the test process at the wrong moment cannot fail a condition
 * that holds.
 */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (let final = false; ;) {
    final = Date.now() >= deadline;
    const started = performance.now();
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (final) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(1000, Math.max(50, 4 * (performance.now() - started)))));
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

/** The last 60 lines that a workspace's code-server wrote (its code container's log), for a failure's message. */
export async function codeServerLog(runtime: WorkspaceRuntime, workspaceId: string): Promise<string> {
  const [container] = (await runtime.listContainers({ workspaceId })).filter((each) => each.role === 'code');
  return container ? `code-server (${container.state}):\n${await runtime.logsTail(container.id, 60)}` : '(no code container)';
}

/**
 * Runs `command` in a running container through the docker CLI (`docker exec`) and returns its exit
 * code and output (stdout and stderr together): the engine's own client, with no stream to demultiplex.
 * `user`: as whom (default: the container's user).
 */
export function execIn(containerId: string, command: string[], options: { user?: string } = {}): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    execFile('docker', ['exec', ...(options.user ? ['--user', options.user] : []), containerId, ...command], { timeout: 30_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : undefined;
      if (code === undefined) reject(new Error(`docker exec in ${containerId} failed: ${error!.message}`));
      else resolve({ code, output: stdout + stderr });
    });
  });
}
