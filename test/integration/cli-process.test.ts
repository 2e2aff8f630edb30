/**
 * `bin/cli` as a real process on PostgreSQL, beside a running server and without one: an edit made
 * through it reaches the running server at once (NOTIFY), not at its next 30 s resync.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../../src/config.ts';
import { names } from '../../src/docker/runtime.ts';
import { eventually, inspectByName, newControlPlaneId, removeEverything, TEST_ENV } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { startServer, type ServerProcess } from '../helpers/server.ts';
import { testStore } from '../helpers/store.ts';

const run = promisify(execFile);
const db = useTestDatabase({ truncate: false });
const controlPlaneId = newControlPlaneId();
let server: ServerProcess | undefined;
let dataDir: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'cp-cli-process-'));
});
afterAll(async () => {
  await server?.stop('SIGKILL');
  await removeEverything(controlPlaneId);
});

/** `bin/cli` as an operator runs it, on the test database, with `more` in its environment. */
const cliWith = (more: Record<string, string>, ...argv: string[]) =>
  run(path.join(PROJECT_ROOT, 'bin/cli'), argv, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: db.url, DATA_DIR: dataDir, ...more },
    timeout: 60_000,
  });
/** `bin/cli` as an operator runs it, on the test database. */
const cli = (...argv: string[]) => cliWith({}, ...argv);

describe('bin/cli on PostgreSQL', () => {
  it("stops a running server's workspace at once: the server hears the change, not its 30 s resync", async () => {
    server = await startServer({ ...TEST_ENV, DATABASE_URL: db.url, CONTROL_PLANE_ID: controlPlaneId, DATA_DIR: dataDir });
    const store = testStore(db.dataSource);
    const { workspace } = await store.users.create({ email: `cli-${controlPlaneId}@school.test` });
    await store.workspaces.open(workspace.id);
    await eventually('running', async () => (await inspectByName(names.code(workspace.slug)))?.State.Running, 20_000);

    const started = Date.now();
    const { stdout, stderr } = await cli('workspaces', 'stop', workspace.slug);
    expect({ stdout, stderr }).toEqual({ stdout: `Workspace ${workspace.slug} is set to stop.\n`, stderr: '' });
    await eventually('stopped by the server', async () => (await inspectByName(names.code(workspace.slug)))?.State.Running === false, 20_000);
    expect(Date.now() - started).toBeLessThan(15_000);

    const listed = JSON.parse((await cli('status', '--json')).stdout) as {
      workspaces: { slug: string; desiredState: string }[];
      servers: { publicUrl: string }[];
    };
    expect(listed.workspaces.find((entry) => entry.slug === workspace.slug)?.desiredState).toBe('stopped');
    expect(listed.servers.map((entry) => entry.publicUrl)).toEqual([server.url]);

    // A sign-in link goes to the running server's own address, not the CLI's idea of it (it has no PORT or PUBLIC_URL).
    await cli('allowlist', 'add', 'school.test');
    const link = await cli('users', 'sign-in-link', `ana-${controlPlaneId}@school.test`);
    expect(link.stdout.split('\n')[0]).toMatch(new RegExp(`^${server.url}/auth/link/[A-Za-z0-9_-]{43}$`));
    expect(link.stderr).toBe('');
  }, 90_000);

  it('works with no server running, says what waits for one, and ends with exit 3 and one line for an unknown user', async () => {
    await server?.stop('SIGTERM');
    server = undefined;
    const store = testStore(db.dataSource);
    const [workspace] = await store.workspaces.list();
    // What is recorded now waits for a server, and the CLI says so; so do status and a restore.
    await store.workspaces.open(workspace!.id);
    expect(await cli('workspaces', 'stop', workspace!.slug)).toMatchObject({
      stdout: `Workspace ${workspace!.slug} is set to stop. No control plane is running to act on it: it takes effect when the server starts.\n`,
      stderr: '',
    });
    expect((await cli('status')).stdout.split('\n')[0]).toBe('No control plane is running: the observed states below are as a server last saw them.');
    await store.workspaces.writeStatus(workspace!.id, { observedState: 'running', observedGeneration: 0, statusMessage: '' });
    // Refused before the file is read (it is not a backup at all).
    await writeFile(path.join(dataDir, 'any.tar.gz'), 'not read');
    const refused = await cli('restore', path.join(dataDir, 'any.tar.gz'), '--to', workspace!.slug, '--yes').then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(refused).toMatchObject({
      code: 4,
      stderr: `Error: Workspace ${workspace!.slug} was last seen running, and no control plane is running to stop it: start the server (it stops the workspace), then restore.\n`,
    });
    // A link made now names the configured address, with a warning when none is configured.
    const link = await cli('users', 'sign-in-link', `ana-${controlPlaneId}@school.test`);
    expect(link.stdout.split('\n')[0]).toMatch(/^http:\/\/127\.0\.0\.1:8080\/auth\/link\//);
    expect(link.stderr).toBe(
      'Warning: no server is running and PUBLIC_URL is not set: the link assumes the server will answer at http://127.0.0.1:8080; set PUBLIC_URL to the address students open.\n',
    );

    const { stdout } = await cli('users', 'list', '--json');
    expect((JSON.parse(stdout) as { users: { email: string }[] }).users.map((user) => user.email)).toContain(`cli-${controlPlaneId}@school.test`);
    const failed = await cli('users', 'promote', 'nobody@school.test').then(
      () => undefined,
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    expect(failed).toMatchObject({ code: 3, stdout: '', stderr: 'Error: No user "nobody@school.test"; a user exists once they have signed in.\n' });
  }, 60_000);
});

describe('bin/cli without a Docker Engine', () => {
  it.each([
    ['no socket at its address', 'unix:///nonexistent', 'ENOENT'],
    ['its address refuses the connection', 'tcp://127.0.0.1:9', 'ECONNREFUSED'],
  ])(
    'says in one line (exit 5) that the Docker Engine cannot be reached and what to do, when a command needs it and finds %s',
    async (_, address, code) => {
      const { workspace } = await testStore(db.dataSource).users.create({ email: `engine-${code}-${controlPlaneId}@school.test` });
      const failed = await cliWith({ DOCKER_HOST: address }, 'backup', workspace.slug).then(
        () => undefined,
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
      expect(failed).toMatchObject({ code: 5, stdout: '' });
      expect(failed?.stderr).toMatch(
        new RegExp(
          `^Error: Docker Engine cannot be reached at ${address.replaceAll('.', '\\.')} \\([^\\n]*${code}[^\\n]*\\): start it \\(bash scripts/provision\\.sh[^\\n]*DOCKER_HOST[^\\n]*\\.\\n$`,
        ),
      );
    },
    60_000,
  );
});
