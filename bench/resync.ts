/**
 * Resync: what one full resync of the workspace controller costs at 200 and 2,000 running
 * workspaces, with observed state from the shared cache (src/docker/informer.ts, what a deployment
 * runs) against every reconcile asking the engine (the baseline, in the same run): engine calls,
 * the control plane's CPU time and the wall time from the resync until the queue is idle.
 *
 * The engine is the in-memory runtime (test/helpers/memory-runtime.ts): 2,000 real containers do
 * not fit this machine, and an engine call's count does not depend on the engine. Each call it
 * answers is counted by name. The database is the real PostgreSQL of the tests (each reconcile
 * still reads its workspace's row: desired state is not cached). The workspaces are converged
 * first (running, editor confirmed), so a resync finds nothing to do but look, as in a steady class.
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/resync.ts   (SIZES=200,2000 ROUNDS=5 by default)
 */
import type { WorkspaceRuntime } from '../src/docker/runtime.ts';
import { MemoryRuntime } from '../test/helpers/memory-runtime.ts';
import { benchDatabase, controlPlane, deadline } from './lib.ts';

deadline(20 * 60_000);
const SIZES = (process.env.SIZES ?? '200,2000').split(',').map(Number);
const ROUNDS = Number(process.env.ROUNDS ?? 5);

/** The in-memory engine behind a counter of every call made to it, by method. */
function counted(engine: MemoryRuntime): { runtime: WorkspaceRuntime; calls: Map<string, number>; total(): number } {
  const calls = new Map<string, number>();
  const runtime = new Proxy(engine, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function' || property === 'scoped' || property === 'watch') return value;
      return (...args: unknown[]) => {
        calls.set(String(property), (calls.get(String(property)) ?? 0) + 1);
        return (value as (...values: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  // A controller's view (scoped) is the same counted engine.
  engine.scoped = () => runtime;
  return { runtime, calls, total: () => [...calls.values()].reduce((sum, count) => sum + count, 0) };
}

const median = (values: number[]) => values.toSorted((a, b) => a - b)[Math.floor(values.length / 2)]!;

const { dataSource, drop } = await benchDatabase('cp_bench_resync');
try {
  console.log(`resync of the workspace controller, ${ROUNDS} rounds each (medians); engine: in-memory, database: PostgreSQL`);
  console.log('workspaces | observed state | engine calls | per workspace | control-plane CPU | wall');
  let created = 0;
  const engine = new MemoryRuntime();
  const counter = counted(engine);
  for (const size of SIZES) {
    // The class grows to `size` running workspaces (rows, and containers as an engine reports them).
    const bench = controlPlane(dataSource, { runtime: counter.runtime, env: { MAX_ACTIVE_CONTAINERS: String(size + 10) } });
    for (; created < size; created++) {
      const { workspace } = await bench.store.users.create({ email: `resync-${created}@school.test` });
      await bench.store.workspaces.open(workspace.id);
    }
    const results: Record<string, { calls: number; cpuMs: number; wallMs: number }> = {};
    for (const cache of [false, true]) {
      const plane = controlPlane(dataSource, {
        runtime: counter.runtime,
        observedStateCache: cache,
        env: { MAX_ACTIVE_CONTAINERS: String(size + 10) },
        tuning: { workspaces: { probe: async () => ({ outcome: 'ok', seconds: 0 }), resyncIntervalMs: 3_600_000, orphanStartupGraceMs: 3_600_000 } },
      });
      const controller = plane.newController();
      await controller.start();
      // Converged: every workspace's editor created, started and confirmed (the first resync, on connect).
      await controller.resyncAll();
      await controller.queue.idle();
      const rounds: { calls: number; cpuMs: number; wallMs: number }[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        counter.calls.clear();
        const cpu = process.cpuUsage();
        const started = performance.now();
        await controller.resyncAll();
        await controller.queue.idle();
        const wallMs = performance.now() - started;
        const used = process.cpuUsage(cpu);
        rounds.push({ calls: counter.total(), cpuMs: (used.user + used.system) / 1000, wallMs });
      }
      await controller.stop();
      const result = { calls: median(rounds.map((r) => r.calls)), cpuMs: median(rounds.map((r) => r.cpuMs)), wallMs: median(rounds.map((r) => r.wallMs)) };
      results[cache ? 'cache' : 'engine'] = result;
      console.log(
        `${String(size).padStart(10)} | ${(cache ? 'shared cache' : 'engine (before)').padEnd(14)} | ${String(result.calls).padStart(12)} | ${(result.calls / size).toFixed(3).padStart(13)} | ${result.cpuMs.toFixed(0).padStart(14)} ms | ${result.wallMs.toFixed(0)} ms`,
      );
    }
    const before = results.engine!;
    const after = results.cache!;
    console.log(
      `${String(size).padStart(10)} | ratio          | ${(after.calls / before.calls).toFixed(4).padStart(12)} |               | ${(after.cpuMs / before.cpuMs).toFixed(2).padStart(14)}×   | ${(after.wallMs / before.wallMs).toFixed(2)}×`,
    );
  }
  if (engine.containers.size !== created) throw new Error(`expected ${created} containers, the engine has ${engine.containers.size}`);
} finally {
  await drop();
}
process.exit(0);
