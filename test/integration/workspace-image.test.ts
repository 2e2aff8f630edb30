/**
 * The workspace image students work in (images/workspace, classroom-workspace:latest) against real
 * Docker: the image built by scripts/build-workspace-image.sh (called in beforeAll: a no-op when it
 * is up to date, minutes when it is not), run the way the control plane runs it (the home volume at
 * /home/student, `Init: true`, EDITOR_PORT for the editor, `sh -c "$SIM_COMMAND"` with NT4_PORT for
 * a simulator). Containers and volumes carry the label service.test=workspace-image and a name
 * prefix of this run, publish on 127.0.0.1 only, and are removed by name afterwards.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import type { Browser } from 'playwright-core';
import { engineClient } from '../../src/docker/docker-runtime.ts';
import { launchBrowser, withPage } from '../helpers/browser.ts';

const IMAGE = 'classroom-workspace:latest';
const HOME = '/home/student';
const LABELS = { 'service.test': 'workspace-image' };
const projectRoot = path.resolve(import.meta.dirname, '../..');
const run = promisify(execFile);
const docker = engineClient();
const prefix = `workspace-image-${process.pid}-${Date.now().toString(36)}`;
const containers: string[] = [];
const volumes: string[] = [];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function newVolume(suffix: string): Promise<string> {
  const name = `${prefix}-${suffix}`;
  volumes.push(name);
  await docker.createVolume({ Name: name, Labels: LABELS });
  return name;
}

interface Options {
  volume?: string;
  cmd?: string[];
  env?: string[];
  user?: string;
  entrypoint?: string[];
  /** A container port to publish on 127.0.0.1. */
  port?: number;
}

/** Creates and starts a container as the control plane would (home volume, Init); returns it and its published port. */
async function start(suffix: string, options: Options = {}): Promise<{ container: Docker.Container; port: number }> {
  const name = `${prefix}-${suffix}`;
  containers.push(name);
  const exposed = options.port ? `${options.port}/tcp` : undefined;
  const container = await docker.createContainer({
    name,
    Image: IMAGE,
    Env: options.env ?? [],
    Labels: LABELS,
    ...(options.cmd ? { Cmd: options.cmd, WorkingDir: HOME } : {}),
    ...(options.user ? { User: options.user } : {}),
    ...(options.entrypoint ? { Entrypoint: options.entrypoint } : {}),
    ...(exposed ? { ExposedPorts: { [exposed]: {} } } : {}),
    HostConfig: {
      Init: true,
      Mounts: options.volume ? [{ Type: 'volume', Source: options.volume, Target: HOME }] : [],
      ...(exposed ? { PortBindings: { [exposed]: [{ HostIp: '127.0.0.1', HostPort: '' }] } } : {}),
    },
  });
  await container.start();
  let port = 0;
  if (exposed) {
    const hostPort = (await container.inspect()).NetworkSettings.Ports[exposed]?.[0]?.HostPort;
    if (!hostPort) throw new Error(`no host port bound for ${exposed} of ${name}`);
    port = Number(hostPort);
  }
  return { container, port };
}

/** stdout and stderr of a non-TTY container, demultiplexed from Docker's framed stream. */
async function logs(container: Docker.Container): Promise<{ stdout: string; stderr: string }> {
  const raw = (await container.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  for (let at = 0; at + 8 <= raw.length;) {
    const size = raw.readUInt32BE(at + 4);
    (raw[at] === 2 ? err : out).push(raw.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return { stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
}

/** Runs a command container to its end: its exit code and output. */
async function runCommand(suffix: string, cmd: string[], options: Omit<Options, 'cmd'> = {}) {
  const { container } = await start(suffix, { ...options, cmd });
  let timer: NodeJS.Timeout | undefined;
  const { StatusCode } = await Promise.race([
    container.wait() as Promise<{ StatusCode: number }>,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${suffix} did not exit within 60 s`)), 60_000);
    }),
  ]).finally(() => clearTimeout(timer));
  return { code: StatusCode, ...(await logs(container)) };
}

/** Polls a URL until it answers with a status below 500; returns the answer. */
async function waitForHttp(url: string, timeoutMs: number): Promise<Response> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no attempt';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(2000) });
      if (res.status < 500) return res;
      last = `status ${res.status}`;
    } catch (error) {
      last = String(error);
    }
    await sleep(250);
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms (last: ${last})`);
}

beforeAll(async () => {
  try {
    await run('bash', [path.join(projectRoot, 'scripts/build-workspace-image.sh')], {
      env: { ...process.env, WORKSPACE_IMAGE_TAG: IMAGE },
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(`scripts/build-workspace-image.sh failed:\n${stdout}${stderr}`, { cause: error });
  }
}, 30 * 60_000);

afterAll(async () => {
  for (const name of containers)
    await docker
      .getContainer(name)
      .remove({ force: true, v: true })
      .catch(() => undefined);
  for (const name of volumes)
    await docker
      .getVolume(name)
      .remove()
      .catch(() => undefined);
});

test('runs as uid 1000 in /home/student through the entrypoint', async () => {
  const { Config } = await docker.getImage(IMAGE).inspect();
  expect(Config.User).toBe('1000:1000');
  expect(Config.WorkingDir).toBe(HOME);
  expect(Config.Entrypoint).toEqual(['/usr/local/bin/workspace-entrypoint']);
  expect(Config.Labels?.['service.workspace-image-hash']).toMatch(/^[0-9a-f]{16}$/);
  const result = await runCommand('whoami', ['sh', '-c', 'id -u; id -g; id -un; echo "$HOME"; pwd']);
  expect(result).toMatchObject({ code: 0, stdout: `1000\n1000\nstudent\n${HOME}\n${HOME}\n` });
});

test('runs a command as a sim container would, in /home/student, and copies nothing into an empty home', async () => {
  const volume = await newVolume('sim-empty');
  const result = await runCommand('sim-command', ['sh', '-c', 'java -version && git --version && pwd && ls -A'], { volume, env: ['NT4_PORT=5810'] });
  expect(result.code).toBe(0);
  expect(result.stderr).toMatch(/openjdk version "17\./);
  // The command's output only: no code-server, and the empty home stays empty.
  expect(result.stdout).toMatch(new RegExp(`^git version [0-9.]+\\n${HOME}\\n$`));
});

test('holds no build tools, npm or package lists', async () => {
  const script =
    'for c in gcc cc make npm python3; do if command -v "$c" >/dev/null; then echo "has $c"; fi; done; ls -A /var/lib/apt/lists; find / -xdev \\( -name "*.deb" -o -name _cacache \\) -print 2>/dev/null; true';
  const result = await runCommand('lean', ['sh', '-c', script]);
  expect(result).toMatchObject({ code: 0, stdout: '' });
});

describe('a fresh workspace (an empty volume)', () => {
  const editorPort = 8123;
  let volume: string;
  let base: string;

  beforeAll(async () => {
    volume = await newVolume('fresh');
    // A port other than the default, as the control plane's EDITOR_PORT may be.
    const editor = await start('fresh-code', { volume, env: [`EDITOR_PORT=${editorPort}`], port: editorPort });
    base = `http://127.0.0.1:${editor.port}`;
    await waitForHttp(`${base}/healthz`, 60_000);
  }, 90_000);

  test('gets the starter project, owned by uid 1000, and code-server answers on EDITOR_PORT', async () => {
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: expect.any(String) });
    const front = await fetch(`${base}/`, { redirect: 'manual' });
    expect([200, 302]).toContain(front.status);

    const listing = await runCommand(
      'fresh-list',
      [
        'sh',
        '-c',
        'ls -A; echo ---; find . -xdev ! -uid 1000 -o -xdev ! -gid 1000; echo ---; test -x gradlew && echo gradlew-executable; grep -c "extends TimedRobot" src/main/java/frc/robot/Robot.java',
      ],
      { volume },
    );
    expect(listing.code).toBe(0);
    const [names = '', notOwned = '', checks = ''] = listing.stdout.split('---\n');
    expect(names.split('\n')).toEqual(expect.arrayContaining(['README.md', 'build.gradle', 'settings.gradle', 'gradlew', 'src', '.bashrc']));
    expect(notOwned).toBe('');
    expect(checks).toBe('gradlew-executable\n1\n');
  });

  test('loads the workbench in Chromium straight from the container', async () => {
    let browser: Browser | undefined;
    try {
      browser = await launchBrowser();
      await withPage(browser, async (page) => {
        await page.goto(`${base}/`, { timeout: 30_000 });
        await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60_000 });
        // The explorer shows the starter project from the volume.
        await page.locator('.explorer-folders-view').getByText('README.md', { exact: true }).waitFor({ timeout: 30_000 });
        expect(await page.locator('.monaco-workbench').isVisible()).toBe(true);
        // VS Code names the window after the folder it opened.
        expect(await page.title()).toContain('student');
      });
    } finally {
      await browser?.close();
    }
  }, 120_000);

  test('./gradlew simulateJava (the default SIM_COMMAND) compiles the starter and answers on NT4_PORT', async () => {
    const sim = await start('fresh-sim', { volume, cmd: ['sh', '-c', './gradlew simulateJava'], env: ['NT4_PORT=5810'], port: 5810 });
    const answer = await waitForHttp(`http://127.0.0.1:${sim.port}/`, 60_000);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ alive: true, standIn: true, values: expect.any(Object) });
    await sim.container.stop({ t: 5 });
    const { stdout } = await logs(sim.container);
    expect(stdout).toContain('> Task :compileJava');
    expect(stdout).toContain('Robot program started. Hello from Robot.java!');
  }, 90_000);
});

test('leaves a non-empty home alone', async () => {
  const volume = await newVolume('used');
  const seed = await runCommand('used-seed', ['sh', '-c', 'mkdir -p robot && echo mine > robot/Notes.java'], { volume });
  expect(seed.code).toBe(0);
  const editor = await start('used-code', { volume, port: 8080 });
  await waitForHttp(`http://127.0.0.1:${editor.port}/healthz`, 60_000);
  const listing = await runCommand('used-list', ['sh', '-c', 'ls -A; cat robot/Notes.java'], { volume });
  expect(listing.code).toBe(0);
  expect(listing.stdout).toContain('mine\n');
  expect(listing.stdout).not.toMatch(/^(README\.md|build\.gradle|gradlew|src)$/m);
  expect((await logs(editor.container)).stderr).not.toContain('copied the starter project');
}, 90_000);

test('started as root, gives the home back to uid 1000 and drops to it', async () => {
  const volume = await newVolume('root-owned');
  const seed = await runCommand('root-seed', ['touch /home/student/made-by-root && chown 0:0 /home/student'], {
    volume,
    user: '0',
    entrypoint: ['/bin/sh', '-c'],
  });
  expect(seed.code).toBe(0);
  const result = await runCommand('root-repair', ['sh', '-c', 'id -u; stat -c %u:%g . made-by-root'], { volume, user: '0' });
  expect(result).toMatchObject({ code: 0, stdout: '1000\n1000:1000\n1000:1000\n' });
  expect(result.stderr).toContain('gave 2 entries of /home/student to uid 1000');
});
