import type { StatsSample, WorkspaceRuntime } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import type { Store } from '../src/store/index.ts';
import type { StatsRecord } from '../src/store/workspace-list.ts';
import { Periodic } from './periodic.ts';

export interface StatsSamplerOptions {
  runtime: WorkspaceRuntime;
  /** Where each pass's figures are recorded, for the admin's list of workspaces (sorted by them in SQL). */
  store: Pick<Store, 'workspaceList'>;
  metrics: Metrics;
  log: Logger;
  intervalMs?: number;
  /** Stats requests in flight at once. */
  concurrency?: number;
}

/** Runs `work` over `items` with at most `limit` in flight. */
async function eachLimited<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Every 15 s, samples running code containers with one-shot stats (milliseconds each, where
 * stream=false costs 1–2 s because the daemon samples twice) and sets `container_cpu_percent`
 * (from this sampler's consecutive samples) and `container_memory_percent` (of the container's
 * limit) per workspace, and `active_workspaces`, and records the figures in the store (one write a
 * pass) for the admin's list. Series and figures of workspaces that stopped are removed.
 */
export class StatsSampler {
  private readonly options: Required<StatsSamplerOptions>;
  private readonly previous = new Map<string, StatsSample>();
  private readonly periodic: Periodic;

  constructor(options: StatsSamplerOptions) {
    this.options = { intervalMs: 15_000, concurrency: 4, ...options };
    this.periodic = new Periodic(
      () => this.sample(),
      this.options.intervalMs,
      (error) => this.options.log.warning({ error: (error as Error).message }, 'stats sampling failed'),
    );
  }

  start(): void {
    this.periodic.start({ immediately: true });
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** One sampling pass. */
  async sample(): Promise<void> {
    const { runtime, metrics, concurrency } = this.options;
    const running = (await runtime.listContainers()).filter((container) => container.role === 'code' && container.state === 'running');
    metrics.activeWorkspaces.set(running.length);
    const seen = new Set<string>();
    const records: StatsRecord[] = [];
    await eachLimited(running, concurrency, async (container) => {
      const sample = await runtime.stats(container.id).catch(() => undefined);
      if (!sample) return;
      const labels = { workspace_id: container.workspaceId };
      seen.add(container.workspaceId);
      const memoryPercent = (sample.memoryUsageBytes / sample.memoryLimitBytes) * 100;
      metrics.containerMemoryPercent.set(labels, memoryPercent);
      const before = this.previous.get(container.workspaceId);
      this.previous.set(container.workspaceId, sample);
      let cpuPercent: number | null = null;
      if (before && sample.systemNs > before.systemNs && sample.cpuTotalNs >= before.cpuTotalNs) {
        cpuPercent = ((sample.cpuTotalNs - before.cpuTotalNs) / (sample.systemNs - before.systemNs)) * sample.onlineCpus * 100;
        metrics.containerCpuPercent.set(labels, cpuPercent);
      }
      records.push({ workspaceId: container.workspaceId, cpuPercent, memoryPercent });
    });
    await this.options.store.workspaceList.recordStats(records);
    for (const workspaceId of [...this.previous.keys()]) {
      if (seen.has(workspaceId)) continue;
      this.previous.delete(workspaceId);
      metrics.containerCpuPercent.remove({ workspace_id: workspaceId });
      metrics.containerMemoryPercent.remove({ workspace_id: workspaceId });
    }
  }
}
