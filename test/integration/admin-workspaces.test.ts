// @lane local
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { useTestDatabase } from '../helpers/db.ts';

const ADMIN_TOKEN = 'admin-token-0123456789abcdef0123456789';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

const db = useTestDatabase();
let app: TestApp;

beforeEach(async () => {
  app = await startApp(db.dataSource, { ADMIN_TOKEN, MAX_ACTIVE_CONTAINERS: '4' });
});
afterEach(async () => {
  await app.close();
});

async function workspace(email: string, running = false): Promise<WorkspaceRecord> {
  const { workspace: made } = await app.store.users.create({ email });
  return running ? (await app.store.workspaces.open(made.id)).workspace : made;
}

const post = (path: string) => fetch(`${app.url}${path}`, { method: 'POST', headers: admin });
const audit = async () =>
  (await db.dataSource.query('SELECT actor_email, action, target_kind, target_id, metadata FROM audit_log ORDER BY id')) as Record<string, unknown>[];

describe('GET /admin/status', () => {
  it('lists workspaces with desired and observed state per container, the active build count and the capacity', async () => {
    const ada = await workspace('ada@school.test', true);
    const bob = await workspace('bob@school.test');
    await app.store.workspaces.writeStatus(ada.id, { observedState: 'running', observedGeneration: ada.generation, statusMessage: '' });
    const [queued] = await db.dataSource.query('INSERT INTO runs (workspace_id) VALUES ($1) RETURNING id', [ada.id]);
    const response = await fetch(`${app.url}/admin/status`, { headers: admin });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { workspaces: Record<string, unknown>[]; activeBuilds: number; capacity: unknown };
    expect(body.activeBuilds).toBe(1);
    expect(body.capacity).toEqual({ cap: 4, source: 'environment', wantedRunning: 1, running: 1 });
    expect(body.workspaces).toEqual([
      expect.objectContaining({
        id: ada.id,
        slug: 'ada',
        desiredState: 'running',
        observedState: 'running',
        containers: [
          { role: 'code', desiredState: 'running', observedState: 'running' },
          { role: 'sim', runId: (queued as { id: string }).id, desiredState: 'running', observedState: 'queued' },
        ],
      }),
      expect.objectContaining({
        id: bob.id,
        slug: 'bob',
        desiredState: 'stopped',
        observedState: 'unknown',
        containers: [{ role: 'code', desiredState: 'stopped', observedState: 'unknown' }],
      }),
    ]);
  });

  it('refuses a request without the admin token', async () => {
    const response = await fetch(`${app.url}/admin/status`);
    expect(response.status).toBe(401);
  });
});

describe('GET /admin/workspaces', () => {
  it("shows a running workspace's last CPU and memory sample, and none for a stopped one whatever was sampled last", async () => {
    const ada = await workspace('ada@school.test', true);
    const bob = await workspace('bob@school.test');
    await app.store.workspaces.writeStatus(ada.id, { observedState: 'running', observedGeneration: ada.generation, statusMessage: '' });
    await app.store.workspaces.writeStatus(bob.id, { observedState: 'stopped', observedGeneration: bob.generation, statusMessage: '' });
    for (const [id, cpu, memory] of [
      [ada.id, 12.5, 40],
      [bob.id, 80, 90],
    ] as const) {
      app.metrics.containerCpuPercent.set({ workspace_id: id }, cpu);
      app.metrics.containerMemoryPercent.set({ workspace_id: id }, memory);
    }
    const response = await fetch(`${app.url}/admin/workspaces?sort=slug&order=asc`, { headers: admin });
    const { workspaces } = (await response.json()) as { workspaces: { slug: string; cpuPercent: number | null; memoryPercent: number | null }[] };
    expect(workspaces.map(({ slug, cpuPercent, memoryPercent }) => ({ slug, cpuPercent, memoryPercent }))).toEqual([
      { slug: 'ada', cpuPercent: 12.5, memoryPercent: 40 },
      { slug: 'bob', cpuPercent: null, memoryPercent: null },
    ]);
  });
});

describe('POST /admin/workspaces/:workspaceId/stop-containers', () => {
  it('sets the workspace to stopped, audits container.stop, and answers 202 while it converges', async () => {
    const ada = await workspace('ada@school.test', true);
    const response = await post(`/admin/workspaces/${ada.id}/stop-containers`);
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({
      workspace: {
        id: ada.id,
        slug: 'ada',
        desiredState: 'stopped',
        generation: ada.generation + 1,
        restartGeneration: 0,
        observedState: 'unknown',
        observedGeneration: 0,
      },
    });
    expect(await audit()).toEqual([
      { actor_email: 'admin-token', action: 'container.stop', target_kind: 'workspace', target_id: ada.id, metadata: { slug: 'ada', from: 'running' } },
    ]);
  });

  it('answers 200 when the workspace is already observed stopped', async () => {
    const bob = await workspace('bob@school.test');
    await app.store.workspaces.writeStatus(bob.id, { observedState: 'stopped', observedGeneration: bob.generation, statusMessage: '' });
    const response = await post(`/admin/workspaces/${bob.id}/stop-containers`);
    expect(response.status).toBe(200);
  });

  it.each([
    ['an unknown id', '00000000-0000-4000-8000-00000000beef'],
    ['a malformed id', 'not-a-workspace'],
    ['an encoded traversal', '..%2F..%2Fhealthz'],
  ])('answers 404 for %s and audits nothing', async (_name, id) => {
    const response = await post(`/admin/workspaces/${id}/stop-containers`);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { code: string } }).error.code).toMatch(/not_found/);
    expect(await audit()).toEqual([]);
  });

  it('answers 405 to GET', async () => {
    const ada = await workspace('ada@school.test');
    expect((await fetch(`${app.url}/admin/workspaces/${ada.id}/stop-containers`, { headers: admin })).status).toBe(405);
  });
});

describe('POST /admin/workspaces/:workspaceId/restart-code', () => {
  it('bumps the restart generation and audits container.restart-code', async () => {
    const ada = await workspace('ada@school.test', true);
    const response = await post(`/admin/workspaces/${ada.id}/restart-code`);
    expect(response.status).toBe(202);
    expect(((await response.json()) as { workspace: { restartGeneration: number } }).workspace.restartGeneration).toBe(1);
    expect(await audit()).toEqual([
      { actor_email: 'admin-token', action: 'container.restart-code', target_kind: 'workspace', target_id: ada.id, metadata: { slug: 'ada' } },
    ]);
  });

  it('refuses a stopped workspace with 409', async () => {
    const bob = await workspace('bob@school.test');
    const response = await post(`/admin/workspaces/${bob.id}/restart-code`);
    expect(response.status).toBe(409);
    expect(await response.json()).toEqual({
      error: { code: 'workspace_not_running', message: 'Workspace bob is stopped; there is no code container to restart.' },
    });
  });

  it('refuses an unknown workspace with 404', async () => {
    expect((await post('/admin/workspaces/00000000-0000-4000-8000-00000000beef/restart-code')).status).toBe(404);
  });
});
