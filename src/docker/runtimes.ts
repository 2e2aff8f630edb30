/** The runtime a configuration names (RUNTIME): one Docker Engine, the default, or a Docker Swarm. */
import type { Config } from '../config.ts';
import { DockerRuntime } from './docker-runtime.ts';
import type { WorkspaceRuntime } from './runtime.ts';
import { SwarmRuntime } from './swarm-runtime.ts';

export function runtimeFor(config: Pick<Config, 'controlPlaneId' | 'runtime' | 'codeMemoryLimitBytes' | 'codeNanoCpus'>): WorkspaceRuntime {
  if (config.runtime.kind === 'docker') return new DockerRuntime({ controlPlaneId: config.controlPlaneId });
  return new SwarmRuntime({
    controlPlaneId: config.controlPlaneId,
    engines: config.runtime.engines,
    reservation: { memoryBytes: config.codeMemoryLimitBytes, nanoCpus: config.codeNanoCpus },
  });
}
