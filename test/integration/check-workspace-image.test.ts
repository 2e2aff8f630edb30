/**
 * scripts/check-workspace-image.sh, the check of the workspace image contract
 * (docs/workspace-image-contract.md), run as an operator runs it, against real Docker: on the
 * offline image that provisioning built (classroom-workspace:latest) every step passes; it fails,
 * naming each step, on an image that breaks the contract twice: an image derived from it in the test
 * (metadata only, no layer) whose entrypoint copies the starter over a used home, run with a
 * SIM_COMMAND whose robot serves NetworkTables 4 but no HALSim where the contract says; and on a run
 * that ends before it answers, shown by its last lines. Either way nothing it made is left on the
 * engine. The script runs with the control plane's defaults (no setting in its environment), as on
 * an operator's machine.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { engineClient } from '../../src/docker/docker-runtime.ts';

const IMAGE = 'classroom-workspace:latest';
const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/check-workspace-image.sh');
const STEPS = ['image', 'labels', 'user', 'image-home', 'editor', 'new-home', 'run', 'nt4', 'halsim', 'drive', 'disable', 'stop', 'output', 'reopen'];
/** An image derived in the test that copies its starter into every home, used or not; removed afterwards. */
const RESEEDING = `classroom-workspace:check-reseeds-${process.pid}`;
const docker = engineClient();

interface CheckRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Each step's line: its status (ok, FAILED, skip) and what it says. */
  steps: Map<string, { status: string; says: string }>;
  /** The check's own label value (service.control-plane), from its header. */
  owner: string | undefined;
}

/** Runs the script to its end with `args` and the environment of a plain shell (PATH, and the engine's address if set). */
function check(args: string[]): Promise<CheckRun> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, ...(process.env.DOCKER_HOST && { DOCKER_HOST: process.env.DOCKER_HOST }) };
  const child = spawn('bash', [SCRIPT, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      const steps = new Map<string, { status: string; says: string }>();
      for (const [, status, name, says] of stdout.matchAll(/^(ok|FAILED|skip) +([\w-]+): (.*)$/gm)) steps.set(name!, { status: status!, says: says! });
      resolve({ code, stdout, stderr, steps, owner: /labelled service\.control-plane=(image-check-[0-9a-f]+)/.exec(stdout)?.[1] });
    });
  });
}

/** What is left on the engine of a check: containers, volumes and networks with its label. */
async function leftovers(owner: string): Promise<string[]> {
  const filters = { label: [`service.control-plane=${owner}`] };
  const containers = await docker.listContainers({ all: true, filters });
  const { Volumes } = await docker.listVolumes({ filters });
  const networks = await docker.listNetworks({ filters });
  return [...containers.flatMap((container) => container.Names), ...(Volumes ?? []).map((volume) => volume.Name), ...networks.map((network) => network.Name)];
}

/** Builds `tag` from a Dockerfile alone (`docker build -`, no context). */
function build(tag: string, dockerfile: string): Promise<void> {
  const child = spawn('docker', ['build', '-q', '-t', tag, '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdin.end(dockerfile);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`docker build of ${tag} failed (${code}): ${stderr}`))));
  });
}

afterAll(async () => {
  await docker
    .getImage(RESEEDING)
    .remove()
    .catch(() => undefined);
});

const statuses = (run: CheckRun) => Object.fromEntries([...run.steps].map(([name, { status }]) => [name, status]));
const allOk = Object.fromEntries(STEPS.map((name) => [name, 'ok']));

test('passes every step on the offline image, its robot driven over HALSim, and leaves nothing on the engine', async () => {
  const run = await check(['--build-timeout', '3m', IMAGE]);
  // The whole output on a failure: which step, and why.
  expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }).toMatchObject({ code: 0, stderr: '' });
  expect(statuses(run)).toEqual(allOk);
  expect(run.steps.get('run')!.says).toMatch(/^compiled and booted: NT4_PORT 5810 first answered HTTP after [\d.]+ s/);
  expect(run.steps.get('halsim')!.says).toContain('connected on HALSIMWS_PORT 3300 at HALSIMWS_URI /wpilibws');
  expect(run.steps.get('drive')!.says).toMatch(
    /the robot reacted: (PWM \d+ <speed -?[\d.]+ over HALSim|the Field2d pose \/SmartDashboard\/Field\/Robot moved)/,
  );
  expect(run.steps.get('output')!.says).toMatch(/^\d+ lines/);
  expect(run.stdout).toContain('\nPASSED: classroom-workspace:latest meets the workspace image contract (14 steps)\n');
  expect(await leftovers(run.owner!)).toEqual([]);
}, 360_000);

test('fails at each step whose part of the contract an image breaks, saying why: no HALSim at HALSIMWS_URI, a starter copied over a used home', async () => {
  // With no command (an editor), it copies the starter into the home, used or not, before the image's own entrypoint.
  await build(
    RESEEDING,
    `FROM ${IMAGE}\nENTRYPOINT ["/bin/sh", "-c", "if [ $# -eq 0 ]; then cp -R /usr/local/share/classroom/starter/. /home/student/; fi; exec /usr/local/bin/workspace-entrypoint \\"$@\\"", "reseeding-entrypoint"]\n`,
  );
  const run = await check(['--build-timeout', '3m', '--sim-command', 'HALSIMWS_URI=/elsewhere ./gradlew simulateJava', RESEEDING]);
  expect({ code: run.code, stdout: run.stdout }).toMatchObject({ code: 1 });
  expect(statuses(run)).toEqual({ ...allOk, halsim: 'FAILED', drive: 'skip', disable: 'skip', reopen: 'FAILED' });
  expect(run.steps.get('halsim')!.says).toBe('the robot refused a HALSim WebSocket on HALSIMWS_PORT 3300 at HALSIMWS_URI /wpilibws: HTTP 404');
  expect(run.steps.get('drive')!.says).toBe('needs halsim');
  expect(run.steps.get('reopen')!.says).toMatch(
    /^the editor's entrypoint changed a home that was not empty when it started again: the edit to \.\/\S+ was undone, \.\/\S+ came back/,
  );
  expect(run.stdout).toContain(`\nFAILED: ${RESEEDING} does not meet the workspace image contract: halsim, reopen failed; drive, disable skipped\n`);
  expect(await leftovers(run.owner!)).toEqual([]);
}, 360_000);

test('fails at the run step when the run ends first, with its last lines: a print repeated with other numbers is one line, so the rarer line after it shows', async () => {
  const run = await check(['--sim-command', 'for i in $(seq 1 30); do echo "tick $i of 30"; done; echo "the robot gave up"; exit 3', IMAGE]);
  expect({ code: run.code, stdout: run.stdout }).toMatchObject({ code: 1 });
  expect(run.steps.get('run')).toEqual({ status: 'FAILED', says: 'the run failed (exit code 3) before NT4_PORT answered HTTP' });
  const lines = /^FAILED run: .*\n((?: {2}.*\n)*)/m.exec(run.stdout)?.[1];
  expect(lines).toBe('  its last lines:\n  | tick 30 of 30  (the last of 30 such lines)\n  | the robot gave up\n');
  expect(await leftovers(run.owner!)).toEqual([]);
});

test('fails at the image step when the image is not on the engine, and runs nothing', async () => {
  const run = await check(['classroom-workspace:no-such-tag']);
  expect({ code: run.code, stdout: run.stdout }).toMatchObject({ code: 1 });
  expect(run.steps.get('image')).toEqual({
    status: 'FAILED',
    says: expect.stringMatching(/^no image classroom-workspace:no-such-tag on this engine .*: build it first/),
  });
  expect(statuses(run)).toEqual(Object.fromEntries(STEPS.map((name) => [name, name === 'image' ? 'FAILED' : 'skip'])));
  expect(await leftovers(run.owner!)).toEqual([]);
});

test("refuses a bad setting in the control plane's own words, before it makes anything", async () => {
  const run = await check(['--nt4-port', '70000', IMAGE]);
  expect(run.code).toBe(2);
  expect(run.stderr).toContain('NT4_PORT="70000" is not valid: expected a TCP port from 1 to 65535');
  expect(run.stderr).toContain('usage: scripts/check-workspace-image.sh');
  expect(run.stdout).toBe('');
});
