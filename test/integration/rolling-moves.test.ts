/**
 * Issue 44 item 7: a rolling upgrade moves each editor once. Real server processes on one
 * PostgreSQL behind HAProxy with the shipped deploy/haproxy.cfg (its three places a, b and c);
 * eight editor WebSockets through it that reconnect through the balancer as soon as they are
 * closed, as VS Code's do, six on the first replica and two on the second (the balancer sends each
 * new one to the replica with the fewest). The upgrade as docs/operations.md gives it: a new
 * replica on the free place c, then the first old one replaced (stopped, a new one on its place),
 * then the second stopped. While a replica stops, the older ones that still run take no new
 * connections (GET /readyz answers 404), so every editor it lets go lands on a new replica: each
 * editor moved exactly once. The stopping replica keeps its row (and so the drain) for 2.5 s after
 * it lets its editors go, for those that reconnect late.
 */
import type { DataSource } from 'typeorm';
import WebSocket from 'ws';
import { createHarness, eventually, newControlPlaneId, removeEverything, type Harness } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import { createBalancer, replicaEnv, type Balancer } from '../helpers/replicas.ts';
import { startServer, type ServerProcess } from '../helpers/server.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const tag = Date.now().toString(36);
const controlPlaneId = newControlPlaneId();
let db: { url: string; dataSource: DataSource };
let harness: Harness;
let balancer: Balancer;
let env: (port: number) => Record<string, string>;
const servers: ServerProcess[] = [];
const editors: Editor[] = [];
/** When editors' connections were closed (by their replica), in this test process's clock. */
const closedAt: number[] = [];

/** A replica started on `port`, kept for the end. */
async function replica(port: number): Promise<ServerProcess> {
  const server = await startServer(env(port));
  servers.push(server);
  return server;
}

/** An editor's connection through the balancer that opens a new one as soon as it is closed (VS Code's reconnection), counting its moves. */
interface Editor {
  socket: WebSocket | undefined;
  moves: number;
  stopped: boolean;
  /** It could not connect again within its attempts. */
  failed: boolean;
}

function editorOf(student: Student): Promise<Editor> {
  const editor: Editor = { socket: undefined, moves: 0, stopped: false, failed: false };
  editors.push(editor);
  return new Promise((resolve) => {
    let failures = 0;
    const connect = () => {
      const socket = new WebSocket(`${balancer.url.replace('http', 'ws')}/u/${student.workspace.slug}/ws`, {
        headers: { cookie: student.cookie, origin: balancer.url },
      });
      socket.once('open', () => {
        failures = 0;
        editor.socket = socket;
        resolve(editor);
      });
      socket.once('error', () => undefined);
      socket.once('close', () => {
        if (editor.stopped) return;
        const wasOpen = editor.socket === socket;
        if (wasOpen) {
          closedAt.push(Date.now());
          editor.moves++;
          editor.socket = undefined;
        }
        // Bounded: a balancer with nowhere to send it for 10 s fails the test.
        if (!wasOpen && ++failures > 100) return void (editor.failed = true);
        setTimeout(connect, wasOpen ? 0 : 100);
      });
    };
    connect();
  });
}

const allConnected = () => {
  if (editors.some((editor) => editor.failed)) throw new Error('an editor could not connect again');
  return editors.every((editor) => editor.socket?.readyState === WebSocket.OPEN);
};

beforeAll(async () => {
  db = await openTestDatabase();
  harness = createHarness(db.dataSource, { controlPlaneId });
  balancer = await createBalancer(controlPlaneId, { places: 3 });
  env = replicaEnv(balancer, { databaseUrl: db.url, controlPlaneId });
  await balancer.start();
}, 60_000);

afterAll(async () => {
  for (const editor of editors) {
    editor.stopped = true;
    editor.socket?.terminate();
  }
  for (const server of servers) await server.stop('SIGKILL');
  await balancer?.remove();
  await removeEverything(controlPlaneId);
  await db?.dataSource.destroy();
}, 60_000);

it('a rolling upgrade through a third place moves each editor once, even when the old replicas hold unequal shares', async () => {
  const [portA, portB, portC] = balancer.ports as [number, number, number];
  // The first replica alone, then six editors on it.
  const oldA = await replica(portA);
  await balancer.took('a', 0);
  const ada = await newStudent(harness.store, 'ada', tag);
  await openAndWait(harness.store, ada.workspace);
  for (let index = 0; index < 6; index++) await editorOf(ada);
  // The second replica, then two editors more: both go to it, which holds the fewest.
  const oldB = await replica(portB);
  await balancer.took('b', 0);
  for (let index = 0; index < 2; index++) await editorOf(ada);

  // A new replica on the free place.
  await replica(portC);
  await balancer.took('c', 0);
  // The first old one replaced: its six editors move to the new one, none to the old one that goes next.
  const [aUp, aDown] = [await balancer.said('a', 'UP'), await balancer.said('a', 'DOWN')];
  closedAt.length = 0;
  expect(await oldA.stop('SIGTERM')).toBe(0);
  const exitedAt = Date.now();
  await eventually('every editor connected again', async () => allConnected(), 30_000);
  // Its row (which keeps b draining) went only after the editors had 2.5 s to come back, less what
  // passed between its letting them go and this process seeing the first close.
  expect(exitedAt - Math.min(...closedAt)).toBeGreaterThanOrEqual(2000);
  // Its place seen empty, then taken again (as the docs' procedure waits for the balancer).
  await eventually('the balancer to see a gone', async () => (await balancer.said('a', 'DOWN')) > aDown, 30_000);
  await replica(portA);
  await balancer.took('a', aUp);
  // The second old one stopped: its editors move to the new ones.
  expect(await oldB.stop('SIGTERM')).toBe(0);
  await eventually('every editor connected again', async () => allConnected(), 30_000);

  const moves = editors.map((editor) => editor.moves);
  if (moves.some((count) => count !== 1)) {
    // Where each editor's connections went, and when the balancer saw each replica change.
    const told = (await balancer.log()).split('\n').filter((line) => line.includes('/ws') || line.includes('Server replicas/'));
    throw new Error(`editors' moves ${JSON.stringify(moves)}, not one each; the balancer said:\n${told.join('\n')}`);
  }
  expect(moves).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
}, 240_000);
