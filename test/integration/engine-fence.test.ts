/**
 * Issue 44 item 4: a leader's fence holds to its last engine call. A control plane leads on the
 * real PostgreSQL and converges a workspace on the real engine; the process is paused (its one
 * thread blocked, as SIGSTOP or a frozen VM would) right after the first engine call of the
 * reconcile that opens it, for longer than its renew deadline. When it wakes, the reconcile goes
 * on at once, before any timer of the process runs (its renewal among them): the next call, which
 * would create the editor's container, is refused by the leader's own clock and never reaches the
 * engine. Once it has renewed its lease, it leads again and converges.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { text } from 'node:stream/consumers';
import { createControlPlane, type ControlPlane } from '../../bin/control-plane.ts';
import { loadConfig } from '../../src/config.ts';
import { DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { LABELS, type CodeContainerSpec, type ManagedContainer } from '../../src/docker/runtime.ts';
import { FencedOutError } from '../../src/store/leases.ts';
import { captureLogger, docker, newControlPlaneId, removeEverything, TEST_ENV } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, waitForState } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const controlPlaneId = newControlPlaneId();
const RENEW_DEADLINE_MS = 1000;

/** The real engine, with the process paused once right after a chosen call, and every editor creation recorded. */
class PausingRuntime extends DockerRuntime {
  /** Shared with every scoped copy of this runtime (they are made from it with Object.create). */
  readonly pause = { afterVolume: false };
  readonly creations: { error?: unknown }[] = [];

  override async ensureVolume(...args: Parameters<DockerRuntime['ensureVolume']>): Promise<void> {
    await super.ensureVolume(...args);
    if (!this.pause.afterVolume) return;
    this.pause.afterVolume = false;
    // The whole process stops here: no timer, no renewal, no I/O, for more than the renew deadline.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, RENEW_DEADLINE_MS + 1000);
  }

  override async createCodeContainer(spec: CodeContainerSpec): Promise<ManagedContainer> {
    // Nothing awaited before the call: the reconcile's next step must come right after the pause.
    try {
      const created = await super.createCodeContainer(spec);
      this.creations.push({});
      return created;
    } catch (error) {
      this.creations.push({ error });
      throw error;
    }
  }
}

let plane: ControlPlane | undefined;
afterAll(async () => {
  await plane?.stop();
  await removeEverything(controlPlaneId);
});

it("refuses a paused leader's next engine call once it wakes past its renew deadline, before the engine is asked; it converges once it leads again", async () => {
  const { root, records } = captureLogger();
  const config = loadConfig({
    ...TEST_ENV,
    CONTROL_PLANE_ID: controlPlaneId,
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'cp-engine-fence-')),
    LEASE_DURATION_SECONDS: '3',
    LEASE_RENEW_DEADLINE_SECONDS: String(RENEW_DEADLINE_MS / 1000),
    LEASE_RETRY_SECONDS: '0.2',
  });
  const runtime = new PausingRuntime({ controlPlaneId });
  plane = createControlPlane({
    config,
    log: root,
    database: { dataSource: db.dataSource, embedded: false, close: async () => undefined },
    parts: ['leadership', 'workspaces'],
    runtime,
    tuning: { workspaces: { resyncIntervalMs: 60_000, orphanStartupGraceMs: 0, orphanGraceMs: 0 } },
  });
  await plane.start();
  expect(plane.leadership?.term).toBeDefined();

  const startedAt = Date.now();
  const student = await newStudent(plane.store, 'paused', controlPlaneId);
  runtime.pause.afterVolume = true;
  await plane.store.workspaces.open(student.workspace.id);
  await waitForState(plane.store, student.workspace.id, 'running', 60_000);

  // The first creation came right after the pause: refused by the leader's clock, nothing made.
  // The first creation came right after the pause: refused by the leader's own clock.
  expect(runtime.creations.map(({ error }) => (error instanceof FencedOutError ? error.message : error))).toEqual([
    'not the leader any more (term 1): no renewal of the lease within the renew deadline; the write was not made',
    undefined,
  ]);
  const counted = (await plane.metrics.registry.getSingleMetric('fenced_writes_total')!.get()).values;
  expect(counted.find((value) => value.labels.refused_by === 'self')!.value).toBeGreaterThanOrEqual(1);
  expect(records.some((record) => String(record.message).startsWith('stopped leading (term 1)'))).toBe(true);
  // The engine was asked to create one container for the workspace, the one made under a lease that held.
  const events = await docker.getEvents({
    since: Math.floor(startedAt / 1000),
    until: Math.ceil(Date.now() / 1000),
    filters: { type: ['container'], event: ['create'], label: [`${LABELS.workspaceId}=${student.workspace.id}`] },
  });
  const created = (await text(events)).split('\n').filter(Boolean);
  expect(created).toHaveLength(1);
}, 120_000);
