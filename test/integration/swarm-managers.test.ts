/**
 * A swarm of three managers (docs/swarm.md recommends three for a swarm that must survive the loss
 * of a manager) that loses one uncleanly while workspaces run: the first node, the Raft leader and
 * the host of the cluster's registry, is SIGKILLed with its engine. The control plane, given every
 * node's engine (SWARM_ENGINES), carries on through the two managers left: it places a new
 * workspace, and brings the lost manager's workspace back on another node from its backup after
 * NODE_LOST_SECONDS, as for a worker; nothing is done twice (one restore, one editor per workspace,
 * the other nodes' editors untouched). Three managers and no worker: the smallest swarm that keeps
 * its quorum when one goes. (One swarm for the file.)
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Backups } from '../../src/backup/backups.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { eventually, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startSwarmHarness, type Swarm, type SwarmHarness, type SwarmNode } from '../helpers/swarm.ts';
import { newStudent, waitForState } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const shell = promisify(execFile);
const tag = Date.now().toString(36);
const NODE_LOST_SECONDS = 20;
let plane: SwarmHarness | undefined;
let swarm: Swarm;
let harness: Harness;
let editorOf: SwarmHarness['editorOf'];
let backups: Backups;

beforeAll(async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cp-swarm-managers-'));
  plane = await startSwarmHarness(db.dataSource, {
    size: 3,
    managers: 3,
    network: 'classroom-swarm-managers',
    harness: { env: { NODE_LOST_SECONDS: String(NODE_LOST_SECONDS), DATA_DIR: dataDir }, nodeCheckMs: 500 },
  });
  ({ swarm, harness, editorOf } = plane);
  backups = new Backups({ store: harness.store, runtime: harness.runtime, dataDir, image: plane.env.WORKSPACE_IMAGE });
}, 5 * 60_000);
afterAll(async () => {
  await plane?.stop();
}, 5 * 60_000);

const nodeNamed = (name: string | null | undefined): SwarmNode => swarm.nodes.find((node) => node.name === name)!;

/** The containers that run a service's task on a node. */
const containersOn = async (node: SwarmNode, service: string) =>
  (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${service}`])).split('\n').filter(Boolean);

/** Runs a shell command in a workspace's home, in its editor's container on its node. */
async function inHome(workspaceId: string, command: string): Promise<string> {
  const editor = (await editorOf(workspaceId))!;
  const node = nodeNamed(editor.node);
  const [container] = await containersOn(node, editor.id);
  return swarm.docker(node, ['exec', '-w', '/home/student', container!, 'sh', '-c', command]);
}

const checksum = async (workspaceId: string) => (await inHome(workspaceId, 'sha256sum kept.bin')).split(' ')[0]!;

/** The running tasks of every service of a workspace, as `manager` lists them. */
async function runningTasks(manager: SwarmNode, workspaceId: string): Promise<number> {
  const services = (await swarm.docker(manager, ['service', 'ls', '-q', '--filter', `label=service.workspace-id=${workspaceId}`])).split('\n').filter(Boolean);
  if (services.length === 0) return 0;
  const states = await swarm.docker(manager, ['service', 'ps', '--filter', 'desired-state=running', '--format', '{{.CurrentState}}', ...services]);
  return states.split('\n').filter((state) => state.startsWith('Running')).length;
}

it("carries on through the two managers left when the leader is killed: places a new workspace, brings the lost manager's workspace back elsewhere from its backup after NODE_LOST_SECONDS, and does nothing twice", async () => {
  const students = await Promise.all([0, 1, 2].map((index) => newStudent(harness.store, `m${index}`, tag)));
  await Promise.all(students.map((student) => harness.store.workspaces.open(student.workspace.id)));
  const workspaces: WorkspaceRecord[] = [];
  for (const student of students) workspaces.push(await waitForState(harness.store, student.workspace.id, 'running', 120_000));
  // One on each node; each home has a file its backup holds, and one written after the backup.
  expect(new Set(workspaces.map((workspace) => workspace.status.node))).toEqual(new Set(swarm.nodes.map((node) => node.name)));
  const kept = new Map<string, string>();
  for (const workspace of workspaces) {
    await inHome(workspace.id, 'head -c 4096 /dev/urandom > kept.bin');
    await backups.create(SYSTEM_ACTOR, workspace);
    await inHome(workspace.id, 'echo after the backup > later.txt');
    kept.set(workspace.id, await checksum(workspace.id));
  }
  const [leader, ...left] = swarm.nodes as [SwarmNode, SwarmNode, SwarmNode];
  expect((await swarm.docker(leader, ['node', 'inspect', 'self', '--format', '{{.ManagerStatus.Leader}}'])).trim()).toBe('true');
  const lost = workspaces.find((workspace) => workspace.status.node === leader.name)!;
  const others = await Promise.all(
    workspaces
      .filter((workspace) => workspace !== lost)
      .map(async (workspace) => {
        const editor = (await editorOf(workspace.id))!;
        return { workspace, editor, containers: await containersOn(nodeNamed(editor.node), editor.id) };
      }),
  );

  const killedAt = Date.now();
  await shell('docker', ['kill', leader.name]);
  const since = () => (Date.now() - killedAt) / 1000;
  // A student opens a workspace at once: placed through a manager left (the manager API answers nothing until a leader is elected, 10 to 20 s).
  const late = await newStudent(harness.store, 'm3', tag);
  await harness.store.workspaces.open(late.workspace.id);

  // One of the managers left leads.
  await eventually(
    'another manager leading',
    async () => {
      const listed = await swarm.docker(left[0], ['node', 'ls', '--format', '{{.Hostname}} {{.ManagerStatus}}'], 10_000);
      return left.some((node) => listed.includes(`${node.name} Leader`));
    },
    60_000,
  );

  // Placing went on: it runs on a node left.
  const placedRecord = await waitForState(harness.store, late.workspace.id, 'running', 120_000);
  expect(left.map((node) => node.name)).toContain(placedRecord.status.node);
  expect(since()).toBeLessThan(60);

  // The lost manager's workspace back on another node from its backup, never two editors of it at once.
  await eventually(
    "the lost manager's workspace running on a node left",
    async () => {
      expect(await runningTasks(left[0], lost.id)).toBeLessThanOrEqual(1);
      const workspace = await harness.store.workspaces.get(lost.id);
      return (
        workspace?.status.observedState === 'running' &&
        workspace.status.observedGeneration === workspace.spec.generation &&
        left.some((node) => node.name === workspace.status.node) &&
        (await fetch(`http://${workspace.status.editorEndpoint}/healthz`).catch(() => undefined))?.ok === true
      );
    },
    180_000,
  );
  // NODE_LOST_SECONDS after the control plane first saw it not ready (`unknown` to the new leader, which never heard from it).
  expect(since()).toBeGreaterThan(NODE_LOST_SECONDS);
  expect(since()).toBeLessThan(120);
  const restored = (await harness.store.workspaces.get(lost.id))!;
  expect(await checksum(lost.id)).toBe(kept.get(lost.id));
  expect(await inHome(lost.id, 'ls')).not.toContain('later.txt');
  expect(restored.status.homeRestore).toEqual(expect.objectContaining({ reason: `the server ${leader.name} that held your files stopped answering` }));

  // Nothing done twice: one restore, of that workspace; one editor and one running task per workspace; the other nodes' editors untouched.
  const restores = (await harness.store.audit.list({ action: 'workspace.restore', limit: 10 })).entries;
  expect(restores.map((entry) => entry.target.id)).toEqual([lost.id]);
  for (const workspace of [...workspaces, placedRecord]) {
    const editors = (await harness.runtime.listContainers({ workspaceId: workspace.id })).filter((container) => container.role === 'code');
    expect(editors).toHaveLength(1);
    expect(await runningTasks(left[0], workspace.id)).toBe(1);
  }
  for (const { workspace, editor, containers } of others) {
    expect((await editorOf(workspace.id))!.id).toBe(editor.id);
    expect(await containersOn(nodeNamed(editor.node), editor.id)).toEqual(containers);
    expect(await inHome(workspace.id, 'cat later.txt')).toBe('after the backup\n');
  }
}, 400_000);
