/**
 * Run latency: time from the run request to `running` (the first nt4 answer) with the stand-in
 * simulator (compile 1.5 s, boot 0.5 s, as the test image defaults), against a plain dockerode
 * create+start of the same simulator container polled every 20 ms until its nt4 port answers,
 * alternating, in the same run. The difference is the control plane's share.
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/runs.ts   (N=10 by default)
 */
import { randomBytes } from 'node:crypto';
import { probeHttp } from '../src/probe.ts';
import { benchDatabase, CONTROL_PLANE_LABEL, controlPlane, deadline, docker, IMAGE, median, MEMORY, percentile, removeLabelled } from './lib.ts';

deadline(10 * 60_000);
const N = Number(process.env.N ?? 10);
const SIM = 'node /app/sim.mjs';
const { dataSource, drop } = await benchDatabase('cp_bench_runs');
const plane = controlPlane(dataSource, { parts: ['workspaces', 'runs'], env: { SIM_COMMAND: SIM, RUN_BUILD_TIMEOUT: '60s' } });
const workspaces = plane.plane.workspaces!;
const runs = plane.plane.runs!;
const baselineId = randomBytes(4).toString('hex');
const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function plainRound(i: number): Promise<number> {
  const started = performance.now();
  const container = await docker.createContainer({
    name: `bench-sim-${baselineId}-${i}`,
    Image: IMAGE,
    Cmd: ['sh', '-c', SIM],
    Labels: { 'bench.baseline': baselineId },
    HostConfig: { Memory: MEMORY, MemorySwap: MEMORY, NetworkMode: 'bridge', Init: true },
  });
  await container.start();
  const address = (await container.inspect()).NetworkSettings.Networks.bridge!.IPAddress;
  while ((await probeHttp(`${address}:5810`)).outcome !== 'ok') await wait(20);
  const elapsed = performance.now() - started;
  await removeLabelled('bench.baseline', baselineId);
  return elapsed;
}

const plain: number[] = [];
const viaControlPlane: number[] = [];
try {
  await workspaces.start();
  await runs.start();
  const { workspace } = await plane.store.users.create({ email: `runs-${baselineId}@school.test` });
  await plane.store.workspaces.open(workspace.id);
  while ((await plane.store.workspaces.get(workspace.id))?.status.observedState !== 'running') await wait(20);
  const controlPlaneRound = async () => {
    const started = performance.now();
    const run = await plane.store.runs.create(workspace.id);
    while ((await plane.store.runs.get(run.id))?.status.phase !== 'running') await wait(5);
    const elapsed = performance.now() - started;
    await plane.store.runs.requestStop(workspace.id, run.id);
    while ((await plane.store.runs.get(run.id))?.status.phase === 'running') await wait(20);
    await runs.queue.idle();
    return elapsed;
  };
  for (let i = 0; i < N + 1; i++) {
    // Alternate which goes first; the first round warms both sides.
    let direct: number;
    let managed: number;
    if (i % 2 === 0) {
      direct = await plainRound(i);
      managed = await controlPlaneRound();
    } else {
      managed = await controlPlaneRound();
      direct = await plainRound(i);
    }
    if (i === 0) continue;
    plain.push(direct);
    viaControlPlane.push(managed);
  }
} finally {
  await runs.stop();
  await workspaces.stop();
  await removeLabelled(CONTROL_PLANE_LABEL, plane.controlPlaneId);
  await removeLabelled('bench.baseline', baselineId);
  await drop();
}
const share = median(viaControlPlane) - median(plain);
console.log(`run request → running, stand-in simulator (compile 1.5 s + boot 0.5 s), ${N} rounds (ms):`);
console.log(`  plain create+start, nt4 polled every 20 ms   median ${median(plain).toFixed(0)}  p90 ${percentile(plain, 90).toFixed(0)}`);
console.log(`  control plane (probe every 100 ms)           median ${median(viaControlPlane).toFixed(0)}  p90 ${percentile(viaControlPlane, 90).toFixed(0)}`);
console.log(`  control plane's share: ${share.toFixed(0)} ms median (${((share / median(viaControlPlane)) * 100).toFixed(1)} % of the total)`);
process.exit(0);
