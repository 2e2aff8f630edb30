import Docker from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DockerRuntime } from '../../src/docker/docker-runtime.ts';
import { eventually } from '../helpers/controllers.ts';

describe('the Docker Engine', () => {
  it('answers through dockerode on the local socket with an API that has one-shot stats (1.41+)', async () => {
    const docker = new Docker();
    expect(String(await docker.ping())).toBe('OK');
    const version = await docker.version();
    const [major, minor] = version.ApiVersion.split('.').map(Number);
    expect(major! * 1000 + minor!).toBeGreaterThanOrEqual(1041);
  });

  it('opens a new engine connection for every call of DockerRuntime, so no call lands on an idle connection as it is being closed', async () => {
    // A relay in front of the engine's socket counts the connections the runtime opens.
    const directory = mkdtempSync(path.join(os.tmpdir(), 'engine-relay-'));
    const socketPath = path.join(directory, 'docker.sock');
    let accepted = 0;
    const open = new Set<net.Socket>();
    const relay = net.createServer((client) => {
      accepted++;
      open.add(client);
      const engine = net.connect('/var/run/docker.sock');
      client.pipe(engine).pipe(client);
      client.on('error', () => engine.destroy());
      engine.on('error', () => client.destroy());
      client.on('close', () => (open.delete(client), engine.destroy()));
    });
    await new Promise<void>((resolve) => relay.listen(socketPath, resolve));
    try {
      const runtime = new DockerRuntime({ controlPlaneId: `relay-${process.pid}`, docker: { socketPath } });
      expect(await runtime.listContainers()).toEqual([]);
      expect(await runtime.listContainers()).toEqual([]);
      // Node's default agent would have kept the first connection for the second call, and open.
      expect(accepted).toBe(2);
      await eventually('the connections to be closed', async () => open.size === 0, 5000);
    } finally {
      for (const socket of open) socket.destroy();
      relay.close();
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
