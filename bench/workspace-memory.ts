/**
 * Memory per workspace (issue 40), as a deployment runs it: the control plane (bin/server.ts,
 * every part, a student signed in through OpenID Connect: bench/deployed.ts) with the real
 * workspace image at the default limits (2 GiB each for the editor and the simulator). Every
 * SAMPLE_MS (1 s) each container of the student's workspace is measured as `docker stats` and the
 * control plane's stats sampler measure it (the cgroup's usage less its inactive page cache:
 * DockerRuntime.stats), through these phases, each after SETTLE_SECONDS (10) to settle, for
 * PHASE_SECONDS (15):
 *
 * - idle: the editor container up, no browser;
 * - editor open: a Chromium page with the workbench loaded and Robot.java open (as the e2e tests open it);
 * - build: from Run (the student API) until the run is running (javac, then the robot's start; not settled);
 * - during a run: the robot running, disabled, the page still open;
 * - driving: HALSim input at 50 Hz (the robot enabled in teleop, both sticks moving; straight at its
 *   HALSim port: the path does not change the workspace's memory).
 *
 * Then the cgroups' own peaks (usage with page cache, over each container's life), each
 * container's containerd shim, the control plane's RSS, PostgreSQL's share (PSS of its server's
 * own processes and of the control plane's connections) and the host's (dockerd, containerd, the
 * kernel's slab, stacks and page tables), and a sizing table: students per 16, 32 and 64 GiB host.
 *
 * Needs the provisioned PostgreSQL, Docker Engine, Chromium and the real workspace image
 * (`classroom-workspace:latest`). Everything it makes is removed at the end.
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/workspace-memory.ts
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { ROBOT_WORKSPACE_ENV, startDeployed, startRobotRun, type Deployed } from './deployed.ts';
import { benchScope, loadAverage, benchDatabaseUrl, browserCookies, CONTROL_PLANE_LABEL, docker, median, processRssBytes } from './lib.ts';
import { DockerRuntime } from '../src/docker/docker-runtime.ts';
import { LABELS } from '../src/docker/runtime.ts';
import { launchBrowser, openFromExplorer, waitForWorkbench, withPage } from '../test/helpers/browser.ts';
import { HalSimClient } from '../test/helpers/robot-protocols.ts';

const DATABASE = 'cp_bench_workspace_memory';
const SAMPLE_MS = 1000;
const SETTLE_SECONDS = Number(process.env.SETTLE_SECONDS ?? 10);
const PHASE_SECONDS = Number(process.env.PHASE_SECONDS ?? 15);
const MiB = 2 ** 20;
const GiB = 2 ** 30;
const PHASES = ['idle', 'editor open', 'build', 'during a run', 'driving'] as const;
type Phase = (typeof PHASES)[number];
type Role = 'code' | 'sim';

/** Every SAMPLE_MS while a phase is on: each container of the control plane's (by role) and the control plane's RSS. */
class Sampler {
  phase: Phase | undefined;
  readonly containers = new Map<Phase, Record<Role, number[]>>();
  readonly controlPlane = new Map<Phase, number[]>();
  /** Each container seen: its role, and its init process (for its cgroup and shim). */
  readonly seen = new Map<string, { role: Role; pid: number }>();
  private running = true;
  private readonly done: Promise<void>;

  constructor(controlPlaneId: string, controlPlanePid: number) {
    const runtime = new DockerRuntime({ controlPlaneId });
    this.done = (async () => {
      while (this.running) {
        const phase = this.phase;
        const next = sleep(SAMPLE_MS);
        if (phase) {
          const listed = await docker.listContainers({ filters: { label: [`${CONTROL_PLANE_LABEL}=${controlPlaneId}`] } });
          const bucket = this.containers.get(phase) ?? { code: [], sim: [] };
          this.containers.set(phase, bucket);
          for (const info of listed) {
            const role = info.Labels[LABELS.role] as Role;
            const sample = await runtime.stats(info.Id);
            if (sample && phase === this.phase) bucket[role].push(sample.memoryUsageBytes);
            if (!this.seen.has(info.Id)) this.seen.set(info.Id, { role, pid: (await docker.getContainer(info.Id).inspect()).State.Pid });
          }
          this.controlPlane.set(phase, [...(this.controlPlane.get(phase) ?? []), processRssBytes(controlPlanePid)]);
        }
        await next;
      }
    })();
  }

  /** Settles for SETTLE_SECONDS, then records `phase` for PHASE_SECONDS. */
  async record(phase: Phase): Promise<void> {
    this.phase = undefined;
    await sleep(SETTLE_SECONDS * 1000);
    this.phase = phase;
    await sleep(PHASE_SECONDS * 1000);
    this.phase = undefined;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
  }
}

/** A process's proportional set size (its private memory and its share of what it shares), from /proc/<pid>/smaps_rollup. */
function processPssBytes(pid: number): number {
  const match = /^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return match ? Number(match[1]) * 1024 : NaN;
}

/** The peak of the memory cgroup of process `pid` (cgroup v1 memory.max_usage_in_bytes, v2 memory.peak): usage with page cache. */
function cgroupPeakBytes(pid: number): number {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((line) => /^\d+:memory:/.test(line));
  if (v1) return Number(readFileSync(`/sys/fs/cgroup/memory${v1.slice(v1.lastIndexOf(':') + 1)}/memory.max_usage_in_bytes`, 'utf8'));
  const v2 = lines.find((line) => line.startsWith('0::'));
  return Number(readFileSync(`/sys/fs/cgroup${v2!.slice(3)}/memory.peak`, 'utf8'));
}

/** Processes whose command line satisfies `match` (read as root: others' may be unreadable). */
function processes(match: (command: string[]) => boolean): number[] {
  return readdirSync('/proc').flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return [];
    try {
      return match(readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')) ? [Number(entry)] : [];
    } catch {
      return [];
    }
  });
}

/** The RSS of container `id`'s containerd shim (NaN when none is found). */
function shimRssBytes(id: string): number {
  const [pid] = processes((command) => command[0]!.includes('containerd-shim') && command.includes(id));
  return pid === undefined ? NaN : processRssBytes(pid);
}

/** PostgreSQL's share: PSS of its server's own processes (postmaster, checkpointer, writers, ...) and of the connections to `database`. */
async function postgresPssBytes(database: string): Promise<number> {
  const client = new pg.Client({ connectionString: benchDatabaseUrl('postgres') });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = $1 OR (datname IS NULL AND backend_type <> 'client backend')`,
      [database],
    );
    const mine = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    // The postmaster: the parent of any of its processes (field 4 of /proc/<pid>/stat).
    const stat = readFileSync(`/proc/${mine}/stat`, 'utf8');
    const postmaster = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return [postmaster, ...rows.map((row) => row.pid)].reduce((sum, pid) => sum + processPssBytes(pid), 0);
  } finally {
    await client.end();
  }
}

/** The host's own share: the host engine's dockerd and containerd RSS (not those of engines in containers), and the kernel's slab, stacks and page tables (the whole machine's). */
function hostShare(): { docker: number; kernel: number } {
  const ours = readlinkSync('/proc/self/ns/mnt');
  const dockerPids = processes((command) => /(^|\/)(dockerd|containerd)$/.test(command[0]!)).filter((pid) => {
    try {
      return readlinkSync(`/proc/${pid}/ns/mnt`) === ours;
    } catch {
      return false;
    }
  });
  const meminfo = readFileSync('/proc/meminfo', 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(meminfo)?.[1] ?? 0) * 1024;
  return {
    docker: dockerPids.reduce((sum, pid) => sum + processRssBytes(pid), 0),
    kernel: field('Slab') + field('KernelStack') + field('PageTables'),
  };
}

/** Drives the robot at 50 Hz straight at its HALSim: enabled in teleop, both sticks swinging; stops when `signal` aborts. */
async function drive(url: string, signal: AbortSignal): Promise<void> {
  const client = await HalSimClient.connect(url);
  if (typeof client === 'number') throw new Error(`the robot's HALSim refused: ${client}`);
  const started = performance.now();
  const timer = setInterval(() => {
    const t = (performance.now() - started) / 1000;
    client.driveTeleop([0, -0.5 - 0.4 * Math.sin(t), 0, 0, 0.6 * Math.sin(t / 2), 0]);
  }, 20);
  await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  clearInterval(timer);
  await client.close();
}

async function main(): Promise<void> {
  const { cleanups, cleanup, controlPlaneId } = benchScope(20);
  try {
    console.log(`load average at the start: ${loadAverage()} (${os.cpus().length} CPUs)`);
    const deployed: Deployed = await startDeployed({ database: { kind: 'postgres', name: DATABASE }, controlPlaneId, env: ROBOT_WORKSPACE_ENV }, cleanups);
    const sampler = new Sampler(controlPlaneId, deployed.child.pid!);
    cleanups.push(() => sampler.stop());
    await sampler.record('idle');
    const browser = await launchBrowser({ full: true });
    cleanups.push(() => browser.close());
    let simId = '';
    await withPage(
      browser,
      async (page) => {
        await page.setViewportSize({ width: 1500, height: 900 });
        await page.context().addCookies(browserCookies(deployed.cookie, deployed.origin));
        await page.goto(`${deployed.origin}/u/${deployed.slug}/?folder=/home/student`, { waitUntil: 'commit' });
        await waitForWorkbench(page);
        await openFromExplorer(page, 'src/main/java/frc/robot/Robot.java');
        await sampler.record('editor open');
        sampler.phase = 'build';
        const run = await startRobotRun(deployed, cleanups);
        sampler.phase = undefined;
        simId = run.containerId;
        await sampler.record('during a run');
        const driving = new AbortController();
        const driver = drive(run.halsim.direct, driving.signal);
        await sampler.record('driving');
        driving.abort();
        await driver;
      },
      { serviceWorkers: 'allow' },
    );
    await sampler.stop();

    const mib = (bytes: number) => (bytes / MiB).toFixed(0);
    const cell = (values: number[] | undefined) => (values?.length ? `${mib(median(values))} / ${mib(Math.max(...values))}` : '-');
    console.log(`\nmemory (MiB, median / max of ${SAMPLE_MS} ms samples, docker stats: usage less inactive page cache), ${PHASE_SECONDS} s a phase:`);
    console.log('| phase | editor container | simulator container | control plane RSS |');
    console.log('| --- | --- | --- | --- |');
    for (const phase of PHASES) {
      const bucket = sampler.containers.get(phase);
      console.log(`| ${phase} | ${cell(bucket?.code)} | ${cell(bucket?.sim)} | ${cell(sampler.controlPlane.get(phase))} |`);
    }
    const editorEntry = [...sampler.seen].find(([, each]) => each.role === 'code')!;
    const simEntry = sampler.seen.get(simId)!;
    const peaks = { code: cgroupPeakBytes(editorEntry[1].pid), sim: cgroupPeakBytes(simEntry.pid) };
    const shims = shimRssBytes(editorEntry[0]) + shimRssBytes(simId);
    console.log(`cgroup peaks over each container's life (with page cache): editor ${mib(peaks.code)} MiB, simulator ${mib(peaks.sim)} MiB`);
    console.log(`containerd shims of the two containers: ${mib(shims)} MiB`);

    // The sizing: what a class needs on one host.
    const max = (phases: Phase[], role: Role) => Math.max(...phases.flatMap((phase) => sampler.containers.get(phase)?.[role] ?? []));
    const editor = max(['editor open', 'during a run', 'driving'], 'code');
    const steady = editor + max(['during a run', 'driving'], 'sim') + shims;
    const building = editor + max(['build'], 'sim') + shims;
    const controlPlane = Math.max(...[...sampler.controlPlane.values()].flat());
    const postgres = await postgresPssBytes(DATABASE);
    const host = hostShare();
    const reserved = controlPlane + postgres + host.docker + host.kernel;
    console.log(
      `shared: control plane ${mib(controlPlane)} MiB (RSS, max), PostgreSQL ${mib(postgres)} MiB (PSS), dockerd + containerd ${mib(host.docker)} MiB, kernel ${mib(host.kernel)} MiB (slab, stacks, page tables: the whole machine's)`,
    );
    console.log(
      `a student: ${mib(steady)} MiB driving (editor open + simulator + shims), ${mib(building)} MiB while their robot builds; shared: ${mib(reserved)} MiB`,
    );
    console.log('\n| host | students driving at once | every robot building at once |');
    console.log('| --- | --- | --- |');
    for (const size of [16, 32, 64]) {
      const room = size * GiB - reserved;
      console.log(`| ${size} GiB | ${Math.floor(room / steady)} | ${Math.floor(room / building)} |`);
    }
    console.log(`load average at the end: ${loadAverage()}`);
  } finally {
    await cleanup();
  }
}

await main();
