import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config.ts';
import { createDataSource } from '../../src/db/database.ts';
import { SERVICE } from '../../src/package-info.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent } from '../helpers/workspaces.ts';
import { behindProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';

const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789';
const METRICS_TOKEN = 'metrics-token-0123456789abcdef0123456789';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

const db = useTestDatabase();
let app: TestApp;

/** Closed after each test, even a failing one: a TCP proxy and its data source. */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await app?.close();
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** Serves the app (with `env`) on a data source of `poolSize` connections reached through a TCP proxy the test can break. */
async function appBehindProxy(poolSize: number, env: Record<string, string> = {}): Promise<TcpProxy> {
  const { proxy, url } = await behindProxy(db.url);
  const dataSource = createDataSource(url, poolSize);
  cleanups.push(async () => {
    await proxy.close();
    await dataSource.destroy().catch(() => undefined);
  });
  await dataSource.initialize();
  app = await startApp(dataSource, env);
  return proxy;
}

/** The body of a JSON error response, checked for the shape every error must have. */
async function errorOf(response: Response): Promise<{ code: string; message: string }> {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const body = (await response.json()) as { error: { code: string; message: string } };
  expect(Object.keys(body)).toEqual(['error']);
  expect(typeof body.error.message).toBe('string');
  expect(JSON.stringify(body)).not.toMatch(/\bat .*\.ts:\d+/);
  return body.error;
}

describe('GET /healthz', () => {
  it('answers 200 with ok, service and version when the database answers', async () => {
    app = await startApp(db.dataSource);
    const response = await fetch(`${app.url}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true, service: SERVICE.name, version: SERVICE.version, checks: { database: 'ok' } });
  });

  it('answers 503 naming the database check when the database is gone, and 200 again when it is back', async () => {
    const proxy = await appBehindProxy(2);
    proxy.dropConnections();
    await proxy.close();
    const down = await fetch(`${app.url}/healthz`);
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual({
      ok: false,
      service: SERVICE.name,
      version: SERVICE.version,
      checks: { database: 'unreachable' },
      failed: ['database'],
    });
    await proxy.listen(proxy.port);
    const up = await fetch(`${app.url}/healthz`);
    expect(up.status).toBe(200);
  });

  it('answers 503 with a timeout when the database hangs', async () => {
    const proxy = await appBehindProxy(1);
    proxy.stall();
    const response = await fetch(`${app.url}/healthz`);
    expect(response.status).toBe(503);
    // `timeout`: the check's own 2 s limit answered, not the stalled database.
    expect(((await response.json()) as { checks: unknown }).checks).toEqual({ database: 'timeout' });
  });
});

describe('a database outage (issue 44 item 3)', () => {
  it('answers 503 database_unavailable with Retry-After to every request that needs the database, logs it once with no stack, and answers again once it is back', async () => {
    const proxy = await appBehindProxy(2, { ADMIN_TOKEN });
    const ada = await newStudent(app.store, 'ada', Date.now().toString(36));
    const from = app.logs.length;
    proxy.dropConnections();
    await proxy.close();
    const asked = [
      ['/auth/me', { cookie: ada.cookie }],
      [`/u/${ada.workspace.slug}/api/workspace`, { cookie: ada.cookie }],
      [`/u/${ada.workspace.slug}/api/runs`, { cookie: ada.cookie }],
      ['/admin/users', admin],
      ['/admin/workspaces', admin],
    ] as const;
    for (const [url, headers] of asked) {
      const answer = await fetch(`${app.url}${url}`, { headers });
      expect([url, answer.status, answer.headers.get('retry-after')]).toEqual([url, 503, '5']);
      expect(await errorOf(answer)).toEqual({
        code: 'database_unavailable',
        message: 'The control plane cannot reach its database right now; try again in a moment.',
      });
    }
    // The health check says so in its own words, cookie or not.
    const health = await fetch(`${app.url}/healthz`, { headers: { cookie: ada.cookie } });
    expect(health.status).toBe(503);
    expect(((await health.json()) as { failed: string[] }).failed).toEqual(['database']);
    // One line for the outage, at its start, and no "request failed" with a stack for any of them.
    const logged = app.logs.slice(from);
    expect(logged.filter((line) => String(line['message']).startsWith('the database cannot be reached'))).toHaveLength(1);
    expect(logged.filter((line) => line['message'] === 'request failed')).toEqual([]);
    expect(JSON.stringify(logged)).not.toMatch(/\bat .*\.ts:\d+/);
    // Back: answered again.
    await proxy.listen(proxy.port);
    const back = await fetch(`${app.url}/auth/me`, { headers: { cookie: ada.cookie } });
    expect(back.status).toBe(200);
  });
});

describe('GET /openapi.json', () => {
  it('serves the API document to anyone, as kept in docs/openapi.json, the same at every request', async () => {
    app = await startApp(db.dataSource);
    const kept = readFileSync(path.join(PROJECT_ROOT, 'docs/openapi.json'), 'utf8');
    const [first, second] = await Promise.all([fetch(`${app.url}/openapi.json`), fetch(`${app.url}/openapi.json`)]);
    for (const response of [first!, second!]) {
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await response.text()).toBe(kept);
    }
  });
});

describe('GET /metrics', () => {
  it('requires the metrics bearer token when METRICS_TOKEN is set', async () => {
    app = await startApp(db.dataSource, { METRICS_TOKEN, ADMIN_TOKEN });
    const cases: [Record<string, string>, number][] = [
      [{}, 401],
      [{ authorization: 'Bearer ' }, 401],
      [{ authorization: 'Bearer wrong' }, 401],
      [{ authorization: `Bearer ${METRICS_TOKEN}x` }, 401],
      [{ authorization: `Bearer ${METRICS_TOKEN.slice(0, -1)}` }, 401],
      [{ authorization: `Basic ${METRICS_TOKEN}` }, 401],
      [{ authorization: `Bearer ${ADMIN_TOKEN}` }, 401],
      [{ authorization: `Bearer ${METRICS_TOKEN}` }, 200],
      [{ authorization: `bearer ${METRICS_TOKEN}` }, 200],
    ];
    for (const [headers, status] of cases) {
      const response = await fetch(`${app.url}/metrics`, { headers });
      const code = response.status === 401 ? (await errorOf(response)).code : undefined;
      expect({ headers, status: response.status, code }).toEqual({ headers, status, code: status === 401 ? 'authentication_required' : undefined });
    }
  });

  it('falls back to the admin gate when METRICS_TOKEN is not set', async () => {
    app = await startApp(db.dataSource, { ADMIN_TOKEN });
    expect((await fetch(`${app.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${app.url}/metrics`, { headers: admin })).status).toBe(200);
  });

  it('refuses everyone when neither token is set and nobody can sign in yet', async () => {
    app = await startApp(db.dataSource);
    expect((await fetch(`${app.url}/metrics`, { headers: admin })).status).toBe(401);
  });

  it('shows process metrics and request latency with the templated route, never the raw path', async () => {
    app = await startApp(db.dataSource, { METRICS_TOKEN });
    await fetch(`${app.url}/healthz`);
    await fetch(`${app.url}/no/such/student-path-4711`);
    const response = await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    for (const name of [
      'process_cpu_seconds_total',
      'nodejs_heap_size_used_bytes',
      'nodejs_gc_duration_seconds',
      'nodejs_eventloop_lag_seconds',
      'http_requests_in_flight',
    ]) {
      expect(text).toContain(`${name} `.replace(/ $/, ''));
    }
    expect(text).toMatch(/http_request_duration_seconds_count\{method="GET",route="\/healthz",status_class="2xx"\} 1/);
    expect(text).toMatch(/http_request_duration_seconds_count\{method="GET",route="unmatched",status_class="4xx"\} 1/);
    expect(text).not.toContain('student-path-4711');
    for (const name of [
      'proxy_upstream_duration_seconds',
      'run_build_duration_seconds',
      'run_active_duration_seconds',
      'runs_total',
      'container_start_duration_seconds',
      'container_cpu_percent',
      'container_memory_percent',
      'active_workspaces',
      'idle_sweep_stops_total',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
  });

  it('uses the route template for parameterised routes', async () => {
    app = await startApp(db.dataSource, { ADMIN_TOKEN });
    await fetch(`${app.url}/admin/config/max-active-containers`, { headers: admin });
    await fetch(`${app.url}/admin/config/max-active-containers`, { method: 'POST', headers: admin });
    const text = await (await fetch(`${app.url}/metrics`, { headers: admin })).text();
    expect(text).toMatch(/http_request_duration_seconds_count\{method="GET",route="\/admin\/config\/max-active-containers",status_class="2xx"\} 1/);
    expect(text).toMatch(/http_request_duration_seconds_count\{method="POST",route="\/admin\/config\/max-active-containers",status_class="4xx"\} 1/);
  });
});

describe('admin cap endpoints', () => {
  const cap = (on: TestApp, init: Omit<RequestInit, 'headers'> & { headers?: Record<string, string> } = {}) =>
    fetch(`${on.url}/admin/config/max-active-containers`, { ...init, headers: { ...admin, ...init.headers } });
  const post = (on: TestApp, body: string, contentType = 'application/json') => cap(on, { method: 'POST', body, headers: { 'content-type': contentType } });

  it('reads the environment cap, stores an override and audits the change', async () => {
    app = await startApp(db.dataSource, { ADMIN_TOKEN, MAX_ACTIVE_CONTAINERS: '7' });
    expect(await (await cap(app)).json()).toEqual({ value: 7, source: 'environment' });
    const response = await post(app, '{"value": 12}');
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ value: 12, source: 'override', previous: 7 });
    expect(await (await cap(app)).json()).toEqual({ value: 12, source: 'override' });
    const audit: Record<string, unknown>[] = await db.dataSource.query('SELECT actor_id, actor_email, action, target_kind, target_id, metadata FROM audit_log');
    expect(audit).toEqual([
      {
        actor_id: null,
        actor_email: 'admin-token',
        action: 'config.max-active-containers',
        target_kind: 'config',
        target_id: 'max_active_containers',
        metadata: { from: 7, to: 12 },
      },
    ]);
  });

  it.each([
    ['a string', '{"value": "12"}', 'validation_error', 'The field "value" must be integer.'],
    ['a fraction', '{"value": 2.5}', 'validation_error', 'The field "value" must be integer.'],
    ['a negative number', '{"value": -1}', 'validation_error', 'The field "value" must be >= 0.'],
    ['an absurd number', '{"value": 1000000}', 'validation_error', 'The field "value" must be <= 10000.'],
    ['a missing value', '{}', 'validation_error', 'The field "value" is required.'],
    ['an extra field', '{"value": 3, "force": true}', 'validation_error', 'The field "force" is not allowed.'],
    ['an array', '[3]', 'validation_error', 'The request body must be object.'],
    ['malformed JSON', '{"value": ', 'invalid_json', 'The request body is not valid JSON.'],
  ])('refuses %s with 400 and changes nothing', async (_name, body, code, message) => {
    app = await startApp(db.dataSource, { ADMIN_TOKEN });
    const response = await post(app, body);
    expect(response.status).toBe(400);
    expect(await errorOf(response)).toEqual({ code, message });
    expect(await (await cap(app)).json()).toEqual({ value: 10, source: 'environment' });
  });

  it('refuses a body that is not sent as JSON', async () => {
    app = await startApp(db.dataSource, { ADMIN_TOKEN });
    const response = await post(app, 'value=12', 'application/x-www-form-urlencoded');
    expect(response.status).toBe(400);
    expect((await errorOf(response)).code).toBe('unsupported_content_type');
  });

  it('refuses a body over the size limit with 413', async () => {
    app = await startApp(db.dataSource, { ADMIN_TOKEN });
    const response = await post(app, JSON.stringify({ value: 1, pad: 'x'.repeat(300 * 1024) }));
    expect(response.status).toBe(413);
    expect((await errorOf(response)).code).toBe('payload_too_large');
  });

  it('refuses requests without the admin token', async () => {
    app = await startApp(db.dataSource, { ADMIN_TOKEN });
    const response = await fetch(`${app.url}/admin/config/max-active-containers`, {
      method: 'POST',
      body: '{"value":1}',
      headers: { 'content-type': 'application/json' },
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
    expect((await errorOf(response)).code).toBe('authentication_required');
  });
});

describe('errors', () => {
  it('answers an unknown route with a JSON 404', async () => {
    app = await startApp(db.dataSource);
    const response = await fetch(`${app.url}/nope`);
    expect(response.status).toBe(404);
    expect(await errorOf(response)).toEqual({ code: 'not_found', message: 'No route for GET /nope.' });
  });

  it('answers a wrong method with a JSON 405', async () => {
    app = await startApp(db.dataSource);
    const response = await fetch(`${app.url}/healthz`, { method: 'DELETE' });
    expect(response.status).toBe(405);
    expect((await errorOf(response)).code).toBe('method_not_allowed');
  });

  it('answers an unexpected failure with internal_error, logs it, and keeps serving', async () => {
    const broken = createDataSource(db.url, 1);
    await broken.initialize();
    app = await startApp(broken, { ADMIN_TOKEN });
    await broken.destroy();
    const response = await fetch(`${app.url}/admin/config/max-active-containers`, { headers: admin });
    expect(response.status).toBe(500);
    expect(await errorOf(response)).toEqual({ code: 'internal_error', message: 'Something went wrong on our side; it has been logged.' });
    expect(app.logs).toContainEqual(
      expect.objectContaining({ level: 'error', category: 'control.http', message: 'request failed', path: '/admin/config/max-active-containers' }),
    );
    expect((await fetch(`${app.url}/nope`)).status).toBe(404);
  });
});
