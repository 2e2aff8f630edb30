/**
 * The embedded database shared between the server and the CLI (src/db/embedded.ts): one process
 * owns it, others join through the owner's port; a guest's NOTIFY reaches the owner; the server
 * waits, saying why, while the CLI holds it; and `bin/cli` works beside a running server or alone.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../../src/config.ts';
import { createDataSource, migrate, openDatabase, type Database } from '../../src/db/database.ts';
import { ONE_COMMAND, ownInThread } from '../../src/db/owner-thread.ts';
import { categoryLogger } from '../../src/log.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';
import { spawnServer, startServer, type ServerProcess } from '../helpers/server.ts';

const run = promisify(execFile);

/** A guest process's load: two connections of parameterised queries, alone and in transactions; prints the failures it saw. */
const GUEST_LOAD = `
import pg from ${JSON.stringify(path.join(PROJECT_ROOT, 'node_modules/pg/lib/index.js'))};
const clients = await Promise.all([1, 2].map(async () => { const client = new pg.Client({ connectionString: process.argv[1] }); await client.connect(); return client; }));
const failures = [];
await Promise.all(clients.map(async (client) => {
  for (let i = 0; i < 150; i++) {
    try {
      const { rows } = await client.query('SELECT $1::int AS n', [i]);
      if (rows[0].n !== i) failures.push('query ' + i + ' answered ' + rows[0].n);
      await client.query('BEGIN');
      await client.query('SELECT $1::int AS n', [i]);
      await client.query('COMMIT');
    }
    catch (error) { failures.push('query ' + i + ': ' + error.message); }
  }
}));
await Promise.all(clients.map((client) => client.end()));
console.log(JSON.stringify({ failures: failures.slice(0, 5) }));
`;
const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789';
let dataDir: string;
let server: ServerProcess | undefined;
const opened: Database[] = [];

beforeEach(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-embedded-sharing-'));
});
afterEach(async () => {
  await server?.stop('SIGKILL');
  server = undefined;
  for (const database of opened.splice(0).toReversed()) await database.close().catch(() => undefined);
  await rm(dataDir, { recursive: true, force: true });
});

/** Opens the embedded database under dataDir as the server would (its owner) or as the CLI would (shared: owned while free). */
async function open(mode: 'owner' | 'shared', command: string): Promise<Database> {
  const role = command.split(' ')[0]!;
  const database = await openDatabase({
    url: undefined,
    dataDir,
    log: categoryLogger(captureLogger().root, 'db'),
    embedded: { mode, describe: { role, command } },
  });
  opened.push(database);
  return database;
}

/** `bin/cli` as an operator runs it, on the embedded database of dataDir. */
const cli = (...argv: string[]) =>
  run(path.join(PROJECT_ROOT, 'bin/cli'), argv, { env: { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir }, timeout: 60_000 });

describe('one owner, guests through its port', () => {
  it("lets a guest read and write the owner's database, and relays the guest's NOTIFYs to the owner", async () => {
    const owner = await open('owner', 'server');
    await migrate(owner.dataSource);
    const heard: string[][] = [];
    owner.onNotification!((channel, payload) => heard.push([channel, payload]));
    const holder = JSON.parse(await readFile(path.join(dataDir, 'pgdata.holder.json'), 'utf8')) as { pid: number; role: string; url: string };
    expect(holder).toMatchObject({ pid: process.pid, role: 'server', url: expect.stringMatching(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/) });

    const guest = await open('shared', 'cli test');
    await guest.dataSource.query("UPDATE settings SET value = '4' WHERE key = 'max_active_containers'");
    expect(await owner.dataSource.query('SELECT value FROM settings')).toEqual([{ value: 4 }]);
    await guest.dataSource.transaction(async (tx) => {
      await tx.query("SELECT pg_notify('cp_workspaces', 'from-the-guest')");
    });
    await eventually(
      'the notification relayed',
      async () => heard.some(([channel, payload]) => channel === 'cp_workspaces' && payload === 'from-the-guest'),
      5000,
    );
  });

  it("runs the owner's queries and another process's side by side without mixing their extended-protocol state", async () => {
    const owner = await open('owner', 'server');
    await migrate(owner.dataSource);
    const { url } = JSON.parse(await readFile(path.join(dataDir, 'pgdata.holder.json'), 'utf8')) as { url: string };
    // Another process (as the CLI is): two connections of parameterised queries (Parse, Bind, Execute, Sync each), alone and in transactions.
    const guest = run(process.execPath, ['--input-type=module', '-e', GUEST_LOAD, url], { timeout: 60_000 });
    const failures: string[] = [];
    for (let i = 0; i < 300; i++) {
      await owner.dataSource.query(i % 2 === 0 ? 'SELECT $1::int AS n' : 'SELECT $1::int AS n, 1 AS plain', [i]).then(
        (rows: { n: number }[]) => rows[0]!.n === i || failures.push(`owner query ${i} answered ${rows[0]!.n}`),
        (error: Error) => failures.push(`owner query ${i}: ${error.message}`),
      );
    }
    expect(failures).toEqual([]);
    expect(JSON.parse((await guest).stdout)).toEqual({ failures: [] });
  }, 60_000);

  it("starts an operator command's database small, and the server's with a pool that holds a classroom's data", async () => {
    const settings = "SELECT current_setting('shared_buffers') AS pool, current_setting('max_connections') AS connections";
    const log = categoryLogger(captureLogger().root, 'db');
    const thread = ownInThread({ dataDir, describe: { role: 'cli', command: 'cli users list' }, channels: [], settings: ONE_COMMAND, log });
    const url = await thread.ready;
    const guest = createDataSource(url!, 1);
    await guest.initialize();
    expect(await guest.query(settings)).toEqual([{ pool: '4MB', connections: '1' }]);
    // Its one connection is PGlite's backend: the socket's several connections share it.
    const second = createDataSource(url!, 1);
    await second.initialize();
    expect(await Promise.all([guest.query('SELECT 1 AS n'), second.query('SELECT 2 AS n')])).toEqual([[{ n: 1 }], [{ n: 2 }]]);
    await Promise.all([guest.destroy(), second.destroy()]);
    await thread.close();
    // The server, as it starts (bin/server.ts), through its holder file's port.
    server = await startServer({ DATA_DIR: dataDir, ADMIN_TOKEN, DATABASE_URL: undefined }, 60_000);
    const holder = JSON.parse(await readFile(path.join(dataDir, 'pgdata.holder.json'), 'utf8')) as { role: string; url: string };
    expect(holder.role).toBe('server');
    const beside = createDataSource(holder.url, 1);
    await beside.initialize();
    expect(await beside.query(settings)).toEqual([{ pool: '32MB', connections: '100' }]);
    await beside.destroy();
  }, 90_000);

  it('makes the server wait, saying who holds the database, until the CLI lets it go', async () => {
    const cliHolds = await open('shared', 'cli backup ada');
    await migrate(cliHolds.dataSource);
    server = spawnServer({ DATA_DIR: dataDir, ADMIN_TOKEN, DATABASE_URL: undefined });
    const waiting = await server.waitForLog((record) => record.message.startsWith('the embedded database is held by'), 30_000);
    expect(waiting).toMatchObject({ level: 'warning', category: 'control.db' });
    expect(waiting.message).toContain('cli backup ada (pid ');
    expect(server.records.some((record) => record.message.startsWith('listening on'))).toBe(false);
    await cliHolds.close();
    opened.splice(opened.indexOf(cliHolds), 1);
    const listening = await server.waitForLog((record) => record.message.startsWith('listening on'), 30_000);
    // Healthy once its database answers the check within its 2 s (in CI on a loaded machine, the
    // first check, as the server began its work on the embedded database, did not).
    let said = '';
    await eventually(
      'the server healthy',
      async () => {
        const answer = await fetch(`http://127.0.0.1:${String(listening.port)}/healthz`);
        said = `${answer.status} ${await answer.text()}`;
        return answer.status === 200;
      },
      30_000,
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; last answer ${said}`);
    });
  }, 90_000);
});

describe('bin/cli on the embedded database', () => {
  it("changes a running server's database (the server sees the new cap at once)", async () => {
    server = await startServer({ DATA_DIR: dataDir, ADMIN_TOKEN, DATABASE_URL: undefined }, 60_000);
    const { stdout } = await cli('cap', 'set', '4');
    expect(stdout).toBe('The cap is 4 (was 10).\n');
    const cap = await fetch(`${server.url}/admin/config/max-active-containers`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(await cap.json()).toEqual({ value: 4, source: 'override' });
    const audit = (await (await fetch(`${server.url}/admin/audit-log`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as {
      entries: { actor: { email: string } }[];
    };
    expect(audit.entries.map((entry) => entry.actor.email)).toEqual(['cli']);
  }, 90_000);

  it('owns the database when no server runs, and leaves it free afterwards', async () => {
    expect((await cli('cap', 'set', '6')).stdout).toBe('The cap is 6 (was 10).\n');
    expect((await cli('cap', 'get', '--json')).stdout).toBe(`${JSON.stringify({ value: 6, source: 'override' }, null, 2)}\n`);
    server = await startServer({ DATA_DIR: dataDir, ADMIN_TOKEN, DATABASE_URL: undefined }, 60_000);
    const cap = await fetch(`${server.url}/admin/config/max-active-containers`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(await cap.json()).toEqual({ value: 6, source: 'override' });
  }, 90_000);
});
