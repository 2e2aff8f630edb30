import type { DataSource } from 'typeorm';
import { names } from '../../src/docker/runtime.ts';
import { createUserWithWorkspace, getWorkspace, openWorkspace, type WorkspaceRecord } from '../../src/store/workspaces.ts';
import { createHarness, eventually, inspectByName, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import { startServer, type ServerProcess } from '../helpers/server.ts';

let db: { url: string; dataSource: DataSource };
const controlPlaneId = newControlPlaneId();
let server: ServerProcess | undefined;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await server?.stop('SIGKILL');
  await removeEverything(controlPlaneId);
  await db.dataSource.destroy();
});

const env = () => ({ DATABASE_URL: db.url, WORKSPACE_IMAGE: TEST_IMAGE, CODE_MEMORY_LIMIT: '64m', CONTROL_PLANE_ID: controlPlaneId });

describe('restart safety', () => {
  it('adopts running containers after a SIGKILL: same containers, no restarts, state reported within seconds', async () => {
    server = await startServer(env());
    // Another process (this test) opens the workspaces: the server hears it through LISTEN/NOTIFY.
    const { store } = createHarness(db.dataSource, { controlPlaneId });
    const workspaces: WorkspaceRecord[] = [];
    for (let i = 0; i < 3; i++) workspaces.push((await createUserWithWorkspace(store, { email: `adopt-${i}-${controlPlaneId}@school.test` })).workspace);
    for (const workspace of workspaces) await openWorkspace(store, workspace.id);
    const before = [];
    for (const workspace of workspaces) {
      before.push(await eventually(`${workspace.slug} running`, async () => {
        const info = await inspectByName(names.code(workspace.slug));
        return info?.State.Running ? info : undefined;
      }));
    }

    expect(await server.stop('SIGKILL')).toBeNull();
    await db.dataSource.query("UPDATE workspaces SET observed_state = 'unknown'");
    const restarted = Date.now();
    server = await startServer(env());
    for (const workspace of workspaces) {
      await eventually('state reported', async () => (await getWorkspace(db.dataSource, workspace.id))?.observedState === 'running', 5000);
    }
    const reportedWithinMs = Date.now() - restarted;
    expect(reportedWithinMs).toBeLessThan(10_000);
    for (const [index, workspace] of workspaces.entries()) {
      const after = (await inspectByName(names.code(workspace.slug)))!;
      expect(after.Id).toBe(before[index]!.Id);
      expect(after.State.StartedAt).toBe(before[index]!.State.StartedAt);
      expect(after.RestartCount).toBe(0);
    }
    expect(await server.stop('SIGTERM')).toBe(0);
    // A graceful stop leaves them running too.
    for (const workspace of workspaces) expect((await inspectByName(names.code(workspace.slug)))!.State.Running).toBe(true);
  }, 60_000);
});
