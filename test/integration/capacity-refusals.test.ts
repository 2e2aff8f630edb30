/**
 * Issue 39, finding 7: capacity refusals cannot be spammed. Two real server processes (replicas) on
 * one PostgreSQL, the cap at 0: a student's flood of Opens, spread over both, is one refusal row whose
 * count is every Open, one `refusal` event on a panel's stream and one warning line, while every Open
 * still gets the spec's exact toast with Retry-After and capacity_rejections_total counts each; once
 * the minute of that refusal is over, the next Open is a new refusal, told and logged again.
 */
import http from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AT_CAPACITY_MESSAGE } from '../../src/errors.ts';
import { REFUSAL_FOLD_MS } from '../../src/store/refusals.ts';
import { TEST_SESSION_SECRET } from '../helpers/app.ts';
import { createHarness, eventually, newControlPlaneId } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startServer, type LogRecord, type ServerProcess } from '../helpers/server.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';

const ADMIN_TOKEN = 'admin-token-refusals-0123456789abcdef0123';
const METRICS_TOKEN = 'metrics-token-refusals-0123456789abcdef01';
/** Opens of one student, half to each replica, all at once. */
const FLOOD = 40;
const db = useTestDatabase({ truncate: false });
const controlPlaneId = newControlPlaneId();
const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'cp-refusals-'));
writeFileSync(path.join(DATA_DIR, 'allowlist.json'), JSON.stringify({ entries: ['school.test'] }));
let a: ServerProcess;
let b: ServerProcess;

beforeAll(async () => {
  const env = {
    DATABASE_URL: db.url,
    DATA_DIR,
    CONTROL_PLANE_ID: controlPlaneId,
    SESSION_SECRET: TEST_SESSION_SECRET,
    MAX_ACTIVE_CONTAINERS: '0',
    ADMIN_TOKEN,
    METRICS_TOKEN,
  };
  [a, b] = await Promise.all([startServer(env), startServer(env)]);
  // Each hears the other's refusals through LISTEN.
  await Promise.all([a, b].map((server) => server.waitForLog((record) => record.message === 'change listener connected')));
}, 60_000);
afterAll(async () => {
  await Promise.all([a, b].map((server) => server?.stop('SIGKILL')));
});

/** A panel's event stream (`/admin/events`) on `server`: the events of a kind so far, by what they name. */
function openEvents(server: ServerProcess): Promise<{ refusalsOf: (slug: string) => number; close: () => void }> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${server.url}/admin/events`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }, (response) => {
      if (response.statusCode !== 200) return reject(new Error(`status ${response.statusCode}`));
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      const refusalsOf = (slug: string) =>
        text.split('\n\n').filter((block) => block.startsWith('event: refusal\n') && block.includes(`"slug":${JSON.stringify(slug)}`)).length;
      response.once('data', () => resolve({ refusalsOf, close: () => request.destroy() }));
    });
    request.on('error', reject);
  });
}

/** Opens `student`'s workspace through `server`: the answer must be the spec's refusal, whole. */
async function refusedOpen(server: ServerProcess, student: Student): Promise<void> {
  const answer = await fetch(`${server.url}/u/${student.workspace.slug}/api/workspace/open`, {
    method: 'POST',
    headers: { cookie: student.cookie, accept: 'application/json', origin: server.url },
  });
  expect(answer.status).toBe(503);
  expect(answer.headers.get('retry-after')).toBe('60');
  expect(await answer.json()).toEqual({ error: { code: 'at_capacity', message: AT_CAPACITY_MESSAGE } });
}

/** The warning lines of `server` about `student`'s refusals. */
const warningsOf = (server: ServerProcess, student: Student) => server.records.filter((record) => isWarningOf(record, student)).length;
const isWarningOf = (record: LogRecord, student: Student) =>
  record.category === 'control.containers' && record.message === 'workspace open refused: server at capacity' && record.slug === student.workspace.slug;

async function rejectionsCounted(server: ServerProcess): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  return Number(/^capacity_rejections_total (\d+)$/m.exec(text)?.[1]);
}

async function rowsOf(student: Student): Promise<{ count: number; at: Date; last_at: Date }[]> {
  return db.dataSource.query('SELECT count, at, last_at FROM capacity_refusals WHERE workspace_id = $1 ORDER BY id', [student.workspace.id]);
}

it("folds a student's flood of Opens on both replicas into one refusal, one panel event and one log line a minute; each Open gets the toast", async () => {
  const { store } = createHarness(db.dataSource, { controlPlaneId });
  const tag = controlPlaneId.slice(5);
  const [ada, bob, carol] = await Promise.all([newStudent(store, 'ada', tag), newStudent(store, 'bob', tag), newStudent(store, 'carol', tag)]);
  const events = await openEvents(b);
  try {
    await Promise.all(Array.from({ length: FLOOD }, (_, index) => refusedOpen(index % 2 === 0 ? a : b, ada)));
    // Whatever the flood made is committed and written by now; a refusal of another student on each
    // replica comes after it in B's stream and in each log, so once those arrive nothing more of ada's will.
    await refusedOpen(a, bob);
    await refusedOpen(b, carol);
    await eventually(
      'the later refusals in the stream',
      async () => events.refusalsOf(bob.workspace.slug) === 1 && events.refusalsOf(carol.workspace.slug) === 1,
    );
    await a.waitForLog((record) => isWarningOf(record, bob));
    await b.waitForLog((record) => isWarningOf(record, carol));

    const rows = await rowsOf(ada);
    expect(rows.map((row) => row.count)).toEqual([FLOOD]);
    expect(rows[0]!.last_at.getTime()).toBeGreaterThanOrEqual(rows[0]!.at.getTime());
    expect(events.refusalsOf(ada.workspace.slug)).toBe(1);
    expect(warningsOf(a, ada) + warningsOf(b, ada)).toBe(1);
    // The panel lists it once, saying how often; the counter counts every refused Open.
    const { refusals } = (await (await fetch(`${a.url}/admin/refusals`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as {
      refusals: { slug: string; count: number }[];
    };
    expect(refusals.filter((refusal) => refusal.slug === ada.workspace.slug).map((refusal) => refusal.count)).toEqual([FLOOD]);
    expect((await rejectionsCounted(a)) + (await rejectionsCounted(b))).toBe(FLOOD + 2);

    // The minute of that refusal over (its first time moved back past the window, as the clock would):
    // the next Open is a new refusal, told and logged again.
    await db.dataSource.query(
      'UPDATE capacity_refusals SET at = at - make_interval(secs => $2), last_at = last_at - make_interval(secs => $2) WHERE workspace_id = $1',
      [ada.workspace.id, REFUSAL_FOLD_MS / 1000 + 1],
    );
    await refusedOpen(b, ada);
    await eventually('the new refusal in the stream', async () => events.refusalsOf(ada.workspace.slug) === 2);
    await b.waitForLog((record) => isWarningOf(record, ada) && warningsOf(a, ada) + warningsOf(b, ada) === 2);
    expect((await rowsOf(ada)).map((row) => row.count)).toEqual([FLOOD, 1]);
  } finally {
    events.close();
  }
}, 60_000);
