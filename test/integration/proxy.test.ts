import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { request as send } from 'undici';
import WebSocket from 'ws';
import { CACHE_TTL_MS, REFRESH_AHEAD_MS, SHARED_LOOKUP_MS } from '../../api/proxy/ttl-cache.ts';
import { createDataSource } from '../../src/db/database.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, eventually, removeEverything, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { direct, rawAnswer, requestsSeen, servingOf } from '../helpers/stand-ins.ts';
import { newStudent, openAndWait, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let harness: Harness;
let app: TestApp;
let ada: Student;
let bob: Student;
let coach: Student;
const tag = Date.now().toString(36);

beforeAll(async () => {
  harness = createHarness(db.dataSource);
  await harness.controller.start();
  // One change feed: the proxy hears the controller's status changes at once, as in the server.
  app = await startApp(db.dataSource, {}, { changes: harness.changes });
  ada = await newStudent(harness.store, 'ada', tag);
  bob = await newStudent(harness.store, 'bob', tag);
  coach = await newStudent(harness.store, 'coach', tag, 'admin');
  ada.workspace = await openAndWait(harness.store, ada.workspace);
  bob.workspace = await openAndWait(harness.store, bob.workspace);
}, 60_000);
afterAll(async () => {
  await app.close();
  await harness.stop();
  await removeEverything(harness.controlPlaneId);
});

/** Every API Jest's fake timers can fake but Date. */
const NOT_DATE = [
  'hrtime',
  'nextTick',
  'performance',
  'queueMicrotask',
  'requestAnimationFrame',
  'cancelAnimationFrame',
  'requestIdleCallback',
  'cancelIdleCallback',
  'setImmediate',
  'clearImmediate',
  'setInterval',
  'clearInterval',
  'setTimeout',
  'clearTimeout',
] as const;

const url = (student: Student, rest: string) => `${app.url}/u/${student.workspace.slug}${rest}`;
const as = (student: Student, headers: Record<string, string> = {}) => ({ cookie: student.cookie, ...headers });

/** A raw GET, exactly as written (fetch would normalise `..` and encodings). */
function rawGet(target: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(app.url);
    const request = http.request({ host: '127.0.0.1', port, path: target, headers }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

/** The sample count of a labelled series in the app's metrics text. */
async function count(name: string, labels: string, of: TestApp = app): Promise<number> {
  const text = await of.metrics.registry.metrics();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name}_count{${labels}}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('the workspace proxy over HTTP', () => {
  it('forwards to the editor with the prefix stripped, without the session cookie or Authorization, with X-Forwarded-*', async () => {
    const response = await fetch(url(ada, '/echo-headers?x=1'), {
      headers: as(ada, { cookie: `theme=dark; ${ada.cookie}; lang=en`, authorization: 'Bearer student-token-0123' }),
    });
    expect(response.status).toBe(200);
    const echo = (await response.json()) as { method: string; url: string; headers: Record<string, string> };
    expect(echo.url).toBe('/echo-headers?x=1');
    expect(echo.headers.cookie).toBe('theme=dark; lang=en');
    expect(echo.headers.authorization).toBeUndefined();
    expect(JSON.stringify(echo.headers)).not.toContain('cp_session');
    expect(echo.headers).toEqual(
      expect.objectContaining({
        'x-forwarded-for': '127.0.0.1',
        'x-forwarded-proto': 'http',
        'x-forwarded-host': new URL(app.url).host,
        'x-forwarded-prefix': `/u/${ada.workspace.slug}`,
      }),
    );
    expect(echo.headers['proxy-authorization']).toBeUndefined();
  });

  it("drops hop-by-hop request headers, including those Connection names, and replaces a client's X-Forwarded-*", async () => {
    const answer = await rawGet(`/u/${ada.workspace.slug}/echo-headers`, {
      cookie: ada.cookie,
      connection: 'keep-alive, X-Secret-Hop',
      'x-secret-hop': '1',
      te: 'trailers',
      'x-forwarded-for': '203.0.113.9',
      'x-forwarded-host': 'evil.example',
      'x-custom': 'kept',
    });
    expect(answer.status).toBe(200);
    const echo = JSON.parse(answer.body) as { headers: Record<string, string> };
    expect(echo.headers['x-secret-hop']).toBeUndefined();
    expect(echo.headers.te).toBeUndefined();
    expect(echo.headers['x-custom']).toBe('kept');
    expect(echo.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(echo.headers['x-forwarded-host']).toBe(new URL(app.url).host);
    expect(echo.headers.cookie).toBeUndefined();
  });

  it('streams a 50 MB upload and a 50 MB download through intact', async () => {
    const size = 50 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 7);
    const sent = createHash('sha256');
    const body = Readable.from(
      (function* () {
        for (let offset = 0; offset < size; offset += chunk.length) {
          sent.update(chunk);
          yield chunk;
        }
      })(),
    );
    const upload = await fetch(url(ada, '/upload'), {
      method: 'POST',
      body: Readable.toWeb(body) as ReadableStream,
      headers: as(ada),
      duplex: 'half',
    } as RequestInit);
    expect(upload.status).toBe(200);
    expect(await upload.json()).toEqual({ bytes: size, sha256: sent.digest('hex') });

    const download = await fetch(url(ada, `/download?bytes=${size}`), { headers: as(ada) });
    expect(download.status).toBe(200);
    let received = 0;
    for await (const part of download.body as unknown as AsyncIterable<Uint8Array>) received += part.length;
    expect(received).toBe(size);
  }, 60_000);

  it('streams server-sent events as they come, not at the end', async () => {
    const started = Date.now();
    const response = await fetch(url(ada, '/sse?count=5&intervalMs=500'), { headers: as(ada, { accept: 'text/event-stream' }) });
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    const arrivals: number[] = [];
    let text = '';
    for await (const part of response.body as unknown as AsyncIterable<Uint8Array>) {
      text += Buffer.from(part).toString();
      arrivals.push(Date.now() - started);
    }
    expect(text.match(/^data: /gm)).toHaveLength(5);
    // The first event arrived long before the last one was sent (2 s later).
    expect(arrivals[0]).toBeLessThan(arrivals.at(-1)! - 1000);
  });

  it('answers 504 when the editor is slower than the proxy timeout, and counts it', async () => {
    // An app of its own with a short timeout: the other tests keep the default, so a slow moment of the machine is no 504.
    const impatient = await startApp(db.dataSource, { PROXY_TIMEOUT_SECONDS: '1.5' });
    try {
      const response = await fetch(`${impatient.url}/u/${ada.workspace.slug}/slow?ms=4000`, { headers: as(ada) });
      expect(response.status).toBe(504);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('upstream_timeout');
      expect(await count('proxy_upstream_duration_seconds', 'upstream="vscode",outcome="timeout"', impatient)).toBe(1);
    } finally {
      await impatient.close();
    }
  });

  it('breaks the response when the editor dies mid-response, and keeps serving', async () => {
    const response = await fetch(url(ada, '/die-midway'), { headers: as(ada) });
    await expect(response.text()).rejects.toThrow();
    expect((await fetch(url(ada, '/healthz'), { headers: as(ada) })).status).toBe(200);
  });

  it('labels proxied requests with the route template only', async () => {
    await fetch(url(ada, '/some/student/path-9137'), { headers: as(ada) });
    const text = await app.metrics.registry.metrics();
    expect(text).toMatch(/http_request_duration_seconds_count\{method="GET",route="\/u\/:slug\/\*",status_class="2xx"\}/);
    expect(text).not.toContain('path-9137');
    expect(text).not.toContain(ada.workspace.slug);
    expect(await count('proxy_upstream_duration_seconds', 'upstream="vscode",outcome="ok"')).toBeGreaterThan(0);
  });

  it('marks the workspace active on proxied requests, in batches', async () => {
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() - interval '1 hour' WHERE id = $1", [ada.workspace.id]);
    await fetch(url(ada, '/healthz'), { headers: as(ada) });
    const [before] = (await db.dataSource.query('SELECT last_activity_at FROM workspaces WHERE id = $1', [ada.workspace.id])) as { last_activity_at: Date }[];
    expect(Date.now() - before!.last_activity_at.getTime()).toBeGreaterThan(50 * 60_000);
    await app.activity.flush();
    const [after] = (await db.dataSource.query('SELECT last_activity_at FROM workspaces WHERE id = $1', [ada.workspace.id])) as { last_activity_at: Date }[];
    expect(Date.now() - after!.last_activity_at.getTime()).toBeLessThan(60_000);
  });
});

describe('who may pass', () => {
  it('lets the owner in, and keeps other students and (in path mode) admins out', async () => {
    expect((await fetch(url(ada, '/healthz'), { headers: as(ada) })).status).toBe(200);
    for (const someone of [bob, coach]) {
      const other = await fetch(url(ada, '/healthz'), { headers: as(someone) });
      expect(other.status).toBe(403);
      expect(((await other.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    }
  });

  it('sends a browser without a session to sign in, and answers an API client 401', async () => {
    const browser = await fetch(url(ada, '/files?x=1'), { headers: { accept: 'text/html' }, redirect: 'manual' });
    expect(browser.status).toBe(302);
    expect(browser.headers.get('location')).toBe(`/auth/sign-in?return_to=${encodeURIComponent(`/u/${ada.workspace.slug}/files?x=1`)}`);
    expect((await fetch(url(ada, '/files'))).status).toBe(401);
  });

  it('refuses a forged session cookie', async () => {
    const forged = ada.cookie.replace(/cp_session\.sig=[^;]+/, 'cp_session.sig=forged');
    expect((await fetch(url(ada, '/healthz'), { headers: { cookie: forged } })).status).toBe(401);
  });

  it.each([
    ['a plain path', (a: string, b: string) => `/u/${b}/echo-headers`, 403],
    ['an encoded slash in the slug', (a: string, b: string) => `/u/${a}%2F..%2F${b}/echo-headers`, 400],
    ['a dot-dot segment', (a: string, b: string) => `/u/${a}/../${b}/echo-headers`, 400],
    ['an encoded dot-dot', (a: string, b: string) => `/u/${a}/%2e%2e/${b}/echo-headers`, 400],
    ['a double-encoded dot-dot', (a: string, b: string) => `/u/${a}/%252e%252e/${b}/echo-headers`, 400],
    ['a double-encoded slash', (a: string, b: string) => `/u/${a}/..%252f${b}/echo-headers`, 400],
    ['a backslash', (a: string, b: string) => `/u/${a}/..\\${b}/echo-headers`, 400],
    ['an encoded backslash', (a: string, b: string) => `/u/${a}/..%5c${b}/echo-headers`, 400],
    ['a percent-encoded slug', (a: string, b: string) => `/u/%${b.charCodeAt(0).toString(16)}${b.slice(1)}/echo-headers`, 400],
    ['a traversal into the control plane', (a: string) => `/u/${a}/../../admin/status`, 400],
    ['a traversal through the API prefix', (a: string) => `/u/${a}/api/../../../admin/status`, 400],
  ])("cannot reach another student's workspace or the control plane through %s", async (_name, build, status) => {
    const answer = await rawGet(build(ada.workspace.slug, bob.workspace.slug), { cookie: ada.cookie });
    expect(answer.status).toBe(status);
    expect(answer.body).not.toContain('"method"');
  });
});

describe("the proxy's lookups of sessions", () => {
  /**
   * An app of its own (cold caches) whose database calls are counted, and whose session lookups can
   * be held at a gate: the real database answers each of them once the gate opens.
   */
  async function countedApp(): Promise<{
    app: TestApp;
    get: () => Promise<Response>;
    lookups: () => number;
    hold: () => void;
    release: () => void;
    close: () => Promise<void>;
  }> {
    const counted = createDataSource(db.url, 3);
    await counted.initialize();
    let lookups = 0;
    let gate: Promise<void> | undefined;
    let open = () => undefined as void;
    // Counted where every query runs, whichever way the store asks (the data source's own query, or a runner of its own: the row codecs).
    const createRunner = counted.createQueryRunner.bind(counted);
    jest.spyOn(counted, 'createQueryRunner').mockImplementation((...args) => {
      const runner = createRunner(...args);
      const query = runner.query.bind(runner) as (sql: string, ...rest: unknown[]) => Promise<unknown>;
      runner.query = (async (sql: string, ...rest: unknown[]) => {
        if (sql.includes('FROM sessions s JOIN users')) {
          lookups++;
          await gate;
        }
        return query(sql, ...rest);
      }) as typeof runner.query;
      return runner;
    });
    const own = await startApp(counted).catch(async (error: unknown) => {
      await counted.destroy();
      throw error;
    });
    return {
      app: own,
      get: () => fetch(`${own.url}/u/${ada.workspace.slug}/healthz`, { headers: as(ada) }),
      lookups: () => lookups,
      hold: () => void (gate = new Promise<void>((resolve) => (open = resolve))),
      release: () => open(),
      close: async () => {
        open();
        await own.close();
        await counted.destroy();
      },
    };
  }
  const inFlight = async (of: TestApp) => (await of.metrics.httpRequestsInFlight.get()).values[0]?.value ?? 0;

  it('looks a session up once for many requests that arrive together', async () => {
    const counted = await countedApp();
    try {
      counted.hold();
      const answers = Promise.all(Array.from({ length: 20 }, () => counted.get()));
      // All twenty are in the proxy, waiting on the database, before it answers.
      await eventually('20 requests in flight', async () => (await inFlight(counted.app)) === 20, 10_000);
      expect(counted.lookups()).toBe(1);
      counted.release();
      expect((await answers).map((answer) => answer.status)).toEqual(Array(20).fill(200));
      expect(counted.lookups()).toBe(1);
    } finally {
      await counted.close();
    }
  });

  it('looks a session in use up again before it expires, answering from the cache meanwhile', async () => {
    const counted = await countedApp();
    const { get } = counted;
    // The cache's clock is the test's: Date alone is faked (timers, I/O and the database run as they are), and it stands still.
    jest.useFakeTimers({ doNotFake: [...NOT_DATE], now: Date.now() });
    try {
      expect((await get()).status).toBe(200);
      expect(counted.lookups()).toBe(1);
      // Inside the entry's last quarter second, with the database held.
      jest.setSystemTime(Date.now() + CACHE_TTL_MS - REFRESH_AHEAD_MS / 2);
      counted.hold();
      // Answered from the cache, while the lookup it started waits at the gate (were it to wait for
      // the database, this would never answer: the gate opens only in close()).
      expect((await get()).status).toBe(200);
      expect(counted.lookups()).toBe(2);
    } finally {
      jest.useRealTimers();
      await counted.close();
    }
  });

  it('shares a lookup for 2 s at most, so one that hangs does not hold up every later request', async () => {
    const counted = await countedApp();
    const { get } = counted;
    try {
      counted.hold();
      const first = get();
      await eventually('the first lookup', async () => counted.lookups() === 1, 5000);
      await sleep(SHARED_LOOKUP_MS + 500);
      const second = get();
      await eventually('a lookup of its own for the later request', async () => counted.lookups() === 2, 5000);
      counted.release();
      expect([(await first).status, (await second).status]).toEqual([200, 200]);
    } finally {
      await counted.close();
    }
  });
});

describe('the workspace proxy over WebSocket', () => {
  const connect = (student: Student, headers: Record<string, string>) =>
    new WebSocket(url(student, '/ws').replace('http', 'ws'), { headers: { cookie: ada.cookie, origin: app.url, ...headers } });

  it('echoes 10,000 messages in order, text and binary', async () => {
    const socket = connect(ada, {});
    await new Promise((resolve, reject) => (socket.once('open', resolve), socket.once('error', reject)));
    const received: string[] = [];
    const done = new Promise<void>((resolve) =>
      socket.on('message', (data: Buffer) => {
        received.push(data.toString());
        if (received.length === 10_000) resolve();
      }),
    );
    for (let i = 0; i < 10_000; i++) socket.send(i % 2 === 0 ? `message ${i}` : Buffer.from(`message ${i}`));
    await done;
    expect(received).toEqual(Array.from({ length: 10_000 }, (_, i) => `message ${i}`));
    socket.close();
  });

  it.each([
    ['no Origin', { origin: '' }, 403],
    ['another Origin', { origin: 'http://evil.example' }, 403],
    ["another student's session", { cookie: 'x' }, 401],
  ])('refuses an upgrade with %s', async (_name, headers, status) => {
    const socket = connect(ada, headers as Record<string, string>);
    const refused = await new Promise<number>((resolve) => socket.once('unexpected-response', (_request, answer) => resolve(answer.statusCode ?? 0)));
    expect(refused).toBe(status);
  });

  it("refuses an upgrade to another student's workspace", async () => {
    const socket = new WebSocket(url(bob, '/ws').replace('http', 'ws'), { headers: { cookie: ada.cookie, origin: app.url } });
    const refused = await new Promise<number>((resolve) => socket.once('unexpected-response', (_request, answer) => resolve(answer.statusCode ?? 0)));
    expect(refused).toBe(403);
  });

  it('refuses an upgrade to something other than WebSocket', async () => {
    const answer = await new Promise<number>((resolve) => {
      const { port } = new URL(app.url);
      const request = http.request({
        host: '127.0.0.1',
        port,
        path: `/u/${ada.workspace.slug}/x`,
        headers: { cookie: ada.cookie, origin: app.url, connection: 'upgrade', upgrade: 'h2c' },
      });
      request.on('response', (response) => resolve(response.statusCode ?? 0));
      request.on('upgrade', (response) => resolve(response.statusCode ?? 0));
      request.end();
    });
    expect(answer).toBe(400);
  });
});

describe('an editor that is not up', () => {
  it('answers 503 JSON to API clients and the workspace page to browsers while stopped', async () => {
    await harness.store.workspaces.stop(SYSTEM_ACTOR, bob.workspace.id, 'coach');
    await waitForState(harness.store, bob.workspace.id, 'stopped');
    const api = await eventually('the proxy to see the editor stopped', async () => {
      const answer = await fetch(url(bob, '/files'), { headers: as(bob) });
      return answer.status === 503 ? answer : (await answer.body?.cancel(), undefined);
    });
    expect(((await api.json()) as { error: { code: string } }).error.code).toBe('editor_not_running');
    const page = await fetch(url(bob, '/'), { headers: as(bob, { accept: 'text/html' }) });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<button id="open"');
  });
});

describe('an editor that is not what the controller started', () => {
  // The controller stops here: the tests below write Ada's record themselves, as a controller whose
  // record is out of date would have left it; her container keeps running.
  beforeAll(() => harness.stop());
  const REFUSED = 'refused to connect to a recorded address that is not where the live container serves (its record is out of date)';

  /** Records Ada's editor as running at `endpoint` (a new transition: a new pool) and announces it, as the controller does. */
  async function recordEditorAt(endpoint: string): Promise<void> {
    await db.dataSource.query("UPDATE workspaces SET observed_state = 'running', editor_endpoint = $2, last_transition_at = now() WHERE id = $1", [
      ada.workspace.id,
      endpoint,
    ]);
    app.store.changes.publish({ kind: 'status', id: ada.workspace.id });
  }

  /** The value of a counter's series in the app's metrics text (0 when absent). */
  async function counter(name: string, labels: string): Promise<number> {
    const line = (await app.metrics.registry.metrics()).split('\n').find((candidate) => candidate.startsWith(`${name}{${labels}}`));
    return line ? Number(line.split(' ').at(-1)) : 0;
  }

  /** An upgrade to Ada's editor at `path`, refused: its status and JSON body. */
  function refusedUpgrade(path: string): Promise<{ status: number; body: unknown }> {
    const socket = new WebSocket(url(ada, path).replace('http', 'ws'), { headers: { cookie: ada.cookie, origin: app.url } });
    return new Promise((resolve, reject) => {
      socket.once('open', () => reject(new Error('the upgrade was accepted')));
      socket.once('unexpected-response', (_request, answer) => {
        let body = '';
        answer.on('data', (chunk: Buffer) => (body += chunk.toString()));
        answer.on('end', () => resolve({ status: answer.statusCode ?? 0, body: JSON.parse(body) as unknown }));
      });
    });
  }

  /** The connections open to Ada's editor (a question asked of it straight, on a connection it does not count). */
  const editorConnections = async () => (JSON.parse((await direct(ada.workspace.status.editorEndpoint!, '/connections')).body) as { open: number }).open;

  it('refuses a recorded address that is not where the live editor serves: 502 editor_gone (a page that retries, for a page load) over HTTP and WebSocket, logged once and counted, and connects to nothing', async () => {
    // Whatever listens at the recorded address (here a trap on loopback) is never connected to.
    let trapped = 0;
    const trap = net.createServer((socket) => (trapped++, socket.destroy()));
    await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
    const trapAt = `127.0.0.1:${(trap.address() as net.AddressInfo).port}`;
    const before = {
      unverified: await counter('proxy_upstream_unverified_total', 'upstream="vscode"'),
      errors: await count('proxy_upstream_duration_seconds', 'upstream="vscode",outcome="error"'),
    };
    const from = app.logs.length;
    try {
      await recordEditorAt(trapAt);
      const api = await fetch(url(ada, '/healthz'), { headers: as(ada) });
      expect(api.status).toBe(502);
      expect(await api.json()).toEqual({
        error: { code: 'editor_gone', message: 'The editor is not running here any more; it may be restarting: try again in a moment.' },
      });
      // A page load (the student reloading the editor) gets a page that says so and tries again.
      // (As a browser sends it: fetch() would say `sec-fetch-mode: cors` whatever it is given.)
      const reload = await send(url(ada, '/'), { headers: as(ada, { accept: 'text/html', 'sec-fetch-mode': 'navigate' }) });
      expect(reload.statusCode).toBe(502);
      const text = await reload.body.text();
      expect(text).toContain('<h1>The editor is not answering</h1>');
      expect(text).toContain('<meta http-equiv="refresh" content="5">');
      expect(await refusedUpgrade('/ws')).toEqual({ status: 502, body: { error: expect.objectContaining({ code: 'editor_gone' }) } });
      expect(trapped).toBe(0);
      // A port no connection could even be made to: an upgrade is refused alike (its tunnel's opening used to fail with a 500).
      await recordEditorAt('127.0.0.1:99999');
      expect(await refusedUpgrade('/ws')).toEqual({ status: 502, body: { error: expect.objectContaining({ code: 'editor_gone' }) } });
      expect(await counter('proxy_upstream_unverified_total', 'upstream="vscode"')).toBe(before.unverified + 4);
      expect(await count('proxy_upstream_duration_seconds', 'upstream="vscode",outcome="error"')).toBe(before.errors + 4);
      // One line for the workspace (its repeats fold into the next one, a minute on), and no error.
      expect(app.logs.slice(from).filter((record) => record.message === REFUSED)).toEqual([
        expect.objectContaining({ level: 'warning', workspaceId: ada.workspace.id, upstream: 'vscode', endpoint: trapAt, repeats: 0 }),
      ]);
      expect(app.logs.slice(from).filter((record) => record.level === 'error')).toEqual([]);
    } finally {
      await new Promise((resolve) => trap.close(resolve));
    }
  });

  it('survives an editor that answers with an invalid status line, and never passes on its own session cookie', async () => {
    await recordEditorAt(ada.workspace.status.editorEndpoint!);
    // A reason phrase Node refuses to write is dropped (it used to throw and end the process).
    const oddReason = await fetch(url(ada, rawAnswer('HTTP/1.1 200 O\u0001K\r\nContent-Length: 2\r\n\r\nhi')), { headers: as(ada) });
    expect(oddReason.status).toBe(200);
    expect(await oddReason.text()).toBe('hi');
    const invalid = await fetch(url(ada, rawAnswer('HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nhi')), { headers: as(ada) });
    expect(invalid.status).toBe(502);
    const cookies = await fetch(
      url(
        ada,
        rawAnswer(
          'HTTP/1.1 200 OK\r\nSet-Cookie: cp_session=stolen; Path=/\r\nSet-Cookie: cp_session.sig=x; Path=/\r\nSet-Cookie: theme=dark\r\nContent-Length: 2\r\n\r\nok',
        ),
      ),
      { headers: as(ada) },
    );
    expect(cookies.status).toBe(200);
    expect(cookies.headers.getSetCookie()).toEqual(['theme=dark']);
    // A header the editor's Connection names is hop-by-hop, even when it comes before Connection.
    const named = await fetch(
      url(ada, rawAnswer('HTTP/1.1 200 OK\r\nX-Hop: secret\r\nConnection: keep-alive, X-Hop\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\nok')),
      {
        headers: as(ada),
      },
    );
    expect(named.status).toBe(200);
    expect(named.headers.get('x-hop')).toBeNull();
    expect(named.headers.get('x-kept')).toBe('yes');
    // Still serving, the editor too.
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
    expect((await fetch(url(ada, '/healthz'), { headers: as(ada) })).status).toBe(200);
  });

  it('answers 503 (a page that retries, for a page load) and logs a warning when the database fails while authorising, then keeps serving', async () => {
    // An app of its own whose database connection is gone: its caches are empty, so it must ask the database.
    const lost = createDataSource(db.url, 1);
    await lost.initialize();
    const broken = await startApp(lost);
    await lost.destroy();
    try {
      const api = await fetch(`${broken.url}/u/${ada.workspace.slug}/headers`, { headers: as(ada) });
      expect(api.status).toBe(503);
      expect(api.headers.get('retry-after')).toBe('2');
      expect(await api.json()).toEqual({
        error: { code: 'unavailable', message: 'The control plane cannot check this request right now; try again in a moment.' },
      });
      const load = await send(`${broken.url}/u/${ada.workspace.slug}/`, { headers: as(ada, { accept: 'text/html', 'sec-fetch-mode': 'navigate' }) });
      expect(load.statusCode).toBe(503);
      expect(await load.body.text()).toContain('<meta http-equiv="refresh" content="3">');
      expect(broken.logs.filter((record) => record.level === 'error')).toEqual([]);
      expect(broken.logs).toContainEqual(expect.objectContaining({ level: 'warning', message: expect.stringContaining('answered 503') }));
      expect((await fetch(`${broken.url}/u/${ada.workspace.slug}/headers`)).status).toBe(401);
    } finally {
      await broken.close();
    }
  });

  it('retries once on a fresh connection when a kept-alive socket turns out dead', async () => {
    // The editor answers the first request of a connection and keeps it, then resets it on the next one (as a gone container's socket does).
    const seenBefore = (await requestsSeen(harness.runtime, await servingOf(harness.runtime, { workspaceId: ada.workspace.id }))).length;
    const first = await fetch(url(ada, '/first/keep-then-reset'), { headers: as(ada) });
    expect(first.status).toBe(200);
    const second = await fetch(url(ada, '/second/keep-then-reset'), { headers: as(ada) });
    expect(second.status).toBe(200);
    expect(await second.text()).toBe('ok');
    // Sent on the kept connection (reset), then once more on a connection the editor accepted later.
    expect(Number(second.headers.get('x-connection'))).toBeGreaterThan(Number(first.headers.get('x-connection')));
    expect((await requestsSeen(harness.runtime, await servingOf(harness.runtime, { workspaceId: ada.workspace.id }))).slice(seenBefore)).toEqual([
      'GET /first/keep-then-reset',
      'GET /second/keep-then-reset',
      'GET /second/keep-then-reset',
    ]);
  });

  it("closes its kept-alive connections to a workspace's editor as soon as the workspace is stopped", async () => {
    // A new transition, so a new pool: those of the tests before close.
    await recordEditorAt(ada.workspace.status.editorEndpoint!);
    expect((await fetch(url(ada, '/kept'), { headers: as(ada) })).status).toBe(200);
    await eventually('the one kept-alive connection of the new pool alone to be open', async () => (await editorConnections()) === 1);
    await app.store.workspaces.stop(SYSTEM_ACTOR, ada.workspace.id, 'coach');
    // Left to itself, undici keeps an idle connection for 4 s.
    await eventually('the kept-alive connection to be closed', async () => (await editorConnections()) === 0, 1500);
  });
});
