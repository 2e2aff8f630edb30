import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { createHarness, docker, eventually, newControlPlaneId, removeEverything, TEST_ENV } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import { startServer, type LogRecord, type ServerProcess } from '../helpers/server.ts';
import { TcpProxy } from '../helpers/tcp-proxy.ts';

let db: { url: string; dataSource: DataSource };
const controlPlaneId = newControlPlaneId();
let server: ServerProcess | undefined;
let proxy: TcpProxy | undefined;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await server?.stop('SIGKILL');
  await proxy?.close();
  await removeEverything(controlPlaneId);
  await db.dataSource.destroy();
});

/** The real engine's socket, which the proxy forwards to once it listens (the shared engine itself is never touched). */
async function realEngine(): Promise<{ path: string } | { host: string; port: number }> {
  // docker-modem finds the default socket as it dials.
  const modem = docker.modem as unknown as { getSocketPath(): Promise<string> | undefined; host: string; port: string };
  const socketPath = await modem.getSocketPath();
  return socketPath === undefined ? { host: modem.host, port: Number(modem.port) } : { path: socketPath };
}

const cannotBeReached = (record: LogRecord) => record.message.startsWith('Docker Engine cannot be reached');
const reachableAgain = (record: LogRecord) => record.message.startsWith('Docker Engine reachable again');
/** How many records so far carry this message. */
const count = (records: LogRecord[], message: string) => records.filter((record) => record.message === message).length;

describe('a first start without a Docker Engine', () => {
  it('says once that the engine cannot be reached and what to do, retries quietly, says once that it is back, then starts the workspaces', async () => {
    // The engine's address: a socket nothing listens on yet (ENOENT), in a directory of this test's own.
    const socket = path.join(mkdtempSync(path.join(os.tmpdir(), 'cp-engine-')), 'docker.sock');
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cp-engine-data-'));
    writeFileSync(path.join(dataDir, 'allowlist.json'), JSON.stringify({ entries: ['school.test'] }));
    const { store } = createHarness(db.dataSource, { controlPlaneId });
    const { workspace } = await store.users.create({ email: `away-${controlPlaneId}@school.test` });
    // A student opened their workspace before the server started: no NOTIFY tells of it, and the
    // engine's containers cannot be listed, so only the database's keys of a resync find it. Its
    // reconciles then fail, retried with backoff.
    await store.workspaces.open(workspace.id);

    server = await startServer({
      ...TEST_ENV,
      DATABASE_URL: db.url,
      CONTROL_PLANE_ID: controlPlaneId,
      DATA_DIR: dataDir,
      DOCKER_HOST: `unix://${socket}`,
      // Scheduled backups on (spawnServer turns them off): their first pass, at start, meets the engine away too.
      BACKUP_INTERVAL_HOURS: '24',
    });
    const said = await server.waitForLog(cannotBeReached);
    expect(said).toMatchObject({ level: 'error', category: 'control.containers', address: `unix://${socket}`, code: 'ENOENT' });
    expect(said.message).toContain(`at unix://${socket}`);
    expect(said.message).toContain('bash scripts/provision.sh');
    expect(said.message).toContain('DOCKER_HOST');

    // Several retry periods of every loop (debug lines): two stats passes 15 s apart, the workspace's reconcile
    // retried with its backoff, the events stream reconnecting (every 5 s at most) and the look at the nodes (every 5 s).
    await server.waitForLog(
      () =>
        count(server!.records, 'stats sampling failed') >= 2 &&
        count(server!.records, 'workspaces reconcile failed, retrying') >= 3 &&
        count(server!.records, 'Docker events stream: engine not reached, retrying') >= 6,
      45_000,
    );
    const lines = [...server.stdout, ...server.stderr];
    // Said once, and nothing else said above debug of the engine's absence: no line per loop or per attempt.
    expect(server.records.filter(cannotBeReached)).toHaveLength(1);
    expect(server.records.filter((record) => !['trace', 'debug', 'info'].includes(record.level))).toEqual([said]);
    // A single engine has no nodes to speak of; and an expected condition has no stack.
    expect(lines.filter((line) => /\bnodes?\b/i.test(line))).toEqual([]);
    expect(lines.filter((line) => line.includes('    at '))).toEqual([]);

    // The engine appears at that address: the proxy forwards to the real one from now on.
    proxy = await new TcpProxy(await realEngine()).listenAt(socket);
    const back = await server.waitForLog(reachableAgain, 20_000);
    expect(back).toMatchObject({ level: 'info', address: `unix://${socket}` });
    await eventually('the workspace running', async () => (await store.workspaces.get(workspace.id))?.status.observedState === 'running', 60_000);
    expect(server.records.filter(cannotBeReached)).toHaveLength(1);
    expect(server.records.filter(reachableAgain)).toHaveLength(1);
  }, 150_000);
});
