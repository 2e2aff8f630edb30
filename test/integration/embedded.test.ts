import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startServer, type ServerProcess } from '../helpers/server.ts';

const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789';

describe('the embedded database (no DATABASE_URL)', () => {
  let dataDir: string;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-embedded-'));
  });
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });

  it('serves /healthz, says so in one log line, and keeps data across restarts', async () => {
    server = await startServer({ DATA_DIR: dataDir, ADMIN_TOKEN, DATABASE_URL: undefined }, 60_000);
    expect(server.records.filter((record) => record.message.includes('embedded'))).toEqual([
      expect.objectContaining({ level: 'info', category: 'control.db', message: 'no DATABASE_URL set: using the embedded PostgreSQL (PGlite)' }),
    ]);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const set = await fetch(`${server.url}/admin/config/max-active-containers`, {
      method: 'POST',
      body: '{"value": 3}',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    });
    expect(set.status).toBe(200);
    expect(await server.stop('SIGTERM')).toBe(0);

    server = await startServer({ DATA_DIR: dataDir, ADMIN_TOKEN, DATABASE_URL: undefined }, 60_000);
    expect(server.records.some((record) => record.message === 'database schema is up to date')).toBe(true);
    const cap = await fetch(`${server.url}/admin/config/max-active-containers`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(await cap.json()).toEqual({ value: 3, source: 'override' });
    expect(await server.stop('SIGTERM')).toBe(0);
  }, 120_000);
});
