/**
 * What bounds a scoped runtime's engine calls (EngineScope): the client's requests (scopedClient)
 * and two scopes at once (bothScopes, as a swarm's scoped copy of a scoped copy has them). The real
 * engine's side is test/integration/engine-fence.test.ts.
 */
import Docker from 'dockerode';
import { bothScopes, scopedClient } from '../../src/docker/docker-runtime.ts';

/** A dockerode client whose modem records what it is asked to send, and answers each with {}. */
function recording() {
  const sent: { method: string; path: string; signal: AbortSignal | undefined }[] = [];
  const docker = new Docker();
  docker.modem.dial = (options, callback) => {
    sent.push({ method: String(options.method), path: options.path, signal: options.abortSignal });
    callback?.(null, {});
  };
  return { docker, sent };
}

describe('a scoped engine client', () => {
  it('asks beforeChange before every request that may change something, and sends none it refuses; reads pass', async () => {
    const { docker, sent } = recording();
    let leads = true;
    const scoped = scopedClient(docker, {
      beforeChange: () => {
        if (!leads) throw new Error('no longer leads');
      },
    });
    await scoped.getContainer('c').inspect();
    await scoped.getContainer('c').start();
    leads = false;
    await expect(scoped.getContainer('c').stop()).rejects.toThrow('no longer leads');
    await expect(scoped.createVolume({ Name: 'v' })).rejects.toThrow('no longer leads');
    await expect(scoped.getContainer('c').remove()).rejects.toThrow('no longer leads');
    await scoped.listContainers();
    expect(sent.map(({ method, path }) => `${method} ${path.split('?')[0]}`)).toEqual([
      'GET /containers/c/json',
      'POST /containers/c/start',
      'GET /containers/json',
    ]);
  });

  it("aborts on its signal and on the request's own", async () => {
    const { docker, sent } = recording();
    const controller = new AbortController();
    const own = new AbortController();
    const scoped = scopedClient(scopedClient(docker, {}), { signal: controller.signal });
    await scoped.getContainer('c').inspect({ abortSignal: own.signal });
    own.abort();
    expect(sent[0]!.signal!.aborted).toBe(true);
    await scoped.getContainer('c').inspect();
    expect(sent[1]!.signal!.aborted).toBe(false);
    controller.abort();
    expect(sent[1]!.signal!.aborted).toBe(true);
  });
});

describe('two scopes at once', () => {
  it("runs both checks, the outer one first, and ends on either's signal", () => {
    const asked: string[] = [];
    const outer = new AbortController();
    const inner = new AbortController();
    const both = bothScopes(
      { signal: outer.signal, beforeChange: () => void asked.push('outer') },
      { signal: inner.signal, beforeChange: () => void asked.push('inner') },
    );
    both.beforeChange!();
    expect(asked).toEqual(['outer', 'inner']);
    expect(both.signal!.aborted).toBe(false);
    inner.abort();
    expect(both.signal!.aborted).toBe(true);
  });

  it('is the inner scope alone when there is no outer one, and keeps a check of either alone', () => {
    const inner = { signal: new AbortController().signal };
    expect(bothScopes(undefined, inner)).toBe(inner);
    const check = () => undefined;
    expect(bothScopes({ beforeChange: check }, inner)).toEqual({ signal: inner.signal, beforeChange: expect.any(Function) });
    expect(bothScopes({}, {}).beforeChange).toBeUndefined();
  });
});
