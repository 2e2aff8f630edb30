/**
 * REUSE_PORT: two server processes of one host on PostgreSQL share one PORT (SO_REUSEPORT), and
 * the kernel spreads new connections between them, so that the proxy runs on more than one core
 * with no balancer in between. Without it the second cannot listen there (the control case).
 */
import http from 'node:http';
import { useTestDatabase } from '../helpers/db.ts';
import { freePort, spawnServer, startServer, type ServerProcess } from '../helpers/server.ts';

const db = useTestDatabase();
const METRICS_TOKEN = 'reuse-port-test-metrics-token-0123456789';
const servers: ServerProcess[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) await server.stop('SIGKILL');
});

/** The pid of the process that answered /metrics on a connection of its own (a new one each time: the kernel picks per connection). */
function answeringPid(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path: '/metrics', agent: false, headers: { authorization: `Bearer ${METRICS_TOKEN}` } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => {
        const pid = /^replica_info\{[^}]*pid="(\d+)"/m.exec(body)?.[1];
        if (pid) resolve(pid);
        else reject(new Error(`no replica_info in /metrics (${response.statusCode})`));
      });
    });
    request.on('error', reject);
  });
}

it('lets two servers listen on one port and answer connections between them', async () => {
  const port = await freePort();
  const env = { DATABASE_URL: db.url, PORT: String(port), REUSE_PORT: 'true', METRICS_TOKEN, CONTROL_PLANE_ID: 'test-reuse-port' };
  for (let i = 0; i < 2; i++) servers.push(await startServer(env));
  const pids = new Set(servers.map((server) => String(server.proc.pid)));
  const seen = new Set<string>();
  // Bounded: the kernel hashes each new connection to one of the two, so both answer within a few.
  for (let attempt = 0; attempt < 200 && seen.size < 2; attempt++) seen.add(await answeringPid(port));
  expect(seen).toEqual(pids);
}, 90_000);

it('refuses a second server on a port in use without REUSE_PORT, saying so', async () => {
  const port = await freePort();
  const env = { DATABASE_URL: db.url, PORT: String(port), METRICS_TOKEN };
  servers.push(await startServer(env));
  const second = spawnServer(env);
  servers.push(second);
  const refused = await second.waitForLog((record) => record.level === 'fatal', 30_000);
  expect(refused.message).toBe(`cannot listen: 127.0.0.1:${port} is already in use`);
}, 90_000);
