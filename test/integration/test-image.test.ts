/**
 * The test workspace image (test/fixtures/workspace, built by scripts/build-test-image.sh, which
 * scripts/provision.sh runs) against real Docker: the stand-in editor and the stand-in simulator
 * behave as the integration tests and benchmarks that use them expect. Containers carry the label
 * service.test=image-fixture, publish on 127.0.0.1 only, and are removed by name afterwards.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import type Docker from 'dockerode';
import { engineClient } from '../../src/docker/docker-runtime.ts';
import WebSocket from 'ws';

const IMAGE = 'classroom-workspace:test';
const docker = engineClient();
const prefix = `image-fixture-${process.pid}-${Date.now().toString(36)}`;
const perTest: string[] = [];

interface Started {
  container: Docker.Container;
  name: string;
  port: number;
}

async function start(suffix: string, options: { env?: string[]; cmd?: string[]; port?: number; keep?: boolean } = {}): Promise<Started> {
  const name = `${prefix}-${suffix}`;
  const containerPort = `${options.port ?? 8080}/tcp`;
  if (!options.keep) perTest.push(name);
  const container = await docker.createContainer({
    name,
    Image: IMAGE,
    Env: options.env ?? [],
    ...(options.cmd ? { Cmd: options.cmd } : {}),
    Labels: { 'service.test': 'image-fixture' },
    ExposedPorts: { [containerPort]: {} },
    HostConfig: { PortBindings: { [containerPort]: [{ HostIp: '127.0.0.1', HostPort: '' }] } },
  });
  await container.start();
  const info = await container.inspect();
  const hostPort = info.NetworkSettings.Ports[containerPort]?.[0]?.HostPort;
  if (!hostPort) throw new Error(`no host port bound for ${containerPort} of ${name}`);
  return { container, name, port: Number(hostPort) };
}

async function remove(name: string): Promise<void> {
  try {
    await docker.getContainer(name).remove({ force: true, v: true });
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode !== 404) throw error;
  }
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls a URL (500 ms per attempt) until it answers 200; returns the parsed JSON or text. */
async function waitForOk(url: string, timeoutMs: number): Promise<{ body: string; at: number }> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no attempt';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(500) });
      const body = await res.text();
      if (res.status === 200) return { body, at: Date.now() };
      last = `status ${res.status}`;
    } catch (error) {
      last = String(error);
    }
    await sleep(100);
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs} ms (last: ${last})`);
}

async function waitForExit(container: Docker.Container, timeoutMs: number): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const result = await Promise.race([
      container.wait() as Promise<{ StatusCode: number }>,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`container did not exit within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return result.StatusCode;
  } finally {
    clearTimeout(timer);
  }
}

async function waitForLog(container: Docker.Container, text: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await logs(container)).stdout.includes(text)) return;
    await sleep(100);
  }
  throw new Error(`"${text}" did not appear in the logs within ${timeoutMs} ms`);
}

beforeAll(async () => {
  try {
    await docker.getImage(IMAGE).inspect();
  } catch {
    throw new Error(`image ${IMAGE} is missing: run bash scripts/build-test-image.sh (scripts/provision.sh does)`);
  }
});

afterEach(async () => {
  await Promise.all(perTest.splice(0).map(remove));
});

describe('the stand-in editor', () => {
  let editor: Started;
  let base: string;

  beforeAll(async () => {
    editor = await start('editor', { keep: true });
    base = `http://127.0.0.1:${editor.port}`;
    await waitForOk(`${base}/healthz`, 10_000);
  });

  afterAll(async () => {
    if (editor) await remove(editor.name);
  });

  it('answers /healthz with ok without logging it, and logs every other request line', async () => {
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('ok');
    const page = await fetch(`${base}/some/file.ts`);
    expect(await page.text()).toBe('<html><body>editor stand-in: /some/file.ts</body></html>');
    // The container's output reaches Docker's log asynchronously: wait for it rather than read it at once.
    await waitForLog(editor.container, 'GET /some/file.ts', 10_000);
    // Written in order, so a health check's line would be there by now.
    expect((await logs(editor.container)).stdout).not.toContain('GET /healthz');
  });

  it('echoes the method, url and headers it received, also under a path prefix', async () => {
    for (const path of ['/echo-headers?x=1', '/u/alice/echo-headers?x=1']) {
      const res = await fetch(`${base}${path}`, { headers: { 'x-forwarded-proto': 'https', 'x-test': 'abc' } });
      expect(res.status).toBe(200);
      const echoed = (await res.json()) as { method: string; url: string; headers: Record<string, string> };
      expect(echoed.method).toBe('GET');
      expect(echoed.url).toBe(path);
      expect(echoed.headers['x-forwarded-proto']).toBe('https');
      expect(echoed.headers['x-test']).toBe('abc');
      expect(echoed.headers.cookie).toBeUndefined();
    }
  });

  it('takes a 5 MB streamed upload and reports its size and sha256', async () => {
    const chunk = randomBytes(64 * 1024);
    const chunks = 80;
    const expected = createHash('sha256');
    for (let i = 0; i < chunks; i++) expected.update(chunk);
    const answer = await new Promise<string>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: editor.port, path: '/upload', method: 'POST', headers: { 'content-type': 'application/octet-stream' } },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (data: string) => (body += data));
          res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`status ${res.statusCode}: ${body}`))));
        },
      );
      req.on('error', reject);
      let sent = 0;
      const pump = () => {
        while (sent < chunks) {
          sent++;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    expect(JSON.parse(answer)).toEqual({ bytes: chunks * chunk.length, sha256: expected.digest('hex') });
  });

  it('streams downloads of the asked size and dies midway on /die-midway', async () => {
    const res = await fetch(`${base}/download?bytes=300000`);
    expect(res.headers.get('content-length')).toBe('300000');
    expect((await res.arrayBuffer()).byteLength).toBe(300000);
    const dying = await fetch(`${base}/die-midway`);
    expect(dying.status).toBe(200);
    await expect(dying.arrayBuffer()).rejects.toThrow();
  });

  it('echoes WebSocket text and binary messages unchanged', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${editor.port}/u/alice/ws?x=1`);
    const sent: Array<string | Buffer> = ['hello', Buffer.from([0, 1, 2, 254, 255]), 'ünïcödé ✓', randomBytes(70_000)];
    const received: Array<{ data: Buffer; isBinary: boolean }> = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('WebSocket echo timed out')), 5000);
      socket.on('error', reject);
      socket.on('open', () => sent.forEach((message) => socket.send(message)));
      socket.on('message', (data, isBinary) => {
        received.push({ data: data as Buffer, isBinary });
        if (received.length === sent.length) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    socket.close();
    expect(received.map((m) => m.isBinary)).toEqual([false, true, false, true]);
    received.forEach((message, i) => {
      const original = sent[i]!;
      expect(message.data.equals(typeof original === 'string' ? Buffer.from(original) : original)).toBe(true);
    });
  });

  it('delivers server-sent events one by one, spaced in time, then ends', async () => {
    const started = Date.now();
    const res = await fetch(`${base}/sse?count=4&intervalMs=500`);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let firstDataAt = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!firstDataAt) firstDataAt = Date.now();
      text += decoder.decode(value, { stream: true });
    }
    const endedAt = Date.now();
    expect(text).toBe('data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n');
    // Three gaps of 500 ms: streamed as sent, not all at once at the end.
    expect(endedAt - firstDataAt).toBeGreaterThanOrEqual(1000);
    expect(endedAt - started).toBeLessThan(10_000);
  });
});

describe('the stand-in simulator', () => {
  const simCmd = ['node', '/app/sim.mjs'];

  it('becomes alive on the nt4 port after compiling and booting (defaults: 1.5 s + 0.5 s)', async () => {
    const started = Date.now();
    const sim = await start('sim-default', { cmd: simCmd, port: 5810 });
    const { body, at } = await waitForOk(`http://127.0.0.1:${sim.port}/alive`, 15_000);
    expect(JSON.parse(body)).toEqual({ alive: true });
    expect(at - started).toBeGreaterThanOrEqual(1900);
    const root = await fetch(`http://127.0.0.1:${sim.port}/`);
    expect(await root.json()).toEqual({ alive: true });
    const { stdout } = await logs(sim.container);
    expect(stdout).toContain('compiling... 1/3');
    expect(stdout).toContain('compiling... 3/3');
  });

  it('exits with the compile exit code and logs the failure when compilation fails', async () => {
    const sim = await start('sim-compile-fail', { cmd: simCmd, port: 5810, env: ['SIM_COMPILE_EXIT=2', 'SIM_COMPILE_MS=300'] });
    expect(await waitForExit(sim.container, 10_000)).toBe(2);
    const { stdout, stderr } = await logs(sim.container);
    expect(stdout).toContain('compiling... 1/3');
    expect(stderr).toContain('error: compilation failed');
  });

  it('crashes with exit code 3 after having been alive', async () => {
    const sim = await start('sim-crash', {
      cmd: simCmd,
      port: 5810,
      env: ['SIM_COMPILE_MS=200', 'SIM_BOOT_MS=100', 'SIM_CRASH_AFTER_MS=5000'],
    });
    await waitForOk(`http://127.0.0.1:${sim.port}/alive`, 10_000);
    expect(await waitForExit(sim.container, 15_000)).toBe(3);
    expect((await logs(sim.container)).stderr).toContain('sim crashed');
  });

  it('with SIM_HANG_PROBE accepts connections but never answers the probe', async () => {
    const sim = await start('sim-hang', { cmd: simCmd, port: 5810, env: ['SIM_COMPILE_MS=0', 'SIM_BOOT_MS=0', 'SIM_HANG_PROBE=1'] });
    await waitForLog(sim.container, 'sim ready', 10_000);
    await expect(fetch(`http://127.0.0.1:${sim.port}/alive`, { signal: AbortSignal.timeout(500) })).rejects.toThrow(/timeout|aborted/i);
  });

  it('with SIM_EXIT_AFTER_MS exits 0 on its own', async () => {
    const sim = await start('sim-exit', { cmd: simCmd, port: 5810, env: ['SIM_COMPILE_MS=0', 'SIM_BOOT_MS=0', 'SIM_EXIT_AFTER_MS=300'] });
    expect(await waitForExit(sim.container, 10_000)).toBe(0);
    expect((await logs(sim.container)).stdout).toContain('sim ready');
  });
});

describe('the image', () => {
  it('has a shell with the usual tools and /home/student as its working directory', async () => {
    const box = await start('shell', { cmd: ['sh', '-c', 'pwd; ls /app; echo hi | cat; sleep 0.1; echo done'] });
    expect(await waitForExit(box.container, 10_000)).toBe(0);
    const { stdout } = await logs(box.container);
    expect(stdout).toBe('/home/student\neditor.mjs\nhalsim.mjs\nhold.mjs\nnode_modules\nnt4.mjs\nsim.mjs\nhi\ndone\n');
  });

  it('stops the editor on docker stop by itself (SIGTERM handled as PID 1)', async () => {
    const editor = await start('editor-stop');
    await waitForOk(`http://127.0.0.1:${editor.port}/healthz`, 10_000);
    await editor.container.stop({ t: 10 });
    // Exit code 0, not 137: it ended on SIGTERM itself, before Docker's 10 s kill.
    expect((await editor.container.inspect()).State.ExitCode).toBe(0);
  });
});
