/**
 * Homes that survive a node, on a real swarm of three Docker-in-Docker nodes: a node that blips for
 * ten seconds moves nothing; a worker killed has its workspaces brought back on another node from
 * their latest backup (never two editors of one workspace at once, none left pending); a drained
 * node has every workspace moved with a fresh backup, no file lost.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Backups } from '../../src/backup/backups.ts';
import type { ManagedContainer } from '../../src/docker/runtime.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, eventually, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startSwarm, type Swarm, type SwarmNode } from '../helpers/swarm.ts';
import { newStudent, waitForState } from '../helpers/workspaces.ts';

const run = promisify(execFile);
const db = useTestDatabase({ truncate: false });
let swarm: Swarm;
let harness: Harness;
let backups: Backups;
const tag = Date.now().toString(36);
/** Each workspace with the checksum of the file its backup holds. */
const homes: { workspace: WorkspaceRecord; cookie: string; kept: string; backupCreated: string }[] = [];
let app: TestApp;

beforeAll(async () => {
  swarm = await startSwarm({ size: 3, images: [TEST_IMAGE] });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cp-swarm-nodes-'));
  harness = createHarness(db.dataSource, {
    environmentCap: 20,
    env: { RUNTIME: 'swarm', SWARM_ENGINES: swarm.engines, WORKSPACE_NETWORK: 'classroom-swarm-workspaces', NODE_LOST_SECONDS: '30', DATA_DIR: dataDir },
    nodeCheckMs: 500,
  });
  backups = new Backups({ store: harness.store, runtime: harness.runtime, dataDir, image: TEST_IMAGE });
  await harness.controller.start();
  app = await startApp(db.dataSource, {}, { changes: harness.changes });
  // Nine workspaces, three on each node; each home has a file its backup holds, and one written after the backup.
  const students = await Promise.all(Array.from({ length: 9 }, (_, index) => newStudent(harness.store, `n${index}`, tag)));
  await Promise.all(students.map((student) => harness.store.workspaces.open(student.workspace.id)));
  for (const student of students) {
    const { cookie } = student;
    const workspace = await waitForState(harness.store, student.workspace.id, 'running', 120_000);
    await inHome(workspace, 'head -c 4096 /dev/urandom > kept.bin');
    const backup = await backups.create(SYSTEM_ACTOR, workspace);
    await inHome(workspace, 'echo after the backup > later.txt');
    homes.push({ workspace, cookie, kept: await checksum(workspace), backupCreated: backup.manifest.created });
  }
}, 10 * 60_000);
afterAll(async () => {
  await app?.close();
  await harness?.stop();
  await swarm?.stop();
}, 5 * 60_000);

const nodeNamed = (name: string | undefined) => swarm.nodes.find((node) => node.name === name)!;

/** A workspace's editor service, as the runtime reports it. */
async function editorOf(workspaceId: string): Promise<ManagedContainer | undefined> {
  return (await harness.runtime.listContainers({ workspaceId })).find((container) => container.role === 'code');
}

/** Runs a shell command in a workspace's home, in its editor's container on its node. */
async function inHome(workspace: WorkspaceRecord, command: string): Promise<string> {
  const editor = (await editorOf(workspace.id))!;
  const node = nodeNamed(editor.node);
  const container = (await swarm.docker(node, ['ps', '-q', '--filter', `label=com.docker.swarm.service.id=${editor.id}`])).trim();
  return swarm.docker(node, ['exec', '-w', '/home/student', container, 'sh', '-c', command]);
}

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
  it('moves nothing when a node is away for ten seconds', async () => {
    const node = swarm.nodes[2]!;
    const before = await onNode(node);
    expect(before).toHaveLength(3);
    const pausedAt = Date.now();
    await run('docker', ['pause', node.name]);
    // Away for ten seconds, and long enough for the swarm, then the controller, to see it down.
    await eventually(
      'the node seen down',
      async () => (await harness.runtime.nodes()).find((candidate) => candidate.name === node.name)?.state === 'down',
      60_000,
    );
    await eventually('the controller saw it down', async () =>
      harness.records.some((record) => record.node === node.name && String(record.message).includes('is down')),
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 10_000 - (Date.now() - pausedAt))));
    await run('docker', ['unpause', node.name]);
    await eventually(
      'the node ready again',
      async () => (await harness.runtime.nodes()).find((candidate) => candidate.name === node.name)?.state === 'ready',
      60_000,
    );
    for (const { home, editor } of before) {
      await waitForState(harness.store, home.workspace.id, 'running', 60_000);
      const after = (await editorOf(home.workspace.id))!;
      expect(after.id).toBe(editor!.id);
      expect(after.node).toBe(node.name);
      expect(await inHome(home.workspace, 'cat later.txt')).toBe('after the backup\n');
      expect((await harness.store.workspaces.get(home.workspace.id))!.homeRestore).toBeNull();
    }
  }, 180_000);

  it("brings a killed worker's workspaces back on another node from their latest backup within two minutes, never two editors of one at once, none pending", async () => {
    const node = swarm.nodes[1]!;
    const lost = await onNode(node);
    const others = (await Promise.all(homes.map(async (home) => ({ home, editor: await editorOf(home.workspace.id) })))).filter(
      ({ editor }) => editor?.node !== node.name,
    );
    expect(lost).toHaveLength(3);
    const killedAt = Date.now();
    await run('docker', ['kill', node.name]);
    await eventually(
      'every workspace of the killed node running elsewhere',
      async () => {
        for (const { home } of lost) expect(await runningTasks(home.workspace.id)).toBeLessThanOrEqual(1);
        const moved = await Promise.all(
          lost.map(async ({ home }) => {
            const workspace = await harness.store.workspaces.get(home.workspace.id);
            return (
              workspace?.observedState === 'running' &&
              workspace.observedGeneration === workspace.generation &&
              workspace.node !== node.name &&
              workspace.node !== null
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
      const workspace = (await harness.store.workspaces.get(home.workspace.id))!;
      // The files of its latest backup: what it held, not what was written after it.
      expect(await checksum(workspace)).toBe(home.kept);
      expect(await inHome(workspace, 'ls')).not.toContain('later.txt');
      expect(workspace.homeRestore).toEqual({
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
    // Nothing left pending anywhere, and the other nodes' workspaces untouched.
    const services = (await swarm.docker(swarm.nodes[0]!, ['service', 'ls', '-q'])).split('\n').filter(Boolean);
    const states = await swarm.docker(swarm.nodes[0]!, ['service', 'ps', '--filter', 'desired-state=running', '--format', '{{.CurrentState}}', ...services]);
    expect(states).not.toMatch(/Pending/);
    for (const { home, editor } of others) expect((await editorOf(home.workspace.id))!.id).toBe(editor!.id);
  }, 240_000);

  it('moves every workspace off a drained node with a fresh backup, no file lost, and places nothing new there', async () => {
    const node = swarm.nodes[2]!;
    const draining = await onNode(node);
    expect(draining).toHaveLength(3);
    await harness.store.nodes.drain(SYSTEM_ACTOR, node.name);
    await eventually(
      'every workspace of the drained node running elsewhere',
      async () => {
        const moved = await Promise.all(
          draining.map(async ({ home }) => {
            const workspace = await harness.store.workspaces.get(home.workspace.id);
            return workspace?.observedState === 'running' && workspace.observedGeneration === workspace.generation && workspace.node === swarm.nodes[0]!.name;
          }),
        );
        return moved.every(Boolean);
      },
      180_000,
    );
    expect((await harness.runtime.nodes()).find((candidate) => candidate.name === node.name)?.availability).toBe('pause');
    for (const { home } of draining) {
      const workspace = (await harness.store.workspaces.get(home.workspace.id))!;
      expect(await checksum(workspace)).toBe(home.kept);
      // Written after the last backup, and still there: the move took a fresh one.
      expect(await inHome(workspace, 'cat later.txt')).toBe('after the backup\n');
      expect(workspace.homeRestore).toBeNull();
    }
    // Its old homes go once nothing mounts them.
    await eventually(
      'the drained node holds no home',
      async () => (await swarm.docker(node, ['volume', 'ls', '-q', '--filter', `label=service.control-plane=${harness.controlPlaneId}`])).trim() === '',
      60_000,
    );
  }, 300_000);
});
