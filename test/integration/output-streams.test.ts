/**
 * Issue 39, finding 8: runs' output streams are bounded. A real server process on PostgreSQL and
 * the real engine (the test image's editor and stand-in simulator): a user's streams past
 * OUTPUT_STREAMS_PER_USER are refused (429 `too_many_output_streams`, Retry-After) while another
 * user's pass, and a closed stream frees its place; a run's past OUTPUT_STREAMS_PER_RUN are refused
 * (429 `run_output_streams_full`); a flood of refusals is one log line; and a reader that takes
 * nothing is cut once its buffer has waited OUTPUT_STREAM_STALL_SECONDS, then resumes from the last
 * event it got (Last-Event-ID) with nothing lost and nothing repeated.
 */
import http from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TEST_SESSION_SECRET } from '../helpers/app.ts';
import { createHarness, eventually, newControlPlaneId, removeEverything, TEST_ENV } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startServer, type LogRecord, type ServerProcess } from '../helpers/server.ts';
import { newStudent, waitForState, type Student } from '../helpers/workspaces.ts';

const METRICS_TOKEN = 'metrics-token-streams-0123456789abcdef0123';
/**
 * The run prints this many U+0001 first: each is 6 bytes in an event's JSON (`\u0001`), so its stream
 * is about 6 MB, more than loopback's socket buffers hold (about 4 MB here: the kernel's tcp_wmem
 * maximum), so that a reader who takes nothing leaves the rest in the server's buffer.
 */
const CONTROL_CHARACTERS = 1_040_000;
const db = useTestDatabase({ truncate: false });
const controlPlaneId = newControlPlaneId();
const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'cp-output-streams-'));
writeFileSync(path.join(DATA_DIR, 'allowlist.json'), JSON.stringify({ entries: ['school.test'] }));
let server: ServerProcess;
let ada: Student;
let coach: Student;
let head: Student;
let runId: string;

beforeAll(async () => {
  server = await startServer({
    ...TEST_ENV,
    DATABASE_URL: db.url,
    DATA_DIR,
    CONTROL_PLANE_ID: controlPlaneId,
    SESSION_SECRET: TEST_SESSION_SECRET,
    METRICS_TOKEN,
    SIM_COMMAND: `head -c ${CONTROL_CHARACTERS} /dev/zero | tr '\\0' '\\1'; SIM_COMPILE_MS=300 SIM_BOOT_MS=100 node /app/sim.mjs`,
    OUTPUT_STREAMS_PER_USER: '3',
    OUTPUT_STREAMS_PER_RUN: '5',
    OUTPUT_STREAM_BUFFER: '64k',
    OUTPUT_STREAM_STALL_SECONDS: '1',
  });
  const { store } = createHarness(db.dataSource, { controlPlaneId });
  const tag = controlPlaneId.slice(5);
  ada = await newStudent(store, 'ada', tag);
  coach = await newStudent(store, 'coach', tag, 'admin');
  head = await newStudent(store, 'head', tag, 'admin');
  const opened = await post(ada, '/workspace/open');
  if (opened.status !== 202) throw new Error(`opening the workspace answered ${opened.status}`);
  await waitForState(store, ada.workspace.id, 'running', 30_000);
  const started = await post(ada, '/runs');
  if (started.status !== 202) throw new Error(`starting the run answered ${started.status}`);
  runId = ((await started.json()) as { run: { id: string } }).run.id;
  // The whole output is kept once the simulator said it is ready (it prints nothing after).
  await eventually(
    'the output kept to "sim ready"',
    async () => (await store.runs.outputFrom(runId, CONTROL_CHARACTERS)).some((chunk) => chunk.text.includes('sim ready')),
    60_000,
  );
}, 120_000);
afterAll(async () => {
  await server?.stop('SIGKILL');
  await removeEverything(controlPlaneId);
}, 60_000);

const api = (rest: string) => `${server.url}/u/${ada.workspace.slug}/api${rest}`;
const post = (student: Student, rest: string) => fetch(api(rest), { method: 'POST', headers: { cookie: student.cookie, origin: server.url } });

/** The run's output stream as `who` sees it (the student API for its owner, the admin API for admins), with `headers`. */
function outputUrl(who: Student, query = ''): string {
  return who === ada ? api(`/runs/${runId}/output${query}`) : `${server.url}/admin/runs/${runId}/output${query}`;
}

/** Opens an output stream and reads it to nothing (it stays open: the run goes on); `close` ends it. */
async function openStream(who: Student, query = ''): Promise<{ status: number; body: unknown; retryAfter: string | null; close: () => void }> {
  const abort = new AbortController();
  const answer = await fetch(outputUrl(who, query), { headers: { cookie: who.cookie }, signal: abort.signal });
  if (answer.status !== 200) return { status: answer.status, body: await answer.json(), retryAfter: answer.headers.get('retry-after'), close: () => undefined };
  void answer.body!.pipeTo(new WritableStream()).catch(() => undefined);
  return { status: 200, body: undefined, retryAfter: null, close: () => abort.abort() };
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}

const refusedLine = (bound: 'user' | 'run') => (record: LogRecord) =>
  record.category === 'control.runs' && record.bound === bound && record.message.startsWith('refused an output stream');

/** The complete server-sent events of `text` (a last one cut short is left out). */
function events(text: string): { id: string; type: string; data: { offset: number; text: string } }[] {
  const blocks = text.split('\n\n').slice(0, -1);
  return blocks.flatMap((block) => {
    const field = (name: string) =>
      block
        .split('\n')
        .find((line) => line.startsWith(`${name}: `))
        ?.slice(name.length + 2);
    return field('event') === 'output' ? [{ id: field('id')!, type: 'output', data: JSON.parse(field('data')!) as { offset: number; text: string } }] : [];
  });
}

it("refuses a user's streams past the user's bound (429, Retry-After) and a run's past the run's, not another user's; a closed stream frees its place", async () => {
  const kept = (await (await fetch(api(`/runs/${runId}/output.txt`), { headers: { cookie: ada.cookie } })).text()).length;
  // From the end: these carry nothing but their start (and a heartbeat).
  const end = `?from=${kept}`;
  const mine = [await openStream(ada, end), await openStream(ada, end), await openStream(ada, end)];
  const theirs: { close: () => void }[] = [];
  try {
    expect(mine.map((stream) => stream.status)).toEqual([200, 200, 200]);
    const refused = await Promise.all(Array.from({ length: 20 }, () => openStream(ada, end)));
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(answer.retryAfter).toBe('10');
      expect(answer.body).toEqual({ error: { code: 'too_many_output_streams', message: expect.stringContaining('3 run output streams open') } });
    }
    // Another user (a coach, through the admin API) is not held to ada's bound.
    const coachs = await openStream(coach, end);
    theirs.push(coachs);
    expect(coachs.status).toBe(200);
    expect(await metric('run_output_streams')).toBe(4);

    // A closed stream frees its place.
    mine.shift()!.close();
    await eventually('the closed stream given back', async () => (await metric('run_output_streams')) === 3);
    const again = await openStream(ada, end);
    mine.push(again);
    expect(again.status).toBe(200);

    // The run's bound: 3 of ada's and the coach's, then another admin's fifth passes and a sixth does not.
    const fifth = await openStream(head, end);
    theirs.push(fifth);
    expect(fifth.status).toBe(200);
    const sixth = await openStream(head, end);
    expect(sixth.status).toBe(429);
    expect(sixth.body).toEqual({ error: { code: 'run_output_streams_full', message: expect.stringContaining('5 output streams open') } });

    expect(await metric('run_output_stream_refusals_total{bound="user"}')).toBe(20);
    expect(await metric('run_output_stream_refusals_total{bound="run"}')).toBe(1);
    // The run's refusal was logged after ada's 20: once it is read, ada's are too, folded into one line.
    await server.waitForLog(refusedLine('run'));
    expect(server.records.filter(refusedLine('user'))).toHaveLength(1);
  } finally {
    for (const stream of [...mine, ...theirs]) stream.close();
  }
  await eventually('every stream given back', async () => (await metric('run_output_streams')) === 0);
}, 60_000);

it('cuts a reader that takes nothing once its buffer waited OUTPUT_STREAM_STALL_SECONDS; it resumes from its last event with nothing lost', async () => {
  const kept = await (await fetch(api(`/runs/${runId}/output.txt`), { headers: { cookie: ada.cookie } })).text();
  expect(kept.length).toBeGreaterThan(CONTROL_CHARACTERS);
  // What the kernel holds of one loopback connection (its send buffer at most) must leave the server some to hold.
  const sendBufferMax = Number(readFileSync('/proc/sys/net/ipv4/tcp_wmem', 'utf8').trim().split(/\s+/)[2]);
  expect(sendBufferMax).toBeLessThan(CONTROL_CHARACTERS * 6 - 1024 * 1024);
  // A reader that takes nothing: its response paused from the start (Node then stops reading the socket).
  let received = '';
  const closed = new Promise<void>((resolve, reject) => {
    const request = http.get(outputUrl(ada), { headers: { cookie: ada.cookie } }, (response) => {
      expect(response.statusCode).toBe(200);
      response.pause();
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (received += chunk));
      response.once('close', resolve);
      // The cut ends the response before its end: that is expected here.
      response.on('error', () => undefined);
      void server
        .waitForLog((record) => record.category === 'control.runs' && record.message.startsWith('cut an output stream') && record.runId === runId)
        .then(() => response.resume(), reject);
    });
    request.on('error', () => undefined);
  });
  await closed;
  expect(await metric('run_output_stream_cuts_total')).toBe(1);

  // What it got: whole events from the start, each where the one before ended; the last id is where it resumes.
  const first = events(received);
  expect(first.length).toBeGreaterThan(0);
  let offset = 0;
  for (const event of first) {
    expect(event.data.offset).toBe(offset);
    offset += event.data.text.length;
    expect(event.id).toBe(String(offset));
  }
  expect(offset).toBeLessThan(kept.length);

  // Resumed as EventSource does, from its Last-Event-ID: the rest, from there, and nothing else.
  const abort = new AbortController();
  const resumed = await fetch(outputUrl(ada), { headers: { cookie: ada.cookie, 'last-event-id': String(offset) }, signal: abort.signal });
  expect(resumed.status).toBe(200);
  const second: ReturnType<typeof events> = [];
  let pending = '';
  let got = 0;
  const decoder = new TextDecoder();
  const reader = resumed.body!.getReader();
  try {
    // Until the rest of the kept output came (the run goes on, printing nothing more): read by read.
    for (let read = 0; got < kept.length - offset; read++) {
      expect(read).toBeLessThan(100_000);
      const { value, done } = await reader.read();
      expect(done).toBe(false);
      pending += decoder.decode(value, { stream: true });
      const whole = pending.lastIndexOf('\n\n') + 2;
      if (whole === 1) continue;
      for (const event of events(pending.slice(0, whole))) {
        second.push(event);
        got += event.data.text.length;
      }
      pending = pending.slice(whole);
    }
  } finally {
    abort.abort();
  }
  // The cut stream's place was given back, and the resumed one's once it closed.
  await eventually('every stream given back', async () => (await metric('run_output_streams')) === 0);
  expect(second[0]!.data.offset).toBe(offset);
  expect(first.map((event) => event.data.text).join('') + second.map((event) => event.data.text).join('')).toBe(kept);
}, 60_000);
