/**
 * The Swarm runtime on a real three-node swarm (Docker-in-Docker nodes, test/helpers/swarm.ts):
 * (1) open-to-editor: a workspace opened until its editor answers (status running), one at a time,
 *     on the swarm against the single engine of this host, same stand-in image, same run;
 * (2) a full resync of the workspace controller with WORKSPACES (200) running on the swarm: engine
 *     calls (every HTTP request to any node's engine, counted by a relay in front of each node's
 *     socket) and the control plane's CPU, with observed state from the shared cache against every
 *     reconcile asking the engines (the baseline, same run);
 * (3) recovery: every home backed up, a worker killed (SIGKILL of its node), the time until the
 *     swarm reports it down, and until every workspace it held runs on another node from its backup
 *     (NODE_LOST_SECONDS=10, the shortest allowed, so that the figure is mostly the work itself).
 *
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/swarm.ts   (OPENS=10 WORKSPACES=200 ROUNDS=3)
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Backups } from '../src/backup/backups.ts';
import { SYSTEM_ACTOR } from '../src/store/audit.ts';
import { TEST_IMAGE } from '../test/helpers/controllers.ts';
import { startSwarm, type Swarm } from '../test/helpers/swarm.ts';
import { benchDatabase, controlPlane, deadline, removeLabelled, CONTROL_PLANE_LABEL } from './lib.ts';

const OPENS = Number(process.env.OPENS ?? 10);
const WORKSPACES = Number(process.env.WORKSPACES ?? 200);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
let swarm: Swarm | undefined;
const relays: net.Server[] = [];
const { dataSource, drop } = await benchDatabase('cp_bench_swarm');
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cp-bench-swarm-'));
const cleanup = async () => {
  for (const server of relays) server.close();
  await swarm?.stop();
  await drop();
};
deadline(40 * 60_000, cleanup);

/** A Unix-socket relay in front of an engine's socket that counts the connections it relays (each engine call is one: the clients keep none alive). */
async function relay(target: string): Promise<{ path: string; count(): number }> {
  const counted = `${target}.counted`;
  rmSync(counted, { force: true });
  let connections = 0;
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(target);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(counted, resolve));
  relays.push(server);
  return { path: counted, count: () => connections };
}

const median = (values: number[]) => values.toSorted((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Opens `count` workspaces one at a time; each one's time from open to its editor answering. */
async function openOneByOne(bench: ReturnType<typeof controlPlane>, tag: string, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let index = 0; index < count; index++) {
    const { workspace } = await bench.store.users.create({ email: `open-${tag}-${index}@school.test` });
    const started = performance.now();
    await bench.store.workspaces.open(workspace.id);
    for (;;) {
      const current = await bench.store.workspaces.get(workspace.id);
      if (current?.status.observedState === 'running' && current.status.editorEndpoint) break;
      if (current?.status.observedState === 'failed') throw new Error(`workspace failed: ${current.status.statusMessage}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    times.push(performance.now() - started);
  }
  return times;
}

try {
  swarm = await startSwarm({ size: 3, images: [TEST_IMAGE] });
  const counted = await Promise.all(swarm.nodes.map((node) => relay(node.socket)));
  const calls = () => counted.reduce((sum, relayed) => sum + relayed.count(), 0);
  const swarmEnv = {
    RUNTIME: 'swarm',
    SWARM_ENGINES: counted.map((relayed) => `unix://${relayed.path}`).join(','),
    WORKSPACE_NETWORK: 'classroom-bench-workspaces',
    // Pulled by the nodes from the cluster's registry, pinned by digest (docs/swarm.md).
    WORKSPACE_IMAGE: swarm.images[TEST_IMAGE]!,
  };

  // (1) Open to editor, one at a time: the single engine, then the swarm.
  const tag = randomBytes(3).toString('hex');
  const single = controlPlane(dataSource, { env: { WORKSPACE_NETWORK: 'classroom-bench-workspaces', MAX_ACTIVE_CONTAINERS: '1000' } });
  const singleController = single.newController();
  await singleController.start();
  const singleTimes = await openOneByOne(single, `${tag}-single`, OPENS);
  await singleController.stop();
  await removeLabelled(CONTROL_PLANE_LABEL, single.controlPlaneId);
  const onSwarm = controlPlane(dataSource, { env: { ...swarmEnv, MAX_ACTIVE_CONTAINERS: String(WORKSPACES + OPENS + 10), DATA_DIR: dataDir } });
  const swarmController = onSwarm.newController();
  await swarmController.start();
  const swarmTimes = await openOneByOne(onSwarm, `${tag}-swarm`, OPENS);
  console.log(`open to editor, ${OPENS} workspaces one at a time (median, max):`);
  console.log(`  single engine  ${median(singleTimes).toFixed(0)} ms, ${Math.max(...singleTimes).toFixed(0)} ms`);
  console.log(
    `  swarm          ${median(swarmTimes).toFixed(0)} ms, ${Math.max(...swarmTimes).toFixed(0)} ms   (${(median(swarmTimes) / median(singleTimes)).toFixed(2)}× the single engine)`,
  );

  // (2) The class grows to WORKSPACES on the swarm; then full resyncs, with and without the cache.
  const opened = [];
  for (let index = OPENS; index < WORKSPACES; index++)
    opened.push((await onSwarm.store.users.create({ email: `class-${tag}-${index}@school.test` })).workspace.id);
  const growStarted = performance.now();
  await Promise.all(opened.map((id) => onSwarm.store.workspaces.open(id)));
  for (;;) {
    const running = (await dataSource.query(`SELECT count(*) AS n FROM workspaces WHERE observed_state = 'running' AND editor_endpoint IS NOT NULL`)) as {
      n: string;
    }[];
    if (Number(running[0]!.n) >= WORKSPACES) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  console.log(`${WORKSPACES} workspaces running on the swarm (${((performance.now() - growStarted) / 1000).toFixed(0)} s to open ${opened.length} at once)`);
  await swarmController.stop();

  console.log(
    `full resync with ${WORKSPACES} workspaces, ${ROUNDS} rounds (medians): engine calls (HTTP requests to the nodes' engines), control-plane CPU, wall`,
  );
  const results: Record<string, { calls: number; cpuMs: number; wallMs: number }> = {};
  for (const cache of [false, true]) {
    const plane = controlPlane(dataSource, {
      controlPlaneId: onSwarm.controlPlaneId,
      observedStateCache: cache,
      env: { ...swarmEnv, MAX_ACTIVE_CONTAINERS: String(WORKSPACES + OPENS + 10) },
      tuning: { workspaces: { resyncIntervalMs: 3_600_000, orphanStartupGraceMs: 3_600_000 } },
    });
    const controller = plane.newController();
    await controller.start();
    await controller.resyncAll();
    await controller.queue.idle();
    const rounds: { calls: number; cpuMs: number; wallMs: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const before = calls();
      const cpu = process.cpuUsage();
      const started = performance.now();
      await controller.resyncAll();
      await controller.queue.idle();
      const wallMs = performance.now() - started;
      const used = process.cpuUsage(cpu);
      rounds.push({ calls: calls() - before, cpuMs: (used.user + used.system) / 1000, wallMs });
    }
    await controller.stop();
    const result = { calls: median(rounds.map((r) => r.calls)), cpuMs: median(rounds.map((r) => r.cpuMs)), wallMs: median(rounds.map((r) => r.wallMs)) };
    results[cache ? 'cache' : 'engine'] = result;
    console.log(
      `  ${(cache ? 'shared cache' : 'engines (before)').padEnd(17)} ${String(result.calls).padStart(6)} calls   ${result.cpuMs.toFixed(0).padStart(6)} ms CPU   ${result.wallMs.toFixed(0).padStart(6)} ms`,
    );
  }
  console.log(
    `  ratio             ${(results.cache!.calls / results.engine!.calls).toFixed(4)}×       ${(results.cache!.cpuMs / results.engine!.cpuMs).toFixed(2)}×         ${(results.cache!.wallMs / results.engine!.wallMs).toFixed(2)}×`,
  );

  // (3) Recovery after a node is killed.
  const recovering = controlPlane(dataSource, {
    controlPlaneId: onSwarm.controlPlaneId,
    env: { ...swarmEnv, MAX_ACTIVE_CONTAINERS: String(WORKSPACES + OPENS + 10), NODE_LOST_SECONDS: '10', DATA_DIR: dataDir },
  });
  const controller = recovering.newController();
  await controller.start();
  const backups = new Backups({ store: recovering.store, runtime: recovering.runtime, dataDir, image: swarm.images[TEST_IMAGE]! });
  const everyone = (await recovering.store.workspaces.list()).filter((workspace) => workspace.status.observedState === 'running');
  const backedUp = performance.now();
  for (const workspace of everyone) await backups.create(SYSTEM_ACTOR, workspace);
  console.log(`recovery: ${everyone.length} homes backed up (${((performance.now() - backedUp) / 1000).toFixed(0)} s)`);
  const victim = swarm.nodes[1]!;
  const held = everyone.filter((workspace) => workspace.status.node === victim.name).map((workspace) => workspace.id);
  const killedAt = performance.now();
  execFileSync('docker', ['kill', victim.name]);
  let downAfter: number | undefined;
  for (;;) {
    if (downAfter === undefined && (await recovering.runtime.nodes()).find((node) => node.name === victim.name)?.state === 'down')
      downAfter = performance.now() - killedAt;
    const rows = (await dataSource.query(
      `SELECT count(*) AS n FROM workspaces WHERE id = ANY($1::uuid[]) AND observed_state = 'running' AND observed_generation = generation AND node IS DISTINCT FROM $2`,
      [held, victim.name],
    )) as { n: string }[];
    if (Number(rows[0]!.n) === held.length) break;
    if (performance.now() - killedAt > 15 * 60_000) throw new Error('recovery took more than 15 minutes');
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  const recovered = performance.now() - killedAt;
  console.log(
    `  ${held.length} workspaces of the killed node running elsewhere after ${(recovered / 1000).toFixed(1)} s (the swarm saw it down after ${((downAfter ?? recovered) / 1000).toFixed(1)} s; NODE_LOST_SECONDS=10; the rest is restoring and starting)`,
  );
  await controller.stop();
} finally {
  await cleanup();
}
process.exit(0);
