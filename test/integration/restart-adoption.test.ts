import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { names } from '../../src/docker/runtime.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { createHarness, eventually, inspectByName, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import WebSocket from 'ws';
import { startServer, type ServerProcess } from '../helpers/server.ts';
import { sessionFor } from '../helpers/session.ts';

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

const SESSION_SECRET = 'restart-test-session-secret-0123456789';
// The students' domain is allowlisted, or their sessions would not pass.
const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'cp-restart-'));
writeFileSync(path.join(DATA_DIR, 'allowlist.json'), JSON.stringify({ entries: ['school.test'] }));
const env = () => ({ DATABASE_URL: db.url, WORKSPACE_IMAGE: TEST_IMAGE, CODE_MEMORY_LIMIT: '64m', CONTROL_PLANE_ID: controlPlaneId, SESSION_SECRET, DATA_DIR });

describe('restart safety', () => {
  it('adopts running containers after a SIGKILL: same containers, no restarts, state reported within seconds', async () => {
    server = await startServer(env());
    // Another process (this test) opens the workspaces: the server hears it through LISTEN/NOTIFY.
    const { store } = createHarness(db.dataSource, { controlPlaneId });
    const workspaces: WorkspaceRecord[] = [];
    for (let i = 0; i < 3; i++) workspaces.push((await store.users.create({ email: `adopt-${i}-${controlPlaneId}@school.test` })).workspace);
    for (const workspace of workspaces) await store.workspaces.open(workspace.id);
    const before = [];
    for (const workspace of workspaces) {
      before.push(
        await eventually(`${workspace.slug} running`, async () => {
          const info = await inspectByName(names.code(workspace.slug));
          return info?.State.Running ? info : undefined;
        }),
      );
    }

    expect(await server.stop('SIGKILL')).toBeNull();
    await db.dataSource.query("UPDATE workspaces SET observed_state = 'unknown'");
    server = await startServer(env());
    // Counted from the new process's listening line: its start-up time is not the point, the adoption is.
    const listeningAt = Date.parse(String(server.records.find((record) => record.message.startsWith('listening on'))!.timestamp));
    for (const workspace of workspaces) {
      await eventually('state reported', async () => (await store.workspaces.get(workspace.id))?.status.observedState === 'running', 20_000);
    }
    // Reported at start-up, not left to the 30 s resync (the figure for 100 workspaces is in bench/fleet.ts).
    expect(Date.now() - listeningAt).toBeLessThan(15_000);
    for (const [index, workspace] of workspaces.entries()) {
      const after = (await inspectByName(names.code(workspace.slug)))!;
      expect(after.Id).toBe(before[index]!.Id);
      expect(after.State.StartedAt).toBe(before[index]!.State.StartedAt);
      expect(after.RestartCount).toBe(0);
    }
    // An open editor WebSocket does not hold up a graceful stop.
    const [owner] = (await db.dataSource.query('SELECT user_id FROM workspaces WHERE id = $1', [workspaces[0]!.id])) as { user_id: string }[];
    const { cookie } = await sessionFor(store.sessions, owner!.user_id, SESSION_SECRET);
    const socket = new WebSocket(`${server.url.replace('http', 'ws')}/u/${workspaces[0]!.slug}/ws`, { headers: { cookie, origin: server.url } });
    await new Promise((resolve, reject) => (socket.once('open', resolve), socket.once('error', reject)));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    expect(await server.stop('SIGTERM')).toBe(0);
    // Ended at once, not after the shutdown grace period.
    expect(server.records.filter((record) => record.message.startsWith('in-flight requests still open'))).toEqual([]);
    await closed;
    // A graceful stop leaves them running too.
    for (const workspace of workspaces) expect((await inspectByName(names.code(workspace.slug)))!.State.Running).toBe(true);
  }, 120_000);
});
