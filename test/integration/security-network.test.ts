/**
 * Network isolation on real Docker: the workspace network the runtime makes (a bridge with
 * inter-container traffic off) lets no workspace container, editor or simulator run, reach another
 * workspace's editor or the control plane's port, while the control plane (here, this process on
 * the host) reaches every editor. A control case on a network with inter-container traffic on shows
 * that the same probe does get through there, so a refusal above means isolation, not a broken probe.
 *
 * Below the firewall: all workspaces share one bridge, so a process with a raw socket could answer
 * ARP for a classmate's address and take their traffic. Workspace containers hold no capabilities
 * (the test image runs as root, so its processes are root): no raw socket opens, and the host's
 * ARP entry of a classmate's editor stays; a control case with NET_RAW given back moves it.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { CONTROL_PLANE_LABEL, engineClient } from '../../src/docker/docker-runtime.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createHarness, eventually, execIn, removeEverything, TEST_ENV, TEST_IMAGE, type Harness, testRunController } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait } from '../helpers/workspaces.ts';

const db = useTestDatabase({ truncate: false });
const docker = engineClient();
const tag = Date.now().toString(36);
let harness: Harness;
let app: TestApp;
let ada: WorkspaceRecord;
let bob: WorkspaceRecord;

beforeAll(async () => {
  // The control plane's HTTP port, as a student's code would look for it.
  app = await startApp(db.dataSource);
  harness = createHarness(db.dataSource, { changes: app.store.changes });
  await harness.controller.start();
  ada = await openAndWait(harness.store, (await newStudent(harness.store, 'ada', tag)).workspace);
  bob = await openAndWait(harness.store, (await newStudent(harness.store, 'bob', tag)).workspace);
}, 60_000);

afterAll(async () => {
  await harness?.stop();
  await app?.close();
  if (harness) await removeEverything(harness.controlPlaneId);
}, 30_000);

/** A probe of `url`, as a student's program would make it: exit 0 when it answers, 1 when it does not within 3 s. */
const probe = (url: string) => `node -e "fetch('${url}', { signal: AbortSignal.timeout(3000) }).then(() => process.exit(0), () => process.exit(1))"`;

/** The probe, run inside a container. */
const fetchFrom = (containerId: string, url: string) => execIn(containerId, ['sh', '-c', probe(url)]);

async function codeContainer(workspace: WorkspaceRecord): Promise<{ id: string; address: string }> {
  const [container] = (await harness.runtime.listContainers({ workspaceId: workspace.id })).filter((each) => each.role === 'code' && each.state === 'running');
  return { id: container!.id, address: container!.address! };
}

/** The gateway of the workspace network: the host, as a container sees it. */
async function gateway(): Promise<string> {
  const info = await docker.getNetwork(TEST_ENV.WORKSPACE_NETWORK).inspect();
  return (info as { IPAM: { Config: { Gateway: string }[] } }).IPAM.Config[0]!.Gateway;
}

it('makes the workspace network with inter-container traffic off', async () => {
  const info = (await docker.getNetwork(TEST_ENV.WORKSPACE_NETWORK).inspect()) as { Driver: string; Options: Record<string, string> };
  expect(info.Driver).toBe('bridge');
  expect(info.Options['com.docker.network.bridge.enable_icc']).toBe('false');
});

it("lets the control plane reach every editor, and no workspace's editor reach another's", async () => {
  const [fromAda, toBob] = [await codeContainer(ada), await codeContainer(bob)];
  const direct = await fetch(`http://${toBob.address}:8080/`);
  expect(direct.status).toBe(200);
  expect((await fetchFrom(fromAda.id, `http://${toBob.address}:8080/`)).code).toBe(1);
  // Its own editor answers it, so the probe itself works.
  expect((await fetchFrom(fromAda.id, 'http://127.0.0.1:8080/')).code).toBe(0);
});

it("gives a workspace no way to the control plane's port", async () => {
  const port = new URL(app.url).port;
  const { id } = await codeContainer(ada);
  expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  expect((await fetchFrom(id, `http://${await gateway()}:${port}/healthz`)).code).toBe(1);
});

it("lets no simulator run reach another workspace's editor", async () => {
  const { address } = await codeContainer(bob);
  // The run's command probes Bob's editor, leaves the answer in Ada's home, then boots the stand-in simulator.
  const { controller: runs } = testRunController(
    harness,
    `${probe(`http://${address}:8080/`)}; echo $? > probe-exit; SIM_COMPILE_MS=100 SIM_BOOT_MS=100 node /app/sim.mjs`,
    { runningCheckMs: 500 },
  );
  await runs.start();
  try {
    const created = await harness.store.runs.create(ada.id);
    await eventually('the run running', async () => (await harness.store.runs.get(created.id))?.status.phase === 'running', 30_000);
    const { id } = await codeContainer(ada);
    const exit = (await execIn(id, ['cat', '/home/student/probe-exit'])).output.trim();
    expect(exit).toBe('1');
  } finally {
    await runs.stop();
  }
});

it('is what stops the probe: on a network with inter-container traffic on, the same probe gets through', async () => {
  const shared = `classroom-test-shared-${tag}`;
  await docker.createNetwork({ Name: shared, Driver: 'bridge', Labels: { 'service.test': 'security-network' } });
  const network = docker.getNetwork(shared);
  const { id: adaId } = await codeContainer(ada);
  const { id: bobId } = await codeContainer(bob);
  try {
    await network.connect({ Container: adaId });
    await network.connect({ Container: bobId });
    const info = (await network.inspect()) as { Containers: Record<string, { IPv4Address: string }> };
    const bobAddress = info.Containers[bobId]!.IPv4Address.split('/')[0]!;
    expect((await fetchFrom(adaId, `http://${bobAddress}:8080/`)).code).toBe(0);
  } finally {
    await network.disconnect({ Container: adaId, Force: true }).catch(() => undefined);
    await network.disconnect({ Container: bobId, Force: true }).catch(() => undefined);
    await network.remove();
  }
});

describe('a root process in a workspace container', () => {
  /** The address and MAC of a workspace's editor on the workspace network. */
  async function endpointOf(workspace: WorkspaceRecord): Promise<{ ip: string; mac: string }> {
    const { id } = await codeContainer(workspace);
    const info = await docker.getContainer(id).inspect();
    const network = info.NetworkSettings.Networks[TEST_ENV.WORKSPACE_NETWORK]!;
    return { ip: network.IPAddress, mac: network.MacAddress };
  }

  /** The MAC address the host's ARP table holds for `ip` (undefined: none). */
  async function hostArp(ip: string): Promise<string | undefined> {
    const line = (await readFile('/proc/net/arp', 'utf8')).split('\n').find((candidate) => candidate.split(/\s+/)[0] === ip);
    const mac = line?.split(/\s+/)[3];
    return mac === '00:00:00:00:00:00' ? undefined : mac;
  }

  /** Sends the spoof: gratuitous ARP saying that `ip` is at this container's MAC (busybox's arping). */
  const spoof = (containerId: string, ip: string) => execIn(containerId, ['arping', '-U', '-c', '4', '-I', 'eth0', ip]);

  it('holds no capabilities, in any set, and can gain none', async () => {
    const { id } = await codeContainer(ada);
    const { output } = await execIn(id, ['cat', '/proc/self/status']);
    expect(output).toMatch(/^Uid:\s+0\s/m);
    for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) expect(output).toMatch(new RegExp(`^${set}:\\s+0{16}$`, 'm'));
    expect(output).toMatch(/^NoNewPrivs:\s+1$/m);
  });

  it("opens no raw socket, so it cannot take a classmate's traffic by ARP spoofing", async () => {
    const { id } = await codeContainer(ada);
    const victim = await endpointOf(bob);
    // The host talks to Bob's editor, as the proxy does: its ARP table has Bob's MAC.
    expect((await fetch(`http://${victim.ip}:8080/`)).status).toBe(200);
    expect(await hostArp(victim.ip)).toBe(victim.mac);

    const ping = await execIn(id, ['ping', '-c', '1', '-W', '2', await gateway()]);
    expect(ping).toMatchObject({ code: 1, output: expect.stringContaining('permission denied') });
    const spoofed = await spoof(id, victim.ip);
    expect(spoofed.code).not.toBe(0);
    expect(spoofed.output).toContain('socket: Operation not permitted');
    expect(await hostArp(victim.ip)).toBe(victim.mac);
  });

  it('is what stops both: with NET_RAW given back, the same ping answers and the same spoof takes the entry', async () => {
    const victim = await endpointOf(bob);
    expect((await fetch(`http://${victim.ip}:8080/`)).status).toBe(200);
    const runtime = (await docker.getContainer((await codeContainer(ada)).id).inspect()).HostConfig;
    expect({ CapDrop: runtime.CapDrop, SecurityOpt: runtime.SecurityOpt }).toEqual({ CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges:true'] });
    // As the runtime makes a workspace container, but NET_RAW given back; the sysctl lets busybox's
    // arping claim another's address (a hand-made frame would not need it).
    const attacker = await docker.createContainer({
      Image: TEST_IMAGE,
      Cmd: ['sleep', '120'],
      Labels: { [CONTROL_PLANE_LABEL]: harness.controlPlaneId },
      HostConfig: { ...runtime, CapAdd: ['NET_RAW'], Sysctls: { 'net.ipv4.ip_nonlocal_bind': '1' }, Mounts: [], AutoRemove: false },
    });
    try {
      await attacker.start();
      const mac = (await attacker.inspect()).NetworkSettings.Networks[TEST_ENV.WORKSPACE_NETWORK]!.MacAddress;
      expect((await execIn(attacker.id, ['ping', '-c', '1', '-W', '2', await gateway()])).code).toBe(0);
      expect((await spoof(attacker.id, victim.ip)).code).toBe(0);
      // The host now sends Bob's traffic to the attacker: what the capabilities prevent above.
      expect(await hostArp(victim.ip)).toBe(mac);
    } finally {
      await attacker.remove({ force: true });
      // Bob's editor gets its own entry back at the next resolution.
      await promisify(execFile)('ip', ['neigh', 'flush', 'to', victim.ip]).catch(() => undefined);
    }
  });
});
