/**
 * dockerode (with the gRPC, protobuf.js and ssh2 it loads) is loaded at a DockerRuntime's first
 * engine call, not when the runtime or a leader term's scoped copy is made: the server's start
 * makes both before it listens, and its first /healthz does not wait for that load (docs/operations.md,
 * "Start-up and command times"). In a process of its own, whose module cache nothing else filled.
 */
import { spawnSync } from 'node:child_process';
import { PROJECT_ROOT } from '../../src/config.ts';

const SCRIPT = `
import { createRequire } from 'node:module';
const { DockerRuntime } = await import('./src/docker/docker-runtime.ts');
const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('/node_modules/dockerode/'));
const runtime = new DockerRuntime({ controlPlaneId: 'dockerode-load-test' });
const scoped = runtime.scoped({ beforeChange: () => undefined });
const made = loaded();
void scoped.docker;
console.log(JSON.stringify({ made, called: loaded() }));
`;

test('dockerode is loaded at the first client use, not when the runtime and a scoped copy are made', () => {
  const child = spawnSync(process.execPath, ['--no-warnings', '--input-type=module', '-e', SCRIPT], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  expect(child.stderr).toBe('');
  expect(JSON.parse(child.stdout)).toEqual({ made: false, called: true });
});
