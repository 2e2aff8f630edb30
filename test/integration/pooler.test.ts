/**
 * Issue 23, replicas behind a real connection pooler: PgBouncer (Debian's; scripts/provision.sh
 * installs it) in transaction mode, with few server connections, so that the statements of one
 * replica's client connection land on whichever server connection is free, as a pooler in front
 * of a busy class does. Two real server processes reach the database through it (DATABASE_URL)
 * and hold their sessions (LISTEN, the migrations' lock) on DATABASE_DIRECT_URL. The lease, its
 * fence and the controllers work through it: one leads, a paused leader loses the lease to the
 * other and steps down when woken, desired state converges with one container per workspace.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { names } from '../../src/docker/runtime.ts';
import { docker, eventually, inspectByName, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import { pausedLeaderHandsOver } from '../helpers/replicas.ts';
import { freePort, type ServerProcess } from '../helpers/server.ts';

let db: { url: string; dataSource: DataSource };
let pooler: ChildProcess;
let poolerPort = 0;
const poolerLog: string[] = [];
const controlPlaneId = newControlPlaneId();
const servers: ServerProcess[] = [];

beforeAll(async () => {
  db = await openTestDatabase();
  const upstream = new URL(db.url);
  poolerPort = await freePort();
  // Readable by the user it runs as (PgBouncer refuses to run as root).
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cp-pgbouncer-'));
  chmodSync(dir, 0o755);
  writeFileSync(path.join(dir, 'users.txt'), `"${upstream.username}" ""\n`, { mode: 0o644 });
  writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${upstream.hostname} port=${upstream.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${poolerPort}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      `admin_users = ${upstream.username}`,
      'pool_mode = transaction',
      // Few server connections for two replicas' pools: their statements are multiplexed.
      'default_pool_size = 3',
      'max_client_conn = 200',
      'ignore_startup_parameters = extra_float_digits',
      // Its counters as they are (SHOW STATS), not a minute late.
      'stats_period = 1',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  pooler = spawn('/usr/sbin/pgbouncer', [...(asRoot ? ['-u', 'nobody'] : []), path.join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [pooler.stdout!, pooler.stderr!]) stream.on('data', (chunk: Buffer) => poolerLog.push(chunk.toString()));
  await eventually('PgBouncer to listen', async () => (await adminConsole('SHOW VERSION').catch(() => undefined)) !== undefined, 15_000).catch(
    (error: unknown) => {
      throw new Error(`${(error as Error).message}\n${poolerLog.join('')}`);
    },
  );
});

afterAll(async () => {
  for (const server of servers) {
    server.proc.kill('SIGCONT');
    await server.stop('SIGKILL');
  }
  pooler?.kill('SIGINT');
  if (pooler && pooler.exitCode === null) await once(pooler, 'exit');
  await removeEverything(controlPlaneId);
  await db.dataSource.destroy();
});

/** A statement on PgBouncer's admin console (simple query protocol, as it requires): its rows. */
async function adminConsole(statement: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: `postgres://${new URL(db.url).username}@127.0.0.1:${poolerPort}/pgbouncer` });
  await client.connect();
  try {
    return (await client.query(statement)).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

const pooledUrl = () => {
  const url = new URL(db.url);
  url.port = String(poolerPort);
  return url.toString();
};
const LEASE = { LEASE_DURATION_SECONDS: '3', LEASE_RENEW_DEADLINE_SECONDS: '2', LEASE_RETRY_SECONDS: '0.25' };
const env = () => ({
  DATABASE_URL: pooledUrl(),
  DATABASE_DIRECT_URL: db.url,
  WORKSPACE_IMAGE: TEST_IMAGE,
  CODE_MEMORY_LIMIT: '64m',
  CONTROL_PLANE_ID: controlPlaneId,
  SESSION_SECRET: 'pooler-test-session-secret-0123456789',
  ...LEASE,
});

it('leads, fences and converges through PgBouncer in transaction mode: a paused leader loses the lease and steps down, nothing doubles or restarts', async () => {
  // Through the pooler: one leads; paused, the other takes over and converges; woken, it steps down.
  const { a, b, first, running, second } = await pausedLeaderHandsOver(db.dataSource, controlPlaneId, env, servers);
  // Nothing went wrong on the way.
  for (const server of [a, b]) expect(server.records.filter((record) => record.level === 'error' || record.level === 'fatal')).toEqual([]);
  for (const workspace of [first, second]) {
    expect(await docker.listContainers({ all: true, filters: { label: [`service.workspace-id=${workspace.id}`, 'service.role=code'] } })).toHaveLength(1);
  }
  const after = (await inspectByName(names.code(first.slug)))!;
  expect([after.Id, after.State.StartedAt]).toEqual([running.Id, running.State.StartedAt]);

  // It all went through PgBouncer, in transaction mode, multiplexed onto its few server connections.
  expect((await adminConsole('SHOW CONFIG')).find((row) => row.key === 'pool_mode')?.value).toBe('transaction');
  const database = new URL(db.url).pathname.slice(1);
  const stats = (await adminConsole('SHOW STATS')).find((row) => row.database === database);
  expect(Number(stats?.total_xact_count)).toBeGreaterThan(0);
  const clients = (await adminConsole('SHOW CLIENTS')).filter((row) => row.database === database);
  const serverConnections = (await adminConsole('SHOW SERVERS')).filter((row) => row.database === database);
  expect(serverConnections.length).toBeLessThanOrEqual(3);
  expect(clients.length).toBeGreaterThan(serverConnections.length);
}, 120_000);
