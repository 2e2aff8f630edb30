/**
 * Issue 39, finding 5: no workspace container reaches a link-local address, where a cloud's
 * metadata service hands out the machine's credentials. On real Docker, with a stand-in metadata
 * service of this test's own on the host at 169.254.169.254 (an address the test puts on the
 * loopback interface for its duration, so no traffic leaves the machine): a container on the
 * workspace network (where editors and simulators both are) gets nothing from it, while the host and
 * a container on another network do (so a refusal here is the firewall's, not a broken probe).
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { FIREWALL_CHAIN, LINK_LOCAL } from '../../src/docker/firewall.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { createHarness, docker, execIn, removeEverything, TEST_ENV, TEST_IMAGE, type Harness } from '../helpers/controllers.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { newStudent, openAndWait } from '../helpers/workspaces.ts';

const run = promisify(execFile);
const db = useTestDatabase({ truncate: false });
const tag = Date.now().toString(36);
const METADATA = '169.254.169.254';
/** The control container's network's subnet: not one Docker hands out by itself (its pools are 172.17–31 and 192.168). */
const CONTROL_SUBNET = '10.213.77.0/24';
let harness: Harness;
let metadata: http.Server;
let url: string;
let ada: WorkspaceRecord;
/** Who asked the stand-in, in order: the peer's address and the path. */
const asked: string[] = [];

beforeAll(async () => {
  await run('ip', ['addr', 'replace', `${METADATA}/32`, 'dev', 'lo']);
  metadata = http.createServer((req, res) => {
    asked.push(`${req.socket.remoteAddress} ${req.url}`);
    res.end('{"AccessKeyId":"stand-in"}');
  });
  await new Promise<void>((resolve) => metadata.listen(0, METADATA, resolve));
  url = `http://${METADATA}:${(metadata.address() as AddressInfo).port}/latest/meta-data/`;
  harness = createHarness(db.dataSource);
  await harness.controller.start();
  ada = await openAndWait(harness.store, (await newStudent(harness.store, 'ada', tag)).workspace);
}, 60_000);

afterAll(async () => {
  await harness?.stop();
  if (harness) await removeEverything(harness.controlPlaneId);
  await new Promise((resolve) => metadata?.close(resolve));
  await run('ip', ['addr', 'del', `${METADATA}/32`, 'dev', 'lo']).catch(() => undefined);
}, 30_000);

/** A probe of `url`, as a student's program would make it: exit 0 when it answers, 1 when it does not within 3 s; prints the status or the error. */
const probe = (target: string) => [
  'sh',
  '-c',
  `node -e "fetch('${target}', { signal: AbortSignal.timeout(3000) }).then((r) => { console.log(r.status); process.exit(0); }, (e) => { console.log(String(e.cause ?? e)); process.exit(1); })"`,
];

it('keeps a workspace container from a link-local address (a cloud metadata service)', async () => {
  const [editor] = (await harness.runtime.listContainers({ workspaceId: ada.id })).filter(
    (container) => container.role === 'code' && container.state === 'running',
  );
  expect((await fetch(url)).status).toBe(200);
  const { code, output } = await execIn(editor!.id, probe(url));
  // Answered: say what the way there looked like, so that a failure on a busy run can be explained.
  if (code !== 1) throw new Error(`the editor's probe exited ${code} (${output.trim() || 'no output'})\n${await wayThere(editor!.id)}`);
});

/** The container's addresses, what the stand-in was asked and by whom, the host's rules and route for the probe. */
async function wayThere(containerId: string): Promise<string> {
  const show = async (file: string, args: string[]) =>
    run(file, args).then(
      ({ stdout }) => stdout.trim(),
      (error: Error) => `(${error.message})`,
    );
  const networks = await show('docker', ['inspect', '--format', '{{json .NetworkSettings.Networks}}', containerId]);
  return [
    `container networks: ${networks}`,
    `the stand-in was asked by: ${asked.join(', ') || 'nobody'}`,
    `iptables INPUT:\n${await show('iptables', ['-w', '-S', 'INPUT'])}`,
    `iptables DOCKER-USER:\n${await show('iptables', ['-w', '-S', 'DOCKER-USER'])}`,
    `iptables ${FIREWALL_CHAIN}:\n${await show('iptables', ['-w', '-L', FIREWALL_CHAIN, '-v', '-n'])}`,
    `the nat table:\n${await show('iptables', ['-w', '-t', 'nat', '-S'])}`,
    `the host's route to it: ${await show('ip', ['route', 'get', METADATA])}`,
  ].join('\n');
}

it("is the workspace network's firewall rule that stops it: a container on another network gets through", async () => {
  // A network of the test's own, on a subnet of its own (no workspace network's rule names it, whatever earlier runs left).
  const name = `cp-metadata-control-${tag}`;
  const network = await docker.createNetwork({ Name: name, Driver: 'bridge', IPAM: { Config: [{ Subnet: CONTROL_SUBNET }] }, Labels: { 'service.test': tag } });
  const container = await docker.createContainer({ Image: TEST_IMAGE, Cmd: probe(url), Labels: { 'service.test': tag }, HostConfig: { NetworkMode: name } });
  try {
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    expect(StatusCode).toBe(0);
  } finally {
    await container.remove({ force: true });
    await network.remove();
  }
  // The rule the runtime wrote for the workspace network's subnet.
  const info = (await docker.getNetwork(TEST_ENV.WORKSPACE_NETWORK).inspect()) as { IPAM: { Config: { Subnet: string }[] } };
  await expect(run('iptables', ['-w', '-C', FIREWALL_CHAIN, '-s', info.IPAM.Config[0]!.Subnet, '-d', LINK_LOCAL, '-j', 'REJECT'])).resolves.toBeDefined();
});
