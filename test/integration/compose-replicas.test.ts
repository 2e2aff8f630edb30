/**
 * Issue 23, the replicated deployment against real Docker, as an operator brings it up:
 * compose.yaml with compose.replicas.yaml, i.e. PostgreSQL, two control-plane replicas on the
 * host's loopback and HAProxy in front (the local base images: classroom-base/haproxy:2.6 is
 * Debian's haproxy). Through the balancer a student signs in and reaches the editor; requests go
 * to both replicas, one leads. The leader stopped (SIGTERM), then a rolling upgrade of both: no
 * request through the balancer fails, the other replica leads, the student's workspace keeps its
 * container. `compose down` leaves nothing.
 */
import { randomBytes } from 'node:crypto';
import { buildImages, deployment, ok, type Deployment } from '../helpers/compose.ts';
import { docker, eventually } from '../helpers/controllers.ts';
import { freePort } from '../helpers/server.ts';

const ADMIN_TOKEN = randomBytes(24).toString('hex');
const METRICS_TOKEN = randomBytes(24).toString('hex');
let deployed: Deployment;
let base = '';
/** Each replica's own address (on the host's loopback), by compose service. */
const replica: Record<'control' | 'control-b' | 'control-c', string> = { control: '', 'control-b': '', 'control-c': '' };
let cookie = '';
let slug = '';
let editorContainer = '';

/** What a replica's /metrics says of one metric, summed over its label sets whose labels contain `labels`. */
async function metric(service: keyof typeof replica, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${replica[service]}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => line.includes(labels))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

/** How many requests for the student's API a replica has served (they come only through the balancer). */
const servedThroughBalancer = (service: keyof typeof replica) => metric(service, 'http_request_duration_seconds_count', 'route="/u/:slug/api/workspace"');

/**
 * Whether the balancer sends `service` requests (its checks have passed twice since it started):
 * one request for the student's API through the balancer, then whether the replica's process has
 * served any.
 */
async function balancerSends(service: keyof typeof replica): Promise<boolean> {
  await (await fetch(`${base}/u/${slug}/api/workspace`, { headers: { cookie } })).arrayBuffer();
  return (await servedThroughBalancer(service)) > 0;
}

/** The replica that leads now (by its `leader` gauge), or undefined. */
async function leader(): Promise<keyof typeof replica | undefined> {
  for (const service of ['control', 'control-b', 'control-c'] as const) if ((await metric(service, 'leader').catch(() => 0)) === 1) return service;
  return undefined;
}

/**
 * GET requests through the balancer, one after another, until `during` has settled: how many were
 * sent and which failed (not a 200). A student's page, the admin API and the health check in turn.
 */
async function steadyRequests(during: Promise<unknown>): Promise<{ sent: number; failed: string[] }> {
  let done = false;
  void during.finally(() => (done = true));
  const targets: [string, Record<string, string>][] = [
    [`${base}/u/${slug}/api/workspace`, { cookie }],
    [`${base}/admin/status`, { authorization: `Bearer ${ADMIN_TOKEN}` }],
    [`${base}/healthz`, {}],
  ];
  const failed: string[] = [];
  let sent = 0;
  // Bounded: the longest step (a replica's stop and a new one's start) takes well under this.
  for (const deadline = Date.now() + 180_000; !done && Date.now() < deadline; sent++) {
    const [url, headers] = targets[sent % targets.length]!;
    try {
      const answer = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
      await answer.arrayBuffer();
      if (answer.status !== 200) failed.push(`${url}: ${answer.status}`);
    } catch (error) {
      // undici's "fetch failed" says why in its cause (a reset, a closed socket).
      failed.push(`${url}: ${String(error)}${error instanceof Error && error.cause ? ` (${String(error.cause)})` : ''}`);
    }
  }
  await during;
  // A failure shows what the balancer did meanwhile (a request a line: which replica, how it ended).
  if (failed.length > 0)
    console.log(
      `the balancer's log:\n${(await ok('docker', ['logs', '--tail', '200', (await deployed.container('lb'))!], { timeoutMs: 10_000 }).catch(String)).trim()}`,
    );
  return { sent, failed };
}

/** The student's editor container: its id and when it started. */
async function editor(): Promise<{ id: string; startedAt: string }> {
  const info = await docker.getContainer(editorContainer).inspect();
  return { id: info.Id, startedAt: info.State.StartedAt };
}

beforeAll(async () => {
  const [port, dbPort, portA, portB, portC] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  base = `http://127.0.0.1:${port}`;
  replica.control = `http://127.0.0.1:${portA}`;
  replica['control-b'] = `http://127.0.0.1:${portB}`;
  replica['control-c'] = `http://127.0.0.1:${portC}`;
  deployed = await deployment(['compose.yaml', 'compose.replicas.yaml'], {
    PORT: String(port),
    DB_PORT: String(dbPort),
    CONTROL_A_PORT: String(portA),
    CONTROL_B_PORT: String(portB),
    CONTROL_C_PORT: String(portC),
    HAPROXY_IMAGE: 'classroom-base/haproxy:2.6',
    PUBLIC_URL: base,
    ADMIN_TOKEN,
    METRICS_TOKEN,
  });
  await buildImages();
  const up = await deployed.compose(['up', '-d', '--no-build'], 180_000);
  if (up.code !== 0) throw new Error(`compose up failed (${up.code}):\n${up.stdout}${up.stderr}`);
}, 20 * 60_000);

afterAll(async () => {
  await deployed?.cleanup();
}, 150_000);

it('serves through the balancer once both replicas answer, one of them leading', async () => {
  await eventually('/healthz through the balancer', async () => (await fetch(`${base}/healthz`)).status === 200, 90_000);
  for (const service of ['control', 'control-b'] as const) {
    await eventually(`${service}'s /healthz`, async () => (await fetch(`${replica[service]}/healthz`)).status === 200, 90_000);
  }
  await eventually('a leader', async () => (await leader()) !== undefined, 30_000);
  const gauges = await Promise.all((['control', 'control-b'] as const).map((service) => metric(service, 'leader')));
  expect(gauges.toSorted((x, y) => x - y)).toEqual([0, 1]);
  // Only the balancer is reachable from outside the host's loopback, as the single control plane was.
  const { HostConfig } = await docker.getContainer((await deployed.container('lb'))!).inspect();
  expect(HostConfig.NetworkMode).toBe('host');
}, 150_000);

it('signs a student in through the balancer and serves the editor, the requests spread over both replicas', async () => {
  const control = (await deployed.container('control'))!;
  const email = `ada-${deployed.project}@school.test`;
  await ok('docker', ['exec', control, 'cli', 'allowlist', 'add', email], { timeoutMs: 60_000 });
  const link = (await ok('docker', ['exec', control, 'cli', 'users', 'sign-in-link', email], { timeoutMs: 60_000 })).split('\n')[0]!;
  // PUBLIC_URL: the balancer's address, whichever replica made the link.
  expect(link.startsWith(`${base}/auth/link/`)).toBe(true);
  const signedIn = await fetch(link, { method: 'POST', headers: { origin: base }, redirect: 'manual' });
  expect(signedIn.status).toBe(303);
  cookie = signedIn.headers
    .getSetCookie()
    .map((line) => line.split(';')[0])
    .join('; ');
  slug = email.split('@')[0]!;
  expect((await fetch(`${base}/u/${slug}/api/workspace/open`, { method: 'POST', headers: { cookie, origin: base } })).status).toBe(202);
  await eventually(
    'the editor through the balancer',
    async () => (await (await fetch(`${base}/u/${slug}/`, { headers: { cookie } })).text()).includes('editor stand-in'),
    90_000,
  );
  const [found] = await docker.listContainers({ filters: { label: [`service.control-plane=${deployed.project}`, 'service.role=code'] } });
  editorContainer = found!.Id;

  // The student's API, through the balancer twenty times: both replicas answered some.
  const before = await Promise.all((['control', 'control-b'] as const).map(servedThroughBalancer));
  for (let i = 0; i < 20; i++) expect((await fetch(`${base}/u/${slug}/api/workspace`, { headers: { cookie } })).status).toBe(200);
  const after = await Promise.all((['control', 'control-b'] as const).map(servedThroughBalancer));
  expect(after[0]! + after[1]! - before[0]! - before[1]!).toBe(20);
  expect(after[0]! - before[0]!).toBeGreaterThan(0);
  expect(after[1]! - before[1]!).toBeGreaterThan(0);
}, 180_000);

it('loses no request through the balancer when the leader is stopped, and the other replica leads; the workspace keeps its container', async () => {
  const was = (await leader())!;
  const other = was === 'control' ? 'control-b' : 'control';
  const before = await editor();
  const { sent, failed } = await steadyRequests(deployed.compose(['stop', '-t', '30', was], 60_000));
  expect(failed).toEqual([]);
  expect(sent).toBeGreaterThan(10);
  await eventually(`${other} to lead`, async () => (await leader()) === other, 30_000);
  expect(await editor()).toEqual(before);
  expect((await deployed.compose(['start', was], 60_000)).code).toBe(0);
  await eventually(`${was}'s /healthz`, async () => (await fetch(`${replica[was]}/healthz`)).status === 200, 90_000);
  await eventually(`the balancer to send ${was} requests again`, () => balancerSends(was), 30_000);
}, 240_000);

it('upgrades through the third place (docs/operations.md) without a failed request or a restarted workspace', async () => {
  const before = await editor();
  // The new release on the free place, the first old replica replaced on its place, the other stopped.
  const steps: [string, string[], keyof typeof replica | undefined][] = [
    ['start control-c', ['up', '-d', '--no-build', '--no-deps', 'control-c'], 'control-c'],
    ['replace control', ['up', '-d', '--no-build', '--no-deps', '--force-recreate', 'control'], 'control'],
    ['stop control-b', ['stop', 'control-b'], undefined],
  ];
  for (const [name, args, started] of steps) {
    const step = (async () => {
      const done = await deployed.compose(args, 120_000);
      if (done.code !== 0) throw new Error(`${name} failed:\n${done.stdout}${done.stderr}`);
      if (!started) return;
      await eventually(`the new ${started}'s /healthz`, async () => (await fetch(`${replica[started]}/healthz`)).status === 200, 90_000);
      // As the procedure says: the next step waits until the balancer sends this one requests
      // (its checks pass twice); before that, the next stop could leave the balancer no replica.
      await eventually(`the balancer to send the new ${started} requests`, () => balancerSends(started), 30_000);
    })();
    const { failed } = await steadyRequests(step);
    expect({ name, failed }).toEqual({ name, failed: [] });
  }
  await eventually('a leader', async () => (await leader()) !== undefined, 30_000);
  expect(await editor()).toEqual(before);
}, 400_000);

it('compose down removes every container, volume and network it made', async () => {
  const down = await deployed.compose(['--profile', 'upgrade', 'down', '-v', '--remove-orphans', '-t', '10'], 120_000);
  expect(down.code).toBe(0);
  expect(await deployed.leftovers()).toEqual([`network ${deployed.workspaceNetwork}`]);
}, 150_000);
