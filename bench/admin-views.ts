/**
 * The admin's views at 500 and 5,000 workspaces: how long the API takes to answer the panel's
 * Workspaces page (the default page of 100, a search sorted by CPU, a page deep in the list by
 * last activity), the Overview and the spec's `/admin/status`, against `/healthz` (one request and
 * a database round trip, the floor) in the same run. Served by a control plane with the parts a
 * deployment runs beside its API (the change feed, activity, the stats sampler, the idle sweep,
 * sessions; not the workspace controller, which would start 5,000 containers), signed in as an
 * admin with a real session; the class is mid-session: a mix of states, activity, CPU and memory
 * samples for the running ones, and runs in progress.
 *
 *   PATH=$PWD/node_modules/.bin:$PATH node bench/admin-views.ts
 *
 * Makes its own database `cp_bench_views` on the provisioned PostgreSQL and drops it at the end;
 * aborts after 10 minutes. REPS sets the requests per case (default 200).
 */
import { randomBytes } from 'node:crypto';
import { benchDatabase, controlPlane, deadline, median, percentile, signedSessionCookie, MID_SESSION_SQL } from './lib.ts';

const REPS = Math.max(20, Number(process.env.REPS ?? 200));
const SIZES = [500, 5000];

const { dataSource, drop } = await benchDatabase('cp_bench_views');
deadline(10 * 60_000, drop);
const secret = randomBytes(32).toString('hex');
const { plane, store, metrics } = controlPlane(dataSource, {
  parts: ['changes', 'activity', 'http', 'stats', 'idle', 'sessions'],
  listen: { port: 0, host: '127.0.0.1' },
  sessionSecret: secret,
  allowlist: { isAllowed: () => true },
});

/** Makes the class `size` workspaces big, mid-session (see the file comment). */
async function grow(size: number, tag: string): Promise<void> {
  const [row] = (await dataSource.query('SELECT count(*)::int AS count FROM workspaces')) as { count: number }[];
  const count = row?.count ?? 0;
  for (let i = count; i < size; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, size - i) }, (_, j) => store.users.create({ email: `student${String(i + j).padStart(4, '0')}-${tag}@school.test` })),
    );
  }
  await dataSource.query(MID_SESSION_SQL);
  await dataSource.query(
    `INSERT INTO runs (workspace_id, status) SELECT id, 'queued' FROM workspaces w
      WHERE observed_state = 'running' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.workspace_id = w.id) AND random() < 0.2`,
  );
  // The stats sampler's last figures of the running workspaces: in the store where the code keeps
  // them there, else in its gauges (the code before the views moved into SQL).
  const running = (await dataSource.query("SELECT id FROM workspaces WHERE observed_state = 'running'")) as { id: string }[];
  const samples = running.map(({ id }, n) => ({ workspaceId: id, cpuPercent: (n * 37) % 100, memoryPercent: (n * 53) % 100 }));
  const list = (store as { workspaceList?: { recordStats(samples: unknown[]): Promise<void> } }).workspaceList;
  if (list) await list.recordStats(samples);
  else {
    for (const sample of samples) {
      metrics.containerCpuPercent.set({ workspace_id: sample.workspaceId }, sample.cpuPercent);
      metrics.containerMemoryPercent.set({ workspace_id: sample.workspaceId }, sample.memoryPercent);
    }
  }
  await dataSource.query('VACUUM ANALYZE');
}

/** Milliseconds of `REPS` requests of `path`, one after another (a warm-up first). */
async function time(origin: string, cookie: string, path: string): Promise<number[]> {
  const get = async () => {
    const response = await fetch(`${origin}${path}`, { headers: { cookie } });
    if (!response.ok) throw new Error(`${path} answered ${response.status}: ${await response.text()}`);
    await response.arrayBuffer();
  };
  for (let i = 0; i < 10; i++) await get();
  const times: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const started = performance.now();
    await get();
    times.push(performance.now() - started);
  }
  return times;
}

try {
  const tag = randomBytes(3).toString('hex');
  const { user: coach } = await store.users.create({ email: `coach-${tag}@school.test`, role: 'admin' });
  await plane.start();
  const origin = plane.http!.url;
  const cookie = await signedSessionCookie(dataSource, coach.id, secret);
  const CASES: [string, (size: number) => string][] = [
    ['GET /healthz (the floor)', () => '/healthz'],
    ['Workspaces: the first page (100)', () => '/admin/workspaces'],
    ['Workspaces: a search sorted by CPU', () => '/admin/workspaces?q=student1&sort=cpu&order=desc'],
    ['Workspaces: deep, by last activity', (size) => `/admin/workspaces?sort=lastActivity&order=desc&offset=${Math.floor(size * 0.8)}&limit=100`],
    ['GET /admin/overview', () => '/admin/overview'],
    ['GET /admin/status (every workspace)', () => '/admin/status'],
  ];
  for (const size of SIZES) {
    await grow(size, tag);
    console.log(`\n${size} workspaces, ${REPS} requests each:`);
    let floor = 0;
    for (const [name, path] of CASES) {
      const times = await time(origin, cookie, path(size));
      const p95 = percentile(times, 95);
      if (!floor) floor = p95;
      console.log(
        `  ${name.padEnd(40)} p50 ${median(times).toFixed(2).padStart(7)} ms  p95 ${p95.toFixed(2).padStart(7)} ms  (${(p95 / floor).toFixed(1).padStart(5)}× the floor)`,
      );
    }
  }
} finally {
  await plane.stop();
  await drop();
}
