/**
 * A real Docker Swarm of several nodes on this machine: each node a Docker-in-Docker container of
 * classroom-swarm-node:test (scripts/build-swarm-node-image.sh, Debian's docker.io) with its own
 * /var/lib/docker, all on one bridge network of the outer engine. The first node is a manager, and
 * so are the next ones when more managers are asked for; the others join as workers. The control
 * plane reaches each node's engine through a Unix socket that the node's dockerd opens in a
 * directory bound from this host (no TCP port that a workspace could reach); the nodes' addresses
 * on the bridge are reachable from this host, as a cluster's nodes are from its control plane's
 * host.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import type { ManagedContainer } from '../../src/docker/runtime.ts';
import { ok, ROOT, run } from './compose.ts';
import { createHarness, eventually, TEST_IMAGE, type Harness } from './controllers.ts';

export const SWARM_NODE_IMAGE = 'classroom-swarm-node:test';
/** The cluster's registry (scripts/build-registry-image.sh), as docs/swarm.md runs it. */
export const REGISTRY_IMAGE = 'classroom-registry:2.8';
/** The label on every node container and volume of a harness swarm: its id. */
const SWARM_LABEL = 'service.swarm-test';

export interface SwarmNode {
  /** The node's container name, also its hostname and its swarm node name. */
  name: string;
  /** Its engine's socket on this host. */
  socket: string;
  /** Its address on the swarm's bridge (its swarm address too). */
  address: string;
}

export interface Swarm {
  id: string;
  nodes: SwarmNode[];
  /** This host's address on the swarm's bridge: where the nodes see the control plane come from. */
  gateway: string;
  /** The bridge's subnet (CIDR). */
  subnet: string;
  /** SWARM_ENGINES for a control plane: every node's engine. */
  engines: string;
  /**
   * Each image asked for, as the nodes pull it from the cluster's registry: pinned by digest
   * (`<manager address>:5000/<name>@sha256:…`), the WORKSPACE_IMAGE a control plane is given.
   */
  images: Record<string, string>;
  /** `docker <args>` against one node's engine. */
  docker(node: SwarmNode, args: string[], timeoutMs?: number): Promise<string>;
  /** A command in the node's own container (iptables, ip). */
  exec(node: SwarmNode, args: string[], input?: string): Promise<string>;
  /**
   * Applies the shipped node firewall (deploy/swarm-node-firewall.sh) on every node, as the docs
   * say: only this host (the gateway, where the control plane's connections come from) reaches
   * workspaces, and workspaces reach neither it nor the nodes' network.
   */
  firewall(): Promise<void>;
  /** Removes the nodes, their volumes and the bridge. */
  stop(): Promise<void>;
}

/** Builds the node and registry images the way provisioning does (a no-op check when they are up to date). */
export async function buildNodeImage(): Promise<void> {
  await ok('bash', [path.join(ROOT, 'scripts/build-swarm-node-image.sh')], { timeoutMs: 10 * 60_000 });
  await ok('bash', [path.join(ROOT, 'scripts/build-registry-image.sh')], { timeoutMs: 10 * 60_000 });
}

/**
 * Starts a swarm of `size` nodes, the first `managers` of them managers (default one: the first
 * inits the swarm, the other managers then join it as managers, the rest as workers), with the
 * cluster's registry on the first node, as docs/swarm.md sets one up: the registry image loaded
 * into it (the one image brought in by hand), run as a service pinned there, and each of `images`
 * brought into it and pushed to it, to be pulled by every node by digest. Leftovers of harness
 * swarms whose test process is gone are removed first.
 */
export async function startSwarm(options: { size: number; images: string[]; managers?: number }): Promise<Swarm> {
  const managers = options.managers ?? 1;
  if (!Number.isInteger(managers) || managers < 1 || managers > options.size)
    throw new Error(`a swarm of ${options.size} nodes cannot have ${managers} managers`);
  await buildNodeImage();
  await removeLeftovers();
  const id = `${process.pid}-${randomBytes(3).toString('hex')}`;
  const network = `classroom-swarm-${id}`;
  const dir = path.join(tmpdir(), `classroom-swarm-${id}`);
  const outer = (args: string[], timeoutMs = 60_000) => ok('docker', args, { timeoutMs });
  const names = Array.from({ length: options.size }, (_, index) => `swarm-${id}-${index + 1}`);
  const stop = async () => {
    for (const name of names) {
      // A node's dockerd stops its containers when it is stopped; killed, it would leave their cgroups.
      await run('docker', ['stop', '-t', '30', name], { timeoutMs: 60_000 });
      await run('docker', ['rm', '-f', '-v', name], { timeoutMs: 60_000 });
      await run('docker', ['volume', 'rm', '-f', name], { timeoutMs: 60_000 });
      removeNodeCgroups(name);
    }
    await run('docker', ['network', 'rm', network], { timeoutMs: 60_000 });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await outer(['network', 'create', '--label', `${SWARM_LABEL}=${id}`, network]);
    const [gateway = '', subnet = ''] = (
      await outer(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Gateway}} {{(index .IPAM.Config 0).Subnet}}', network])
    )
      .trim()
      .split(' ');
    const nodes: SwarmNode[] = [];
    for (const name of names) {
      const socketDir = path.join(dir, name);
      mkdirSync(socketDir, { recursive: true });
      await outer(['volume', 'create', '--label', `${SWARM_LABEL}=${id}`, name]);
      // Privileged but for CAP_SYS_RESOURCE, which these machines' bounding set lacks (so --privileged
      // itself fails): every other capability, every device, no seccomp or AppArmor profile, the
      // cgroup hierarchy writable (each node's containers go under a parent of their own).
      await outer([
        'run', '-d', '--name', name, '--hostname', name, '--network', network,
        '--label', `${SWARM_LABEL}=${id}`, '--label', `${SWARM_LABEL}-pid=${process.pid}`,
        '--cap-add=ALL', '--cap-drop=SYS_RESOURCE',
        '--security-opt', 'seccomp=unconfined', '--security-opt', 'apparmor=unconfined', '--security-opt', 'systempaths=unconfined',
        '--device-cgroup-rule', 'a *:* rwm', '--tmpfs', '/run',
        '-v', '/sys/fs/cgroup:/sys/fs/cgroup:rw', '-v', `${name}:/var/lib/docker`, '-v', `${socketDir}:/engine`,
        // The cluster's registry speaks plain HTTP on the nodes' network (docs/swarm.md: or give it TLS).
        '-e', `DOCKERD_ARGS=--insecure-registry=${subnet}`,
        SWARM_NODE_IMAGE,
      ]); // prettier-ignore
      const address = (await outer(['inspect', '-f', `{{(index .NetworkSettings.Networks "${network}").IPAddress}}`, name])).trim();
      nodes.push({ name, socket: path.join(socketDir, 'docker.sock'), address });
    }
    const docker = (node: SwarmNode, args: string[], timeoutMs = 60_000) => ok('docker', ['-H', `unix://${node.socket}`, ...args], { timeoutMs });
    const exec = (node: SwarmNode, args: string[], input?: string) => execIn(node.name, args, input);
    for (const node of nodes)
      await eventually(
        `the engine of ${node.name}`,
        async () => (await run('docker', ['-H', `unix://${node.socket}`, 'info'], { timeoutMs: 10_000 })).code === 0,
        60_000,
      );
    const first = nodes[0]!;
    await docker(first, ['swarm', 'init', '--advertise-addr', first.address]);
    const tokens = {
      manager: (await docker(first, ['swarm', 'join-token', '-q', 'manager'])).trim(),
      worker: (await docker(first, ['swarm', 'join-token', '-q', 'worker'])).trim(),
    };
    // One at a time: a manager joins the Raft group only once the one before it has.
    for (const [index, node] of nodes.entries()) {
      if (index === 0) continue;
      const token = index < managers ? tokens.manager : tokens.worker;
      await docker(node, ['swarm', 'join', '--token', token, '--advertise-addr', node.address, `${first.address}:2377`]);
    }
    const images = await registryImages(first, options.images, docker);
    const firewall = async () => {
      const script = readFileSync(path.join(ROOT, 'deploy/swarm-node-firewall.sh'), 'utf8');
      for (const node of nodes) await exec(node, ['sh', '-s', '--', gateway, subnet], script);
    };
    return { id, nodes, gateway, subnet, engines: nodes.map((node) => `unix://${node.socket}`).join(','), images, docker, exec, firewall, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * A control plane's settings on a harness swarm: the Swarm runtime, every node's engine, its
 * workspace network, and the test image as the nodes pull it from the cluster's registry.
 */
export type SwarmSettings = { RUNTIME: 'swarm'; SWARM_ENGINES: string; WORKSPACE_NETWORK: string; WORKSPACE_IMAGE: string };

/** A swarm with a control plane's workspace controller running on it. */
export interface SwarmHarness {
  swarm: Swarm;
  harness: Harness;
  /** The swarm settings the harness was given. */
  env: SwarmSettings;
  /** A workspace's editor (its code container) as the harness's runtime lists it, if it has one. */
  editorOf: (workspaceId: string) => Promise<ManagedContainer | undefined>;
  /** Stops the controller, then removes the swarm. */
  stop(): Promise<void>;
}

/**
 * Starts a swarm of `size` nodes, `managers` of them managers (startSwarm, the test image in its
 * registry), then a control plane's workspace controller on `db` (createHarness with `harness`,
 * started) given the swarm's settings with its workspaces on `network`, `harness.env` on top. What
 * it started is stopped again when a step fails.
 */
export async function startSwarmHarness(
  db: DataSource,
  options: { size: number; managers?: number; network: string; harness?: NonNullable<Parameters<typeof createHarness>[1]> },
): Promise<SwarmHarness> {
  const swarm = await startSwarm({ size: options.size, managers: options.managers, images: [TEST_IMAGE] });
  const env: SwarmSettings = { RUNTIME: 'swarm', SWARM_ENGINES: swarm.engines, WORKSPACE_NETWORK: options.network, WORKSPACE_IMAGE: swarm.images[TEST_IMAGE]! };
  let harness: Harness | undefined;
  const stop = async () => {
    await harness?.stop();
    await swarm.stop();
  };
  try {
    harness = createHarness(db, { ...options.harness, env: { ...env, ...options.harness?.env } });
    await harness.controller.start();
  } catch (error) {
    await stop();
    throw error;
  }
  const runtime = harness.runtime;
  const editorOf = async (workspaceId: string) => (await runtime.listContainers({ workspaceId })).find((container) => container.role === 'code');
  return { swarm, harness, env, editorOf, stop };
}

/**
 * The cluster's registry on the first node, a manager (a service pinned there, its port published
 * on its address, its storage a volume there), and `images` pushed to it from there: each image's
 * reference by digest.
 */
async function registryImages(
  manager: SwarmNode,
  images: string[],
  docker: (node: SwarmNode, args: string[], timeoutMs?: number) => Promise<string>,
): Promise<Record<string, string>> {
  await loadImage(REGISTRY_IMAGE, manager.socket);
  await docker(manager, [
    'service', 'create', '-d', '--name', 'classroom-registry', '--constraint', `node.hostname==${manager.name}`,
    '--publish', 'mode=host,target=5000,published=5000', '--mount', 'type=volume,source=classroom-registry,target=/var/lib/docker-registry',
    REGISTRY_IMAGE,
  ]); // prettier-ignore
  const registry = `${manager.address}:5000`;
  await eventually('the registry answering', async () => (await fetch(`http://${registry}/v2/`).catch(() => undefined))?.ok === true, 60_000);
  const references: Record<string, string> = {};
  for (const image of images) {
    await loadImage(image, manager.socket);
    const name = `${registry}/${image.split(':')[0]}`;
    await docker(manager, ['tag', image, `${name}:pushed`]);
    const pushed = await docker(manager, ['push', `${name}:pushed`], 5 * 60_000);
    const digest = /digest: (sha256:[0-9a-f]{64})/.exec(pushed)?.[1];
    if (!digest) throw new Error(`pushing ${image} to the registry printed no digest:\n${pushed}`);
    references[image] = `${name}@${digest}`;
  }
  return references;
}

/** `docker save IMAGE | docker -H <node> load`. */
function loadImage(image: string, socket: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const save = spawn('docker', ['save', image], { stdio: ['ignore', 'pipe', 'pipe'] });
    const load = spawn('docker', ['-H', `unix://${socket}`, 'load', '-q'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let errors = '';
    save.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    load.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    save.stdout.pipe(load.stdin);
    load.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`loading ${image} into ${socket} failed: ${errors}`))));
  });
}

/** Runs a command in a node's container, with `input` on its stdin. */
function execIn(container: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('docker', ['exec', '-i', container, ...args], { timeout: 60_000, maxBuffer: 8 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`docker exec ${container} ${args.join(' ')}: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
    child.stdin?.end(input ?? '');
  });
}

/** Node containers of harness swarms whose test process is gone: removed with their volumes and networks; and the cgroups of nodes no longer there. */
async function removeLeftovers(): Promise<void> {
  // The cgroups first, the nodes after: a node listed after its cgroup was seen is kept, so a swarm starting beside this one keeps its own.
  const cgroups = new Set(cgroupHierarchies().flatMap((hierarchy) => readdirSync(hierarchy).filter((entry) => entry.startsWith(CGROUP_PREFIX))));
  const listed = await ok(
    'docker',
    ['ps', '-a', '--filter', `label=${SWARM_LABEL}-pid`, '--format', `{{.Names}} {{.Label "${SWARM_LABEL}-pid"}} {{.Label "${SWARM_LABEL}"}}`],
    {
      timeoutMs: 60_000,
    },
  );
  const gone = new Set<string>();
  for (const line of listed.split('\n').filter(Boolean)) {
    const [name = '', pid = '', id = ''] = line.split(' ');
    if (alive(Number(pid))) continue;
    await run('docker', ['rm', '-f', '-v', name], { timeoutMs: 60_000 });
    await run('docker', ['volume', 'rm', '-f', name], { timeoutMs: 60_000 });
    gone.add(id);
  }
  for (const id of gone) await run('docker', ['network', 'rm', `classroom-swarm-${id}`], { timeoutMs: 60_000 });
  const nodes = new Set(
    (await ok('docker', ['ps', '-a', '--filter', `label=${SWARM_LABEL}`, '--format', '{{.Names}}'], { timeoutMs: 60_000 })).split('\n').filter(Boolean),
  );
  for (const cgroup of cgroups) if (!nodes.has(cgroup.slice(CGROUP_PREFIX.length))) removeNodeCgroups(cgroup.slice(CGROUP_PREFIX.length));
}

/** Where a node's dockerd puts its containers' cgroups (`--cgroup-parent`, scripts/build-swarm-node-image.sh): `/swarm-node-<name>`. */
const CGROUP_PREFIX = 'swarm-node-';

/** The host's cgroup hierarchies: the unified one (cgroup v2), or one per controller (v1). */
function cgroupHierarchies(): string[] {
  const root = '/sys/fs/cgroup';
  if (existsSync(path.join(root, 'cgroup.controllers'))) return [root];
  return readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => path.join(root, entry.name));
}

/**
 * Removes a removed node's cgroups from the host: its dockerd makes them under the host's hierarchy
 * and never removes the parent (nor a child of a container it did not stop), so each swarm would
 * leave a dozen empty cgroups per controller behind. A cgroup that still holds a process stays.
 */
function removeNodeCgroups(name: string): void {
  const remove = (dir: string) => {
    try {
      for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) remove(path.join(dir, entry.name));
      rmdirSync(dir);
    } catch {
      // Busy (a process still in it) or gone already.
    }
  };
  for (const hierarchy of cgroupHierarchies()) remove(path.join(hierarchy, `${CGROUP_PREFIX}${name}`));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
