/**
 * The Swarm runtime on a real swarm of three Docker-in-Docker nodes (one manager, two workers), the
 * workspace image pulled by every node from the cluster's registry: workspaces placed and spread,
 * their editors reached through the proxy on the node that runs them, runs beside their home,
 * isolation with its control case, a workspace that fits nowhere told so and started once room is
 * made; then homes that survive a node: a node away for 25 s moves nothing (its editors start
 * again there, as Swarm marked it down), a killed worker's workspaces come back elsewhere from their
 * latest backup, a drained node is emptied with a fresh backup of each home. (One swarm for all:
 * starting one is the slow part.)
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import WebSocket from 'ws';
import { request } from 'undici';
import { Backups } from '../../src/backup/backups.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { endpointOf, type ManagedContainer } from '../../src/docker/runtime.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { RunController } from '../../controllers/runs.ts';
import { categoryLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics.ts';
import { captureLogger, createHarness, eventually, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import type { Status } from '../../src/wire/schemas.ts';
import { startSwarmHarness, type Swarm, type SwarmHarness, type SwarmNode, type SwarmSettings } from '../helpers/swarm.ts';
import { echoes } from '../helpers/websocket.ts';
import { newStudent, waitForState, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
let plane: SwarmHarness | undefined;
let swarm: Swarm;
let harness: Harness;
/** A control plane on the swarm, its workspace image pulled by the nodes from the cluster's registry, pinned by digest. */
let swarmEnv: SwarmSettings;
let app: TestApp;
/** The control plane of the second part (NODE_LOST_SECONDS short, backups in its data directory). */
let nodes: Harness | undefined;
const shell = promisify(execFile);

/**
 * Pauses a container (its cgroup frozen). runc gives up freezing a busy cgroup after a bounded
 * number of tries ("unable to freeze", thawed again; CI on a loaded 2-core machine, 2026-12-02) and
 * leaves a retry to its caller (opencontainers/runc#4388): tried up to five times.
 */
async function pause(name: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await shell('docker', ['pause', name]);
      return;
    } catch (error) {
      if (attempt === 5 || !String((error as { stderr?: string }).stderr).includes('unable to freeze')) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}
const tag = Date.now().toString(36);
const SIZE = 30;

/** Run in a workspace's container with `host:port`: prints `reached` when a connection opens within 3 s, else `blocked`. */
/** Where a cloud's metadata service answers (a link-local address). */
const METADATA = '169.254.169.254';

const PROBE = `const [host, port] = process.argv[1].split(':');
const socket = require('net').connect(Number(port), host);
const say = (what) => { console.log(what); process.exit(0); };
socket.setTimeout(3000, () => say('blocked'));
socket.on('connect', () => say('reached'));
socket.on('error', () => say('blocked'));`;

beforeAll(async () => {
  plane = await startSwarmHarness(db.dataSource, { size: 3, network: 'classroom-swarm-workspaces', harness: { environmentCap: SIZE + 5 } });
  ({ swarm, harness, env: swarmEnv } = plane);
  // The proxy asks the same swarm where each editor serves (its own control plane's services), as in a deployment.
  app = await startApp(db.dataSource, { ...swarmEnv, CONTROL_PLANE_ID: harness.controlPlaneId }, { changes: harness.changes });
}, 10 * 60_000);
afterAll(async () => {
  await app?.close();
  await nodes?.stop();
  await plane?.stop();
}, 5 * 60_000);

const codeOf = async (runtime: { listContainers(filter?: { workspaceId?: string }): Promise<ManagedContainer[]> }, workspaceId: string) =>
  (await runtime.listContainers({ workspaceId })).find((container) => container.role === 'code');

/** A service's task limits as the manager keeps them, and as its node's engine applied them to its running container. */
async function limitsOf(service: ManagedContainer): Promise<{ limits: unknown; applied: unknown }> {
  const node = swarm.nodes.find((candidate) => candidate.name === service.node)!;
  const limits = JSON.parse(
    await swarm.docker(swarm.nodes[0]!, ['service', 'inspect', service.id, '--format', '{{json .Spec.TaskTemplate.Resources.Limits}}']),
  ) as unknown;
  const container = (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${service.id}`])).trim();
  const host = JSON.parse(await swarm.docker(node, ['inspect', container, '--format', '{{json .HostConfig}}'])) as Record<string, unknown>;
  return { limits, applied: { NanoCpus: host.NanoCpus, Memory: host.Memory, PidsLimit: host.PidsLimit } };
}

describe('workspaces on a swarm', () => {
  let students: Student[] = [];

  it(`spreads ${SIZE} workspaces over the three nodes, each editor answering HTTP and WebSocket through the proxy on its node`, async () => {
    students = await Promise.all(Array.from({ length: SIZE }, (_, index) => newStudent(harness.store, `s${index}`, tag)));
    await Promise.all(students.map((student) => harness.store.workspaces.open(student.workspace.id)));
    for (const student of students) student.workspace = await waitForState(harness.store, student.workspace.id, 'running', 180_000);

    const editors = (await harness.runtime.listContainers()).filter((container) => container.role === 'code');
    expect(editors).toHaveLength(SIZE);
    const perNode = new Map<string, number>();
    for (const editor of editors) perNode.set(editor.node ?? '?', (perNode.get(editor.node ?? '?') ?? 0) + 1);
    expect([...perNode.keys()].toSorted()).toEqual(swarm.nodes.map((node) => node.name).toSorted());
    expect(Math.max(...perNode.values()) - Math.min(...perNode.values())).toBeLessThanOrEqual(1);
    // Limited as on one engine: memory (CODE_MEMORY_LIMIT) and processes (CONTAINER_PIDS_LIMIT; services take `Pids` since API 1.41).
    expect(await limitsOf(editors[0]!)).toEqual({
      limits: { MemoryBytes: 64 * 1024 * 1024, Pids: 1024 },
      applied: { NanoCpus: 0, Memory: 64 * 1024 * 1024, PidsLimit: 1024 },
    });

    // Each editor is reached at its node's address, on the port the node published.
    const addresses = new Set(swarm.nodes.map((node) => node.address));
    for (const student of students) expect(addresses.has(student.workspace.status.editorEndpoint!.split(':')[0]!)).toBe(true);
    for (const student of students) {
      const response = await request(`${app.url}/u/${student.workspace.slug}/healthz`, { headers: { cookie: student.cookie } });
      expect(response.statusCode).toBe(200);
      expect(await response.body.text()).toBe('ok');
      const socket = new WebSocket(`${app.url.replace('http', 'ws')}/u/${student.workspace.slug}/ws`, { headers: { cookie: student.cookie, origin: app.url } });
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      await echoes(socket);
      socket.close();
    }

    // Where each runs, for the operator: /admin/status, `cli nodes list` and the panel read what the leader recorded.
    const coach = await newStudent(harness.store, 'coach', tag, 'admin');
    const status = (await (await request(`${app.url}/admin/status`, { headers: { cookie: coach.cookie } })).body.json()) as Status;
    const nodeOf = new Map(editors.map((editor) => [editor.workspaceId, editor.node]));
    for (const student of students)
      expect(status.workspaces.find((workspace) => workspace.id === student.workspace.id)?.node).toBe(nodeOf.get(student.workspace.id));
    const recorded = await eventually('the nodes recorded', async () => {
      const listed = await harness.store.nodes.list();
      return listed.length === 3 && listed.every((node) => node.state === 'ready') ? listed : undefined;
    });
    for (const node of recorded) expect(node.runningWorkspaces).toBe(perNode.get(node.name));
  }, 400_000);

  it("runs a student's code beside the workspace's home, on its node: probed there, its output kept, stopped on request; a failed compile keeps its exit code", async () => {
    const student = students[1]!;
    const logger = captureLogger();
    const runs = new RunController({
      store: harness.store,
      runtime: harness.runtime,
      metrics: createMetrics(),
      log: categoryLogger(logger.root, 'runs'),
      buildTimeoutMs: 60_000,
      probeIntervalMs: 100,
      runningCheckMs: 500,
      template: {
        image: swarm.images[TEST_IMAGE]!,
        memoryBytes: 64 * 1024 * 1024,
        nanoCpus: 250_000_000,
        pidsLimit: 100,
        network: swarmEnv.WORKSPACE_NETWORK,
        nt4Port: 5810,
        command: 'SIM_COMPILE_MS=300 SIM_BOOT_MS=100 node /app/sim.mjs',
      },
    });
    await runs.start();
    try {
      const editor = (await codeOf(harness.runtime, student.workspace.id))!;
      const run = await harness.store.runs.create(student.workspace.id);
      const ready = await eventually(
        'run running',
        async () => ((await harness.store.runs.get(run.id))?.status.phase === 'running' ? harness.store.runs.get(run.id) : undefined),
        60_000,
      );
      const node = swarm.nodes.find((candidate) => candidate.name === editor.node)!;
      expect(ready!.status.simEndpoint).toMatch(new RegExp(`^${node.address.replaceAll('.', '\\.')}:\\d+$`));
      const sim = (await harness.runtime.listContainers({ workspaceId: student.workspace.id })).find((container) => container.role === 'sim')!;
      expect(sim.node).toBe(editor.node);
      // Its robot's HALSim WebSocket (HALSIM_PORT) is published on the node too, where the proxy's relay reaches it.
      const halsim = await harness.runtime.serving({ workspaceId: student.workspace.id, runId: run.id }, 3300);
      expect(halsim?.endpoint).toMatch(new RegExp(`^${node.address.replaceAll('.', '\\.')}:\\d+$`));
      // A run's own CPU, memory and process limits, as the manager keeps them and as the node applied them.
      expect(await limitsOf(sim)).toEqual({
        limits: { MemoryBytes: 64 * 1024 * 1024, NanoCPUs: 250_000_000, Pids: 100 },
        applied: { NanoCpus: 250_000_000, Memory: 64 * 1024 * 1024, PidsLimit: 100 },
      });
      await harness.store.runs.requestStop(student.workspace.id, run.id);
      const stopped = await eventually(
        'run stopped',
        async () => ((await harness.store.runs.get(run.id))?.status.phase === 'stopped' ? harness.store.runs.get(run.id) : undefined),
        60_000,
      );
      expect(stopped!.status.output).toContain('compiling');
      await eventually(
        'its service removed',
        async () => !(await harness.runtime.listContainers({ workspaceId: student.workspace.id })).some((container) => container.role === 'sim'),
        60_000,
      );
    } finally {
      await runs.stop();
    }
    const failing = new RunController({
      store: harness.store,
      runtime: harness.runtime,
      metrics: createMetrics(),
      log: categoryLogger(captureLogger().root, 'runs'),
      buildTimeoutMs: 60_000,
      probeIntervalMs: 100,
      runningCheckMs: 500,
      template: {
        image: swarm.images[TEST_IMAGE]!,
        memoryBytes: 64 * 1024 * 1024,
        network: swarmEnv.WORKSPACE_NETWORK,
        nt4Port: 5810,
        command: 'SIM_COMPILE_MS=200 SIM_COMPILE_EXIT=2 node /app/sim.mjs',
      },
    });
    await failing.start();
    try {
      const run = await harness.store.runs.create(student.workspace.id);
      const failed = await eventually(
        'run failed',
        async () => ((await harness.store.runs.get(run.id))?.status.phase === 'failed' ? harness.store.runs.get(run.id) : undefined),
        60_000,
      );
      expect(failed).toMatchObject({ status: { exitCode: 2, reason: 'compile or boot failed (exit code 2)' } });
      expect(failed!.status.output).toContain('compilation failed');
    } finally {
      await failing.stop();
    }
  }, 300_000);

  it('stops a workspace by scaling its service to none, and reopens it on the node of its home with its files', async () => {
    const [student] = students;
    const before = (await codeOf(harness.runtime, student!.workspace.id))!;
    const node = swarm.nodes.find((candidate) => candidate.name === before.node)!;
    const container = (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${before.id}`])).trim();
    await swarm.docker(node, ['exec', container, 'sh', '-c', 'echo kept > /home/student/notes.txt']);

    await harness.store.workspaces.stop(SYSTEM_ACTOR, student!.workspace.id, 'coach');
    await waitForState(harness.store, student!.workspace.id, 'stopped');
    // (Scaled to none, its task is soon removed: `exited`, then `created` again.)
    expect(['exited', 'created']).toContain((await codeOf(harness.runtime, student!.workspace.id))?.state);
    expect((await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${before.id}`])).trim()).toBe('');

    await harness.store.workspaces.open(student!.workspace.id);
    await waitForState(harness.store, student!.workspace.id, 'running', 120_000);
    const after = (await codeOf(harness.runtime, student!.workspace.id))!;
    expect(after.id).toBe(before.id);
    expect(after.node).toBe(before.node);
    const again = (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${before.id}`])).trim();
    expect(await swarm.docker(node, ['exec', again, 'cat', '/home/student/notes.txt'])).toBe('kept\n');
  }, 300_000);

  it('keeps workspaces from each other on one node and across nodes, and from the control plane and the nodes, once the node firewall is on; the control plane still reaches every editor', async () => {
    const editors = (await harness.runtime.listContainers()).filter((container) => container.role === 'code' && container.state === 'running');
    const on = (node: SwarmNode) => editors.filter((editor) => editor.node === node.name);
    // A workspace on a worker, a neighbour on the same worker, and one on another node.
    const [manager, worker, other] = swarm.nodes as [SwarmNode, SwarmNode, SwarmNode];
    const [a, neighbour] = on(worker) as [ManagedContainer, ManagedContainer];
    const [b] = on(other) as [ManagedContainer];
    const containerOf = async (node: SwarmNode, editor: ManagedContainer) =>
      (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${editor.id}`])).trim();
    const from = await containerOf(worker, a);
    const neighbourAddress = (
      await swarm.docker(worker, ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', await containerOf(worker, neighbour)])
    ).trim();
    // The control plane's host, as a workspace would find it: a listener on this host's address on the nodes' network.
    // (A probe exits at once, resetting the connection.)
    const host = net.createServer((socket) => socket.on('error', () => undefined).end('host\n'));
    await new Promise<void>((resolve) => host.listen(0, swarm.gateway, resolve));
    // A cloud's metadata service, as a workspace would find it beyond its node: a stand-in of this test's own, at
    // 169.254.169.254 on this host's loopback for the test's duration (no traffic leaves the machine).
    await shell('ip', ['addr', 'replace', `${METADATA}/32`, 'dev', 'lo']);
    const metadata = net.createServer((socket) => socket.on('error', () => undefined).end('metadata\n'));
    await new Promise<void>((resolve) => metadata.listen(0, METADATA, resolve));
    try {
      const targets = {
        "another node's editor": b.published![8080]!,
        'an editor on the same node, at its published port': neighbour.published![8080]!,
        "the control plane's host": `${swarm.gateway}:${(host.address() as net.AddressInfo).port}`,
        "the swarm manager's port": `${manager.address}:2377`,
        "the workspace's own node": `${worker.address}:7946`,
        "a link-local address (a cloud's metadata service)": `${METADATA}:${(metadata.address() as net.AddressInfo).port}`,
      };
      const reach = async (target: string) =>
        (await swarm.docker(worker, ['exec', from, 'node', '-e', PROBE, target])).trim() === 'reached' ? 'reached' : 'blocked';
      const reached = async () => Object.fromEntries(await Promise.all(Object.entries(targets).map(async ([what, target]) => [what, await reach(target)])));

      // The control case: without the firewall, a workspace gets through to each (but to its neighbour's address: the bridge's own switch).
      expect(await reached()).toEqual(Object.fromEntries(Object.keys(targets).map((what) => [what, 'reached'])));
      expect(await reach(`${neighbourAddress}:8080`)).toBe('blocked');

      await swarm.firewall();
      expect(await reached()).toEqual(Object.fromEntries(Object.keys(targets).map((what) => [what, 'blocked'])));
      expect(await reach(`${neighbourAddress}:8080`)).toBe('blocked');
      // The control plane reaches every editor still.
      for (const student of students) {
        const response = await request(`${app.url}/u/${student.workspace.slug}/healthz`, { headers: { cookie: student.cookie } });
        expect(response.statusCode).toBe(200);
        await response.body.dump();
      }
    } finally {
      host.close();
      metadata.close();
      await shell('ip', ['addr', 'del', `${METADATA}/32`, 'dev', 'lo']).catch(() => undefined);
    }
  }, 300_000);

  it('tells a workspace that fits on no node that it waits for room, and starts it once a workspace stops', async () => {
    // The workspaces above stopped and their controller with them: one controller per database.
    await Promise.all(students.map((student) => harness.store.workspaces.stop(SYSTEM_ACTOR, student.workspace.id, 'coach')));
    for (const student of students) await waitForState(harness.store, student.workspace.id, 'stopped', 60_000);
    const live = (await harness.runtime.listContainers()).filter((container) => ['running', 'restarting'].includes(container.state));
    expect(live).toEqual([]);
    await harness.stop();
    // Another control plane on the same swarm (its own reservations), whose editors reserve more than half a node.
    const sizes = await harness.runtime.nodes();
    const memory = Math.floor((Math.min(...sizes.map((node) => node.memoryBytes)) * 0.6) / 1024 / 1024);
    const big = createHarness(db.dataSource, { environmentCap: 10, env: { ...swarmEnv, CODE_MEMORY_LIMIT: `${memory}m` } });
    await big.controller.start();
    try {
      const owners = await Promise.all(Array.from({ length: 4 }, (_, index) => newStudent(big.store, `big${index}`, tag)));
      for (const owner of owners.slice(0, 3)) await big.store.workspaces.open(owner.workspace.id);
      for (const owner of owners.slice(0, 3)) await waitForState(big.store, owner.workspace.id, 'running', 120_000);
      const placed = await Promise.all(owners.slice(0, 3).map(async (owner) => (await codeOf(big.runtime, owner.workspace.id))!.node));
      expect(new Set(placed).size).toBe(3);

      const last = owners[3]!;
      await big.store.workspaces.open(last.workspace.id);
      const waiting = await waitForState(big.store, last.workspace.id, 'waiting');
      expect(waiting.status.statusMessage).toMatch(
        /^Waiting for room: no node of the swarm has [\d.]+ GiB of memory unreserved for another editor \(CODE_MEMORY_LIMIT/,
      );
      expect(await codeOf(big.runtime, last.workspace.id)).toBeUndefined();

      await big.store.workspaces.stop(SYSTEM_ACTOR, owners[1]!.workspace.id, 'coach');
      await waitForState(big.store, last.workspace.id, 'running', 120_000);
      expect((await codeOf(big.runtime, last.workspace.id))!.node).toBe(placed[1]);
    } finally {
      await big.stop();
    }
  }, 400_000);
});

/** Each workspace of the second part with the checksum of the file its backup holds. */
const homes: { workspace: WorkspaceRecord; cookie: string; kept: string; backupCreated: string }[] = [];
let backups: Backups;

const nodeNamed = (name: string | undefined) => swarm.nodes.find((node) => node.name === name)!;

/** A workspace's editor service, as the runtime reports it. */
async function editorOf(workspaceId: string): Promise<ManagedContainer | undefined> {
  return (await nodes!.runtime.listContainers({ workspaceId })).find((container) => container.role === 'code');
}

/** Runs a shell command in a workspace's home, in its editor's container on its node. */
async function inHome(workspace: WorkspaceRecord, command: string): Promise<string> {
  const editor = (await editorOf(workspace.id))!;
  const node = nodeNamed(editor.node);
  const container = (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${editor.id}`])).trim();
  return swarm.docker(node, ['exec', '-w', '/home/student', container, 'sh', '-c', command]);
}

/** The container that runs a service's task on a node ('' when none runs). */
const containerOn = async (node: SwarmNode, service: string) =>
  (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${service}`])).trim();

const checksum = async (workspace: WorkspaceRecord) => (await inHome(workspace, 'sha256sum kept.bin')).split(' ')[0]!;

/** Every running task of a workspace's services, on the manager. */
async function runningTasks(workspaceId: string): Promise<number> {
  const listed = await swarm.docker(swarm.nodes[0]!, ['service', 'ls', '-q', '--filter', `label=service.workspace-id=${workspaceId}`]);
  let running = 0;
  for (const service of listed.split('\n').filter(Boolean)) {
    const states = await swarm.docker(swarm.nodes[0]!, ['service', 'ps', '--format', '{{.CurrentState}}', '--filter', 'desired-state=running', service]);
    running += states.split('\n').filter((state) => state.startsWith('Running')).length;
  }
  return running;
}

const onNode = async (node: SwarmNode) =>
  (await Promise.all(homes.map(async (home) => ({ home, editor: await editorOf(home.workspace.id) })))).filter(({ editor }) => editor?.node === node.name);

describe('homes on a swarm whose nodes fail', () => {
  beforeAll(async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cp-swarm-nodes-'));
    nodes = createHarness(db.dataSource, {
      environmentCap: 20,
      env: { ...swarmEnv, NODE_LOST_SECONDS: '30', DATA_DIR: dataDir },
      nodeCheckMs: 500,
    });
    backups = new Backups({ store: nodes.store, runtime: nodes.runtime, dataDir, image: swarm.images[TEST_IMAGE]! });
    await nodes.controller.start();
    // Six workspaces, two on each node; each home has a file its backup holds, and one written after the backup.
    const students = await Promise.all(Array.from({ length: 6 }, (_, index) => newStudent(nodes!.store, `n${index}`, tag)));
    await Promise.all(students.map((student) => nodes!.store.workspaces.open(student.workspace.id)));
    for (const student of students) {
      const { cookie } = student;
      const workspace = await waitForState(nodes.store, student.workspace.id, 'running', 120_000);
      await inHome(workspace, 'head -c 4096 /dev/urandom > kept.bin');
      const backup = await backups.create(SYSTEM_ACTOR, workspace);
      await inHome(workspace, 'echo after the backup > later.txt');
      homes.push({ workspace, cookie, kept: await checksum(workspace), backupCreated: backup.manifest.created });
    }
  }, 5 * 60_000);

  it("moves nothing when a node is away for 25 s, past Swarm's down detection and within NODE_LOST_SECONDS: each editor runs again on its node in a new container, with its files; the page says starting (its server away), never failed", async () => {
    const node = swarm.nodes[2]!;
    const before = await onNode(node);
    expect(before).toHaveLength(2);
    const containers = new Map<string, string>();
    for (const { home, editor } of before) containers.set(home.workspace.id, await containerOn(node, editor!.id));
    // Every status the store shows for them through the blip (what their pages and the panel read).
    const shown = new Map<string, string[]>(before.map(({ home }) => [home.workspace.id, []]));
    const unsubscribe = nodes!.changes.subscribe((change) => {
      if (change.kind !== 'status' || !shown.has(change.id)) return;
      void nodes!.store.workspaces
        .get(change.id)
        .then((record) => shown.get(change.id)!.push(`${record!.status.observedState}: ${record!.status.statusMessage}`));
    });
    const away = `starting: The server ${node.name} that holds your files is not answering; your editor starts again there once it is back.`;
    try {
      await pause(node.name);
      const pausedAt = Date.now();
      // Swarm marks it down (10 to 15 s after it stops answering) and replaces its tasks.
      await eventually(
        'the node marked down',
        async () => (await nodes!.runtime.nodes()).find((candidate) => candidate.name === node.name)?.state === 'down',
        60_000,
      );
      // A full look while it is down, as the periodic resync may make at any time: it starts nothing there, and says why.
      await nodes!.controller.resyncAll();
      await eventually('their pages saying their server is away', async () => before.every(({ home }) => shown.get(home.workspace.id)!.includes(away)), 30_000);
      // Away for 25 s in all: long past Swarm's down detection, within NODE_LOST_SECONDS (30 s from when it is first seen down).
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 25_000 - (Date.now() - pausedAt))));
      await shell('docker', ['unpause', node.name]);
      for (const { home, editor } of before) {
        // Swarm shut its task down when it marked the node down, and runs a new one there: a new container (its processes and /tmp are gone).
        await eventually(
          'its editor running again on its node, in a new container, and answering where its page says',
          async () => {
            const [record, after] = await Promise.all([nodes!.store.workspaces.get(home.workspace.id), editorOf(home.workspace.id)]);
            if (!after) return false;
            const running = (await containerOn(node, after.id)).split('\n').filter(Boolean);
            if (running.length !== 1 || running[0] === containers.get(home.workspace.id) || record?.status.observedState !== 'running') return false;
            if (record.status.editorEndpoint !== endpointOf(after, 8080)) return false;
            return (await fetch(`http://${record.status.editorEndpoint}/healthz`).catch(() => undefined))?.ok === true;
          },
          60_000,
        );
        // The same service on the same node, with its home and the files written after its last backup: nothing moved.
        const after = (await editorOf(home.workspace.id))!;
        expect([after.id, after.node]).toEqual([editor!.id, node.name]);
        expect(await inHome(home.workspace, 'cat later.txt')).toBe('after the backup\n');
        const record = (await nodes!.store.workspaces.get(home.workspace.id))!;
        expect([record.spec.homeVolume, record.status.homeRestore]).toEqual([home.workspace.spec.homeVolume, null]);
      }
    } finally {
      unsubscribe();
    }
    for (const { home } of before) {
      const states = shown.get(home.workspace.id)!;
      expect(states.filter((state) => !state.startsWith('starting') && !state.startsWith('running'))).toEqual([]);
      expect(states.at(-1)).toBe('running: ');
    }
    expect((await nodes!.store.audit.list({ action: 'workspace.restore', limit: 10 })).entries).toEqual([]);
  }, 180_000);

  it("brings a killed worker's workspaces back on another node from their latest backup within two minutes, never two editors of one at once, none pending", async () => {
    const node = swarm.nodes[1]!;
    const lost = await onNode(node);
    const others = (await Promise.all(homes.map(async (home) => ({ home, editor: await editorOf(home.workspace.id) })))).filter(
      ({ editor }) => editor?.node !== node.name,
    );
    expect(lost).toHaveLength(2);
    const killedAt = Date.now();
    await shell('docker', ['kill', node.name]);
    await eventually(
      'every workspace of the killed node running elsewhere',
      async () => {
        for (const { home } of lost) expect(await runningTasks(home.workspace.id)).toBeLessThanOrEqual(1);
        const moved = await Promise.all(
          lost.map(async ({ home }) => {
            const workspace = await nodes!.store.workspaces.get(home.workspace.id);
            return (
              workspace?.status.observedState === 'running' &&
              workspace.status.observedGeneration === workspace.spec.generation &&
              workspace.status.node !== node.name &&
              workspace.status.node !== null
            );
          }),
        );
        return moved.every(Boolean);
      },
      120_000,
    );
    const seconds = (Date.now() - killedAt) / 1000;
    expect(seconds).toBeLessThan(120);
    for (const { home } of lost) {
      const workspace = (await nodes!.store.workspaces.get(home.workspace.id))!;
      // The files of its latest backup: what it held, not what was written after it.
      expect(await checksum(workspace)).toBe(home.kept);
      expect(await inHome(workspace, 'ls')).not.toContain('later.txt');
      expect(workspace.status.homeRestore).toEqual({
        at: expect.any(Date),
        from: new Date(home.backupCreated),
        reason: `the server ${node.name} that held your files stopped answering`,
      });
      expect(await runningTasks(workspace.id)).toBe(1);
      // Its page tells the student from what time the files are.
      const page = await (await fetch(`${app.url}/u/${workspace.slug}/.cp/`, { headers: { cookie: home.cookie } })).text();
      expect(page).toContain('Your files were brought back from a backup.');
      expect(page).toContain(
        `your files as they were at <time id="restored-from" datetime="${new Date(home.backupCreated).toISOString()}">${new Date(home.backupCreated).toISOString().slice(0, 16).replace('T', ' ')} UTC</time>`,
      );
    }
    // Nothing of this control plane left pending, and the other nodes' workspaces untouched.
    const services = (await swarm.docker(swarm.nodes[0]!, ['service', 'ls', '-q', '--filter', `label=service.control-plane=${nodes!.controlPlaneId}`]))
      .split('\n')
      .filter(Boolean);
    const states = await swarm.docker(swarm.nodes[0]!, ['service', 'ps', '--filter', 'desired-state=running', '--format', '{{.CurrentState}}', ...services]);
    expect(states).not.toMatch(/Pending/);
    for (const { home, editor } of others) expect((await editorOf(home.workspace.id))!.id).toBe(editor!.id);
  }, 240_000);

  it('moves every workspace off a drained node with a fresh backup, no file lost, and places nothing new there', async () => {
    const node = swarm.nodes[2]!;
    const draining = await onNode(node);
    expect(draining).toHaveLength(2);
    await nodes!.store.nodes.drain(SYSTEM_ACTOR, node.name);
    await eventually(
      'every workspace of the drained node running elsewhere',
      async () => {
        const moved = await Promise.all(
          draining.map(async ({ home }) => {
            const workspace = await nodes!.store.workspaces.get(home.workspace.id);
            return (
              workspace?.status.observedState === 'running' &&
              workspace.status.observedGeneration === workspace.spec.generation &&
              workspace.status.node === swarm.nodes[0]!.name
            );
          }),
        );
        return moved.every(Boolean);
      },
      180_000,
    );
    expect((await nodes!.runtime.nodes()).find((candidate) => candidate.name === node.name)?.availability).toBe('pause');
    for (const { home } of draining) {
      const workspace = (await nodes!.store.workspaces.get(home.workspace.id))!;
      expect(await checksum(workspace)).toBe(home.kept);
      // Written after the last backup, and still there: the move took a fresh one.
      expect(await inHome(workspace, 'cat later.txt')).toBe('after the backup\n');
      expect(workspace.status.homeRestore).toBeNull();
    }
    // Its old homes go once nothing mounts them.
    await eventually(
      'the drained node holds no home',
      async () => (await swarm.docker(node, ['volume', 'ls', '-q', '--filter', `label=service.control-plane=${nodes!.controlPlaneId}`])).trim() === '',
      60_000,
    );
  }, 300_000);
});
