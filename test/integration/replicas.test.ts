/**
 * Issue 23, two control planes on one PostgreSQL: real server processes, the real engine. One
 * leads (runs the controllers), the other follows. A leader paused (SIGSTOP) past its lease loses it
 * to the other under the next term and, woken (SIGCONT), steps down by its own clock; a leader
 * killed (SIGKILL) is replaced at once (a dead process of this host is known dead). Through both,
 * desired state converges with one container per workspace, and a running one is never restarted.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { names } from '../../src/docker/runtime.ts';
import { RECONCILER_LEASE } from '../../src/store/leases.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { createHarness, docker, eventually, inspectByName, newControlPlaneId, removeEverything, TEST_IMAGE } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';
import { leading, pausedLeaderHandsOver } from '../helpers/replicas.ts';
import { startServer, type ServerProcess } from '../helpers/server.ts';
import { sessionFor } from '../helpers/session.ts';

let db: { url: string; dataSource: DataSource };
const controlPlaneId = newControlPlaneId();
const servers: ServerProcess[] = [];

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  for (const server of servers) {
    server.proc.kill('SIGCONT');
    await server.stop('SIGKILL');
  }
  await removeEverything(controlPlaneId);
  await db.dataSource.destroy();
});

const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'cp-replicas-'));
writeFileSync(path.join(DATA_DIR, 'allowlist.json'), JSON.stringify({ entries: ['school.test'] }));
/** A short lease, so that the test waits seconds, not the default 15. */
const LEASE = { LEASE_DURATION_SECONDS: '3', LEASE_RENEW_DEADLINE_SECONDS: '2', LEASE_RETRY_SECONDS: '0.25' };
const METRICS_TOKEN = 'replicas-test-metrics-token-0123456789abcdef';
const SESSION_SECRET = 'replicas-test-session-secret-0123456789';
const env = () => ({
  DATABASE_URL: db.url,
  WORKSPACE_IMAGE: TEST_IMAGE,
  CODE_MEMORY_LIMIT: '64m',
  CONTROL_PLANE_ID: controlPlaneId,
  SESSION_SECRET,
  DATA_DIR,
  METRICS_TOKEN,
  ...LEASE,
});

/** The code containers of a workspace (all states). */
async function codeContainers(workspace: WorkspaceRecord) {
  return docker.listContainers({ all: true, filters: { label: [`service.workspace-id=${workspace.id}`, 'service.role=code'] } });
}

it('one leads; a paused leader loses the lease and steps down when woken; a killed one is replaced at once; state converges, nothing restarts or doubles', async () => {
  const { a, b, store, leases, first, running, second } = await pausedLeaderHandsOver(db.dataSource, controlPlaneId, env, servers);
  // Woken, the old leader wrote nothing under its old term.
  expect(a.records.filter((record) => record.level === 'error' && record.category === 'control.containers')).toEqual([]);

  // The leader killed: the other (a process of this host that sees it dead) takes over at once.
  const killedAt = Date.now();
  await b.stop('SIGKILL');
  const took = await a.waitForLog(leading(3), 20_000);
  expect(Date.parse(String(took.timestamp)) - killedAt).toBeLessThan(3000 + 250 + 1000);
  expect(a.records.map((record) => record.message)).toContain(
    'the previous leader is a process of this host that no longer runs: taking over without waiting for its lease',
  );
  const third = (await store.users.create({ email: `third-${controlPlaneId}@school.test` })).workspace;
  await store.workspaces.open(third.id);
  await eventually('the third workspace running', async () => (await inspectByName(names.code(third.slug)))?.State.Running === true, 30_000);

  // One container per workspace, and the first never restarted through three terms.
  for (const workspace of [first, second, third]) expect(await codeContainers(workspace)).toHaveLength(1);
  const after = (await inspectByName(names.code(first.slug)))!;
  expect([after.Id, after.State.StartedAt, after.RestartCount]).toEqual([running.Id, running.State.StartedAt, 0]);
  // The metrics say who leads.
  const metrics = await (await fetch(`${a.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  expect(metrics).toMatch(/^leader 1$/m);
  expect(metrics).toMatch(/^leader_term 3$/m);
  // It names itself: the replica that holds the lease.
  const replica = /^replica_info\{replica="([^"]+)",hostname="[^"]+",pid="(\d+)",version="[^"]+"\} 1$/m.exec(metrics);
  expect(replica?.[2]).toBe(String(a.proc.pid));
  expect((await leases.get(RECONCILER_LEASE))?.holder).toBe(replica?.[1]);
}, 120_000);

it('holds its sessions (LISTEN, and the migrations) on DATABASE_DIRECT_URL, so that DATABASE_URL may go through a pooler in transaction mode', async () => {
  // The same database under two names (application_name), as a pooler's URL and a direct one would be.
  const named = (name: string) => {
    const url = new URL(db.url);
    url.searchParams.set('application_name', name);
    return url.toString();
  };
  const server = await startServer({ ...env(), DATABASE_URL: named('cp-pooled'), DATABASE_DIRECT_URL: named('cp-direct') });
  servers.push(server);
  await server.waitForLog((record) => record.message.startsWith('leading: took the reconciler lease') || record.message.startsWith('another replica leads'));
  const listeners = await eventually('its LISTEN session', async () => {
    const rows = (await db.dataSource.query(
      "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND application_name LIKE 'cp-%'",
    )) as { application_name: string }[];
    return rows.length > 0 ? rows.map((row) => row.application_name) : undefined;
  });
  expect(listeners).toEqual(['cp-direct']);
  // Requests and leadership go through the pooled URL.
  expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual(expect.objectContaining({ ok: true }));
  const pooled = (await db.dataSource.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'cp-pooled'")) as { n: number }[];
  expect(pooled[0]!.n).toBeGreaterThan(0);
}, 60_000);

it("passes on the editor's answer to a request in flight when it is stopped (SIGTERM), then exits 0: an upgrade loses no proxied request", async () => {
  const server = await startServer(env());
  servers.push(server);
  const { store } = createHarness(db.dataSource, { controlPlaneId });
  const { user, workspace } = await store.users.create({ email: `inflight-${controlPlaneId}@school.test` });
  await store.workspaces.open(workspace.id);
  // Whichever replica leads (this one, or one of a test before) starts the stand-in editor.
  const editor = await eventually(
    'the editor running',
    async () => {
      const info = await inspectByName(names.code(workspace.slug));
      return info?.State.Running ? info : undefined;
    },
    30_000,
  );
  await eventually('the workspace observed running', async () => (await store.workspaces.get(workspace.id))?.status.observedState === 'running', 30_000);
  const { cookie } = await sessionFor(store.sessions, user.id, SESSION_SECRET);

  // A run's output followed through this replica (a stream that would hold the shutdown open for the grace period).
  const [run] = (await db.dataSource.query("INSERT INTO runs (workspace_id, status, desired_state) VALUES ($1, 'running', 'running') RETURNING id", [
    workspace.id,
  ])) as { id: string }[];
  const output = await fetch(`${server.url}/u/${workspace.slug}/api/runs/${run!.id}/output`, { headers: { cookie } });
  expect(output.status).toBe(200);
  const outputEnded = output.text();
  // A request the editor answers after 3 s, sent through this replica; stopped once the editor has it.
  const answer = fetch(`${server.url}/u/${workspace.slug}/slow?ms=3000`, { headers: { cookie } }).then(async (response) => [
    response.status,
    await response.text(),
  ]);
  await eventually(
    'the editor to have the request',
    async () => {
      const logs = await docker.getContainer(editor.Id).logs({ stdout: true, stderr: true });
      return logs.toString().includes('GET /slow?ms=3000');
    },
    15_000,
  );
  server.proc.kill('SIGTERM');
  await server.waitForLog((record) => record.message.startsWith('shutting down'));
  expect(await answer).toEqual([200, 'slow']);
  expect(await server.exited).toBe(0);
  // The output stream was ended by the shutdown (its reader resumes elsewhere), not cut at the end of the grace period.
  expect(await outputEnded).toContain(': connected');
  expect(server.records.map((record) => record.message)).not.toContain('in-flight requests still open after the grace period, closing them');
}, 90_000);

it('waits for the lease of a holder on this host in another PID namespace (a replica in another container, whose pid means nothing here)', async () => {
  // The lease held by a server of this host's name, in a PID namespace that is not this one's, with a
  // pid that runs nowhere: in this namespace it would be a dead process, taken over at once.
  for (const server of servers.splice(0)) {
    server.proc.kill('SIGCONT');
    await server.stop('SIGKILL');
  }
  const holder = '00000000-0000-4000-8000-0000000000aa';
  await db.dataSource.query("INSERT INTO servers (id, public_url, hostname, pid, pid_namespace) VALUES ($1, 'http://other.test', $2, $3, 'pid:[1]')", [
    holder,
    os.hostname(),
    2 ** 22 - 1,
  ]);
  await db.dataSource.query(
    "INSERT INTO leader_lease (name, holder, term, expires_at) VALUES ($1, $2, 100, now() + interval '3 seconds') ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, term = EXCLUDED.term, expires_at = EXCLUDED.expires_at, renewed_at = now()",
    [RECONCILER_LEASE, holder],
  );
  const server = await startServer(env());
  servers.push(server);
  await server.waitForLog(leading(101), 20_000);
  expect(server.records.map((record) => record.message)).not.toContain(
    'the previous leader is a process of this host that no longer runs: taking over without waiting for its lease',
  );
}, 60_000);
