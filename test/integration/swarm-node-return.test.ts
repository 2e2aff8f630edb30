/**
 * A swarm node whose engine dies uncleanly and comes back (moby#37087): on a real swarm of two
 * Docker-in-Docker nodes, the worker's container is killed (its dockerd with it: SIGKILL) and
 * started again on its own /var/lib/docker. The engine then keeps a dead bridge of the workspace
 * network and refuses every editor task that joins it (`network <id> exists`); the control plane
 * counts and says the refusal once, repairs the node's network through its engine, and the
 * workspace runs again on that node with its files, twice in a row; the periodic resync is off, so
 * what wakes the controller is the node's return and the runtime's announcement of the refused task,
 * which a first test sees for a task refused for an image no node can have. (One swarm for the file.)
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/config.ts';
import { CONTROL_PLANE_LABEL } from '../../src/docker/docker-runtime.ts';
import { runtimeFor } from '../../src/docker/runtimes.ts';
import { endpointOf, LABELS, MANAGED_LABEL, type RuntimeEvent } from '../../src/docker/runtime.ts';
import { eventually, TEST_ENV, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startSwarmHarness, type Swarm, type SwarmHarness, type SwarmNode } from '../helpers/swarm.ts';
import { newStudent, waitForState } from '../helpers/workspaces.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const shell = promisify(execFile);
const tag = Date.now().toString(36);
const NETWORK = 'classroom-swarm-return';
let plane: SwarmHarness | undefined;
let swarm: Swarm;
let harness: Harness;
let editorOf: SwarmHarness['editorOf'];

beforeAll(async () => {
  // No periodic resync while the test runs: events (a node's return, a refused task's announcement) wake the controller.
  plane = await startSwarmHarness(db.dataSource, { size: 2, network: NETWORK, harness: { resyncIntervalMs: 60 * 60_000 } });
  ({ swarm, harness, editorOf } = plane);
}, 5 * 60_000);
afterAll(async () => {
  await plane?.stop();
}, 5 * 60_000);

/** The id of the container that runs a service's task on a node ('' when none runs). */
const containerOn = async (node: SwarmNode, service: string) =>
  (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${service}`])).trim();

/** SIGKILL of the node's container (its dockerd dies with it, as in a power cut), then started again. */
async function killAndStart(node: SwarmNode): Promise<void> {
  await shell('docker', ['kill', node.name]);
  await shell('docker', ['start', node.name]);
}

/**
 * Waits until the workspace's editor runs again on `node` in a task of its own (not the container
 * `before`) and answers at the endpoint recorded for it.
 */
async function runningAgainOn(workspace: WorkspaceRecord, node: SwarmNode, before: string): Promise<void> {
  await eventually(
    'the editor running again on its node',
    async () => {
      const [record, editor] = await Promise.all([harness.store.workspaces.get(workspace.id), editorOf(workspace.id)]);
      if (record?.status.observedState !== 'running' || record.status.node !== node.name || !editor || editor.state !== 'running') return false;
      if (record.status.editorEndpoint !== endpointOf(editor, 8080)) return false;
      const answer = await fetch(`http://${record.status.editorEndpoint}/healthz`).catch(() => undefined);
      return answer?.ok === true;
    },
    120_000,
  );
  const container = await containerOn(node, (await editorOf(workspace.id))!.id);
  expect(container).not.toBe('');
  expect(container).not.toBe(before);
}

const networkRefusals = (workspaceId: string) =>
  harness.records.filter((record) => record.workspaceId === workspaceId && record.reason === 'network' && record.level === 'warning');
const rejections = async (reason: string) => (await harness.metrics.swarmTaskRejections.get()).values.find((value) => value.labels.reason === reason)?.value;

// Swarm has no task events, and a task a node refuses never has a container: the runtime's look at
// the tasks announces it. Seen through a runtime of a control plane of its own (the harness's
// controller leaves its service alone): a service labelled as it labels a workspace's, of an image
// no node can have, whose task the node refuses (`No such image`).
it('announces a task its node refused as an event of its workspace', async () => {
  const controlPlaneId = `refusals-${tag}`;
  const runtime = runtimeFor(loadConfig({ ...TEST_ENV, ...plane!.env, CONTROL_PLANE_ID: controlPlaneId }));
  const events: RuntimeEvent[] = [];
  const watching = runtime.watch({ onEvent: (event) => events.push(event), onConnect: () => undefined, onDisconnect: () => undefined });
  const workspaceId = randomUUID();
  const labels = [`${MANAGED_LABEL}=true`, `${CONTROL_PLANE_LABEL}=${controlPlaneId}`, `${LABELS.workspaceId}=${workspaceId}`, `${LABELS.role}=code`];
  const service = `refused-${tag}`;
  const manager = swarm.nodes[0]!;
  try {
    await swarm.docker(manager, [
      ...['service', 'create', '--detach', '--name', service, '--no-resolve-image', '--restart-condition', 'none'],
      ...labels.flatMap((label) => ['--label', label, '--container-label', label]),
      '127.0.0.1:1/no-such-image:1',
    ]);
    await eventually('the refused task announced', async () => events.find((event) => event.workspaceId === workspaceId), 60_000);
    expect(events).toEqual([{ workspaceId, runId: undefined, action: 'task rejected' }]);
  } finally {
    watching.close();
    await swarm.docker(manager, ['service', 'rm', service]);
  }
}, 120_000);

it("runs a workspace again on its node after the node's engine died uncleanly and came back, with its files, twice, without the periodic resync; the refusal counted and said once", async () => {
  const [worker, manager] = [swarm.nodes[1]!, swarm.nodes[0]!];
  const students = await Promise.all([newStudent(harness.store, 'r0', tag), newStudent(harness.store, 'r1', tag)]);
  await Promise.all(students.map((student) => harness.store.workspaces.open(student.workspace.id)));
  const workspaces = await Promise.all(students.map((student) => waitForState(harness.store, student.workspace.id, 'running', 120_000)));
  // Each editor's start said once (issue 44 item 8: each look at a task scheduled but not yet running said it again, 21-25 times).
  for (const workspace of workspaces)
    expect(harness.records.filter((record) => record.message === 'code container started' && record.workspaceId === workspace.id)).toHaveLength(1);
  const here = workspaces.find((workspace) => workspace.status.node === worker.name)!;
  const other = workspaces.find((workspace) => workspace.status.node === manager.name)!;
  expect([here?.status.node, other?.status.node]).toEqual([worker.name, manager.name]);
  const [editor, otherEditor] = [(await editorOf(here.id))!, (await editorOf(other.id))!];
  let container = await containerOn(worker, editor.id);
  await swarm.docker(worker, ['exec', container, 'sh', '-c', 'echo kept > /home/student/notes.txt']);
  expect(await rejections('network')).toBe(0);

  // Back without the periodic resync (it is off here): the node's return and the refused task's announcement wake the controller.
  await killAndStart(worker);
  await runningAgainOn(here, worker, container);
  container = await containerOn(worker, editor.id);
  expect(await swarm.docker(worker, ['exec', container, 'cat', '/home/student/notes.txt'])).toBe('kept\n');
  // The node refused the network at least once (`network <id> exists`): said once, counted, and repaired by a network of the node's own.
  expect(networkRefusals(here.id)).toEqual([expect.objectContaining({ node: worker.name, error: expect.stringMatching(/^network \S+ exists$/) })]);
  expect(await rejections('network')).toBeGreaterThanOrEqual(1);
  const repairs = () => harness.records.filter((record) => String(record.message).startsWith(`repaired the workspace network on node ${worker.name}`));
  expect(repairs()).toEqual([expect.objectContaining({ network: `${NETWORK}-r1` })]);

  // Dead again while on its repaired network: repaired again, with another.
  await killAndStart(worker);
  await runningAgainOn(here, worker, container);
  container = await containerOn(worker, editor.id);
  expect(await swarm.docker(worker, ['exec', container, 'cat', '/home/student/notes.txt'])).toBe('kept\n');
  expect(repairs().map((record) => record.network)).toEqual([`${NETWORK}-r1`, `${NETWORK}-r2`]);
  // Said once per error: a line for each death (each names the network it refused).
  expect(networkRefusals(here.id)).toHaveLength(2);

  // The manager's workspace was never touched.
  expect((await editorOf(other.id))!.id).toBe(otherEditor.id);
  expect(networkRefusals(other.id)).toEqual([]);
}, 400_000);
