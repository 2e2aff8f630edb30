/**
 * Issue 23, what two replicas on one database must share beyond desired state, each served by a
 * real app on real PostgreSQL (the second hearing the first through LISTEN, as a replica does):
 * the rate limits' counters (failures on one count on the other), the students refused at the cap
 * (the other replica's panel lists them and its event stream tells them), the observed status
 * (NOTIFYed, so the other replica's caches and panels hear it), a resync of the open panels when
 * a replica's change listener comes back, and a run's output streamed live from either replica.
 */
import http from 'node:http';
import { ChangeFeed, type Change } from '../../src/db/changes.ts';
import { categoryLogger } from '../../src/log.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent } from '../helpers/workspaces.ts';

const ADMIN_TOKEN = 'admin-token-replicas-0123456789abcdef0123';
const db = useTestDatabase();
const tag = Date.now().toString(36);
let a: TestApp;
let b: TestApp;
const feedB = new ChangeFeed();
const log = captureLogger();
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

beforeAll(async () => {
  feedB.listen(db.url, categoryLogger(log.root, 'db'));
  a = await startApp(db.dataSource, { ADMIN_TOKEN, MAX_ACTIVE_CONTAINERS: '0' });
  b = await startApp(db.dataSource, { ADMIN_TOKEN, MAX_ACTIVE_CONTAINERS: '0' }, { changes: feedB });
  await eventually('B to listen', async () => log.records.some((record) => record.message === 'change listener connected'));
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await feedB.close();
});

it('counts wrong tokens on either replica against one limit', async () => {
  const wrong = { authorization: 'Bearer wrong-token' };
  for (let i = 0; i < 10; i++) expect((await fetch(`${a.url}/admin/status`, { headers: wrong })).status).toBe(401);
  for (let i = 0; i < 10; i++) expect((await fetch(`${b.url}/admin/status`, { headers: wrong })).status).toBe(401);
  // The 21st, on either, is over the limit of 20 per 5 minutes.
  const locked = await fetch(`${a.url}/admin/status`, { headers: wrong });
  expect(locked.status).toBe(429);
  expect((await fetch(`${b.url}/admin/status`, { headers: wrong })).status).toBe(429);
  // The right token passes on both.
  expect((await fetch(`${b.url}/admin/status`, { headers: admin })).status).toBe(200);
});

it("lists on one replica's panel, and tells its open event stream, a student refused at the cap on the other", async () => {
  const ada = await newStudent(a.store, 'ada', tag);
  const events = await openEvents(b.url);
  try {
    const refused = await fetch(`${a.url}/u/${ada.workspace.slug}/api/workspace/open`, {
      method: 'POST',
      headers: { cookie: ada.cookie, accept: 'application/json', origin: a.url },
    });
    expect(refused.status).toBe(503);
    await eventually('the refusal on B', async () => {
      const { refusals } = (await (await fetch(`${b.url}/admin/refusals`, { headers: admin })).json()) as { refusals: { slug: string; email: string }[] };
      return refusals.some((refusal) => refusal.slug === ada.workspace.slug && refusal.email === ada.email);
    });
    await eventually("the refusal in B's event stream", async () => events.text().includes('event: refusal') && events.text().includes(ada.workspace.slug));
    // Told once, though B hears it only by NOTIFY and A by both.
    expect(events.text().split('event: refusal').length - 1).toBe(1);
  } finally {
    events.close();
  }
});

it("announces a workspace's observed status to the other replica", async () => {
  const ada = await newStudent(a.store, 'ada-status', tag);
  const heard: Change[] = [];
  const unsubscribe = feedB.subscribe((change) => heard.push(change));
  try {
    await a.store.workspaces.writeStatus(ada.workspace.id, { observedState: 'stopped', observedGeneration: 1, statusMessage: 'seen', editorEndpoint: null });
    await eventually('the status on B', async () => heard.some((change) => change.kind === 'status' && change.id === ada.workspace.id));
  } finally {
    unsubscribe();
  }
});

it('tells the open panels of a replica to read again when its change listener comes back (it may have missed changes)', async () => {
  const events = await openEvents(b.url);
  try {
    const reconnects = log.records.filter((record) => record.message === 'change listener reconnected').length;
    await db.dataSource.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()",
    );
    await eventually('B to reconnect', async () => log.records.filter((record) => record.message === 'change listener reconnected').length > reconnects);
    await eventually("a resync in B's event stream", async () => events.text().includes('event: resync'));
  } finally {
    events.close();
  }
});

it("shows on one replica's Overview the orphans the leader found", async () => {
  await a.store.leaderCounters.add('orphan_containers', 2);
  await a.store.leaderCounters.add('orphan_volumes', 1);
  const overview = (await (await fetch(`${b.url}/admin/overview`, { headers: admin })).json()) as { orphansSeen: number; orphanVolumesSeen: number };
  expect([overview.orphansSeen, overview.orphanVolumesSeen]).toEqual([2, 1]);
});

it("streams a run's output live on a replica that does not collect it (the leader's pieces are signalled, read from the database)", async () => {
  const ada = await newStudent(a.store, 'ada-output', tag);
  const [run] = (await db.dataSource.query("INSERT INTO runs (workspace_id, status, desired_state) VALUES ($1, 'running', 'running') RETURNING id", [
    ada.workspace.id,
  ])) as { id: string }[];
  const output = await openEvents(b.url, `/u/${ada.workspace.slug}/api/runs/${run!.id}/output`, { cookie: ada.cookie });
  try {
    // Kept as the leader's collector keeps it; nothing else changes (no status to read again on).
    await a.store.runs.appendOutput([{ runId: run!.id, offset: 0, text: 'tick 1\n', sourceBytes: 7, truncated: false }]);
    await eventually('the piece on B', async () => output.text().includes('"text":"tick 1\\n"'));
    await a.store.runs.appendOutput([{ runId: run!.id, offset: 7, text: 'tick 2\n', sourceBytes: 14, truncated: false }]);
    await eventually('the next piece on B', async () => output.text().includes('{"offset":7,"text":"tick 2\\n"}'));
  } finally {
    output.close();
  }
});

/** Opens an event stream (`/admin/events` with the admin token, unless told); resolves once the stream's first comment arrived. */
function openEvents(url: string, path = '/admin/events', headers: Record<string, string> = admin): Promise<{ text: () => string; close: () => void }> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port: new URL(url).port, path, headers }, (response) => {
      if (response.statusCode !== 200) return reject(new Error(`status ${response.statusCode}`));
      let text = '';
      response.on('data', (chunk: Buffer) => {
        const first = text === '';
        text += chunk.toString();
        if (first) resolve({ text: () => text, close: () => request.destroy() });
      });
    });
    request.on('error', reject);
  });
}
