import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import type { WorkspacePage } from '../../src/wire/schemas.ts';
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
    await app.store.workspaces.writeStatus(ada.id, { observedState: 'running', observedGeneration: ada.spec.generation, statusMessage: '' });
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

describe('GET /admin/nodes', () => {
  it('lists the nodes as the leader recorded them, with their room and workspaces; none on a single engine', async () => {
    const none = await fetch(`${app.url}/admin/nodes`, { headers: admin });
    expect(await none.json()).toEqual({ nodes: [] });
    await app.store.nodes.record([
      {
        name: 'n1',
        state: 'ready',
        availability: 'active',
        address: '',
        memoryBytes: 8 * 1024 ** 3,
        reservedMemoryBytes: 1024 ** 3,
        nanoCpus: 4e9,
        reachable: true,
      },
    ]);
    const response = await fetch(`${app.url}/admin/nodes`, { headers: admin });
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(await response.json()).toEqual({
      nodes: [
        expect.objectContaining({
          name: 'n1',
          state: 'ready',
          availability: 'active',
          drainRequested: false,
          memoryBytes: 8 * 1024 ** 3,
          freeMemoryBytes: 7 * 1024 ** 3,
        }),
      ],
    });
    expect((await fetch(`${app.url}/admin/nodes`)).status).toBe(401);
  });
});

describe('GET /admin/workspaces', () => {
  it("shows a running workspace's last CPU and memory sample, and none for a stopped one whatever was sampled last", async () => {
    const ada = await workspace('ada@school.test', true);
    const bob = await workspace('bob@school.test');
    await app.store.workspaces.writeStatus(ada.id, { observedState: 'running', observedGeneration: ada.spec.generation, statusMessage: '' });
    await app.store.workspaces.writeStatus(bob.id, { observedState: 'stopped', observedGeneration: bob.spec.generation, statusMessage: '' });
    // As the stats sampler records its pass (bob's sample is from before he stopped).
    await app.store.workspaceList.recordStats([
      { workspaceId: ada.id, cpuPercent: 12.5, memoryPercent: 40 },
      { workspaceId: bob.id, cpuPercent: 80, memoryPercent: 90 },
    ]);
    const response = await fetch(`${app.url}/admin/workspaces?sort=slug&order=asc`, { headers: admin });
    const { workspaces } = (await response.json()) as { workspaces: { slug: string; cpuPercent: number | null; memoryPercent: number | null }[] };
    expect(workspaces.map(({ slug, cpuPercent, memoryPercent }) => ({ slug, cpuPercent, memoryPercent }))).toEqual([
      { slug: 'ada', cpuPercent: 12.5, memoryPercent: 40 },
      { slug: 'bob', cpuPercent: null, memoryPercent: null },
    ]);
  });
});

describe('GET /admin/workspaces: search, filters, order and paging by the database', () => {
  /** Six workspaces in every state that matters, with activity, samples and a run. */
  async function classOf(): Promise<Record<string, WorkspaceRecord>> {
    const made: Record<string, WorkspaceRecord> = {};
    for (const [slug, running] of [
      ['ada', true],
      ['bob', true],
      ['cy', false],
      ['dee', true],
      ['eve', false],
      ['finn', false],
    ] as const) {
      made[slug] = await workspace(`${slug}@${slug === 'eve' ? 'robotics.club' : 'school.test'}`, running);
    }
    const status = (id: string, observedState: 'running' | 'failed' | 'stopped') =>
      app.store.workspaces.writeStatus(id, { observedState, observedGeneration: 1, statusMessage: observedState === 'failed' ? 'no image' : '' });
    await status(made.ada!.id, 'running');
    await status(made.bob!.id, 'running');
    await status(made.dee!.id, 'failed');
    await status(made.cy!.id, 'stopped');
    await db.dataSource.query('UPDATE workspaces SET last_activity_at = now() - make_interval(mins => $2) WHERE id = $1', [made.ada!.id, 5]);
    await db.dataSource.query('UPDATE workspaces SET last_activity_at = now() - make_interval(mins => $2) WHERE id = $1', [made.bob!.id, 50]);
    await app.store.workspaceList.recordStats([
      { workspaceId: made.ada!.id, cpuPercent: 30, memoryPercent: 10 },
      { workspaceId: made.bob!.id, cpuPercent: 5, memoryPercent: 70 },
    ]);
    await app.store.runs.create(made.bob!.id);
    // Finn's account is gone, his workspace is not yet: no owner.
    await db.dataSource.query('UPDATE workspaces SET user_id = NULL WHERE id = $1', [made.finn!.id]);
    return made;
  }
  const page = async (query: string) => {
    const response = await fetch(`${app.url}/admin/workspaces?${query}`, { headers: admin });
    expect(response.status).toBe(200);
    return (await response.json()) as WorkspacePage;
  };
  const slugs = async (query: string) => (await page(query)).workspaces.map((row) => row.slug);

  it('finds by part of the slug or of the owner email, in any case, and filters by observed and desired state', async () => {
    await classOf();
    expect(await slugs('q=Ee')).toEqual(['dee']);
    expect(await slugs('q=robotics')).toEqual(['eve']);
    expect(await slugs('observed=running')).toEqual(['ada', 'bob']);
    expect(await slugs('desired=running&observed=failed')).toEqual(['dee']);
    expect(await slugs('q=zzz')).toEqual([]);
  });

  it.each([
    ['slug', 'asc', ['ada', 'bob', 'cy', 'dee', 'eve', 'finn']],
    ['slug', 'desc', ['finn', 'eve', 'dee', 'cy', 'bob', 'ada']],
    ['owner', 'asc', ['ada', 'bob', 'cy', 'dee', 'eve', 'finn']],
    ['owner', 'desc', ['eve', 'dee', 'cy', 'bob', 'ada', 'finn']],
    ['desired', 'asc', ['ada', 'bob', 'dee', 'cy', 'eve', 'finn']],
    ['observed', 'desc', ['eve', 'finn', 'cy', 'ada', 'bob', 'dee']],
    ['lastActivity', 'desc', ['dee', 'ada', 'bob', 'cy', 'eve', 'finn']],
    ['cpu', 'desc', ['ada', 'bob', 'cy', 'dee', 'eve', 'finn']],
    ['cpu', 'asc', ['bob', 'ada', 'cy', 'dee', 'eve', 'finn']],
    ['memory', 'desc', ['bob', 'ada', 'cy', 'dee', 'eve', 'finn']],
  ])('sorts by %s %s, absent values last whatever the order, then by slug', async (sort, order, expected) => {
    await classOf();
    expect(await slugs(`sort=${sort}&order=${order}`)).toEqual(expected);
  });

  it('pages with offset and limit, says how many match, and counts the whole class by state', async () => {
    const made = await classOf();
    const second = await page('limit=2&offset=2');
    expect(second.workspaces.map((row) => row.slug)).toEqual(['cy', 'dee']);
    expect(second.total).toBe(6);
    expect(second.counts).toEqual({
      all: 6,
      observed: { unknown: 2, starting: 0, running: 2, stopped: 1, waiting: 0, failed: 1 },
      desired: { running: 3, stopped: 3, deleted: 0 },
    });
    // A page past the end: no rows, the total still said.
    expect(await page('limit=2&offset=10')).toMatchObject({ workspaces: [], total: 6 });
    expect(await page('q=robotics&limit=1&offset=5')).toMatchObject({ workspaces: [], total: 1 });
    // Each row: owner, activity, the last sample while running, the active run.
    const [bob] = (await page('q=bob')).workspaces;
    expect(bob).toMatchObject({ slug: 'bob', owner: 'bob@school.test', cpuPercent: 5, memoryPercent: 70, activeRun: { status: 'queued' } });
    expect((await page('q=finn')).workspaces[0]).toMatchObject({ slug: 'finn', owner: null, cpuPercent: null, activeRun: null });
    expect(made.finn).toBeDefined();
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
        generation: ada.spec.generation + 1,
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
    await app.store.workspaces.writeStatus(bob.id, { observedState: 'stopped', observedGeneration: bob.spec.generation, statusMessage: '' });
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
