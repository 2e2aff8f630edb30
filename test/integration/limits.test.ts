/**
 * What one student's code may take of the class's machine, on the real engine: the CPU, memory and
 * process limits of editors and simulators read back from the engine (a run's own settings, or the
 * editor's), a fork bomb stopped at the process limit, the bound on homes (the student told when
 * near it, a run refused past it or while the home cannot be measured in full, and allowed again),
 * and whether the control plane's data shares a filesystem with the engine's.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createControlPlane, type ControlPlane } from '../../bin/control-plane.ts';
import { loadConfig } from '../../src/config.ts';
import { engineRootBeside } from '../../src/docker/data-root.ts';
import { names } from '../../src/docker/runtime.ts';
import { probeHttp } from '../../src/probe.ts';
import type { StudentWorkspaceAnswer, WorkspacePage } from '../../src/wire/schemas.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { captureLogger, docker, eventually, execIn, inspectByName, newControlPlaneId, removeEverything, TEST_ENV } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait, type Student } from '../helpers/workspaces.ts';

const db = useTestDatabase();
const tag = Date.now().toString(36);
let counter = 0;
let controlPlaneId: string;
let plane: ControlPlane | undefined;
let app: TestApp | undefined;

beforeEach(() => {
  controlPlaneId = newControlPlaneId();
});
afterEach(async () => {
  await plane?.stop();
  await app?.close();
  plane = undefined;
  app = undefined;
  await removeEverything(controlPlaneId);
});

/** A control plane with the workspace and run controllers on the real engine, configured from `env` beside the tests' settings. */
async function startPlane(env: Record<string, string>): Promise<ControlPlane> {
  const config = loadConfig({
    ...TEST_ENV,
    CONTROL_PLANE_ID: controlPlaneId,
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'cp-test-limits-')),
    SIM_COMMAND: 'SIM_COMPILE_MS=200 SIM_BOOT_MS=100 node /app/sim.mjs',
    ...env,
  });
  plane = createControlPlane({
    config,
    log: captureLogger().root,
    database: { dataSource: db.dataSource, embedded: false, close: async () => undefined },
    parts: ['workspaces', 'runs'],
    tuning: { workspaces: { resyncIntervalMs: 60_000 }, runs: { probeIntervalMs: 100, runningCheckMs: 500 } },
  });
  await plane.start();
  return plane;
}

describe('the limits of the containers a student’s code runs in', () => {
  it('limits the editor to CODE_CPUS, CODE_MEMORY_LIMIT and CONTAINER_PIDS_LIMIT, and a run to RUN_CPUS, RUN_MEMORY_LIMIT and the same process limit', async () => {
    const { store } = await startPlane({ CODE_CPUS: '0.5', RUN_CPUS: '0.25', RUN_MEMORY_LIMIT: '48m', CONTAINER_PIDS_LIMIT: '200' });
    const student = await newStudent(store, `limits${counter++}`, tag);
    const workspace = await openAndWait(store, student.workspace);
    const editor = (await inspectByName(names.code(workspace.slug)))!;
    expect(editor.HostConfig).toMatchObject({ NanoCpus: 500_000_000, Memory: 64 * 1024 * 1024, MemorySwap: 64 * 1024 * 1024, PidsLimit: 200 });

    const run = await store.runs.create(workspace.id);
    const sim = await eventually('the run’s simulator container', async () => {
      const [found] = await docker.listContainers({ all: true, filters: { label: [`service.run-id=${run.id}`] } });
      return found && (await docker.getContainer(found.Id).inspect());
    });
    expect(sim.HostConfig).toMatchObject({ NanoCpus: 250_000_000, Memory: 48 * 1024 * 1024, MemorySwap: 48 * 1024 * 1024, PidsLimit: 200 });
  });

  it('gives a run the editor’s CPU and memory limits when RUN_CPUS and RUN_MEMORY_LIMIT are not set, and a process limit by default', async () => {
    const { store } = await startPlane({ CODE_CPUS: '0.5' });
    const student = await newStudent(store, `defaults${counter++}`, tag);
    const workspace = await openAndWait(store, student.workspace);
    expect((await inspectByName(names.code(workspace.slug)))!.HostConfig.PidsLimit).toBe(1024);
    const run = await store.runs.create(workspace.id);
    const sim = await eventually('the run’s simulator container', async () => {
      const [found] = await docker.listContainers({ all: true, filters: { label: [`service.run-id=${run.id}`] } });
      return found && (await docker.getContainer(found.Id).inspect());
    });
    expect(sim.HostConfig).toMatchObject({ NanoCpus: 500_000_000, Memory: 64 * 1024 * 1024, PidsLimit: 1024 });
  });

  it('stops a fork bomb at the process limit: the editor keeps answering', async () => {
    const { store } = await startPlane({ CONTAINER_PIDS_LIMIT: '64' });
    const student = await newStudent(store, `bomb${counter++}`, tag);
    const workspace = await openAndWait(store, student.workspace);
    const editor = (await inspectByName(names.code(workspace.slug)))!;
    // 300 children at most (bounded), each a sleep that ends by itself; the count of those started is printed, then they are killed and waited for.
    const bomb = `const { spawn } = require('node:child_process');
let started = 0, refused = 0; const children = [];
for (let i = 0; i < 300; i++) {
  try { const child = spawn('sleep', ['30']); child.on('error', () => undefined); if (child.pid) { started++; children.push(child); } else refused++; } catch { refused++; }
}
console.log(JSON.stringify({ started, refused }));
let left = children.length;
if (left === 0) process.exit(0);
for (const child of children) { child.once('exit', () => --left === 0 && process.exit(0)); child.kill('SIGKILL'); }`;
    const { output } = await execIn(editor.Id, ['node', '-e', bomb]);
    const counts = JSON.parse(/\{.*\}/.exec(output)![0]) as { started: number; refused: number };
    // The editor's own processes and threads, and this Node's, share the 64.
    expect(counts.started).toBeLessThan(64);
    expect(counts.refused).toBeGreaterThan(300 - 64);
    expect((await probeHttp(workspace.status.editorEndpoint!)).outcome).toBe('ok');
  });
});

describe('the bound on a home (HOME_DISK_LIMIT)', () => {
  const api = (student: Student, rest: string) => `${app!.url}/u/${student.workspace.slug}/api${rest}`;
  const workspaceOf = async (student: Student) =>
    ((await (await fetch(api(student, '/workspace'), { headers: { cookie: student.cookie } })).json()) as StudentWorkspaceAnswer).workspace;
  /** The workspace once its home's measure satisfies `test` (the sampler measures every second here). */
  const measured = (student: Student, what: string, test: (disk: NonNullable<StudentWorkspaceAnswer['workspace']['disk']>) => boolean) =>
    eventually(
      `the home ${what}`,
      async () => {
        const workspace = await workspaceOf(student);
        return workspace.disk && test(workspace.disk) ? workspace : undefined;
      },
      20_000,
    );
  const startRun = (student: Student) => fetch(api(student, '/runs'), { method: 'POST', headers: { cookie: student.cookie, origin: app!.url } });

  it('tells the student near the bound, refuses a run past it or while the home cannot be measured in full, and runs again once space is freed', async () => {
    app = await startApp(
      db.dataSource,
      { ...TEST_ENV, CONTROL_PLANE_ID: controlPlaneId, HOME_DISK_LIMIT: '8m', HOME_DISK_CHECK_SECONDS: '1' },
      { parts: ['http', 'workspaces', 'stats'] },
    );
    const student = await newStudent(app.store, `disk${counter++}`, tag);
    const coach = await newStudent(app.store, `coach${counter++}`, tag, 'admin');
    await openAndWait(app.store, student.workspace);
    const editor = (await inspectByName(names.code(student.workspace.slug)))!.Id;
    const fill = async (command: string) => expect((await execIn(editor, ['sh', '-c', command])).code).toBe(0);

    const empty = await measured(student, 'measured', () => true);
    expect(empty.disk).toMatchObject({ limitBytes: 8 * 1024 * 1024, level: 'ok', message: null });

    // 7.5 MiB of 8: nearly full, told; a run may still start.
    await fill('head -c 7864320 /dev/zero > /home/student/big.bin');
    const near = await measured(student, 'nearly full', (disk) => disk.level === 'near');
    expect(near.disk!.message).toMatch(/^Your home folder is nearly full: it uses 7\.\d MiB of the 8\.0 MiB it may use\. Delete files/);

    // Past it: told, and a run is refused with how much is used and how to free it; the coach sees it too.
    await fill('head -c 2097152 /dev/zero > /home/student/more.bin');
    const full = await measured(student, 'full', (disk) => disk.level === 'full');
    expect(full.disk!.usedBytes).toBeGreaterThanOrEqual(9.5 * 1024 * 1024);
    const refused = await startRun(student);
    expect(refused.status).toBe(409);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('home_disk_full');
    expect(error.message).toMatch(
      /^Your home folder is full: it uses 9\.\d MiB of the 8\.0 MiB it may use, so Run is refused until you free space\. .*\.\/gradlew clean/,
    );
    expect(await app.store.runs.recent(student.workspace.id)).toEqual([]);
    const page = (await (
      await fetch(`${app.url}/admin/workspaces?q=${student.workspace.slug}`, { headers: { cookie: coach.cookie } })
    ).json()) as WorkspacePage;
    expect(page.workspaces[0]!.disk).toMatchObject({ level: 'full', limitBytes: 8 * 1024 * 1024 });
    expect(app.logs).toContainEqual(
      expect.objectContaining({
        level: 'warning',
        category: 'control.containers',
        workspaceId: student.workspace.id,
        home: 'full',
        message: expect.stringMatching(/is full \(9\.\d MiB of 8\.0 MiB\): its runs are refused/),
      }),
    );

    // Space freed, but a folder made unreadable: what it holds cannot be counted, so runs stay refused, saying which.
    await fill('rm /home/student/big.bin /home/student/more.bin && mkdir /home/student/hidden && chmod 000 /home/student/hidden');
    const hidden = await measured(student, 'not measurable in full', (disk) => disk.level === 'unmeasured');
    expect(hidden.disk!.message).toContain('the folder hidden cannot be read');
    expect((await startRun(student)).status).toBe(409);

    // Readable again: the home is measured in full, under its bound, and a run starts.
    await fill('chmod 755 /home/student/hidden');
    await measured(student, 'back under its bound', (disk) => disk.level === 'ok');
    expect((await startRun(student)).status).toBe(202);
  });
});

describe('the control plane’s own data', () => {
  it('is told apart from the engine’s data root when it shares its filesystem, and not when it does not', async () => {
    const config = loadConfig({});
    const { DockerRootDir } = (await docker.info()) as { DockerRootDir: string };
    expect(await engineRootBeside(path.join(DockerRootDir, 'volumes'), config)).toBe(DockerRootDir);
    // A memory filesystem is never the engine's disk.
    expect(await engineRootBeside('/dev/shm', config)).toBeUndefined();
  });
});
