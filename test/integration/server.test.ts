import net from 'node:net';
import pg from 'pg';
import type { AddressInfo } from 'node:net';
import { SERVICE } from '../../src/package-info.ts';
import { createEmptyDatabase, createTestDatabase } from '../helpers/db.ts';
import { freePort, spawnServer, startServer, type ServerProcess } from '../helpers/server.ts';
import { behindProxy, TcpProxy } from '../helpers/tcp-proxy.ts';

const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789';
const running: ServerProcess[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((server) => server.stop('SIGKILL')));
});

function track(server: ServerProcess): ServerProcess {
  running.push(server);
  return server;
}

describe('the server process', () => {
  it('migrates an empty database, serves /healthz, and logs JSON lines of the spec format', async () => {
    const server = track(await startServer({ DATABASE_URL: await createEmptyDatabase() }));
    const response = await fetch(`${server.url}/healthz`);
    expect(await response.json()).toEqual({ ok: true, service: SERVICE.name, version: SERVICE.version, checks: { database: 'ok' } });
    expect(server.records.some((record) => record.category === 'control.db' && record.message.startsWith('applied migrations: '))).toBe(true);
    for (const line of server.stdout) {
      const record = JSON.parse(line) as Record<string, unknown>;
      expect(record).toEqual(
        expect.objectContaining({
          level: expect.stringMatching(/^(trace|debug|info)$/),
          category: expect.stringMatching(/^control\.[a-z]+$/),
          message: expect.any(String),
        }),
      );
      expect(record.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(server.records.at(-1)).toEqual(expect.objectContaining({ category: 'control.server', message: 'stopped' }));
  });

  it('writes human lines without colours when stdout is not a terminal', async () => {
    const server = track(spawnServer({ DATABASE_URL: await createTestDatabase(), LOG_FORMAT: undefined }));
    const deadline = Date.now() + 20_000;
    while (!server.stdout.some((line) => line.includes('listening on')) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    const line = server.stdout.find((text) => text.includes('listening on'));
    expect(line).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} INFO \[control\.server\] listening on http:\/\/127\.0\.0\.1:\d+ host=127\.0\.0\.1 port=\d+ publicUrl=http:\/\/127\.0\.0\.1:\d+ version=\S+ startupMs=\d+$/,
    );
    expect(server.stdout.join('\n')).not.toContain('\u001b[');
  });

  it('lets an in-flight request finish on SIGTERM, then exits 0', async () => {
    const server = track(await startServer({ DATABASE_URL: await createTestDatabase(), ADMIN_TOKEN }));
    const socket = net.connect(Number(new URL(server.url).port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    const body = '{"value": 4}';
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    // `Expect: 100-continue` makes the server say when it has parsed the headers: the request is then in flight for sure.
    socket.write(
      `POST /admin/config/max-active-containers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
    );
    const deadline = Date.now() + 10_000;
    while (!answer.includes('100 Continue') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n$/);
    socket.write(body.slice(0, 5));
    server.proc.kill('SIGTERM');
    await server.waitForLog((record) => record.message.startsWith('shutting down'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(server.proc.exitCode).toBeNull();
    expect(
      await fetch(`${server.url}/healthz`).then(
        () => 'answered',
        () => 'refused',
      ),
    ).toBe('refused');
    socket.write(body.slice(5));
    expect(await server.exited).toBe(0);
    expect(answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect(answer).toContain('"value":4');
  });

  it('refuses a port in use with one clear fatal line and exit 1', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as AddressInfo;
    const server = track(spawnServer({ DATABASE_URL: await createTestDatabase(), PORT: String(port) }));
    try {
      expect(await server.exited).toBe(1);
    } finally {
      blocker.close();
    }
    const fatal = server.records.filter((record) => record.level === 'fatal');
    expect(fatal).toEqual([expect.objectContaining({ message: `cannot listen: 127.0.0.1:${port} is already in use` })]);
    expect(server.stderr.join('\n')).not.toMatch(/\n\s+at /);
  });

  it('retries an unreachable database with warnings, then serves once it appears', async () => {
    const port = await freePort();
    const real = new URL(await createTestDatabase());
    const viaProxy = new URL(real);
    viaProxy.port = String(port);
    const server = track(spawnServer({ DATABASE_URL: viaProxy.toString() }));
    const warning = await server.waitForLog((record) => record.level === 'warning' && record.category === 'control.db' && record.attempt === 2);
    expect(warning.message).toBe('database not reachable (ECONNREFUSED), retrying');
    expect(JSON.stringify(warning)).not.toContain('password');
    const proxy = await new TcpProxy({ host: real.hostname, port: Number(real.port) }).listen(port);
    try {
      await server.waitForLog((record) => record.message.startsWith('listening on'));
      expect(server.stderr.join('\n')).not.toMatch(/\n\s+at /);
      expect(await server.stop()).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it('retries a database that takes the connection but does not answer within the connection timeout, then serves once it answers', async () => {
    const { proxy, url } = await behindProxy(await createTestDatabase());
    proxy.stall();
    try {
      const server = track(spawnServer({ DATABASE_URL: url }));
      const warning = await server.waitForLog((record) => record.level === 'warning' && record.category === 'control.db');
      expect(warning.message).toBe('database not reachable (ETIMEDOUT), retrying');
      proxy.restore();
      await server.waitForLog((record) => record.message.startsWith('listening on'));
      expect(server.records.filter((record) => record.level === 'fatal')).toEqual([]);
      expect(await server.stop()).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it('exits 0 on SIGTERM while still waiting for the database', async () => {
    const server = track(spawnServer({ DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/x` }));
    await server.waitForLog((record) => record.level === 'warning');
    expect(await server.stop('SIGTERM')).toBe(0);
  });

  it('stops with one fatal line when the database does not exist', async () => {
    const missing = new URL(await createTestDatabase());
    missing.pathname = '/cp_test_no_such_database';
    const server = track(spawnServer({ DATABASE_URL: missing.toString() }));
    expect(await server.exited).toBe(1);
    expect(server.records.filter((record) => record.level === 'fatal')).toEqual([
      expect.objectContaining({ code: '3D000', message: 'cannot open the database: database "cp_test_no_such_database" does not exist' }),
    ]);
  });

  it('stops before serving when the configuration is invalid, one line per problem', async () => {
    const server = track(spawnServer({ LOG_LEVEL: 'loud', MAX_ACTIVE_CONTAINERS: 'many' }));
    expect(await server.exited).toBe(2);
    expect(server.stderr.toSorted()).toEqual([
      'config: LOG_LEVEL="loud" is not valid: expected one of trace, debug, info, warning, error, fatal',
      'config: MAX_ACTIVE_CONTAINERS="many" is not valid: expected an integer from 0 to 10000',
    ]);
  });

  it('starts two processes on one empty database without a migration race', async () => {
    const url = await createEmptyDatabase();
    // Tracked as soon as each is up, so that one failing to start does not leave the other running.
    const [a, b] = await Promise.all([startServer({ DATABASE_URL: url }).then(track), startServer({ DATABASE_URL: url }).then(track)]);
    expect((await fetch(`${a.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${b.url}/healthz`)).status).toBe(200);
    const applied = [a, b].map((server) => server.records.some((record) => record.message.startsWith('applied migrations')));
    expect(applied.toSorted((x, y) => Number(x) - Number(y))).toEqual([false, true]);
  });

  it('promotes an existing account listed in SERVICE_ADMIN_EMAIL at start-up, audited as system', async () => {
    const url = await createTestDatabase();
    const seed = new pg.Client({ connectionString: url });
    await seed.connect();
    await seed.query("INSERT INTO users (email, role) VALUES ('coach@school.test', 'user')");
    const server = track(await startServer({ DATABASE_URL: url, SERVICE_ADMIN_EMAIL: 'Coach@School.test' }));
    const { rows: users } = await seed.query('SELECT role FROM users');
    const { rows: audit } = await seed.query('SELECT actor_id, actor_email, action FROM audit_log');
    await seed.end();
    expect(users).toEqual([{ role: 'admin' }]);
    expect(audit).toEqual([{ actor_id: null, actor_email: 'system', action: 'user.promote' }]);
    expect(server.records).toContainEqual(
      expect.objectContaining({ category: 'control.auth', email: 'coach@school.test', message: 'promoted to admin: listed in SERVICE_ADMIN_EMAIL' }),
    );
  });
});
