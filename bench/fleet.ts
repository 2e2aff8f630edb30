/**
 * Fleet: (1) 100 workspaces opened at once (cap raised) until all 100 code containers run, against a
 * plain parallel dockerode create+start of 100 like containers in the same run (target: at most 1.5×);
 * (2) restart adoption: the controller is stopped and a new one started over the 100 running
 * containers, with their status wiped; time until all 100 are reported running again, and how many
 * containers were restarted (target: within 5 s, zero restarts).
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/fleet.ts   (FLEET=100 by default)
 */
import { randomBytes } from 'node:crypto';
import { benchDatabase, CONTROL_PLANE_LABEL, controlPlane, deadline, docker, plainCreateStart, removeLabelled } from './lib.ts';

deadline(15 * 60_000);
const FLEET = Number(process.env.FLEET ?? 100);
const { dataSource, drop } = await benchDatabase('cp_bench_fleet');
let startedCount = 0;
let allStarted: () => void = () => undefined;
const plane = controlPlane(dataSource, {
  onLog: (record) => {
    if (record.message === 'code container started' && ++startedCount === FLEET) allStarted();
  },
});
const baselineId = randomBytes(4).toString('hex');
let controller = plane.newController();

try {
  // Baseline: 100 plain create+start in parallel.
  const t0 = performance.now();
  await Promise.all(Array.from({ length: FLEET }, (_, i) => plainCreateStart(`bench-fleet-${baselineId}-${i}`, baselineId)));
  const plain = performance.now() - t0;
  await removeLabelled('bench.baseline', baselineId);

  await controller.start();
  const ids: string[] = [];
  for (let i = 0; i < FLEET; i++) ids.push((await plane.store.users.create({ email: `fleet-${baselineId}-${i}@school.test` })).workspace.id);
  const done = new Promise<void>((resolve) => (allStarted = resolve));
  const t1 = performance.now();
  await Promise.all(ids.map((id) => plane.store.workspaces.open(id)));
  await done;
  const fleet = performance.now() - t1;
  console.log(
    `fleet of ${FLEET}: plain parallel create+start ${(plain / 1000).toFixed(2)} s, control plane open→all running ${(fleet / 1000).toFixed(2)} s, ratio ${(fleet / plain).toFixed(2)}x (target ≤ 1.5x): ${fleet / plain <= 1.5 ? 'met' : 'NOT met'}`,
  );

  // Adoption: a new controller over the running fleet, with the recorded status wiped.
  await controller.queue.idle();
  await controller.stop();
  const before = new Map(
    (await docker.listContainers({ filters: { label: [`${CONTROL_PLANE_LABEL}=${plane.controlPlaneId}`] } })).map((info) => [info.Id, info.Status]),
  );
  const startedAt = async () =>
    new Map(await Promise.all([...before.keys()].map(async (id) => [id, (await docker.getContainer(id).inspect()).State.StartedAt] as const)));
  const startedBefore = await startedAt();
  await dataSource.query("UPDATE workspaces SET observed_state = 'unknown'");
  controller = plane.newController();
  const t2 = performance.now();
  await controller.start();
  for (;;) {
    const rows: { n: string }[] = await dataSource.query("SELECT count(*) AS n FROM workspaces WHERE observed_state = 'running'");
    if (Number(rows[0]!.n) === FLEET) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const adoption = performance.now() - t2;
  const startedAfter = await startedAt();
  const restarts = [...startedBefore].filter(([id, at]) => startedAfter.get(id) !== at).length;
  console.log(
    `adoption of ${FLEET} running: all reported running in ${(adoption / 1000).toFixed(2)} s, ${restarts} restarted (target ≤ 5 s, 0 restarts): ${adoption <= 5000 && restarts === 0 ? 'met' : 'NOT met'}`,
  );
} finally {
  await controller.stop();
  await removeLabelled(CONTROL_PLANE_LABEL, plane.controlPlaneId);
  await removeLabelled('bench.baseline', baselineId);
  await drop();
}
process.exit(0);
