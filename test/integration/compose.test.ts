/**
 * The production deployment against real Docker: the image the Dockerfile makes, on the local base
 * images (scripts/build-control-image.sh with LOCAL_BASE=1, which runs scripts/build-base-images.sh:
 * no container registry here), brought up by compose.yaml with PostgreSQL and the Docker socket,
 * exactly as an operator does (Debian's docker-compose, or `docker compose` where it exists;
 * scripts/provision.sh installs it). The images are cached by the hash of their inputs: a warm run
 * builds nothing. Everything compose makes belongs to a project of this run's own name (its
 * containers, volumes and networks; the control plane listens on the host's loopback on a free
 * port, in the host's network namespace), and `compose down` removes it; the last test checks that
 * nothing is left. The images stay, as the test image does, for the next run.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { engineClient } from '../../src/docker/docker-runtime.ts';
import { removeEverything } from '../helpers/controllers.ts';
import { buildImages, CONTROL_IMAGE as IMAGE, deployment, ok, run, type Deployment } from '../helpers/compose.ts';
import { freePort } from '../helpers/server.ts';

const docker = engineClient();
const dockerGid = statSync('/var/run/docker.sock').gid;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let deployed: Deployment;
let project = '';
let workspaceNetwork = '';
let container = '';
let base = '';
const compose = (args: string[], timeoutMs: number) => deployed.compose(args, timeoutMs);
const leftovers = () => deployed.leftovers();

beforeAll(async () => {
  const [port, dbPort] = [await freePort(), await freePort()];
  // The host's loopback; the ports are free ones, chosen before the start.
  deployed = await deployment(['compose.yaml'], { PORT: String(port), DB_PORT: String(dbPort) });
  ({ project, workspaceNetwork } = deployed);
  base = `http://127.0.0.1:${port}`;

  // Provisioning built it (scripts/provision.sh): a no-op check then, well under a second. Run
  // alone on a fresh machine, about two minutes (Debian roots, npm ci).
  await buildImages();

  const up = await compose(['up', '-d', '--no-build'], 180_000);
  if (up.code !== 0) throw new Error(`compose up failed (${up.code}):\n${up.stdout}${up.stderr}`);
  const control = await deployed.container('control');
  if (!control) throw new Error('compose up made no control container');
  container = control;
}, 20 * 60_000);

afterAll(async () => {
  // The last test does this and checks it; here only in case a test before it failed.
  await deployed?.cleanup();
}, 150_000);

test('the image holds the production dependencies and the sources only, runs bin/server as node, with a health check', async () => {
  const image = await docker.getImage(IMAGE).inspect();
  expect(image.Config.User).toBe('node');
  expect(image.Config.Cmd).toEqual(['bin/server']);
  expect(image.Config.Entrypoint ?? []).toEqual([]);
  expect(image.Config.Healthcheck?.Test?.join(' ')).toContain('/healthz');
  expect(image.Config.Labels?.['service.control-image-hash']).toMatch(/^[0-9a-f]{16}$/);
  // Node 24 on Debian (213 MB), git for imports (about 115 MB with the perl it needs) and the
  // production dependencies (about 75 MB, esbuild's WebAssembly 14 MB of it): dev dependencies
  // would add hundreds of MB.
  expect(image.Size).toBeLessThan(420_000_000);

  const listing = await ok(
    'docker',
    ['exec', container, 'sh', '-c', 'cd /app && ls -A && echo --- && ls node_modules && echo --- && find . -name "*.test.ts" ! -path "./node_modules/*"'],
    { timeoutMs: 30_000 },
  );
  const [top = '', modules = '', tests = ''] = listing.split('---\n');
  expect(top.split('\n').filter(Boolean)).toEqual([
    'api',
    'bin',
    'controllers',
    'images',
    'migrations',
    'node_modules',
    'package-lock.json',
    'package.json',
    'src',
  ]);
  const installed = new Set(modules.split('\n'));
  for (const name of ['koa', 'typeorm', 'pg', 'dockerode', '@oclif']) expect(installed).toContain(name);
  for (const name of ['jest', 'typescript', 'node', 'prettier', 'oxlint', '@swc', 'playwright-core', 'nock']) expect(installed).not.toContain(name);
  expect(tests).toBe('');
  // What an import of a team's project runs on the control plane's host (src/import/clone.ts): git 2.37 or later, prlimit.
  const tools = await ok('docker', ['exec', container, 'sh', '-c', 'git --version && prlimit --version'], { timeoutMs: 30_000 });
  const [major = 0, minor = 0] = (/git version (\d+)\.(\d+)/.exec(tools)?.slice(1) ?? []).map(Number);
  expect(major * 1000 + minor).toBeGreaterThanOrEqual(2037);
  expect(tools).toContain('prlimit from util-linux');
  // The workspace page's Driver Station, bundled at its first request from what the image holds (api/driver-station.ts).
  const driverStation = await ok(
    'docker',
    [
      'exec',
      container,
      'node',
      '--input-type=module',
      '-e',
      "const { driverStationPage } = await import('/app/api/driver-station.ts'); const page = await driverStationPage(); console.log(page.body.length, page.policy)",
    ],
    { timeoutMs: 60_000 },
  );
  expect(driverStation).toMatch(/^\d{6,} default-src 'none'; script-src 'sha256-/);
});

test('answers /healthz on loopback only, once its database is up', async () => {
  const deadline = Date.now() + 90_000;
  let last = 'no attempt';
  let body: unknown;
  while (Date.now() < deadline && body === undefined) {
    try {
      const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) body = await res.json();
      else last = `status ${res.status}`;
    } catch (error) {
      last = String(error);
    }
    if (body === undefined) await sleep(250);
  }
  expect(body ?? last).toMatchObject({ ok: true, service: 'workspace-control-plane', checks: { database: 'ok' } });
  // In the host's network namespace, listening on its loopback only: another address of the host does not answer.
  expect((await docker.getContainer(container).inspect()).HostConfig.NetworkMode).toBe('host');
  const other = Object.values(networkInterfaces())
    .flat()
    .find((address) => address?.family === 'IPv4' && !address.internal)?.address;
  expect(other).toBeDefined();
  await expect(fetch(`http://${other}:${new URL(base).port}/healthz`, { signal: AbortSignal.timeout(2000) })).rejects.toThrow();
  // PostgreSQL too: published on the host's loopback only.
  const db = (await docker.listContainers({ filters: { label: [`com.docker.compose.project=${project}`, 'com.docker.compose.service=db'] } }))[0]!;
  expect(db.Ports.filter((binding) => binding.PublicPort).map((binding) => binding.IP)).toEqual(['127.0.0.1']);
}, 120_000);

test("runs as uid 1000 and reaches the Docker socket through the socket's group only", async () => {
  const id = await ok('docker', ['exec', container, 'id'], { timeoutMs: 30_000 });
  expect(id).toMatch(/^uid=1000\(node\) gid=1000\(node\)/);
  expect(id).toMatch(new RegExp(`groups=.*\\b${dockerGid}\\b`));
  const ping =
    "require('node:http').get({ socketPath: '/var/run/docker.sock', path: '/_ping' }, (r) => { let b = ''; r.on('data', (d) => (b += d)).on('end', () => console.log(r.statusCode, b)); }).on('error', (e) => console.log('error', e.code))";
  expect((await ok('docker', ['exec', container, 'node', '-e', ping], { timeoutMs: 30_000 })).trim()).toBe('200 OK');
  // Nor did the server meet a refusal from the engine.
  const logs = await run('docker', ['logs', container], { timeoutMs: 30_000 });
  expect(`${logs.stdout}${logs.stderr}`).not.toMatch(/EACCES|permission denied/i);
});

test('the CLI works in the running container: docker exec … cli', async () => {
  const status = await run('docker', ['exec', container, 'cli', 'status'], { timeoutMs: 60_000 });
  expect(status).toMatchObject({ code: 0, stderr: '' });
  expect(status.stdout).toContain('Capacity: 0 running, 0 wanted running, cap 10');
  const set = await run('docker', ['exec', container, 'cli', 'cap', 'set', '7'], { timeoutMs: 60_000 });
  expect(set).toMatchObject({ code: 0, stdout: 'The cap is 7 (was 10).\n' });
  // A refusal: its exit code and one line on stderr, as on a checkout.
  const unknown = await run('docker', ['exec', container, 'cli', 'users', 'promote', 'nobody@example.org'], { timeoutMs: 60_000 });
  expect(unknown.code).toBe(3);
  expect(unknown.stderr).toMatch(/^Error: /);
});

test('serves a class: a student signs in with a link from the CLI, opens the workspace, and reaches the editor through the proxy', async () => {
  const email = `ada-${project}@school.test`;
  await ok('docker', ['exec', container, 'cli', 'allowlist', 'add', email], { timeoutMs: 60_000 });
  const link = (await ok('docker', ['exec', container, 'cli', 'users', 'sign-in-link', email], { timeoutMs: 60_000 })).split('\n')[0]!;
  // The running server's own address, not a guess of the CLI's.
  expect(link.startsWith(`${base}/auth/link/`)).toBe(true);
  const signedIn = await fetch(link, { method: 'POST', headers: { origin: base }, redirect: 'manual' });
  expect(signedIn.status).toBe(303);
  const cookie = signedIn.headers
    .getSetCookie()
    .map((line) => line.split(';')[0])
    .join('; ');
  const slug = email.split('@')[0]!;
  const open = await fetch(`${base}/u/${slug}/api/workspace/open`, { method: 'POST', headers: { cookie, origin: base } });
  expect(open.status).toBe(202);
  // The controller in the deployment starts the editor; the proxy then serves it at /u/<slug>/.
  const deadline = Date.now() + 90_000;
  let page = '';
  while (Date.now() < deadline && !page.includes('editor stand-in')) {
    page = await (await fetch(`${base}/u/${slug}/`, { headers: { cookie } })).text();
    if (!page.includes('editor stand-in')) await sleep(250);
  }
  expect(page).toContain('editor stand-in: /');
}, 120_000);

test("backs up the database and /data as docs/operations.md's Production section says", async () => {
  const dump = await compose(['exec', '-T', 'db', 'pg_dump', '-U', 'control', '-Fc', 'control'], 60_000);
  expect({ code: dump.code, stderr: dump.stderr, header: dump.stdout.slice(0, 5) }).toEqual({ code: 0, stderr: '', header: 'PGDMP' });
  const out = mkdtempSync(path.join(tmpdir(), 'compose-backup-'));
  const data = ['run', '--rm', '--user', '0', '-v', `${project}_control-data:/data:ro`, '-v', `${out}:/out`, '--entrypoint', 'tar'];
  await ok('docker', [...data, IMAGE, '-czf', '/out/control-data.tar.gz', '-C', '/data', '.'], { timeoutMs: 60_000 });
  expect(readFileSync(path.join(out, 'control-data.tar.gz')).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
  rmSync(out, { recursive: true, force: true });
});

test("Docker reports the image's health check healthy", async () => {
  // Its first check comes 10 s (the interval) after the start: the tests above took part of that.
  const deadline = Date.now() + 90_000;
  let status = '';
  while (Date.now() < deadline) {
    status = (await docker.getContainer(container).inspect()).State.Health?.Status ?? 'none';
    if (status === 'healthy' || status === 'unhealthy') break;
    await sleep(500);
  }
  expect(status).toBe('healthy');
}, 120_000);

test('with the server stopped: compose run --rm control cli …, on the same database', async () => {
  const stop = await compose(['stop', '-t', '30', 'control'], 60_000);
  expect(stop.code).toBe(0);
  const state = (await docker.getContainer(container).inspect()).State;
  // It ended on SIGTERM by itself (0), not killed by Docker after the timeout (137).
  expect({ running: state.Running, exitCode: state.ExitCode }).toEqual({ running: false, exitCode: 0 });

  // The cap set through docker exec above, read from the database by a one-off container.
  const status = await compose(['run', '--rm', '-T', 'control', 'cli', 'status', '--json'], 120_000);
  expect(status.code).toBe(0);
  expect(JSON.parse(status.stdout)).toMatchObject({ capacity: { cap: 7 }, workspaces: [{ desiredState: 'running' }], servers: [] });
  // --rm: the one-off containers are gone; the stopped server's container is all that is left of control.
  const controls = await docker.listContainers({
    all: true,
    filters: { label: [`com.docker.compose.project=${project}`, 'com.docker.compose.service=control'] },
  });
  expect(controls.map((c) => c.Id)).toEqual([container]);
}, 300_000);

test('compose down removes every container, volume and network it made', async () => {
  expect((await leftovers()).length).toBeGreaterThan(0);
  const down = await compose(['down', '-v', '--remove-orphans', '-t', '10'], 120_000);
  expect(down.code).toBe(0);
  // What the control plane made (the student's container and home, the workspace network) is not
  // compose's: the operator removes it as docs/operations.md says, once the class is over.
  expect(await leftovers()).toEqual([`network ${workspaceNetwork}`]);
  await removeEverything(project);
  await ok('docker', ['network', 'rm', workspaceNetwork], { timeoutMs: 60_000 });
  expect(await leftovers()).toEqual([]);
}, 150_000);
