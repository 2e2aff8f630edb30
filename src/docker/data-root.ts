/**
 * Whether the control plane's own data shares a filesystem with what students can fill: the Docker
 * Engine's data root (DockerRootDir), where their homes (volumes) and their containers' writable
 * layers are. A student who fills the one fills the other; see docs/operations.md, "Disk".
 */
import { stat } from 'node:fs/promises';
import type { Config } from '../config.ts';
import { engineClient } from './docker-runtime.ts';

/** How long the engine may take to say where its data is: a start is not held up by it. */
const INFO_TIMEOUT_MS = 5000;

/**
 * The data root of an engine this configuration reaches through a local socket (the one engine, or
 * each swarm node's `unix://` engine) that is on the same filesystem as `dataDir`; undefined when
 * none is, or when that cannot be told (an engine over TCP, one that does not answer, a data root
 * this process cannot see, as from inside a container).
 */
export async function engineRootBeside(dataDir: string, config: Pick<Config, 'runtime'>): Promise<string | undefined> {
  const here = await stat(dataDir).catch(() => undefined);
  if (!here) return undefined;
  const engines = config.runtime.kind === 'docker' ? [{}] : config.runtime.engines.filter((engine) => 'socketPath' in engine);
  for (const engine of engines) {
    const docker = engineClient({ ...engine, timeout: INFO_TIMEOUT_MS });
    // DOCKER_HOST may name a remote engine: its paths are not this host's.
    if (!(docker.modem as { socketPath?: string }).socketPath) continue;
    const info = (await docker.info().catch(() => undefined)) as { DockerRootDir?: string } | undefined;
    const root = info?.DockerRootDir;
    if (!root) continue;
    const there = await stat(root).catch(() => undefined);
    if (there?.dev === here.dev) return root;
  }
  return undefined;
}
