import { createHarness, docker, eventually, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startServer, type ServerProcess } from '../helpers/server.ts';
import { newStudent, waitForState } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const controlPlaneId = newControlPlaneId();
let server: ServerProcess | undefined;

afterAll(async () => {
  await server?.stop('SIGKILL');
  await removeEverything(controlPlaneId);
});

describe('a control-plane restart during a run', () => {
  it('adopts the compiling simulator after a SIGKILL: the run completes, with no duplicate container', async () => {
    const env = {
      DATABASE_URL: db.url,
      WORKSPACE_IMAGE: TEST_IMAGE,
      CODE_MEMORY_LIMIT: '64m',
      CONTROL_PLANE_ID: controlPlaneId,
      SIM_COMMAND: 'SIM_COMPILE_MS=4000 SIM_BOOT_MS=100 node /app/sim.mjs',
    };
    server = await startServer(env);
    // This test is another process: the server hears it through LISTEN/NOTIFY.
    const { store } = createHarness(db.dataSource, { controlPlaneId });
    const student = await newStudent(store, 'restart', controlPlaneId);
    await store.workspaces.open(student.workspace.id);
    await waitForState(store, student.workspace.id, 'running');
    const run = await store.runs.create(student.workspace.id);
    const sims = () => docker.listContainers({ all: true, filters: { label: [`service.run-id=${run.id}`] } });
    const [compiling] = await eventually('sim container compiling', async () => {
      const list = await sims();
      return list.length === 1 && list[0]!.State === 'running' ? list : undefined;
    });
    expect(await server.stop('SIGKILL')).toBeNull();
    expect((await store.runs.get(run.id))!.status.phase).toBe('queued');

    server = await startServer(env);
    const ready = await eventually(
      'run running after restart',
      async () => {
        const current = await store.runs.get(run.id);
        return current?.status.phase === 'running' ? current : undefined;
      },
      20_000,
    );
    expect(ready.status.readyAt).not.toBeNull();
    const after = await sims();
    expect(after).toHaveLength(1);
    expect(after[0]!.Id).toBe(compiling!.Id);
    // The line follows the database write through the process's stdout: wait for it, then count.
    await server.waitForLog((record) => record.runId === run.id && record.message.startsWith('simulator ready'));
    expect(server.records.filter((record) => record.runId === run.id && record.message.startsWith('simulator ready'))).toHaveLength(1);
  }, 90_000);
});
