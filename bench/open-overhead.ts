/**
 * Control-plane overhead of opening a workspace: time from the open call (admission in PostgreSQL)
 * to the code container running (the controller's "started" record), against a plain dockerode
 * volume create + container create + start of the same container, measured in the same run,
 * alternating. Run: PATH=$PWD/node_modules/.bin:$PATH node bench/open-overhead.ts  (N=20 by default)
 */
import { randomBytes } from 'node:crypto';
import { SYSTEM_ACTOR } from '../src/store/audit.ts';
import { benchDatabase, CONTROL_PLANE_LABEL, controlPlane, deadline, median, percentile, plainCreateStart, removeLabelled } from './lib.ts';

deadline(10 * 60_000);
const N = Number(process.env.N ?? 20);
const { dataSource, drop } = await benchDatabase('cp_bench_open');
const started = new Map<string, number>();
const plane = controlPlane(dataSource, {
  onLog: (record) => {
    if (record.message === 'code container started') started.set(String(record.workspaceId), performance.now());
  },
});
const controller = plane.newController();
await controller.start();
const baselineId = randomBytes(4).toString('hex');

const viaControlPlane: number[] = [];
const baseline: number[] = [];
try {
  const plainRound = async (i: number) => {
    const t0 = performance.now();
    await plainCreateStart(`bench-plain-${baselineId}-${i}`, baselineId);
    const elapsed = performance.now() - t0;
    await removeLabelled('bench.baseline', baselineId);
    return elapsed;
  };
  const controlPlaneRound = async (i: number) => {
    const { user, workspace } = await plane.store.users.create({ email: `bench-${baselineId}-${i}@school.test` });
    // The new account's own reconcile (its workspace observed stopped) is not part of opening it.
    await controller.queue.idle();
    const t0 = performance.now();
    await plane.store.workspaces.open(workspace.id);
    while (!started.has(workspace.id)) await new Promise((resolve) => setTimeout(resolve, 1));
    const elapsed = started.get(workspace.id)! - t0;
    await plane.store.users.delete(SYSTEM_ACTOR, user.id);
    while (await plane.store.workspaces.get(workspace.id)) await new Promise((resolve) => setTimeout(resolve, 20));
    await controller.queue.idle();
    return elapsed;
  };
  for (let i = 0; i < N + 2; i++) {
    // Alternate which goes first, so neither always follows the other's teardown.
    let plain: number;
    let open: number;
    if (i % 2 === 0) {
      plain = await plainRound(i);
      open = await controlPlaneRound(i);
    } else {
      open = await controlPlaneRound(i);
      plain = await plainRound(i);
    }
    // The first two rounds warm caches on both sides.
    if (i >= 2) {
      baseline.push(plain);
      viaControlPlane.push(open);
    }
  }
} finally {
  await controller.stop();
  await removeLabelled(CONTROL_PLANE_LABEL, plane.controlPlaneId);
  await removeLabelled('bench.baseline', baselineId);
  await drop();
}
const overhead = median(viaControlPlane) - median(baseline);
console.log(`open → running, ${N} rounds (ms):`);
console.log(`  plain dockerode create+start  median ${median(baseline).toFixed(1)}  p90 ${percentile(baseline, 90).toFixed(1)}`);
console.log(`  control plane open            median ${median(viaControlPlane).toFixed(1)}  p90 ${percentile(viaControlPlane, 90).toFixed(1)}`);
console.log(
  `  ratio ${(median(viaControlPlane) / median(baseline)).toFixed(2)}x, overhead ${overhead.toFixed(1)} ms median (target < 50 ms): ${overhead < 50 ? 'met' : 'NOT met'}`,
);
process.exit(0);
