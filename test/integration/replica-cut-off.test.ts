/**
 * Issue 23: the leader cut off from its database. Two real server processes on one PostgreSQL; the
 * leader reaches it through a TCP relay of this test, which then drops every connection and takes
 * no new one (a network partition between that replica and the database). The leader stops
 * acting by its renew deadline, before the other takes the lease when it expires; the other
 * converges what is asked meanwhile; once the relay lets connections through again, the old leader
 * rejoins as a follower, and nothing crashed.
 */
import net from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { names } from '../../src/docker/runtime.ts';
import { createHarness, eventually, inspectByName, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import { startServer, type LogRecord, type ServerProcess } from '../helpers/server.ts';

let db: { url: string; dataSource: DataSource };
const controlPlaneId = newControlPlaneId();
const servers: ServerProcess[] = [];
let relay: Relay | undefined;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  for (const server of servers) await server.stop('SIGKILL');
  relay?.close();
  await removeEverything(controlPlaneId);
  await db.dataSource.destroy();
});

/** A TCP relay to `target` on a loopback port of its own, which can drop every connection and refuse new ones. */
interface Relay {
  port: number;
  /** Ends every connection at once and takes none until `restore`. */
  cut(): void;
  restore(): void;
  close(): void;
}

async function startRelay(target: { host: string; port: number }): Promise<Relay> {
  const open = new Set<net.Socket>();
  let cut = false;
  const server = net.createServer((client) => {
    if (cut) return void client.destroy();
    const upstream = net.connect(target);
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('error', () => undefined);
      socket.once('close', () => open.delete(socket));
    }
    client.pipe(upstream).pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => {
      cut = true;
      for (const socket of open) socket.destroy();
    },
    restore: () => void (cut = false),
    close: () => {
      cut = true;
      for (const socket of open) socket.destroy();
      server.close();
    },
  };
}

const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'cp-cut-off-'));
writeFileSync(path.join(DATA_DIR, 'allowlist.json'), JSON.stringify({ entries: ['school.test'] }));
const env = (databaseUrl: string) => ({
  DATABASE_URL: databaseUrl,
  WORKSPACE_IMAGE: TEST_IMAGE,
  CODE_MEMORY_LIMIT: '64m',
  CONTROL_PLANE_ID: controlPlaneId,
  SESSION_SECRET: 'cut-off-test-session-secret-0123456789',
  DATA_DIR,
  LEASE_DURATION_SECONDS: '3',
  LEASE_RENEW_DEADLINE_SECONDS: '2',
  LEASE_RETRY_SECONDS: '0.25',
});
const message = (text: string) => (record: LogRecord) => record.message === text;
const at = (record: LogRecord) => Date.parse(String(record.timestamp));

it('a leader cut off from the database stops acting before the other takes over, and rejoins as a follower once it is back', async () => {
  const direct = new URL(db.url);
  relay = await startRelay({ host: direct.hostname, port: Number(direct.port) });
  const relayed = new URL(db.url);
  relayed.port = String(relay.port);
  const a = await startServer(env(relayed.toString()));
  servers.push(a);
  await a.waitForLog(message('leading: took the reconciler lease (term 1)'));
  const b = await startServer(env(db.url));
  servers.push(b);
  await b.waitForLog((record) => record.message.startsWith('another replica leads: following'));

  relay.cut();
  const steppedDown = await a.waitForLog(message('stopped leading (term 1): no renewal within the renew deadline'));
  const tookOver = await b.waitForLog(message('leading: took the reconciler lease (term 2)'));
  // Never two at once: the cut-off leader had stopped acting before the other began (one clock: this machine's).
  expect(at(steppedDown)).toBeLessThan(at(tookOver));

  // The new leader converges what is asked while the old one is cut off.
  const { store } = createHarness(db.dataSource, { controlPlaneId });
  const { workspace } = await store.users.create({ email: `cut-${controlPlaneId}@school.test` });
  await store.workspaces.open(workspace.id);
  await eventually('the workspace running', async () => (await inspectByName(names.code(workspace.slug)))?.State.Running === true, 30_000);

  // Back on the network: a follower, still running.
  const followingBefore = a.records.filter((record) => record.message.startsWith('another replica leads: following')).length;
  relay.restore();
  await eventually(
    'the old leader to follow',
    async () => a.records.filter((record) => record.message.startsWith('another replica leads: following')).length > followingBefore,
    30_000,
  );
  expect(a.proc.exitCode).toBeNull();
  expect(await (await fetch(`${a.url}/healthz`)).json()).toEqual(expect.objectContaining({ ok: true }));
}, 120_000);
