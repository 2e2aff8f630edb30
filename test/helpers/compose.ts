/**
 * A compose deployment of this checkout against real Docker, as an operator brings it up: its own
 * project name (its containers, volumes and networks; the control plane's CONTROL_PLANE_ID too),
 * only the settings it is given (nothing of this machine's environment, nor a .env in the checkout),
 * in compose's environment or, as the production guide has it, in a `.env` file, and a list of what
 * it left (by compose's label, and the workspace network by name).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { engineClient } from '../../src/docker/docker-runtime.ts';
import { removeEverything, TEST_IMAGE } from './controllers.ts';

export const ROOT = path.resolve(import.meta.dirname, '../..');
/** The control-plane image that provisioning builds on the local base images (scripts/build-control-image.sh, LOCAL_BASE=1). */
export const CONTROL_IMAGE = 'classroom-control:test';
const docker = engineClient();

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to its end within timeoutMs (then it is killed): exit code and output, never a throw. */
export function run(file: string, args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<Result> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, env: options.env ?? process.env, timeout: options.timeoutMs, maxBuffer: 32 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, stdout, stderr: error?.killed ? `${stderr}\n(killed after ${options.timeoutMs} ms)` : stderr });
    });
  });
}

/** Like run, but a non-zero exit is an error that carries the output. */
export async function ok(file: string, args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<string> {
  const result = await run(file, args, options);
  if (result.code !== 0) throw new Error(`${file} ${args.join(' ')} exited ${result.code}:\n${result.stdout}${result.stderr}`);
  return result.stdout;
}

/** The images a deployment runs, made the way provisioning makes them: a no-op check when they are up to date. */
export async function buildImages(): Promise<void> {
  await ok('bash', [path.join(ROOT, 'scripts/build-control-image.sh')], {
    env: { ...process.env, LOCAL_BASE: '1', CONTROL_IMAGE, NODE_IMAGE: '', NPM_REGISTRY: '' },
    timeoutMs: 15 * 60_000,
  });
}

export interface Deployment {
  /** The compose project's name, also the control plane's CONTROL_PLANE_ID. */
  project: string;
  /** The Docker network of the workspaces (the control plane makes it; compose does not remove it). */
  workspaceNetwork: string;
  /**
   * The settings compose is given (the test may change them before any command): in its
   * environment, or with `dotEnv` in the `.env` file it reads, written from them before each command.
   */
  env: NodeJS.ProcessEnv;
  /** `docker compose …` (or Debian's `docker-compose …`) on the deployment's files, as its project. */
  compose(args: string[], timeoutMs: number): Promise<Result>;
  /** The container of a service (not a one-off), or undefined. */
  container(service: string): Promise<string | undefined>;
  /** What of the project is left: containers, volumes and networks. */
  leftovers(): Promise<string[]>;
  /** Removes whatever is left (after a failed test), and the scratch directory. */
  cleanup(): Promise<void>;
}

/** What compose's own environment keeps when its settings are in `.env`: where its programs, home and engine are. */
const SHELL = ['PATH', 'HOME', 'DOCKER_HOST'];

/**
 * A `.env` file of `settings`, one `NAME=value` line each. A value is written as it is, unquoted:
 * one that compose would read otherwise (a `$` it interpolates, a quote, a backslash, a `#`, which
 * after a space starts a comment, a line break, spaces at an end) is refused, naming its variable.
 */
function dotEnvText(settings: NodeJS.ProcessEnv): string {
  return Object.entries(settings)
    .filter(([name, value]) => !SHELL.includes(name) && value !== undefined)
    .map(([name, value]) => {
      if (/[$'"\\#\r\n]|^\s|\s$/.test(value!)) throw new Error(`${name}=${JSON.stringify(value)} cannot be written unquoted in .env`);
      return `${name}=${value}\n`;
    })
    .join('');
}

/**
 * A deployment of `files` (compose.yaml, and overrides) under a fresh project name: the settings
 * every deployment needs (secrets, the socket's group, the stand-in editor image, the base images),
 * then `settings`; with `dotEnv`, compose reads them from a `.env` file, as an operator's, and its
 * own environment holds only PATH, HOME and DOCKER_HOST (a variable there would override `.env`'s).
 */
export async function deployment(files: string[], settings: Record<string, string>, options: { dotEnv?: boolean } = {}): Promise<Deployment> {
  let command: string[];
  if ((await run('docker', ['compose', 'version'], { timeoutMs: 10_000 })).code === 0) command = ['docker', 'compose'];
  else if ((await run('docker-compose', ['version'], { timeoutMs: 10_000 })).code === 0) command = ['docker-compose'];
  else throw new Error('neither `docker compose` nor `docker-compose` works: install Docker Compose (scripts/provision.sh does)');
  const project = `compose-${process.pid}-${Date.now().toString(36)}`;
  const workspaceNetwork = `${project}-ws`;
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
    COMPOSE_PROJECT_NAME: project,
    CONTROL_IMAGE,
    POSTGRES_IMAGE: 'classroom-base/postgres:15',
    SESSION_SECRET: randomBytes(32).toString('hex'),
    POSTGRES_PASSWORD: randomBytes(16).toString('hex'),
    DOCKER_GID: String(statSync('/var/run/docker.sock').gid),
    HOST: '127.0.0.1',
    WORKSPACE_NETWORK: workspaceNetwork,
    CONTROL_PLANE_ID: project,
    // The stand-in editor: what is tested here is the deployment, not code-server.
    WORKSPACE_IMAGE: TEST_IMAGE,
    ...settings,
  };
  // Empty unless dotEnv: a .env in the checkout is not this run's configuration.
  const scratch = mkdtempSync(path.join(tmpdir(), 'compose-test-'));
  const envFile = path.join(scratch, '.env');
  writeFileSync(envFile, '');
  const fileArgs = files.flatMap((file) => ['-f', path.join(ROOT, file)]);
  const filters = { label: [`com.docker.compose.project=${project}`] };

  const self: Deployment = {
    project,
    workspaceNetwork,
    env,
    compose: (args, timeoutMs) => {
      const [file, ...first] = command;
      if (options.dotEnv) writeFileSync(envFile, dotEnvText(env), { mode: 0o600 });
      const given = options.dotEnv ? Object.fromEntries(Object.entries(env).filter(([name]) => SHELL.includes(name))) : env;
      return run(file!, [...first, '--env-file', envFile, ...fileArgs, '-p', project, ...args], { env: given, timeoutMs });
    },
    container: async (service) => {
      const [found] = await docker.listContainers({
        all: true,
        filters: { label: [`com.docker.compose.project=${project}`, `com.docker.compose.service=${service}`, 'com.docker.compose.oneoff=False'] },
      });
      return found?.Id;
    },
    leftovers: async () => {
      const [containers, volumes, networks] = await Promise.all([
        docker.listContainers({ all: true, filters }),
        docker.listVolumes({ filters }),
        docker.listNetworks(),
      ]);
      return [
        ...containers.map((c) => `container ${c.Names.join(',')}`),
        ...(volumes.Volumes ?? []).map((v) => `volume ${v.Name}`),
        ...networks.filter((n) => n.Labels?.['com.docker.compose.project'] === project || n.Name === workspaceNetwork).map((n) => `network ${n.Name}`),
      ];
    },
    cleanup: async () => {
      // compose.replicas.yaml's upgrade place too, when it was started.
      if ((await self.leftovers()).length > 0) await self.compose(['--profile', 'upgrade', 'down', '-v', '--remove-orphans', '-t', '10'], 120_000);
      await removeEverything(project);
      await docker
        .getNetwork(workspaceNetwork)
        .remove()
        .catch(() => undefined);
      rmSync(scratch, { recursive: true, force: true });
    },
  };
  return self;
}
