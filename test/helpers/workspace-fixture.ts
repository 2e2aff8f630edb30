/**
 * The fixture of the workspace controller's unit tests, sample-controller style (one per job:
 * test/unit/workspace-reconcile.test.ts, workspace-garbage, workspace-environment, workspace-home-moves):
 * desired state in the real store on the test PostgreSQL, containers in the in-memory runtime, a
 * controller over both. `useWorkspaceFixture` makes them anew before each test; the bindings below
 * are the current test's.
 */
import { codeSpecHash, WorkspaceController, type WorkspaceControllerOptions } from '../../controllers/workspaces.ts';
import { names } from '../../src/docker/runtime.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import type { Probe } from '../../src/probe.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { Store } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { captureLogger } from './controllers.ts';
import type { useTestDatabase } from './db.ts';
import { MemoryRuntime } from './memory-runtime.ts';
import { testStore } from './store.ts';

/** The code container's configuration in these tests. */
export const TEMPLATE = { image: 'classroom-workspace:test', memoryBytes: 64 * 1024 * 1024, network: 'bridge', editorPort: 8080, nanoCpus: 0 };
/** The spec hash of a container made from TEMPLATE. */
export const HASH = codeSpecHash(TEMPLATE);
/** A workspace id with no row. */
export const ORPHAN = '00000000-0000-4000-8000-0000000000aa';

/** The store over the test database (cap 2). */
export let store: Store;
/** The in-memory engine: preload containers and volumes, read `actions`. */
export let runtime: MemoryRuntime;
export let metrics: Metrics;
/** What the last controller made logged. */
export let records: Record<string, unknown>[];
/** Every endpoint the editor probe was asked about. */
export let probes: string[];
let editorAnswers: boolean;
let counter = 0;

/** Makes the fixture anew before each test of the file, on `db`. */
export function useWorkspaceFixture(db: ReturnType<typeof useTestDatabase>): void {
  beforeEach(() => {
    store = testStore(db.dataSource, { environmentCap: 2 });
    runtime = new MemoryRuntime();
    metrics = createMetrics();
    probes = [];
    editorAnswers = true;
  });
}

/** Whether the editors answer the probe from now on (they do at the start of each test). */
export function editorsAnswer(answer: boolean): void {
  editorAnswers = answer;
}

/** A controller over the fixture's store and runtime; its editor probe answers while `editorsAnswer`. */
export function controller(options: Partial<WorkspaceControllerOptions> = {}): WorkspaceController {
  const logger = captureLogger();
  records = logger.records;
  const probe = async (endpoint: string): Promise<Probe> => {
    probes.push(endpoint);
    return { outcome: editorAnswers ? 'ok' : 'error', seconds: 0.001 };
  };
  return new WorkspaceController({
    store,
    runtime,
    metrics,
    log: categoryLogger(logger.root, 'containers'),
    template: TEMPLATE,
    probe,
    orphanStartupGraceMs: 0,
    orphanGraceMs: 0,
    ...options,
  });
}

/** A workspace wanted `desired`, made through the store as the API makes it. */
export async function workspace(desired: 'running' | 'stopped' | 'deleted'): Promise<WorkspaceRecord> {
  const { user, workspace: made } = await store.users.create({ email: `s${counter++}@school.test` });
  if (desired === 'running') await store.workspaces.open(made.id);
  if (desired === 'deleted') await store.users.delete(SYSTEM_ACTOR, user.id);
  return (await store.workspaces.get(made.id))!;
}

/** Its code container, as the controller would have made it, preloaded in the engine. */
export function codeContainer(of: WorkspaceRecord, overrides: Partial<Parameters<MemoryRuntime['preload']>[0]> = {}) {
  return runtime.preload({
    name: names.code(of.slug),
    role: 'code',
    workspaceId: of.id,
    slug: of.slug,
    specHash: HASH,
    restartGeneration: of.spec.restartGeneration,
    ...overrides,
  });
}

/** A workspace's recorded status. */
export const status = async (id: string) => {
  const current = (await store.workspaces.get(id))!;
  return {
    observedState: current.status.observedState,
    statusMessage: current.status.statusMessage,
    editorEndpoint: current.status.editorEndpoint,
    observedGeneration: current.status.observedGeneration,
  };
};
