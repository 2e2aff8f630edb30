import Docker from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DockerRuntime, engineClient } from '../../src/docker/docker-runtime.ts';
import { names } from '../../src/docker/runtime.ts';
import { eventually, removeEverything, TEST_ENV, TEST_IMAGE } from '../helpers/controllers.ts';

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

  it('returns a container it creates as the engine then lists it, without asking; a second create of the name returns the first', async () => {
    const controlPlaneId = `create-${process.pid}`;
    const runtime = new DockerRuntime({ controlPlaneId });
    const workspace = { workspaceId: '00000000-0000-4000-8000-00000000c0de', slug: 'create-check' };
    const homeVolume = names.volume(workspace.slug);
    const common = { ...workspace, image: TEST_IMAGE, memoryBytes: 64 * 2 ** 20, network: TEST_ENV.WORKSPACE_NETWORK, nanoCpus: 0, pidsLimit: 256, homeVolume };
    try {
      await runtime.ensureVolume(workspace, homeVolume);
      const made = [
        await runtime.createCodeContainer({ ...common, editorPort: 8080, restartGeneration: 3, specHash: 'abc123' }),
        await runtime.createSimContainer({ ...common, runId: '00000000-0000-4000-8000-0000000051a0', command: 'true', nt4Port: 5810, halsimPort: 3300 }),
      ];
      const listed = await runtime.listContainers({ workspaceId: workspace.workspaceId });
      for (const container of made) {
        const engine = listed.find((candidate) => candidate.id === container.id)!;
        expect({ ...container, createdAt: 0 }).toEqual({ ...engine, createdAt: 0 });
        expect(Math.abs(container.createdAt - engine.createdAt)).toBeLessThanOrEqual(2000);
      }
      expect(made.map((container) => container.role)).toEqual(['code', 'sim']);
      const again = await runtime.createCodeContainer({ ...common, editorPort: 8080, restartGeneration: 3, specHash: 'abc123' });
      expect(again).toEqual(listed.find((candidate) => candidate.id === made[0]!.id));
    } finally {
      await removeEverything(controlPlaneId);
    }
  });

  it('speaks TLS to an engine reached over https (DOCKER_HOST with TLS), with its connection-per-call agent', async () => {
    // A plain TCP listener stands in: a TLS client's first byte is a handshake record (0x16).
    let first: number | undefined;
    const listener = net.createServer((socket) => socket.once('data', (data: Buffer) => ((first = data[0]), socket.destroy())).on('error', () => undefined));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = listener.address() as net.AddressInfo;
      // The ping fails (nothing speaks Docker there); an http.Agent given to https.request would have
      // thrown before connecting (ERR_INVALID_PROTOCOL), so the listener would have seen nothing.
      await engineClient({ protocol: 'https', host: '127.0.0.1', port, timeout: 5000 })
        .ping()
        .catch(() => undefined);
      expect(first).toBe(0x16);
    } finally {
      listener.close();
    }
  });
});
