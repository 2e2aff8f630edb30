import { engineAway, type HomeUsage, type RuntimeEnvironment, type RuntimeStats, type RuntimeWorkloads, type StatsSample } from '../src/docker/runtime.ts';
import { formatBytes, homeDiskStatus, type HomeDiskLevel, type HomeDiskLimit } from '../src/home-disk.ts';
import type { Logger } from '../src/log.ts';
import type { Metrics } from '../src/metrics.ts';
import type { Store } from '../src/store/index.ts';
import type { HomeDiskRecord, StatsRecord } from '../src/store/workspace-list.ts';
import { Periodic } from './periodic.ts';

export interface StatsSamplerOptions {
  /** The running editors, what each uses, and whether the engine answers. */
  runtime: Pick<RuntimeWorkloads, 'listContainers'> & RuntimeStats & Pick<RuntimeEnvironment, 'reachability'>;
  /** Where each pass's figures are recorded, for the admin's list of workspaces (sorted by them in SQL). */
  store: Pick<Store, 'workspaceList'>;
  metrics: Metrics;
  log: Logger;
  intervalMs?: number;
  /** Stats requests in flight at once. */
  concurrency?: number;
  /** The bound on homes (HOME_DISK_LIMIT, HOME_DISK_CHECK_SECONDS): running homes are measured that often; none or 0: never. */
  homeDisk?: HomeDiskLimit;
}

/** Homes measured at once: each measure is a `du` in the workspace's container, walking its files. */
const HOME_MEASURES_AT_ONCE = 2;

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
 *
 * With a bound on homes, every HOME_DISK_CHECK_SECONDS it also measures the home of each running
 * editor (runtime.homeUsage) and records the measures (one write a pass; a stopped workspace's
 * home keeps its last), which tell its student, the coach, and the refusal of a run past the
 * bound (src/home-disk.ts); a home that becomes nearly full, full or unmeasurable is logged once.
 */
export class StatsSampler {
  private readonly options: Required<Omit<StatsSamplerOptions, 'homeDisk'>> & { homeDisk: HomeDiskLimit | undefined };
  private readonly previous = new Map<string, StatsSample>();
  private readonly periodic: Periodic;
  private readonly homes: Periodic | undefined;
  /** Each home's level as last measured (a change to anything but `ok` is logged once). */
  private readonly homeLevels = new Map<string, HomeDiskLevel>();
  /** Homes whose last measure failed (said once until one succeeds). */
  private readonly unmeasured = new Set<string>();

  constructor(options: StatsSamplerOptions) {
    this.options = { intervalMs: 15_000, concurrency: 4, ...options, homeDisk: options.homeDisk };
    this.periodic = new Periodic(
      () => this.sample(),
      this.options.intervalMs,
      (error) => this.failed(error, 'stats sampling failed'),
    );
    const bound = this.options.homeDisk;
    this.homes =
      bound && bound.limitBytes > 0
        ? new Periodic(
            () => this.measureHomes(),
            bound.checkMs,
            (error) => this.failed(error, 'measuring homes failed'),
          )
        : undefined;
  }

  /** Says a failed pass: at debug when the engine cannot be reached (its reachability says that once), else as a warning. */
  private failed(error: unknown, what: string): void {
    this.options.log[engineAway(this.options.runtime, error) ? 'debug' : 'warning']({ error: (error as Error).message }, what);
  }

  start(): void {
    this.periodic.start({ immediately: true });
    this.homes?.start({ immediately: true });
  }

  async stop(): Promise<void> {
    await Promise.all([this.periodic.stop(), this.homes?.stop()]);
  }

  /** One measuring pass of the homes of running editors (see the class comment); nothing without a bound. */
  async measureHomes(): Promise<void> {
    const { runtime, log, homeDisk } = this.options;
    if (!homeDisk || homeDisk.limitBytes === 0) return;
    const running = (await runtime.listContainers()).filter((container) => container.role === 'code' && container.state === 'running');
    // What was said of homes that no longer run is forgotten: said again if they run again as they were.
    const runs = new Set(running.map((container) => container.workspaceId));
    for (const workspaceId of [...this.homeLevels.keys(), ...this.unmeasured]) {
      if (runs.has(workspaceId)) continue;
      this.homeLevels.delete(workspaceId);
      this.unmeasured.delete(workspaceId);
    }
    const measures: HomeDiskRecord[] = [];
    await eachLimited(running, HOME_MEASURES_AT_ONCE, async (container) => {
      const { workspaceId, slug } = container;
      let usage: HomeUsage | undefined;
      try {
        usage = await runtime.homeUsage(container.id);
      } catch (error) {
        if (!this.unmeasured.has(workspaceId))
          log.warning({ workspaceId, slug, error: (error as Error).message }, `measuring the home of ${slug} failed; its last measure stands`);
        this.unmeasured.add(workspaceId);
        return;
      }
      this.unmeasured.delete(workspaceId);
      if (!usage) return;
      const measure = { workspaceId, usedBytes: usage.bytes, problem: usage.problem ?? null };
      measures.push(measure);
      const { level } = homeDiskStatus({ ...measure, measuredAt: new Date() }, homeDisk)!;
      const before = this.homeLevels.get(workspaceId);
      this.homeLevels.set(workspaceId, level);
      if (level === 'ok' || level === before) return;
      const figures = `${formatBytes(usage.bytes)} of ${formatBytes(homeDisk.limitBytes)}`;
      const said = {
        near: `the home of ${slug} is nearly full (${figures}): its student is told`,
        full: `the home of ${slug} is full (${figures}): its runs are refused until its student frees space`,
        unmeasured: `the home of ${slug} could not be measured in full (${usage.problem}): its runs are refused until it can be`,
      }[level];
      log.warning({ workspaceId, slug, usedBytes: usage.bytes, limitBytes: homeDisk.limitBytes, home: level, problem: measure.problem }, said);
    });
    await this.options.store.workspaceList.recordHomeDisk(measures);
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
