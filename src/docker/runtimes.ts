/**
 * The composition root's way into src/docker (bin/ imports this module and runtime.ts alone, by
 * lint): the runtime a configuration names (RUNTIME), the informer over it, and where the engine
 * keeps its data. Everything else of src/docker stays behind the port, runtime.ts.
 */
import type { Config } from '../config.ts';
import { DockerRuntime } from './docker-runtime.ts';
import type { WorkspaceRuntime } from './runtime.ts';
import { SwarmRuntime } from './swarm-runtime.ts';

export { engineRootBeside } from './data-root.ts';
export { InformedRuntime } from './informer.ts';

/** The runtime a configuration names (RUNTIME): one Docker Engine, the default, or a Docker Swarm. */
export function runtimeFor(config: Pick<Config, 'controlPlaneId' | 'runtime' | 'codeMemoryLimitBytes' | 'codeNanoCpus'>): WorkspaceRuntime {
  if (config.runtime.kind === 'docker') return new DockerRuntime({ controlPlaneId: config.controlPlaneId });
  return new SwarmRuntime({
    controlPlaneId: config.controlPlaneId,
    engines: config.runtime.engines,
    reservation: { memoryBytes: config.codeMemoryLimitBytes, nanoCpus: config.codeNanoCpus },
  });
}
