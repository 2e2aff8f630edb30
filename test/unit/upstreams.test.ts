/**
 * A verified upstream connection reset while it is being verified (api/proxy/upstreams.ts): the
 * simulator or editor is student code, and may accept a connection and reset it at once. The reset
 * arrives while the engine is asked again whether the address is still the container's; it must
 * close the connection and fail the connect (ECONNRESET), not go unheard and end the process. The
 * engine here is a stand-in answering `serving` (an in-memory runtime), the connection a real one
 * to 127.0.0.1.
 */
import net from 'node:net';
import { jest } from '@jest/globals';
import { Upstreams } from '../../api/proxy/upstreams.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { captureLogger, eventually } from '../helpers/controllers.ts';

it('fails a connection reset while it is verified, closing it, and the process goes on', async () => {
  // The server resets the connection when the engine is asked again (after the handshake).
  let accepted: net.Socket | undefined;
  const server = net.createServer((socket) => (accepted = socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  // The client's socket, seen as Upstreams makes it.
  let made: net.Socket | undefined;
  const original = net.connect.bind(net);
  const spy = jest.spyOn(net, 'connect').mockImplementation(((...args: Parameters<typeof net.connect>) => (made = original(...args))) as typeof net.connect);
  const serving = { id: 'c1', endpoint, startedAt: '2026-11-30T00:00:00Z' };
  let readings = 0;
  const runtime = {
    // The first reading at once; the one after the handshake resets the connection and answers once it is closed.
    serving: async () => {
      readings += 1;
      if (readings > 1) {
        const closed = new Promise((resolve) => made!.once('close', resolve));
        await eventually('the connection accepted', async () => accepted);
        accepted!.resetAndDestroy();
        await closed;
      }
      return serving;
    },
  };
  const upstreams = new Upstreams({
    runtime,
    ports: { vscode: 8080, nt4: 5810, halsim: 3300 },
    connectTimeoutMs: 5000,
    metrics: createMetrics(),
    log: categoryLogger(captureLogger().root, 'http'),
  });
  try {
    await expect(upstreams.connect({ workspaceId: 'w1', runId: 'r1' }, 'nt4', endpoint)).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(made!.destroyed).toBe(true);
    expect(readings).toBe(2);
  } finally {
    spy.mockRestore();
    await new Promise((resolve) => server.close(resolve));
  }
});
