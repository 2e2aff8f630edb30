/**
 * The student API under /u/<slug>/api on real PostgreSQL and Docker: the workspace's state (who may
 * read it), opening it (CSRF, admission under the cap, the controller bringing it to ready), activity
 * marking, and the simulator's nt4 alive probe against real stand-in simulator containers, each
 * labelled as its run's (the probe goes only where the engine says the run's own simulator serves).
 */
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { LABELS, type ServingContainer } from '../../src/docker/runtime.ts';
import { AT_CAPACITY_MESSAGE } from '../../src/errors.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, docker, eventually, removeEverything, TEST_ENV, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { requestsSeen, servingOf } from '../helpers/stand-ins.ts';
import { newStudent, type Student } from '../helpers/workspaces.ts';
import type { ErrorBody, StudentWorkspace as WorkspaceView } from '../../src/wire/schemas.ts';

const db = useTestDatabase({ truncate: false });
let app: TestApp;
let harness: Harness;
let ada: Student;
let bob: Student;
let carol: Student;
let coach: Student;
const tag = Date.now().toString(36);
const SIM_LABELS = { 'service.test': 'student-api', 'service.test-run': tag };

beforeAll(async () => {
  app = await startApp(db.dataSource, { MAX_ACTIVE_CONTAINERS: '1' });
  // The controller shares the app's change feed, so an open through the API reaches it at once.
  harness = createHarness(db.dataSource, { changes: app.store.changes });
  await harness.controller.start();
  ada = await newStudent(harness.store, 'ada', tag);
  bob = await newStudent(harness.store, 'bob', tag);
  carol = await newStudent(harness.store, 'carol', tag);
  coach = await newStudent(harness.store, 'coach', tag, 'admin');
}, 30_000);

afterAll(async () => {
  await app?.close();
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
  const mine = await docker.listContainers({ all: true, filters: { label: Object.entries(SIM_LABELS).map(([key, value]) => `${key}=${value}`) } });
  for (const info of mine)
    await docker
      .getContainer(info.Id)
      .remove({ force: true })
      .catch(() => undefined);
}, 30_000);

const api = (student: Student, rest: string) => `${app.url}/u/${student.workspace.slug}/api${rest}`;

function open(student: Student, as: Student, headers: Record<string, string> = { origin: app.url }): Promise<Response> {
  return fetch(api(student, '/workspace/open'), { method: 'POST', headers: { cookie: as.cookie, accept: 'application/json', ...headers } });
}

async function row(student: Student): Promise<{ desired_state: string; generation: string; last_activity_at: Date | null }> {
  const rows = (await db.dataSource.query('SELECT desired_state, generation, last_activity_at FROM workspaces WHERE id = $1', [student.workspace.id])) as {
    desired_state: string;
    generation: string;
    last_activity_at: Date | null;
  }[];
  return rows[0]!;
}

/** The sample count of proxy_upstream_duration_seconds for nt4 with this outcome (0 when absent). */
async function nt4Count(outcome: string): Promise<number> {
  const text = await app.metrics.registry.metrics();
  const line = text
    .split('\n')
    .find(
      (candidate) =>
        candidate.startsWith('proxy_upstream_duration_seconds_count{') && candidate.includes('upstream="nt4"') && candidate.includes(`outcome="${outcome}"`),
    );
  return line ? Number(line.split(' ').at(-1)) : 0;
}

async function nt4Counts(): Promise<Record<'ok' | 'timeout' | 'error', number>> {
  return { ok: await nt4Count('ok'), timeout: await nt4Count('timeout'), error: await nt4Count('error') };
}

describe('GET /u/<slug>/api/workspace', () => {
  it("answers the owner with the workspace's state", async () => {
    const response = await fetch(api(ada, '/workspace'), { headers: { cookie: ada.cookie } });
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const body = (await response.json()) as { workspace: WorkspaceView };
    expect(Object.keys(body.workspace).toSorted()).toEqual([
      'desiredState',
      'disk',
      'guest',
      'id',
      'idle',
      'lessons',
      'lookedAt',
      'observedState',
      'pageUrl',
      'ready',
      'run',
      'slug',
      'statusMessage',
      'stopped',
    ]);
    expect(body.workspace).toEqual({
      id: ada.workspace.id,
      slug: ada.workspace.slug,
      desiredState: 'stopped',
      observedState: expect.any(String),
      statusMessage: expect.any(String),
      ready: false,
      // Stopped: nothing for the idle sweep to stop.
      idle: { stopsAt: null, warnFrom: null },
      run: null,
      // Never measured: no figure to show yet.
      disk: null,
      pageUrl: `${app.url}/u/${ada.workspace.slug}/.cp/`,
      // Never stopped by anyone: made stopped.
      stopped: null,
      // No coach is looking.
      lookedAt: null,
      // No lesson has reached the home.
      lessons: [],
      // Not a guest of a join code.
      guest: null,
    });
  });

  it('says who stopped a stopped workspace, and when: a coach, the operator, the student, or the idle sweep after how long', async () => {
    const stoppedOf = async () =>
      ((await (await fetch(api(carol, '/workspace'), { headers: { cookie: carol.cookie } })).json()) as { workspace: { stopped: unknown } }).workspace.stopped;
    for (const by of ['coach', 'operator', 'student'] as const) {
      await harness.store.workspaces.open(carol.workspace.id);
      const before = Date.now();
      await harness.store.workspaces.stop(SYSTEM_ACTOR, carol.workspace.id, by);
      const stopped = (await stoppedOf()) as { by: string; at: string };
      expect(stopped.by).toBe(by);
      expect(Date.parse(stopped.at)).toBeGreaterThanOrEqual(before - 1000);
    }
    // Stopping again keeps who stopped it first.
    await harness.store.workspaces.stop(SYSTEM_ACTOR, carol.workspace.id, 'coach');
    expect(await stoppedOf()).toMatchObject({ by: 'student' });
    await harness.store.workspaces.open(carol.workspace.id);
    expect(await stoppedOf()).toBeNull();
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() - interval '2 hours' WHERE id = $1", [carol.workspace.id]);
    expect((await harness.store.workspaces.stopIdle(30)).map((each) => each.id)).toContain(carol.workspace.id);
    expect(await stoppedOf()).toMatchObject({ by: 'idle', afterIdleMinutes: 30 });
  });

  it('answers an admin', async () => {
    const response = await fetch(api(ada, '/workspace'), { headers: { cookie: coach.cookie } });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { workspace: WorkspaceView }).workspace.id).toBe(ada.workspace.id);
  });

  it('refuses another student 403, the same for a workspace that does not exist', async () => {
    const other = await fetch(api(ada, '/workspace'), { headers: { cookie: bob.cookie } });
    expect(other.status).toBe(403);
    const body = (await other.json()) as ErrorBody;
    expect(body.error.code).toBe('forbidden');
    expect(JSON.stringify(body)).not.toContain(ada.workspace.id);
    const missing = await fetch(`${app.url}/u/nobody-${tag}/api/workspace`, { headers: { cookie: bob.cookie } });
    expect(missing.status).toBe(403);
    expect(((await missing.json()) as ErrorBody).error.code).toBe('forbidden');
  });

  it('answers 401 JSON without a session', async () => {
    const response = await fetch(api(ada, '/workspace'));
    expect(response.status).toBe(401);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await response.json()) as ErrorBody).error.code).toBe('authentication_required');
  });
});

describe('POST /u/<slug>/api/workspace/open', () => {
  // Runs while nothing is wanted running, so a request that slipped past the check would be admitted.
  it.each([
    ['without Origin', {}],
    ['from another origin', { origin: 'http://evil.example' }],
    ['marked cross-site by the browser', { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' }],
  ])('refuses a request %s with 403 csrf_failed and changes nothing', async (_name, headers: Record<string, string>) => {
    expect(Number((await db.dataSource.query("SELECT count(*) AS n FROM workspaces WHERE desired_state = 'running'"))[0].n)).toBe(0);
    const before = await row(bob);
    const response = await open(bob, bob, headers);
    expect(response.status).toBe(403);
    expect(((await response.json()) as ErrorBody).error.code).toBe('csrf_failed');
    const after = await row(bob);
    expect(after.desired_state).toBe('stopped');
    expect(after.generation).toBe(before.generation);
  });

  it('admits the owner from our origin (202, wanted running), and the controller brings it to ready', async () => {
    const response = await open(ada, ada);
    expect(response.status).toBe(202);
    const body = (await response.json()) as { workspace: WorkspaceView; alreadyRunning: boolean };
    expect(body.alreadyRunning).toBe(false);
    expect(body.workspace).toEqual(expect.objectContaining({ id: ada.workspace.id, desiredState: 'running' }));
    expect((await row(ada)).desired_state).toBe('running');
    const ready = await eventually(
      'the workspace to be ready',
      async () => {
        const answer = await fetch(api(ada, '/workspace'), { headers: { cookie: ada.cookie } });
        const { workspace } = (await answer.json()) as { workspace: WorkspaceView };
        return workspace.ready ? workspace : undefined;
      },
      20_000,
    );
    expect(ready).toEqual(expect.objectContaining({ desiredState: 'running', observedState: 'running', ready: true }));
  }, 30_000);

  describe('at the cap (MAX_ACTIVE_CONTAINERS=1, one workspace wanted running)', () => {
    beforeAll(async () => {
      // Independent of the test above: ada's workspace is wanted running (the harness store's cap is 10).
      await harness.store.workspaces.open(ada.workspace.id);
    });

    it('refuses another student 503 at_capacity with Retry-After and the exact message, counts and logs it, and changes nothing', async () => {
      const rejections = (await app.metrics.capacityRejections.get()).values[0]?.value ?? 0;
      const before = await row(bob);
      const response = await open(bob, bob);
      expect(response.status).toBe(503);
      expect(response.headers.get('retry-after')).toBe('60');
      expect(await response.json()).toEqual({ error: { code: 'at_capacity', message: AT_CAPACITY_MESSAGE } });
      expect(AT_CAPACITY_MESSAGE).toBe('Server at capacity. Your coach has been notified. Please try again in a few minutes.');
      const after = await row(bob);
      expect(after.desired_state).toBe('stopped');
      expect(after.generation).toBe(before.generation);
      expect((await app.metrics.capacityRejections.get()).values[0]?.value).toBe(rejections + 1);
      expect(app.logs.filter((record) => record.level === 'warning' && record.category === 'control.containers').at(-1)).toEqual(
        expect.objectContaining({
          message: 'workspace open refused: server at capacity',
          workspaceId: bob.workspace.id,
          slug: bob.workspace.slug,
          cap: 1,
          running: 1,
        }),
      );
    });

    it('does not refuse a student whose workspace already runs (200, alreadyRunning)', async () => {
      const response = await open(ada, ada);
      expect(response.status).toBe(200);
      const body = (await response.json()) as { workspace: WorkspaceView; alreadyRunning: boolean };
      expect(body.alreadyRunning).toBe(true);
      expect(body.workspace.desiredState).toBe('running');
    });
  });
});

/** A workspace's idle forecast as the student API shows it. */
type IdleView = WorkspaceView & { idle: { stopsAt: string | null; warnFrom: string | null } };

describe('activity', () => {
  const stale = async (student: Student) => {
    await db.dataSource.query("UPDATE workspaces SET last_activity_at = now() - interval '1 hour' WHERE id = $1", [student.workspace.id]);
  };
  const ageMs = async (student: Student) => Date.now() - (await row(student)).last_activity_at!.getTime();

  it('POST workspace/open (even refused at the cap) marks the workspace active, written at the next flush', async () => {
    await app.activity.flush();
    await stale(bob);
    expect((await open(bob, bob)).status).toBe(503);
    // Gathered in memory: nothing is written per request.
    expect(await ageMs(bob)).toBeGreaterThan(50 * 60_000);
    await app.activity.flush();
    expect(await ageMs(bob)).toBeLessThan(60_000);
  });

  it('POST workspace/keep marks the workspace active at once, and answers when the idle sweep would stop it now', async () => {
    const dan = await newStudent(harness.store, 'dan', tag);
    // Wanted running (the harness store's cap is 10, the app's 1).
    await harness.store.workspaces.open(dan.workspace.id);
    await stale(dan);
    const before = (await (await fetch(api(dan, '/workspace'), { headers: { cookie: dan.cookie } })).json()) as { workspace: IdleView };
    // An hour idle: it would be stopped at the next sweep, and the warning is on.
    expect(Date.parse(before.workspace.idle.stopsAt!)).toBeLessThan(Date.now());
    const answer = await fetch(api(dan, '/workspace/keep'), { method: 'POST', headers: { cookie: dan.cookie, origin: app.url } });
    expect(answer.status).toBe(200);
    expect(await ageMs(dan)).toBeLessThan(60_000);
    const { workspace } = (await answer.json()) as { workspace: IdleView };
    // IDLE_STOP_MINUTES (30) from now, warned IDLE_WARNING_MINUTES (5) before.
    expect(Date.parse(workspace.idle.stopsAt!) - Date.now()).toBeGreaterThan(29 * 60_000);
    expect(Date.parse(workspace.idle.stopsAt!) - Date.parse(workspace.idle.warnFrom!)).toBe(5 * 60_000);
  });

  it.each([
    ['GET workspace', () => fetch(api(bob, '/workspace'), { headers: { cookie: bob.cookie } })],
    ['GET sim/status', () => fetch(api(bob, '/sim/status'), { headers: { cookie: bob.cookie } })],
    ["an admin's GET workspace", () => fetch(api(bob, '/workspace'), { headers: { cookie: coach.cookie } })],
  ])('%s is only a look: it does not keep the workspace from the idle sweep', async (_name, call) => {
    await app.activity.flush();
    await stale(bob);
    expect((await call()).status).toBe(200);
    await app.activity.flush();
    expect(await ageMs(bob)).toBeGreaterThan(50 * 60_000);
  });
});

describe('GET /u/<slug>/api/sim/status', () => {
  /** The simulator of the alive test: a live one, whose address another run's record may name. */
  let aliveSim: ServingContainer;

  /**
   * Starts a stand-in simulator as the run controller would for a new run of `student`'s (labelled
   * as that run's simulator, on the workspace network) and records the run as running at its
   * address, as the engine reports it; returns the run's id and its simulator.
   */
  async function startRun(student: Student, env: string[]): Promise<{ runId: string; sim: ServingContainer }> {
    const runId = randomUUID();
    await harness.runtime.ensureNetwork(TEST_ENV.WORKSPACE_NETWORK);
    const container = await docker.createContainer({
      Image: TEST_IMAGE,
      Cmd: ['node', '/app/sim.mjs'],
      Env: ['SIM_COMPILE_MS=0', 'SIM_BOOT_MS=0', ...env],
      Labels: { ...SIM_LABELS, [LABELS.managed]: 'true', [LABELS.workspaceId]: student.workspace.id, [LABELS.role]: 'sim', [LABELS.runId]: runId },
      HostConfig: { NetworkMode: TEST_ENV.WORKSPACE_NETWORK },
    });
    await container.start();
    const sim = await servingOf(harness.runtime, { workspaceId: student.workspace.id, runId });
    await setRun(student, 'running', sim.endpoint, runId);
    return { runId, sim };
  }

  /** True once something accepts TCP connections at `endpoint`. */
  const accepts = (endpoint: string) =>
    new Promise<boolean>((resolve) => {
      const at = endpoint.lastIndexOf(':');
      const socket = net.connect(Number(endpoint.slice(at + 1)), endpoint.slice(0, at));
      socket.setTimeout(500, () => (socket.destroy(), resolve(false)));
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });

  /** Replaces the workspace's runs with one run (`runId`, else a new one); returns its id. */
  async function setRun(student: Student, status: 'queued' | 'running', endpoint: string | null, runId: string = randomUUID()): Promise<string> {
    await db.dataSource.query('DELETE FROM runs WHERE workspace_id = $1', [student.workspace.id]);
    await db.dataSource.query('INSERT INTO runs (id, workspace_id, status, sim_endpoint) VALUES ($1, $2, $3, $4)', [
      runId,
      student.workspace.id,
      status,
      endpoint,
    ]);
    return runId;
  }

  async function simStatus(student: Student): Promise<{ status: number; body: Record<string, unknown>; ms: number; cacheControl: string | null }> {
    const started = performance.now();
    const response = await fetch(api(student, '/sim/status'), { headers: { cookie: student.cookie } });
    const body = (await response.json()) as Record<string, unknown>;
    return { status: response.status, body, ms: performance.now() - started, cacheControl: response.headers.get('cache-control') };
  }

  /** Recorded simulator addresses refused so far (proxy_upstream_unverified_total for nt4). */
  async function unverified(): Promise<number> {
    const line = (await app.metrics.registry.metrics())
      .split('\n')
      .find((candidate) => candidate.startsWith('proxy_upstream_unverified_total{upstream="nt4"}'));
    return line ? Number(line.split(' ').at(-1)) : 0;
  }

  it('says no_active_run without an active run (a finished one does not count), and probes nothing', async () => {
    const before = await nt4Counts();
    const answer = await simStatus(carol);
    expect(answer.status).toBe(200);
    expect(answer.cacheControl).toBe('no-store');
    expect(answer.body).toEqual({ alive: false, reason: 'no_active_run' });
    await db.dataSource.query("INSERT INTO runs (workspace_id, status, sim_endpoint, ended_at) VALUES ($1, 'stopped', '127.0.0.1:9', now())", [
      carol.workspace.id,
    ]);
    expect((await simStatus(carol)).body).toEqual({ alive: false, reason: 'no_active_run' });
    expect(await nt4Counts()).toEqual(before);
  });

  it('says not_started for a queued run without a simulator endpoint, and probes nothing', async () => {
    const before = await nt4Counts();
    const runId = await setRun(carol, 'queued', null);
    const answer = await simStatus(carol);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ alive: false, runId, reason: 'not_started' });
    expect(await nt4Counts()).toEqual(before);
  });

  it('says alive for a running simulator, with its latency and status, and counts outcome ok', async () => {
    const { runId, sim } = await startRun(carol, []);
    aliveSim = sim;
    await eventually('the simulator to answer', async () => (await fetch(`http://${sim.endpoint}/`, { signal: AbortSignal.timeout(1000) })).ok, 20_000);
    const before = await nt4Counts();
    // Asked again if a loaded machine makes one probe miss its 500 ms: the answer, not the timing, is tested here.
    const answer = await eventually('an alive answer', async () => {
      const attempt = await simStatus(carol);
      return attempt.body.alive ? attempt : undefined;
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ alive: true, runId, latencyMs: expect.any(Number), status: 200 });
    expect(answer.body.latencyMs as number).toBeGreaterThanOrEqual(0);
    expect(answer.body.latencyMs as number).toBeLessThan(500);
    const after = await nt4Counts();
    expect(after.ok).toBe(before.ok + 1);
    expect(after.error).toBe(before.error);
  }, 30_000);

  it('says timeout for a simulator that never answers, within well under 1.5 s, and counts outcome timeout', async () => {
    const { runId, sim } = await startRun(carol, ['SIM_HANG_PROBE=1']);
    await eventually('the hanging simulator to listen', async () => accepts(sim.endpoint), 20_000);
    const before = await nt4Counts();
    const answer = await simStatus(carol);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ alive: false, runId, latencyMs: expect.any(Number), reason: 'timeout' });
    expect(answer.body.latencyMs as number).toBeGreaterThanOrEqual(450);
    // The 500 ms timeout, not the simulator, ends the wait: well under 1.5 s even on a loaded machine.
    expect(answer.ms).toBeLessThan(1500);
    expect(await nt4Counts()).toEqual({ ...before, timeout: before.timeout + 1 });
  }, 30_000);

  it("says unreachable for a run whose recorded address is not where its own simulator serves (gone, or another run's now), probes nothing there, and counts it", async () => {
    const heardBefore = (await requestsSeen(harness.runtime, aliveSim)).length;
    // A closed port, and the live simulator of the alive test's run: neither is this run's (it has no container).
    for (const endpoint of ['127.0.0.1:9', aliveSim.endpoint]) {
      const runId = await setRun(carol, 'running', endpoint);
      const before = { ...(await nt4Counts()), unverified: await unverified() };
      const answer = await simStatus(carol);
      expect(answer.status).toBe(200);
      // `unreachable`, not `timeout`: a refused address is reported at once, not after the probe's timeout.
      expect(answer.body).toEqual({ alive: false, runId, latencyMs: expect.any(Number), reason: 'unreachable' });
      expect({ ...(await nt4Counts()), unverified: await unverified() }).toEqual({ ...before, error: before.error + 1, unverified: before.unverified + 1 });
    }
    // The other run's simulator was never asked.
    expect((await requestsSeen(harness.runtime, aliveSim)).slice(heardBefore)).toEqual([]);
  });

  it("refuses another student's probe", async () => {
    const response = await fetch(api(carol, '/sim/status'), { headers: { cookie: bob.cookie } });
    expect(response.status).toBe(403);
  });
});
