// @lane alone
/**
 * Issue 44 item 2: a frozen replica lets its students go and acts on nothing it was asked while
 * frozen. Two real server processes on one PostgreSQL behind HAProxy with the shipped
 * deploy/haproxy.cfg (its API timeout made 3 s, LB_API_TIMEOUT); editors' WebSockets through the
 * balancer on both. One replica is frozen (SIGSTOP) and students ask to open their workspaces
 * through the balancer meanwhile: the WebSockets it held are closed once the balancer marks it down
 * (VS Code would open new ones, to the other); the requests it got fail within seconds instead of
 * ten minutes; woken (SIGCONT), it changes nothing they asked, and says so once each.
 *
 * Alone (scripts/test-lanes.sh): beside a second heavy file, HAProxy once closed a request to the
 * frozen replica with no answer at all (a two-worker CI run of 2026-11-29); it passed alone.
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
const replicas: ServerProcess[] = [];
const sockets: WebSocket[] = [];

beforeAll(async () => {
  db = await openTestDatabase();
  harness = createHarness(db.dataSource, { controlPlaneId });
  balancer = await createBalancer(controlPlaneId, { places: 2, apiTimeout: '3s' });
  const env = replicaEnv(balancer, { databaseUrl: db.url, controlPlaneId });
  const [portA, portB] = balancer.ports as [number, number];
  // The first leads (it converges the workspaces); the second, a follower, is the one frozen.
  replicas.push(await startServer(env(portA)));
  await replicas[0]!.waitForLog((record) => record.message.startsWith('leading: took the reconciler lease'));
  replicas.push(await startServer(env(portB)));
  await balancer.start();
  await balancer.answering();
}, 120_000);

afterAll(async () => {
  for (const socket of sockets) socket.terminate();
  for (const replica of replicas) {
    replica.proc.kill('SIGCONT');
    await replica.stop('SIGKILL');
  }
  await balancer?.remove();
  await removeEverything(controlPlaneId);
  await db?.dataSource.destroy();
}, 60_000);

/** An editor WebSocket through the balancer, open. */
async function editorSocket(student: Student): Promise<WebSocket> {
  const socket = new WebSocket(`${balancer.url.replace('http', 'ws')}/u/${student.workspace.slug}/ws`, {
    headers: { cookie: student.cookie, origin: balancer.url },
  });
  sockets.push(socket);
  await new Promise((resolve, reject) => (socket.once('open', resolve), socket.once('error', reject)));
  return socket;
}

/** What became of a socket: its echo of `text`, or its close; neither within `ms` fails. */
function echoOrClose(socket: WebSocket, text: string, ms: number): Promise<'echoed' | 'closed'> {
  return new Promise((resolve, reject) => {
    if (socket.readyState !== WebSocket.OPEN) return resolve('closed');
    const timer = setTimeout(() => reject(new Error(`a WebSocket neither answered nor closed within ${ms} ms`)), ms);
    const settle = (outcome: 'echoed' | 'closed') => {
      clearTimeout(timer);
      resolve(outcome);
    };
    socket.on('message', (data: Buffer) => {
      if (data.toString() === text) settle('echoed');
    });
    socket.once('close', () => settle('closed'));
    socket.send(text);
  });
}

it('a frozen replica: its editors are let go within seconds, the requests it held fail fast, and nothing they asked is done when it wakes', async () => {
  const ada = await newStudent(harness.store, 'ada', tag);
  await openAndWait(harness.store, ada.workspace);
  // Four editor connections; the balancer spreads them over both replicas (the fewest connections first).
  for (let index = 0; index < 4; index++) await editorSocket(ada);
  for (const [index, socket] of sockets.entries()) expect(await echoOrClose(socket, `before ${index}`, 10_000)).toBe('echoed');
  const asking = await Promise.all(Array.from({ length: 4 }, (_, index) => newStudent(harness.store, `asker${index}`, tag)));

  const frozen = replicas[1]!;
  frozen.proc.kill('SIGSTOP');
  // Students press Open meanwhile: some of their requests go to the frozen replica before the balancer marks it down.
  // Such a request fails with the balancer's 504 (the API timeout), or, when the balancer marks the
  // replica down first, with its connection closed and no answer (`on-marked-down shutdown-sessions`,
  // which lets the frozen replica's editors go): either way within seconds.
  const asked = await Promise.all(
    asking.map(async (student) => {
      const sent = Date.now();
      const status = await fetch(`${balancer.url}/u/${student.workspace.slug}/api/workspace/open`, {
        method: 'POST',
        headers: { cookie: student.cookie, origin: balancer.url },
      }).then(
        (answer) => answer.status,
        (error: unknown) => {
          if ((error as { cause?: { message?: string } }).cause?.message === 'other side closed') return 'closed' as const;
          throw error;
        },
      );
      return { student, status, tookMs: Date.now() - sent };
    }),
  );
  const failed = asked.filter(({ status }) => status === 'closed' || status >= 500);
  expect(failed.length).toBeGreaterThan(0);
  for (const { status, tookMs } of asked) {
    expect([202, 502, 503, 504, 'closed']).toContain(status);
    expect(tookMs).toBeLessThan(15_000);
  }
  // The frozen replica's editors are closed (to reconnect elsewhere); the others still answer.
  const outcomes = await Promise.all(sockets.map((socket, index) => echoOrClose(socket, `during ${index}`, 20_000)));
  expect(outcomes).toContain('closed');
  expect(outcomes).toContain('echoed');

  // Woken: it reads what it was sent while frozen, and commits none of it.
  frozen.proc.kill('SIGCONT');
  await eventually(
    'the woken replica to have refused each request it held',
    async () => frozen.records.filter((record) => record.message.endsWith('changed nothing: its client left before the answer')).length === failed.length,
    30_000,
  );
  for (const { student, status } of asked) {
    const workspace = (await harness.store.workspaces.get(student.workspace.id))!;
    expect(workspace.spec.desiredState).toBe(status === 202 ? 'running' : 'stopped');
  }
}, 180_000);

it('an API request that a replica cannot answer within the API timeout ends as a 504 for the student, and is not carried out once the replica can', async () => {
  const bea = await newStudent(harness.store, 'bea', tag);
  // The replica answers its health checks but this request waits: the workspace's row is held elsewhere.
  const holder = db.dataSource.createQueryRunner();
  await holder.connect();
  await holder.startTransaction();
  await holder.query('SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE', [bea.workspace.id]);
  const logged = () =>
    replicas.flatMap((replica) => replica.records).filter((record) => record.message.endsWith('changed nothing: its client left before the answer')).length;
  const before = logged();
  try {
    const sent = Date.now();
    const answer = await fetch(`${balancer.url}/u/${bea.workspace.slug}/api/workspace/open`, {
      method: 'POST',
      headers: { cookie: bea.cookie, origin: balancer.url },
      // A bound for the failure only: the balancer answers after its 3 s.
      signal: AbortSignal.timeout(20_000),
    });
    expect(answer.status).toBe(504);
    expect(Date.now() - sent).toBeLessThan(15_000);
  } finally {
    await holder.rollbackTransaction();
    await holder.release();
  }
  // The row free, the replica's open goes on and is rolled back: its client is gone.
  await eventually('the replica to refuse the abandoned open', async () => logged() === before + 1, 30_000);
  expect((await harness.store.workspaces.get(bea.workspace.id))!.spec.desiredState).toBe('stopped');
}, 120_000);
