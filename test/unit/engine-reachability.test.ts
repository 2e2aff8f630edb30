import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { DockerRuntime, engineAddress, engineClient } from '../../src/docker/docker-runtime.ts';
import { engineAway, EngineReachability, EngineUnreachableError, isConnectionFailure } from '../../src/docker/reachability.ts';
import { SwarmRuntime } from '../../src/docker/swarm-runtime.ts';
import { categoryLogger, createRootLogger, type Logger } from '../../src/log.ts';

/** A logger of `control.<subsystem>` and the records it wrote. */
function capture(subsystem = 'containers'): { log: Logger; records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const sink = { write: (line: string) => records.push(JSON.parse(line) as Record<string, unknown>) };
  return { log: categoryLogger(createRootLogger({ level: 'debug', format: 'json', colour: false, sinks: { out: sink, err: sink } }), subsystem), records };
}

/** An error as Node's net module makes it for a failed connection. */
function connectError(code: string, address = '/run/missing.sock'): Error & { code: string } {
  return Object.assign(new Error(`connect ${code} ${address}`), { code, syscall: 'connect', address });
}

const ADDRESS = 'unix:///run/missing.sock';

describe('isConnectionFailure: what counts as the engine not reached', () => {
  it.each([
    ['no socket at the address', connectError('ENOENT')],
    ['nothing listening', connectError('ECONNREFUSED')],
    ['no permission on the socket', connectError('EACCES')],
    ['a connection cut or a call timed out (socket hang up)', Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })],
    ['every address of a host refused', Object.assign(new AggregateError([connectError('ECONNREFUSED')]), { code: 'ECONNREFUSED' })],
    ['a host name not found', Object.assign(new Error('getaddrinfo ENOTFOUND engine'), { code: 'ENOTFOUND', syscall: 'getaddrinfo' })],
  ])('counts %s', (_what, error) => {
    expect(isConnectionFailure(error)).toBe(true);
  });

  it.each([
    ['an answer with an HTTP status', Object.assign(new Error('(HTTP code 500) server error'), { statusCode: 500, code: 'ECONNRESET' })],
    ['a call given up (aborted)', new DOMException('The operation was aborted', 'AbortError')],
    ['a file of an upload missing (not the connection)', Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT', syscall: 'open' })],
    ['an error without a code', new Error('the Docker events stream ended')],
    ['something not an error', 'ECONNREFUSED'],
  ])('does not count %s', (_what, error) => {
    expect(isConnectionFailure(error)).toBe(false);
  });
});

describe('EngineReachability: says each transition once', () => {
  const reachability = () => new EngineReachability(() => ADDRESS);

  it('says the first failure once, with the address, the reason and what to do; later failures are only covered', () => {
    const subject = reachability();
    const { log, records } = capture();
    subject.attach(log);
    const first = subject.failed(connectError('ENOENT'));
    const second = subject.failed(connectError('ENOENT'));
    expect(records).toEqual([
      expect.objectContaining({
        level: 'error',
        category: 'control.containers',
        address: ADDRESS,
        code: 'ENOENT',
        message: expect.stringMatching(
          /^Docker Engine cannot be reached at unix:\/\/\/run\/missing\.sock \(connect ENOENT \/run\/missing\.sock\): .*bash scripts\/provision\.sh.*DOCKER_HOST/,
        ),
      }),
    ]);
    expect(JSON.stringify(records)).not.toContain('    at ');
    expect(first).toBeInstanceOf(EngineUnreachableError);
    expect(first).toMatchObject({
      address: ADDRESS,
      code: 'ENOENT',
      message: `Docker Engine cannot be reached at ${ADDRESS} (connect ENOENT /run/missing.sock)`,
    });
    expect([subject.covers(first), subject.covers(second)]).toEqual([true, true]);
  });

  it('says an engine back once, after an outage it said; and a new outage again', () => {
    const subject = reachability();
    const { log, records } = capture();
    subject.attach(log);
    subject.failed(connectError('ECONNREFUSED'));
    subject.answered();
    subject.answered();
    expect(records.map((record) => [record.level, record.message])).toEqual([
      ['error', expect.stringContaining('cannot be reached')],
      ['info', expect.stringMatching(/^Docker Engine reachable again at unix:\/\/\/run\/missing\.sock \(after \d+ s\)/)],
    ]);
    expect(records[1]).toMatchObject({ address: ADDRESS, failedCalls: 1 });
    subject.failed(connectError('ECONNREFUSED'));
    expect(records).toHaveLength(3);
    expect(records[2]).toMatchObject({ level: 'error', code: 'ECONNREFUSED' });
  });

  it('says nothing of an engine that answered from the start', () => {
    const subject = reachability();
    const { log, records } = capture();
    subject.attach(log);
    subject.answered();
    expect(records).toEqual([]);
  });

  it('says an outage that began before anything was attached as soon as something is, once', () => {
    const subject = reachability();
    subject.failed(connectError('ENOENT'));
    const { log, records } = capture();
    subject.attach(log);
    subject.attach(capture().log);
    subject.failed(connectError('ENOENT'));
    expect(records.map((record) => record.level)).toEqual(['error']);
  });

  it('says nothing of an outage over before anything was attached', () => {
    const subject = reachability();
    subject.failed(connectError('ENOENT'));
    subject.answered();
    const { log, records } = capture();
    subject.attach(log);
    expect(records).toEqual([]);
  });

  it('says the transitions through the first logger attached, and through the next once it is detached', () => {
    const subject = reachability();
    const first = capture('containers');
    const second = capture('runs');
    const detach = subject.attach(first.log);
    subject.attach(second.log);
    subject.failed(connectError('ENOENT'));
    detach();
    subject.answered();
    expect(first.records.map((record) => record.level)).toEqual(['error']);
    expect(second.records.map((record) => [record.level, record.category])).toEqual([['info', 'control.runs']]);
  });

  it('tells one who may not use the socket how to get that right', () => {
    const subject = reachability();
    const { log, records } = capture();
    subject.attach(log);
    subject.failed(connectError('EACCES'));
    expect(records[0]).toMatchObject({ code: 'EACCES', message: expect.stringContaining('docker group') });
  });

  it("covers its own errors only: not another engine's, not any other failure", () => {
    const subject = reachability();
    const other = reachability();
    expect(subject.covers(other.failed(connectError('ENOENT')))).toBe(false);
    expect(subject.covers(connectError('ENOENT'))).toBe(false);
    expect(engineAway({ reachability: subject }, subject.failed(connectError('ENOENT')))).toBe(true);
    // A runtime without one (a swarm's): every failure is the loop's to say.
    expect(engineAway({}, subject.failed(connectError('ENOENT')))).toBe(false);
  });
});

describe("the engine's client reports every call", () => {
  const servers: http.Server[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  });

  it('fails a call that finds no engine with an EngineUnreachableError that its runtime covers (scoped views too), and says the engine back once one answers', async () => {
    const socket = path.join(mkdtempSync(path.join(os.tmpdir(), 'cp-reach-')), 'engine.sock');
    const runtime = new DockerRuntime({ controlPlaneId: 'reach', docker: { socketPath: socket } });
    const { log, records } = capture();
    runtime.reachability.attach(log);
    const failure = await runtime.listContainers().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(EngineUnreachableError);
    expect(failure).toMatchObject({ address: `unix://${socket}`, code: 'ENOENT' });
    expect(engineAway(runtime, failure)).toBe(true);
    const scoped = runtime.scoped({ signal: new AbortController().signal });
    expect(engineAway(scoped, await scoped.listVolumes().catch((error: unknown) => error))).toBe(true);
    expect(records.map((record) => record.level)).toEqual(['error']);

    // Something answers there now: an HTTP error is an answer too (its own error, not the engine's absence).
    let status = 500;
    const server = http.createServer((_request, response) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(status === 200 ? '[]' : '{"message":"broken"}');
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    const answered = await runtime.listContainers().catch((error: unknown) => error);
    expect(answered).not.toBeInstanceOf(EngineUnreachableError);
    expect(answered).toMatchObject({ statusCode: 500 });
    status = 200;
    expect(await runtime.listContainers()).toEqual([]);
    expect(records.map((record) => [record.level, record.message])).toEqual([
      ['error', expect.stringContaining(`cannot be reached at unix://${socket}`)],
      ['info', expect.stringContaining(`reachable again at unix://${socket}`)],
    ]);
  });

  it('leaves a client made without a reachability as it was', async () => {
    const socket = path.join(mkdtempSync(path.join(os.tmpdir(), 'cp-reach-')), 'engine.sock');
    const failure = await engineClient({ socketPath: socket })
      .ping()
      .catch((error: unknown) => error);
    expect(failure).not.toBeInstanceOf(EngineUnreachableError);
    expect(failure).toMatchObject({ code: 'ENOENT' });
  });
});

describe("a swarm's engines (SwarmReachability)", () => {
  const servers: http.Server[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  });

  /** The first engine found away by a node's events stream (each node's engine is watched). */
  const streamError = (runtime: SwarmRuntime) =>
    new Promise<Error>((resolve) => {
      const watch = runtime.watch({
        onEvent: () => undefined,
        onConnect: () => undefined,
        onDisconnect: (error) => {
          if (!(error instanceof EngineUnreachableError)) return;
          watch.close();
          resolve(error);
        },
      });
    });

  it('says once that no engine of the swarm answers, covering what failed on its nodes meanwhile; says it back once a manager answers; one node away is not covered', async () => {
    const folder = mkdtempSync(path.join(os.tmpdir(), 'cp-reach-'));
    const sockets = ['one', 'two'].map((name) => path.join(folder, `${name}.sock`));
    const runtime = new SwarmRuntime({
      controlPlaneId: 'reach',
      engines: sockets.map((socketPath) => ({ socketPath })),
      reservation: { memoryBytes: 1, nanoCpus: 0 },
    });
    const { log, records } = capture();
    runtime.reachability.attach(log);
    for (let call = 0; call < 3; call++) expect(engineAway(runtime, await runtime.nodes().catch((error: unknown) => error))).toBe(true);
    const scoped = runtime.scoped({ signal: new AbortController().signal });
    expect(engineAway(scoped, await scoped.listVolumes().catch((error: unknown) => error))).toBe(true);
    // Every node away: a node's lost stream is the same outage.
    expect(engineAway(runtime, await streamError(runtime))).toBe(true);
    // Another engine's outage is not the swarm's.
    const other = new DockerRuntime({ controlPlaneId: 'reach', docker: { socketPath: path.join(folder, 'other.sock') } });
    expect(engineAway(runtime, await other.listContainers().catch((error: unknown) => error))).toBe(false);
    expect(records.map((record) => [record.level, record.message])).toEqual([
      [
        'error',
        expect.stringMatching(
          /^Docker Engine cannot be reached at SWARM_ENGINES \(unix:\/\/.*one\.sock, unix:\/\/.*two\.sock\) .*: start the swarm's engines, or set SWARM_ENGINES/,
        ),
      ],
    ]);

    // The first engine answers as a manager (of a swarm with nothing on it yet); the second is still away.
    const server = http.createServer((request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(request.url?.endsWith('/info') ? JSON.stringify({ Swarm: { NodeID: 'n1', ControlAvailable: true } }) : '[]');
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(sockets[0], resolve));
    expect(await runtime.nodes()).toEqual([]);
    expect(records.at(-1)).toMatchObject({ level: 'info', message: expect.stringContaining('reachable again at SWARM_ENGINES') });
    // One node away while a manager answers: not the swarm's outage (the node check's, and said where it is met).
    const nodeAway = await streamError(runtime);
    expect(nodeAway).toMatchObject({ address: `unix://${sockets[1]}` });
    expect(engineAway(runtime, nodeAway)).toBe(false);
  });
});

describe('engineAddress: where a client looks, as DOCKER_HOST spells it', () => {
  it('names a Unix socket, a TCP engine, and the default socket by the connection that failed', () => {
    expect(engineAddress(engineClient({ socketPath: '/run/engine.sock' }).modem)).toBe('unix:///run/engine.sock');
    expect(engineAddress(engineClient({ host: '127.0.0.1', port: 2375, protocol: 'http' }).modem)).toBe('tcp://127.0.0.1:2375');
    // DOCKER_HOST unset: docker-modem looks for the default socket as it dials (a function of it, as here).
    const byDefault = engineClient({ socketPath: (() => Promise.resolve('/var/run/docker.sock')) as unknown as string }).modem;
    expect(engineAddress(byDefault)).toBe('the default socket (DOCKER_HOST unset)');
    expect(engineAddress(byDefault, connectError('ENOENT', '/var/run/docker.sock'))).toBe('unix:///var/run/docker.sock');
  });
});
