/**
 * The workspace image students work in (images/workspace, classroom-workspace:latest) against real
 * Docker: the image built by scripts/build-workspace-image.sh (called in beforeAll: a no-op when it
 * is up to date, minutes when it is not), run the way the control plane runs it (the home volume at
 * /home/student, `Init: true`, EDITOR_PORT for the editor, `sh -c "$SIM_COMMAND"` with NT4_PORT for
 * a simulator, with HALSIMWS_PORT and HALSIMWS_URI for its HALSim WebSocket). Containers and
 * volumes carry the label service.test=workspace-image and a name prefix of this run, publish on
 * 127.0.0.1 only, and are removed by name afterwards.
 *
 * The stand-in robot of the image is driven as the editor's Driver Station drives it (WPILib's
 * HALSim WebSocket protocol) and read as dashboards read it (NetworkTables 4), straight at its
 * container's published ports.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import type { Browser } from 'playwright-core';
import { engineClient } from '../../src/docker/docker-runtime.ts';
import { launchBrowser, withPage } from '../helpers/browser.ts';
import { HalSimClient, Nt4Client } from '../helpers/robot-protocols.ts';

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
  /** Container ports to publish on 127.0.0.1. */
  ports?: number[];
}

/**
 * Creates and starts a container as the control plane would (home volume, Init); returns it and
 * the host ports its ports are published on (`port`: the first one's).
 */
async function start(suffix: string, options: Options = {}): Promise<{ container: Docker.Container; port: number; ports: Map<number, number> }> {
  const name = `${prefix}-${suffix}`;
  containers.push(name);
  const exposed = (options.ports ?? []).map((port) => `${port}/tcp`);
  const container = await docker.createContainer({
    name,
    Image: IMAGE,
    Env: options.env ?? [],
    Labels: LABELS,
    ...(options.cmd ? { Cmd: options.cmd, WorkingDir: HOME } : {}),
    ...(options.user ? { User: options.user } : {}),
    ...(options.entrypoint ? { Entrypoint: options.entrypoint } : {}),
    ExposedPorts: Object.fromEntries(exposed.map((port) => [port, {}])),
    HostConfig: {
      Init: true,
      Mounts: options.volume ? [{ Type: 'volume', Source: options.volume, Target: HOME }] : [],
      PortBindings: Object.fromEntries(exposed.map((port) => [port, [{ HostIp: '127.0.0.1', HostPort: '' }]])),
    },
  });
  await container.start();
  const ports = new Map<number, number>();
  const published = exposed.length > 0 ? (await container.inspect()).NetworkSettings.Ports : {};
  for (const port of options.ports ?? []) {
    const hostPort = published[`${port}/tcp`]?.[0]?.HostPort;
    if (!hostPort) throw new Error(`no host port bound for ${port}/tcp of ${name}`);
    ports.set(port, Number(hostPort));
  }
  return { container, port: ports.get(options.ports?.[0] ?? -1) ?? 0, ports };
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

/** A container's output (stdout and stderr) as it is written: what came so far, and a wait for a line. */
async function follow(container: Docker.Container): Promise<{ text: () => string; until: (what: RegExp, ms?: number) => Promise<void> }> {
  const stream = (await container.logs({ stdout: true, stderr: true, follow: true })) as NodeJS.ReadableStream;
  const lines = new PassThrough();
  docker.modem.demuxStream(stream, lines, lines);
  let text = '';
  lines.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return {
    text: () => text,
    until: (what, ms = 15_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (!what.test(text)) return;
          clearTimeout(timer);
          lines.off('data', check);
          resolve();
        };
        const timer = setTimeout(() => {
          lines.off('data', check);
          reject(new Error(`${what} not in the output within ${ms} ms; its end:\n${text.slice(-2000)}`));
        }, ms);
        lines.on('data', check);
        check();
      }),
  };
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
    const editor = await start('fresh-code', { volume, env: [`EDITOR_PORT=${editorPort}`], ports: [editorPort] });
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
    const sim = await start('fresh-sim', { volume, cmd: ['sh', '-c', './gradlew simulateJava'], env: ['NT4_PORT=5810'], ports: [5810] });
    const output = await follow(sim.container);
    const answer = await waitForHttp(`http://127.0.0.1:${sim.port}/`, 60_000);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ alive: true, standIn: true, values: expect.any(Object) });
    // The robot's own line comes after the simulator listens: wait for it, not for the HTTP answer.
    await output.until(/Robot program started\. Hello from Robot\.java!/, 30_000);
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
  const editor = await start('used-code', { volume, ports: [8080] });
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

describe('the stand-in robot, driven over HALSim and read over NetworkTables 4', () => {
  const NT4_PORT = 5810;
  // Not WPILib's default (3300): the robot listens where HALSIMWS_PORT says.
  const HALSIM_PORT = 3301;
  const CHOOSER = '/SmartDashboard/Auto choices';
  let sim: Awaited<ReturnType<typeof start>>;
  let output: Awaited<ReturnType<typeof follow>>;
  let nt4: Nt4Client;
  let halsim: string;
  /** The Driver Station of the first tests. */
  let driver: HalSimClient;

  const connect = async () => {
    const client = await HalSimClient.connect(halsim);
    if (typeof client === 'number') throw new Error(`the robot refused a HALSim connection: ${client}`);
    return client;
  };
  const speed = (client: HalSimClient, channel: number) => client.state('PWM', String(channel))['<speed'] as number;
  const told = (client: HalSimClient) =>
    ['DriverStation/', 'Joystick/0', 'PWM/0', 'PWM/1'].every((key) => client.received.some((message) => `${message.type}/${message.device}` === key));

  beforeAll(async () => {
    // A home with the starter project, as a new workspace gets it.
    const volume = await newVolume('robot');
    const seed = await runCommand('robot-seed', ['sh', '-c', 'cp -a /usr/local/share/classroom/starter/. .'], { volume });
    if (seed.code !== 0) throw new Error(`copying the starter failed: ${seed.stdout}${seed.stderr}`);
    sim = await start('robot-sim', {
      volume,
      cmd: ['sh', '-c', './gradlew simulateJava'],
      env: [`NT4_PORT=${NT4_PORT}`, `HALSIMWS_PORT=${HALSIM_PORT}`, 'HALSIMWS_URI=/wpilibws'],
      ports: [NT4_PORT, HALSIM_PORT],
    });
    output = await follow(sim.container);
    await waitForHttp(`http://127.0.0.1:${sim.ports.get(NT4_PORT)}/`, 60_000);
    await output.until(/HALSim WebSocket on port 3301 at \/wpilibws/);
    nt4 = await Nt4Client.connect(`ws://127.0.0.1:${sim.ports.get(NT4_PORT)}/nt/workspace-image-test`);
    halsim = `ws://127.0.0.1:${sim.ports.get(HALSIM_PORT)}/wpilibws`;
  }, 90_000);

  afterAll(() => nt4?.close());

  test('starts disabled, and tells a Driver Station that connects the state of every device: DriverStation, joystick 0, both motors', async () => {
    expect(await nt4.until('/classroom/mode', (mode) => mode === 'disabled')).toBe('disabled');
    driver = await connect();
    await driver.until('every device told', told);
    expect(driver.state('DriverStation', '')).toEqual({
      '>enabled': false,
      '>autonomous': false,
      '>test': false,
      '>estop': false,
      '>fms': false,
      '>ds': false,
      '>station': 'unknown',
      '>match_time': -1,
      '>game_data': '',
    });
    expect(driver.state('Joystick', '0')).toEqual({ '>axes': [], '>buttons': [], '>povs': [], '<rumble_left': 0, '<rumble_right': 0 });
    expect(driver.state('PWM', '0')).toEqual({ '<init': true, '<speed': 0 });
    expect(driver.state('PWM', '1')).toEqual({ '<init': true, '<speed': 0 });
  });

  test('takes one Driver Station at a time, at HALSIMWS_URI only', async () => {
    expect(await HalSimClient.connect(halsim)).toBe(409);
    expect(await HalSimClient.connect(halsim.replace('/wpilibws', '/other'))).toBe(404);
  });

  test('ignores what is not a HALSim message of a type and key it knows, and keeps running', async () => {
    for (const bad of [
      'not json',
      '[1, 2]',
      '{"type": "DriverStation"}',
      `${'['.repeat(5000)}${']'.repeat(5000)}`,
      '{"type": "DriverStation", "device": "", "data": [true]}',
      { type: 'DriverStation', device: '7', data: { '>enabled': true, '>new_data': true } },
      { type: 'PWM', device: '0', data: { '<speed': 1, '>speed': 1 } },
      { type: 'Joystick', device: '9', data: { '>axes': [1] } },
      { type: 'Joystick', device: '0', data: { '>axes': ['fast'], '>buttons': [1], '>povs': [0.5] } },
    ])
      driver.send(bad);
    driver.socket.send(Buffer.from([1, 2, 3]), { binary: true });
    // A value of the wrong type is ignored; the rest of its message counts (the new data: the Driver Station attached).
    driver.driverStation({ '>enabled': 'yes', '>new_data': true });
    await driver.until('the Driver Station attached', (client) => client.state('DriverStation', '')['>ds'] === true);
    expect(driver.state('DriverStation', '')['>enabled']).toBe(false);
    expect(driver.state('Joystick', '0')['>axes']).toEqual([]);
    expect(nt4.values.get('/classroom/mode')).toBe('disabled');
    expect(driver.closed).toBeUndefined();
  });

  test('drives in teleop with the Xbox controller on port 0: both motors turn, the robot moves on the field', async () => {
    const before = (await nt4.until<number[]>(`/SmartDashboard/Field/Robot`, (pose) => pose.length === 3))[0]!;
    // Left stick forward (an Xbox controller's Y is negative forward), nothing else.
    driver.driveTeleop([0, -0.8, 0, 0, 0, 0]);
    await driver.until('both motors driving', (client) => speed(client, 0) > 0 && speed(client, 1) < 0);
    // WPILib's arcade drive: deadband 0.02, then squared; the right side is inverted.
    const expected = ((0.8 - 0.02) / 0.98) ** 2;
    expect(speed(driver, 0)).toBeCloseTo(expected, 6);
    expect(speed(driver, 1)).toBeCloseTo(-expected, 6);
    expect(driver.state('DriverStation', '')).toMatchObject({ '>enabled': true, '>autonomous': false, '>ds': true });
    expect(await nt4.until('/classroom/mode', (mode) => mode === 'teleop')).toBe('teleop');
    await nt4.until<number[]>('/SmartDashboard/Field/Robot', (pose) => pose[0]! > before + 0.5);
  });

  test('is disabled when its Driver Station goes away: the motors stop', async () => {
    await driver.close();
    expect(await nt4.until('/classroom/mode', (mode) => mode === 'disabled')).toBe('disabled');
    const next = await connect();
    await next.until('every device told', told);
    expect(next.state('DriverStation', '')).toMatchObject({ '>enabled': false, '>ds': false });
    expect(speed(next, 0)).toBe(0);
    expect(speed(next, 1)).toBe(0);
    await next.close();
  });

  test('runs the autonomous routine picked on the dashboard: a SendableChooser, its pick published back over NetworkTables 4', async () => {
    expect(await nt4.until(`${CHOOSER}/.type`, (type) => type === 'String Chooser')).toBe('String Chooser');
    expect(await nt4.until(`${CHOOSER}/options`, (options: string[]) => options.length === 2)).toEqual(['Drive forward', 'Drive and turn']);
    expect(nt4.values.get(`${CHOOSER}/default`)).toBe('Drive forward');
    expect(nt4.values.get(`${CHOOSER}/active`)).toBe('Drive forward');
    // Only a chooser's `selected` is taken from a client: another topic is not (never announced back).
    nt4.publishString('/SmartDashboard/Not a chooser', 'ignored');
    nt4.publishString(`${CHOOSER}/selected`, 'Drive and turn');
    await nt4.until(`${CHOOSER}/active`, (active) => active === 'Drive and turn');
    expect([...nt4.topics.values()]).toContain(`${CHOOSER}/selected`);
    expect([...nt4.topics.values()]).not.toContain('/SmartDashboard/Not a chooser');
    // Announced to its publisher once, with its pubuid, as WPILib's server does (not first without it, as to any subscriber).
    expect(nt4.announcements.filter((announced) => announced.name === `${CHOOSER}/selected`)).toEqual([{ name: `${CHOOSER}/selected`, pubuid: 2 }]);

    const auto = await connect();
    auto.driverStation({ '>enabled': true, '>autonomous': true, '>ds': true, '>new_data': true });
    await output.until(/Auto selected: Drive and turn/);
    expect(await nt4.until('/classroom/mode', (mode) => mode === 'autonomous')).toBe('autonomous');
    // Forward at 0.6, then the turn at 0.25 that only this routine makes (left side back, right side
    // forward; the right motor is inverted), each through the drive's deadband.
    const near = (value: number, expected: number) => Math.abs(value - expected) < 1e-9;
    const forward = (0.6 - 0.02) / 0.98;
    const turn = (0.25 - 0.02) / 0.98;
    await auto.until('the routine driving forward', (client) => near(speed(client, 0), forward) && near(speed(client, 1), -forward));
    await auto.until('the routine turning', (client) => near(speed(client, 0), -turn) && near(speed(client, 1), -turn));
    await auto.close();
  });

  test('closes a HALSim connection that sends a message over 64 KiB, and keeps running', async () => {
    const flooder = await connect();
    flooder.send(JSON.stringify({ type: 'DriverStation', device: '', data: { '>game_data': 'x'.repeat(70_000) } }));
    expect(await flooder.whenClosed()).toBe(1009);
    const after = await connect();
    await after.until('every device told', told);
    expect((await fetch(`http://127.0.0.1:${sim.ports.get(NT4_PORT)}/`)).status).toBe(200);
    await after.close();
  });

  test('stays disabled after an emergency stop, whatever the Driver Station says next', async () => {
    const station = await connect();
    station.driverStation({ '>enabled': true, '>estop': true, '>ds': true, '>new_data': true });
    await station.until('the e-stop seen', (client) => client.state('DriverStation', '')['>estop'] === true);
    expect(station.state('DriverStation', '')['>enabled']).toBe(false);
    // The e-stop released and enabled again: the joystick in the same new data shows when the robot took it.
    station.driverStation({ '>enabled': true, '>estop': false });
    station.joystick(0, { '>axes': [0, -1, 0, 0, 0, 0] });
    station.driverStation({ '>new_data': true });
    await station.until('the new data taken', (client) => (client.state('Joystick', '0')['>axes'] as number[]).length === 6);
    expect(station.state('DriverStation', '')).toMatchObject({ '>enabled': false, '>estop': true });
    expect(speed(station, 0)).toBe(0);
    expect(nt4.values.get('/classroom/mode')).toBe('disabled');
    await station.close();
    expect(output.text()).not.toMatch(/Exception|quit unexpectedly/);
  });
});
