/**
 * The engine client (src/docker/docker-runtime.ts engineClient) on the real engine: docker-modem
 * formats each request's options with util.inspect (every hidden property, no depth limit) for a
 * debug line, and those options carry the client's agent. With streams open (the event stream, each
 * run's output followed) an agent formatted that way walks every open socket on every request: it
 * was half the control plane's CPU with 30 runs followed. The agent formats as one short line.
 */
import { inspect } from 'node:util';
import { engineClient } from '../../src/docker/docker-runtime.ts';

it('formats its agent as one short line, however many streams it holds open', async () => {
  const docker = engineClient();
  const streams = await Promise.all(Array.from({ length: 5 }, () => docker.getEvents({ filters: { type: ['network'] } })));
  try {
    const agent = (docker.modem as unknown as { agent: object }).agent;
    // Five sockets are open through it, and formatting it walks none of them.
    const formatted = inspect({ agent }, { showHidden: true, depth: null });
    expect(formatted).not.toMatch(/Socket/);
    expect(formatted.length).toBeLessThan(100);
  } finally {
    for (const stream of streams) (stream as unknown as { destroy(): void }).destroy();
  }
});
