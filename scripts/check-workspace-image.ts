/**
 * The workspace image contract's check (docs/workspace-image-contract.md), run by
 * scripts/check-workspace-image.sh: runs one image on this machine's Docker Engine as the control
 * plane runs a workspace (its editor on a new home, then a run's simulator beside it on that home),
 * reads the robot's NetworkTables 4 and drives it over HALSim as the editor's Driver Station does.
 *
 * Its containers are made by the control plane's own code (DockerRuntime.createCodeContainer and
 * createSimContainer: the same labels, user, Init, environment, command, limits and capabilities),
 * then made again from what the engine recorded of them with only two changes: the check's own
 * bridge network (inter-container traffic off, as WORKSPACE_NETWORK) instead of none, and their
 * ports published on 127.0.0.1 alone, where the check reaches them.
 *
 * Prints one line per step, `ok`, `FAILED` with why, or `skip` (a step it needs failed); exits 0
 * only when every step passed, 1 when one did not, 2 on bad usage or no engine, 130 or 143 when
 * interrupted (SIGINT, SIGTERM). Every step is
 * bounded in time. Everything it makes is named `image-check-<id>…` and labelled
 * `service.control-plane=image-check-<id>`, and is removed at the end, on Ctrl-C too.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type Docker from 'dockerode';
import { ConfigError, loadConfig, parseDurationMs, type Config } from '../src/config.ts';
import { CONTROL_PLANE_LABEL, DockerRuntime } from '../src/docker/docker-runtime.ts';
import { HALSIM_URI, HOME_PATH, LABELS, type ManagedContainer } from '../src/docker/runtime.ts';
import { probeHttp } from '../src/probe.ts';
import { OUTPUT_LIMIT } from '../src/store/runs.ts';
import { HalSimClient, Nt4Client, waitOn, type HalSimMessage } from '../test/helpers/robot-protocols.ts';

const USAGE = `usage: scripts/check-workspace-image.sh [options] [IMAGE]

Checks IMAGE (default: WORKSPACE_IMAGE, else classroom-workspace:latest) against the workspace
image contract (docs/workspace-image-contract.md): an editor on a new home, a run of SIM_COMMAND
beside it, its NetworkTables 4 read, its robot enabled in teleop over HALSim and driven with
joystick 0, then disabled. Settings are the control plane's own environment variables (and
defaults); the options override them.

  --sim-command CMD       SIM_COMMAND (./gradlew simulateJava)
  --editor-port PORT      EDITOR_PORT (8080)
  --nt4-port PORT         NT4_PORT (5810)
  --halsim-port PORT      HALSIM_PORT (3300)
  --build-timeout TIME    RUN_BUILD_TIMEOUT, how long compile and boot may take (10m)
  --editor-timeout TIME   how long the editor may take to answer (3m)
  --axes LIST             joystick 0's axes while driving (0,-0.8,0,0,0,-0.8: an Xbox
                          controller's left and right sticks forward)
  -h, --help

Memory, CPU and process limits are RUN_MEMORY_LIMIT, RUN_CPUS, CODE_MEMORY_LIMIT, CODE_CPUS and
CONTAINER_PIDS_LIMIT of the environment. Exit code: 0 every step passed, 1 a step failed (or what
the check made was not all removed), 2 bad usage or no Docker Engine, 130 interrupted (Ctrl-C).`;

/** What the check runs and how long it waits: the control plane's settings, and its own bounds. */
interface Options {
  image: string;
  config: Config;
  editorTimeoutMs: number;
  axes: number[];
}

/** A bad command line or setting: printed with the usage, exit code 2. */
class UsageError extends Error {}

/** A step's failure: why, and lines that show it (a run's last output). */
class StepFailure extends Error {
  readonly lines: string[];
  constructor(why: string, lines: string[] = []) {
    super(why);
    this.lines = lines;
  }
}

/** How often a starting editor and a compiling run are probed: the control plane's intervals (controllers/workspaces.ts, controllers/runs.ts). */
const EDITOR_PROBE_MS = 250;
const RUN_PROBE_MS = 100;
/** How soon a HALSim connection the robot did not take is tried again. */
const CONNECT_RETRY_MS = 250;
/** How often a wait prints that it is still waiting. */
const PROGRESS_MS = 15_000;
/** The bound on a one-shot command container (the user and home steps). */
const COMMAND_MS = 120_000;
/** How long the rest of an ended run's output may take to arrive. */
const OUTPUT_END_MS = 10_000;
/** The bound on each protocol step once the run is ready: an answer, a topic, the robot's reaction. */
const ROBOT_MS = 30_000;
/** The Driver Station's heartbeat while driving (it sends at least every 100 ms). */
const HEARTBEAT_MS = 100;
/** How long the control plane gives a run's simulator to end on SIGTERM before SIGKILL (controllers/runs.ts). */
const STOP_GRACE_SECONDS = 5;
/** How long a run's output may take to end after its container stopped (the control plane's drain, controllers/runs.ts). */
const OUTPUT_DRAIN_MS = 10_000;

const DEFAULT_AXES = [0, -0.8, 0, 0, 0, -0.8];

/** Reads the command line over the control plane's own configuration (the same variables, validated by src/config.ts). */
function readOptions(argv: string[]): Options | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'sim-command': { type: 'string' },
      'editor-port': { type: 'string' },
      'nt4-port': { type: 'string' },
      'halsim-port': { type: 'string' },
      'build-timeout': { type: 'string' },
      'editor-timeout': { type: 'string' },
      axes: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  if (positionals.length > 1) throw new UsageError(`one image at a time, not ${positionals.length}`);
  const overrides: Record<string, string | undefined> = {
    SIM_COMMAND: values['sim-command'],
    EDITOR_PORT: values['editor-port'],
    NT4_PORT: values['nt4-port'],
    HALSIM_PORT: values['halsim-port'],
    RUN_BUILD_TIMEOUT: values['build-timeout'],
  };
  let config: Config;
  try {
    config = loadConfig({ ...process.env, ...Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined)) });
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.problems.join('\n'));
    throw error;
  }
  const editorTimeoutMs = parseDurationMs(values['editor-timeout'] ?? '3m');
  if (editorTimeoutMs === undefined)
    throw new UsageError(`--editor-timeout ${JSON.stringify(values['editor-timeout'])}: expected seconds, or a number with s, m or h`);
  const axes = values.axes === undefined ? DEFAULT_AXES : values.axes.split(',').map((axis) => Number(axis.trim()));
  if (axes.length > 12 || axes.some((axis) => !Number.isFinite(axis) || Math.abs(axis) > 1))
    throw new UsageError(`--axes ${JSON.stringify(values.axes)}: expected at most 12 comma-separated numbers from -1 to 1`);
  return { image: positionals[0] ?? config.workspaceImage, config, editorTimeoutMs, axes };
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const print = (line: string) => process.stdout.write(`${line}\n`);
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The exit code of the signal that interrupted the check (Ctrl-C: 130, SIGTERM: 143), once one did. */
let interruptedBy: number | undefined;
let interrupt: (reason: Error) => void = () => undefined;
/** Rejects when the check is interrupted: every wait races it, so that the check goes straight to removing what it made. */
const interruption = new Promise<never>((_resolve, reject) => {
  interrupt = reject;
});
interruption.catch(() => undefined);

/** Resolves as `promise` does, or rejects when the check is interrupted. */
function interruptible<T>(promise: Promise<T>): Promise<T> {
  return Promise.race([promise, interruption]);
}

/** Resolves as `promise` does, or rejects after `ms` saying `what` had no answer (or when the check is interrupted). */
async function bounded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      interruption,
      new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: nothing within ${seconds(ms)}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A run's output as the control plane reads it (stdout and stderr of its container, in order), kept up to its limit (OUTPUT_LIMIT). */
class RunOutput {
  text = '';
  bytes = 0;
  readonly ended: Promise<void>;

  constructor(stream: Readable) {
    stream.on('data', (chunk: Buffer) => {
      this.bytes += chunk.length;
      if (this.text.length < OUTPUT_LIMIT) this.text += chunk.toString('utf8');
    });
    this.ended = new Promise((resolve) => {
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', () => resolve());
    });
  }

  lines(): string[] {
    return this.text.split('\n').filter((line) => line.trim() !== '');
  }

  /**
   * Its last `count` lines, indented under a step's line. A run of lines that differ only in their
   * numbers (a robot's print every second, however padded) is one line, its last, with how many it
   * stands for, so that a rare line (an exception, a connection) is not pushed out by them.
   */
  tail(count = 20): string[] {
    const runs: { line: string; shape: string; times: number }[] = [];
    for (const line of this.lines()) {
      const shape = line.replace(/\d+(\.\d+)?/g, '#').replace(/\s+/g, ' ');
      const last = runs.at(-1);
      if (last?.shape === shape) Object.assign(last, { line, times: last.times + 1 });
      else runs.push({ line, shape, times: 1 });
    }
    const shown = runs.slice(-count).map(({ line, times }) => `  | ${line}${times > 1 ? `  (the last of ${times} such lines)` : ''}`);
    return shown.length === 0 ? ['  (the run printed nothing)'] : ['  its last lines:', ...shown];
  }
}

/** The image contract's check of one image; `run` does every step, prints it, removes what it made. */
class ImageCheck {
  private readonly options: Options;
  /** The check's control-plane id, slug, name prefix and label value. */
  readonly owner = `image-check-${randomBytes(4).toString('hex')}`;
  private readonly runtime = new DockerRuntime({ controlPlaneId: this.owner });
  private readonly docker: Docker = this.runtime.docker;
  private readonly home = `${this.owner}-home`;
  private readonly results = new Map<string, 'ok' | 'failed' | 'skipped'>();
  /** The image's labels, as the engine has them. */
  private imageLabels: string[] = [];
  private imageHomeFiles: string[] = [];
  private editor?: { id: string; port: number };
  private sim?: { id: string; nt4: number; halsim: number; output: RunOutput };
  private nt4?: Nt4Client;
  private halsim?: HalSimClient;

  constructor(options: Options) {
    this.options = options;
  }

  /** Runs every step, then removes what it made: whether every step passed and everything was removed. */
  async run(): Promise<boolean> {
    const { image, config } = this.options;
    print(`checking ${image} against the workspace image contract (docs/workspace-image-contract.md)`);
    print(
      `  as the control plane runs it: SIM_COMMAND ${JSON.stringify(config.simCommand)}, EDITOR_PORT ${config.editorPort}, NT4_PORT ${config.nt4Port}, HALSIM_PORT ${config.halsimPort}, RUN_BUILD_TIMEOUT ${seconds(config.runBuildTimeoutMs)}`,
    );
    print(`  what it makes: named ${this.owner}…, labelled ${CONTROL_PLANE_LABEL}=${this.owner}, removed at the end`);
    try {
      await this.docker.createNetwork({
        Name: this.owner,
        Driver: 'bridge',
        // As WORKSPACE_NETWORK: no container on it reaches another (docs/security.md, "The network").
        Options: { 'com.docker.network.bridge.enable_icc': 'false' },
        Labels: { [CONTROL_PLANE_LABEL]: this.owner },
      });
      await this.runtime.ensureVolume({ workspaceId: this.owner, slug: this.owner }, this.home);
      await this.steps();
    } catch (error) {
      print(`FAILED setup: ${messageOf(error)}`);
      this.results.set('setup', 'failed');
    }
    const removed = await this.cleanUp();
    if (interruptedBy !== undefined) {
      print(`INTERRUPTED: ${image} was not checked to the end${removed ? '; what the check made is removed' : ''}`);
      return false;
    }
    const failed = [...this.results].filter(([, result]) => result === 'failed').map(([name]) => name);
    const skipped = [...this.results].filter(([, result]) => result === 'skipped').map(([name]) => name);
    if (failed.length === 0) print(`PASSED: ${image} meets the workspace image contract (${this.results.size} steps)`);
    else
      print(
        `FAILED: ${image} does not meet the workspace image contract: ${failed.join(', ')} failed${skipped.length > 0 ? `; ${skipped.join(', ')} skipped` : ''}`,
      );
    return failed.length === 0 && removed;
  }

  private async steps(): Promise<void> {
    await this.step('image', [], () => this.checkImage());
    await this.step('labels', ['image'], () => this.checkLabels());
    await this.step('user', ['image'], () => this.checkUser());
    await this.step('image-home', ['user'], () => this.checkImageHome());
    await this.step('editor', ['image'], () => this.checkEditor());
    await this.step('new-home', ['editor'], () => this.checkNewHome());
    await this.step('run', ['editor'], () => this.checkRun());
    await this.step('nt4', ['run'], () => this.checkNt4());
    await this.step('halsim', ['run'], () => this.checkHalsim());
    await this.step('drive', ['halsim'], () => this.checkDrive());
    await this.step('disable', ['halsim'], () => this.checkDisable());
    await this.step('stop', ['run'], () => this.checkStop());
    await this.step('output', ['run'], () => this.checkOutput());
    await this.step('reopen', ['new-home'], () => this.checkReopen());
  }

  /** Runs one step unless a step it needs did not pass, and prints its line. */
  private async step(name: string, needs: string[], body: () => Promise<string>): Promise<void> {
    const missing = needs.filter((need) => this.results.get(need) !== 'ok');
    if (missing.length > 0 || interruptedBy !== undefined) {
      this.results.set(name, 'skipped');
      print(`skip   ${name}: ${interruptedBy === undefined ? `needs ${missing.join(', ')}` : 'interrupted'}`);
      return;
    }
    try {
      const detail = await body();
      this.results.set(name, 'ok');
      print(`ok     ${name}: ${detail}`);
    } catch (error) {
      if (interruptedBy !== undefined) {
        this.results.set(name, 'skipped');
        print(`skip   ${name}: interrupted`);
        return;
      }
      this.results.set(name, 'failed');
      print(`FAILED ${name}: ${messageOf(error)}`);
      if (error instanceof StepFailure) for (const line of error.lines) print(line);
    }
  }

  private async checkImage(): Promise<string> {
    let info: Docker.ImageInspectInfo;
    try {
      info = await this.docker.getImage(this.options.image).inspect();
    } catch (error) {
      throw new StepFailure(`no image ${this.options.image} on this engine (${messageOf(error)}): build it first; the control plane pulls nothing`);
    }
    const { User, Entrypoint, Cmd, Labels } = info.Config;
    this.imageLabels = Object.keys(Labels ?? {});
    return `${this.options.image} (${(info.Size / 1e6).toFixed(0)} MB), USER ${JSON.stringify(User ?? '')}, ENTRYPOINT ${JSON.stringify(Entrypoint ?? [])}, CMD ${JSON.stringify(Cmd ?? [])}`;
  }

  /** The control plane's labels are its own: an image's labels are merged into every container made from it. */
  private async checkLabels(): Promise<string> {
    const ours = new Set<string>([...Object.values(LABELS), CONTROL_PLANE_LABEL]);
    const taken = this.imageLabels.filter((label) => ours.has(label));
    if (taken.length > 0) throw new StepFailure(`the image sets ${taken.join(', ')}, which the control plane sets on its containers and reads back`);
    return `none of the control plane's labels (${[...ours].join(', ')}) in the image`;
  }

  /** A command, run as a run's simulator runs one, on the new home before anything was in it. */
  private async checkUser(): Promise<string> {
    const output = await this.command('user', `printf 'uid=%s gid=%s cwd=%s\\n' "$(id -u)" "$(id -g)" "$(pwd)"; ls -A ${HOME_PATH} | sed 's/^/file=/'`);
    const found = /uid=(\S*) gid=(\S*) cwd=(\S*)/.exec(output);
    if (!found) throw new StepFailure(`the command printed no uid, gid and working directory`, [`  | ${output.trim()}`]);
    const [, uid, gid, cwd] = found;
    if (uid !== '1000' || gid !== '1000')
      throw new StepFailure(
        `a command ran as uid ${uid}, gid ${gid}: the image's USER must be 1000:1000 (the control plane sets no user, drops every capability, and gives restored files to 1000:1000)`,
      );
    if (cwd !== HOME_PATH) throw new StepFailure(`a command ran in ${cwd}, not in the home ${HOME_PATH}`);
    this.imageHomeFiles = [...output.matchAll(/^file=(.*)$/gm)].map((match) => match[1]!).filter((name) => name !== 'lost+found');
    return `a command (sh -c, as a run's) ran as uid 1000, gid 1000, in ${HOME_PATH}`;
  }

  /** Docker copies an image's files at the mount point into a new volume: nothing may be there. */
  private async checkImageHome(): Promise<string> {
    if (this.imageHomeFiles.length > 0)
      throw new StepFailure(
        `the image has files under ${HOME_PATH}, which Docker copies into every new home and which then belong to no student: ${this.imageHomeFiles.slice(0, 10).join(', ')}`,
      );
    return `${HOME_PATH} is empty in the image, and a command copied nothing into a new home`;
  }

  /** The editor container, as the controller makes it, on the new home: it answers HTTP on EDITOR_PORT, with no login of its own. */
  private async checkEditor(): Promise<string> {
    const { config } = this.options;
    const template = await this.runtime.createCodeContainer({
      workspaceId: this.owner,
      slug: this.owner,
      image: this.options.image,
      memoryBytes: config.codeMemoryLimitBytes,
      network: 'none',
      editorPort: config.editorPort,
      nanoCpus: config.codeNanoCpus,
      pidsLimit: config.containerPidsLimit,
      restartGeneration: 0,
      homeVolume: this.home,
      specHash: this.owner,
    });
    const { container, ports } = await this.recreate(template, `${this.owner}-code`, [config.editorPort]);
    this.editor = { id: container.id, port: ports.get(config.editorPort)! };
    const started = Date.now();
    await this.untilAnswers(container.id, `127.0.0.1:${this.editor.port}`, EDITOR_PROBE_MS, this.options.editorTimeoutMs, 'the editor', 'EDITOR_PORT');
    const waited = Date.now() - started;
    const answer = await fetch(`http://127.0.0.1:${this.editor.port}/`, { redirect: 'manual', signal: AbortSignal.timeout(10_000) });
    await answer.body?.cancel();
    const location = answer.headers.get('location') ?? '';
    if (answer.status === 401 || /login/i.test(location))
      throw new StepFailure(
        `the editor asks for a login (GET / → ${answer.status}${location ? ` ${location}` : ''}): the control plane in front of it decides who gets through, so it must have none of its own`,
      );
    return `answered HTTP on EDITOR_PORT ${config.editorPort} after ${seconds(waited)} (GET / → ${answer.status}${location ? ` ${location}` : ''})`;
  }

  /** The editor's entrypoint gave the new home a project, the student's, which the control plane can measure. */
  private async checkNewHome(): Promise<string> {
    const output = await this.command(
      'home',
      `ls -A | sed 's/^/entry=/'; find . -xdev \\( ! -uid 1000 -o ! -gid 1000 \\) -print | head -n 5 | sed 's/^/foreign=/'`,
    );
    const entries = [...output.matchAll(/^entry=(.*)$/gm)].map((match) => match[1]!).filter((name) => name !== 'lost+found');
    const foreign = [...output.matchAll(/^foreign=(.*)$/gm)].map((match) => match[1]!);
    if (entries.length === 0)
      throw new StepFailure(
        `the editor started on a new home and left it empty: with no command, the entrypoint must copy a starter project into an empty home`,
      );
    if (foreign.length > 0) throw new StepFailure(`files in the new home that are not uid and gid 1000 (the student's): ${foreign.join(', ')}`);
    const usage = await this.runtime.homeUsage(this.editor!.id);
    if (!usage) throw new StepFailure('the editor container is gone: it cannot be measured');
    if (usage.problem) throw new StepFailure(`the control plane cannot measure the home in the editor (timeout and du): ${usage.problem}`);
    return `the editor's entrypoint filled the new home (${entries.slice(0, 8).join(', ')}${entries.length > 8 ? ', …' : ''}), all uid and gid 1000; measured as the control plane measures homes: ${Math.round(usage.bytes / 1024)} KiB`;
  }

  /** A run: SIM_COMMAND in a sim container as the run controller makes it, beside the editor, until NT4_PORT first answers HTTP. */
  private async checkRun(): Promise<string> {
    const { config } = this.options;
    const template = await this.runtime.createSimContainer(this.simSpec(config.simCommand));
    const { container, ports } = await this.recreate(template, `${this.owner}-sim`, [config.nt4Port, config.halsimPort]);
    this.sim = {
      id: container.id,
      nt4: ports.get(config.nt4Port)!,
      halsim: ports.get(config.halsimPort)!,
      output: new RunOutput(await this.runtime.followOutput(container.id)),
    };
    const started = Date.now();
    await this.untilAnswers(container.id, `127.0.0.1:${this.sim.nt4}`, RUN_PROBE_MS, config.runBuildTimeoutMs, 'the run', 'NT4_PORT');
    return `compiled and booted: NT4_PORT ${config.nt4Port} first answered HTTP after ${seconds(Date.now() - started)} (the sim-ready signal)`;
  }

  /** NetworkTables 4 at /nt/<client>: some topic's value arrives. */
  private async checkNt4(): Promise<string> {
    const url = `ws://127.0.0.1:${this.sim!.nt4}/nt/${this.owner}`;
    const nt4 = await bounded(Nt4Client.connect(url), ROBOT_MS, `NetworkTables 4 at /nt/${this.owner}`).catch((error: unknown) => {
      throw new StepFailure(`no NetworkTables 4 WebSocket at /nt/<client> on NT4_PORT: ${messageOf(error)}`);
    });
    this.nt4 = nt4;
    await interruptible(
      waitOn(
        nt4.socket,
        'message',
        'a topic value',
        () => nt4.values.size > 0,
        () => `${nt4.topics.size} topics announced, no value`,
        ROBOT_MS,
      ),
    ).catch((error: unknown) => {
      throw new StepFailure(`subscribed to every topic, but no value arrived: ${messageOf(error)}`);
    });
    const names = [...nt4.values.keys()];
    return `a NetworkTables 4 client at /nt/<client> got ${names.length} topic values (${names.slice(0, 4).join(', ')}${names.length > 4 ? ', …' : ''})`;
  }

  /** WPILib's HALSim WebSocket at HALSIMWS_PORT and HALSIMWS_URI: the robot tells the Driver Station state it sees. */
  private async checkHalsim(): Promise<string> {
    const url = `ws://127.0.0.1:${this.sim!.halsim}${HALSIM_URI}`;
    const where = `HALSIMWS_PORT ${this.options.config.halsimPort} at HALSIMWS_URI ${HALSIM_URI}`;
    // The robot may open its HALSim port a moment after NetworkTables answered: a connection it does not take is tried again.
    const deadline = Date.now() + ROBOT_MS;
    let client: HalSimClient | number;
    for (;;) {
      try {
        client = await bounded(HalSimClient.connect(url), ROBOT_MS, `a HALSim WebSocket on ${where}`);
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new StepFailure(`no HALSim WebSocket on ${where}: ${messageOf(error)}`);
      }
      await interruptible(sleep(CONNECT_RETRY_MS));
    }
    if (typeof client === 'number') throw new StepFailure(`the robot refused a HALSim WebSocket on ${where}: HTTP ${client}`);
    this.halsim = client;
    await interruptible(client.until('the DriverStation state', (robot) => robot.received.some((message) => message.type === 'DriverStation'), ROBOT_MS)).catch(
      (error: unknown) => {
        throw new StepFailure(`connected on ${where}, but the robot did not tell its DriverStation state: ${messageOf(error)}`);
      },
    );
    const devices = [...new Set(client.received.map((message) => `${message.type}${message.device === '' ? '' : ` ${message.device}`}`))];
    return `connected on ${where}; the robot told ${devices.join(', ')}`;
  }

  /** Teleop enabled with joystick 0's axes, as the Driver Station sends them: a motor turns (PWM) or the robot moves on its field (Field2d). */
  private async checkDrive(): Promise<string> {
    const halsim = this.halsim!;
    const since = halsim.received.length;
    const field = this.fieldPose();
    const before = field === undefined ? undefined : JSON.stringify(this.nt4!.values.get(field));
    halsim.driveTeleop(this.options.axes);
    const heartbeat = setInterval(() => halsim.driverStation({ '>new_data': true }), HEARTBEAT_MS);
    const motor = () =>
      halsim.received.slice(since).find((message) => message.type === 'PWM' && typeof message.data['<speed'] === 'number' && message.data['<speed'] !== 0);
    const seen: Promise<string>[] = [
      halsim
        .until('a PWM <speed other than 0', () => motor() !== undefined, ROBOT_MS)
        .then(() => {
          const { device, data } = motor()!;
          return `PWM ${device} <speed ${(data['<speed'] as number).toFixed(3)} over HALSim`;
        }),
    ];
    if (field !== undefined) {
      // Moving: two changes since the enable, so that a pose set once (a robot placed at its start) does not count.
      const poses = new Set([before]);
      seen.push(
        this.nt4!.until<unknown>(field, (pose) => poses.add(JSON.stringify(pose)).size >= 3, ROBOT_MS).then(
          (pose) => `the Field2d pose ${field} moved from ${before} to ${JSON.stringify(pose)} on NetworkTables 4`,
        ),
      );
    }
    const driving = `in teleop with joystick 0's axes ${JSON.stringify(this.options.axes)} and a Driver Station heartbeat every ${HEARTBEAT_MS} ms`;
    try {
      return `${driving}, the robot reacted: ${await interruptible(Promise.any(seen))}`;
    } catch (error) {
      if (interruptedBy !== undefined) throw error;
      const pose = field === undefined ? 'NetworkTables 4 has no Field2d robot pose' : `the Field2d pose ${field} did not move (from ${before})`;
      throw new StepFailure(
        `${driving}, for ${seconds(ROBOT_MS)} no PWM <speed other than 0 came over HALSim and ${pose}; the robot's DriverStation state: ${JSON.stringify(halsim.state('DriverStation', ''))}`,
        this.sim!.output.tail(),
      );
    } finally {
      clearInterval(heartbeat);
    }
  }

  /**
   * Disabled by the Driver Station: the robot tells it sees `>enabled` false. First it must have told
   * `>enabled` true: the robot tells only what changed, and the drive step can end on the Field2d
   * pose before the robot's next report, so a disable sent at once could come before the robot ever
   * said it was enabled, and it would then never say false.
   */
  private async checkDisable(): Promise<string> {
    const halsim = this.halsim!;
    await interruptible(halsim.until('>enabled true', (robot) => robot.state('DriverStation', '')['>enabled'] === true, ROBOT_MS)).catch((error: unknown) => {
      throw new StepFailure(`the robot was enabled and driven, but did not tell >enabled true: ${messageOf(error)}`, this.sim!.output.tail());
    });
    const since = halsim.received.length;
    const disabled = (message: HalSimMessage) => message.type === 'DriverStation' && message.data['>enabled'] === false;
    halsim.driverStation({ '>enabled': false, '>new_data': true });
    await interruptible(halsim.until('>enabled false', (robot) => robot.received.slice(since).some(disabled), ROBOT_MS)).catch((error: unknown) => {
      throw new StepFailure(`sent >enabled false with >new_data, and the robot did not tell it is disabled: ${messageOf(error)}`, this.sim!.output.tail());
    });
    await bounded(halsim.close(), ROBOT_MS, 'closing the HALSim WebSocket');
    return `the robot told >enabled false after the Driver Station disabled it`;
  }

  /** Stopped as the run controller stops a run: SIGTERM to the init, SIGKILL after 5 s. */
  private async checkStop(): Promise<string> {
    const started = Date.now();
    await this.runtime.stop(this.sim!.id, STOP_GRACE_SECONDS);
    const took = Date.now() - started;
    const exit = await this.runtime.exitOf(this.sim!.id);
    if (!exit || exit.running) throw new StepFailure('the simulator container did not stop');
    const killed = took >= STOP_GRACE_SECONDS * 1000 ? `: it did not end on SIGTERM and was killed after ${STOP_GRACE_SECONDS} s` : '';
    return `stopped as the control plane stops a run (SIGTERM through the init) in ${seconds(took)}, exit code ${exit.exitCode}${killed}`;
  }

  /** The run's output, what its student sees: stdout and stderr of its container, not empty. */
  private async checkOutput(): Promise<string> {
    const output = this.sim!.output;
    await bounded(output.ended, OUTPUT_DRAIN_MS, "the run's output to end");
    const lines = output.lines();
    if (lines.length === 0) throw new StepFailure('the run printed nothing on stdout or stderr: its output is what the student sees of compile and boot');
    return `${lines.length} lines (${output.bytes} bytes) of stdout and stderr; the last: ${JSON.stringify(lines.at(-1)!.slice(0, 160))}`;
  }

  /**
   * The editor stopped and started again, as a workspace closed and reopened: its entrypoint leaves a
   * home with anything in it as it is. A file of the project (not under a top-level dot-folder,
   * where editors keep their own state) edited and another deleted stay so.
   */
  private async checkReopen(): Promise<string> {
    const marker = `edited by ${this.owner}`;
    const edit = await this.command(
      'edit',
      `set -- $(find . -path './.*' -prune -o -type f -print | sort | head -n 2); if [ "$#" -gt 0 ]; then printf '%s\\n' '${marker}' >> "$1"; echo "edited=$1"; fi; if [ "$#" -gt 1 ]; then rm -f "$2"; echo "deleted=$2"; fi`,
    );
    const edited = /^edited=(.*)$/m.exec(edit)?.[1];
    const deleted = /^deleted=(.*)$/m.exec(edit)?.[1];
    if (!edited) throw new StepFailure('the home holds no file outside dot-folders to edit');
    const editor = this.editor!;
    await this.runtime.stop(editor.id);
    await this.runtime.start(editor.id);
    editor.port = (await this.published(editor.id, [this.options.config.editorPort])).get(this.options.config.editorPort)!;
    const started = Date.now();
    await this.untilAnswers(editor.id, `127.0.0.1:${editor.port}`, EDITOR_PROBE_MS, this.options.editorTimeoutMs, 'the editor', 'EDITOR_PORT');
    const waited = Date.now() - started;
    const quoted = (path: string) => `'${path.replaceAll("'", "'\\''")}'`;
    const after = await this.command(
      'reopened',
      `tail -n 1 ${quoted(edited)} | grep -qxF '${marker}' && echo kept-edit; ${deleted ? `[ -e ${quoted(deleted)} ] || echo kept-deletion` : 'echo kept-deletion'}; true`,
    );
    const lost = [
      ...(after.includes('kept-edit') ? [] : [`the edit to ${edited} was undone`]),
      ...(after.includes('kept-deletion') ? [] : [`${deleted} came back`]),
    ];
    if (lost.length > 0)
      throw new StepFailure(
        `the editor's entrypoint changed a home that was not empty when it started again: ${lost.join(', ')} (it may copy its starter only into an empty home)`,
      );
    return `stopped and started (as a workspace closed and opened again), the editor answered after ${seconds(waited)} and left the home as it was: the edit to ${edited}${deleted ? ` and the deletion of ${deleted}` : ''} kept`;
  }

  /** The topic of the first Field2d's robot pose that has a value (`/SmartDashboard/<name>/Robot`), if any. */
  private fieldPose(): string | undefined {
    for (const [name, value] of this.nt4?.values ?? []) {
      if (!name.endsWith('/.type') || value !== 'Field2d') continue;
      const pose = `${name.slice(0, -'.type'.length)}Robot`;
      if (this.nt4!.values.has(pose)) return pose;
    }
    return undefined;
  }

  private simSpec(command: string) {
    const { config } = this.options;
    return {
      workspaceId: this.owner,
      slug: this.owner,
      runId: randomUUID(),
      image: this.options.image,
      memoryBytes: config.runMemoryLimitBytes,
      nanoCpus: config.runNanoCpus,
      pidsLimit: config.containerPidsLimit,
      network: 'none',
      command,
      nt4Port: config.nt4Port,
      halsimPort: config.halsimPort,
      homeVolume: this.home,
    };
  }

  /**
   * Makes a container again from one the control plane's code made (never started): the engine's
   * record of its command, environment, working directory, labels and host configuration, on the
   * check's network with `ports` published on 127.0.0.1 only. The control plane sets no user or
   * entrypoint, so neither is copied: the image's apply, as they do for the control plane.
   */
  private async recreate(template: ManagedContainer, name: string, ports: number[]): Promise<{ container: Docker.Container; ports: Map<number, number> }> {
    const made = this.docker.getContainer(template.id);
    const { Config, HostConfig } = await made.inspect();
    await made.remove({ force: true });
    const exposed = ports.map((port) => `${port}/tcp`);
    const container = await this.docker.createContainer({
      name,
      Image: Config.Image,
      Cmd: Config.Cmd ?? undefined,
      WorkingDir: Config.WorkingDir,
      Env: Config.Env,
      Labels: Config.Labels,
      ExposedPorts: Object.fromEntries(exposed.map((port) => [port, {}])),
      HostConfig: {
        ...HostConfig,
        NetworkMode: this.owner,
        PortBindings: Object.fromEntries(exposed.map((port) => [port, [{ HostIp: '127.0.0.1', HostPort: '' }]])),
      },
    });
    await container.start();
    return { container, ports: await this.published(container.id, ports) };
  }

  /**
   * The host ports on 127.0.0.1 of a started container's `ports` (a new one at each start). A
   * container that has already ended has none, and gets 0 for each: the step that waits on it then
   * reports its end.
   */
  private async published(id: string, ports: number[]): Promise<Map<number, number>> {
    const { Name, NetworkSettings, State } = await this.docker.getContainer(id).inspect();
    const hostPorts = new Map<number, number>();
    for (const port of ports) {
      const hostPort = NetworkSettings.Ports?.[`${port}/tcp`]?.[0]?.HostPort;
      if (!hostPort && State.Running) throw new Error(`the engine published no host port for ${port}/tcp of ${Name}`);
      hostPorts.set(port, Number(hostPort ?? 0));
    }
    return hostPorts;
  }

  /** Runs `script` with `sh -c` in a container made as a run's simulator is, on the home, to its end: its output. */
  private async command(suffix: string, script: string): Promise<string> {
    const template = await this.runtime.createSimContainer(this.simSpec(script));
    const { container } = await this.recreate(template, `${this.owner}-${suffix}`, []);
    const { StatusCode } = await bounded(container.wait() as Promise<{ StatusCode: number }>, COMMAND_MS, `the ${suffix} command`);
    const output = await this.runtime.logsTail(container.id, 200);
    if (StatusCode !== 0)
      throw new StepFailure(
        `the command \`sh -c "${script}"\` exited with ${StatusCode}`,
        output.trim() === ''
          ? []
          : output
              .trim()
              .split('\n')
              .map((line) => `  | ${line}`),
      );
    return output;
  }

  /**
   * Probes `endpoint` as the control plane does (an HTTP GET of `/`, 500 ms timeout; any HTTP answer
   * counts) every `intervalMs` until it answers, the container exits, or `timeoutMs` passed,
   * printing every PROGRESS_MS that it still waits.
   */
  private async untilAnswers(id: string, endpoint: string, intervalMs: number, timeoutMs: number, what: string, port: string): Promise<void> {
    const started = Date.now();
    let report = started + PROGRESS_MS;
    const tail = () => (this.sim?.id === id ? this.sim.output.tail() : []);
    for (;;) {
      const exit = await this.runtime.exitOf(id);
      if (!exit?.running) {
        // Its output to the end: the lines that say why come last.
        if (this.sim?.id === id) await bounded(this.sim.output.ended, OUTPUT_END_MS, `the end of ${what}'s output`).catch(() => undefined);
        const code = exit?.exitCode;
        const why = !exit ? 'is gone' : exit.oomKilled ? 'ran out of memory' : code === 0 ? 'exited (code 0)' : `failed (exit code ${code})`;
        throw new StepFailure(
          `${what} ${why} before ${port} answered HTTP`,
          tail().length > 0
            ? tail()
            : (await this.runtime.logsTail(id, 20))
                .trim()
                .split('\n')
                .map((line) => `  | ${line}`),
        );
      }
      const probe = await probeHttp(endpoint);
      if (probe.outcome === 'ok') return;
      const waited = Date.now() - started;
      if (waited > timeoutMs) throw new StepFailure(`${port} did not answer HTTP within ${seconds(timeoutMs)}`, tail());
      if (Date.now() >= report) {
        const last = this.sim?.id === id ? this.sim.output.lines().at(-1) : undefined;
        print(`  ... ${what}: ${Math.round(waited / 1000)} s, ${port} not answering yet${last ? `; last output: ${last.slice(0, 120)}` : ''}`);
        report += PROGRESS_MS;
      }
      await interruptible(sleep(intervalMs));
    }
  }

  /** Whether the Docker Engine answers (within 10 s): the error that says why not. */
  async engineError(): Promise<string | undefined> {
    try {
      await bounded(this.docker.ping(), 10_000, 'the Docker Engine');
      return undefined;
    } catch (error) {
      return messageOf(error);
    }
  }

  /** Closes its clients and removes everything labelled as its own (containers, then the volume and network): whether all went. */
  private async cleanUp(): Promise<boolean> {
    this.nt4?.socket.terminate();
    this.halsim?.socket.terminate();
    const label = { label: [`${CONTROL_PLANE_LABEL}=${this.owner}`] };
    const left: string[] = [];
    const remove = async (what: string, action: () => Promise<unknown>) => {
      try {
        await action();
      } catch (error) {
        left.push(`${what} (${messageOf(error)})`);
      }
    };
    try {
      for (const { Id, Names } of await this.docker.listContainers({ all: true, filters: label }))
        await remove(`container ${Names[0] ?? Id}`, () => this.docker.getContainer(Id).remove({ force: true }));
      for (const { Name } of (await this.docker.listVolumes({ filters: label })).Volumes ?? [])
        await remove(`volume ${Name}`, () => this.docker.getVolume(Name).remove());
      for (const { Id, Name } of await this.docker.listNetworks({ filters: label })) await remove(`network ${Name}`, () => this.docker.getNetwork(Id).remove());
    } catch (error) {
      left.push(`the listing (${messageOf(error)})`);
    }
    if (left.length === 0) return true;
    process.stderr.write(
      `could not remove ${left.join(', ')}: remove what is labelled ${CONTROL_PLANE_LABEL}=${this.owner} by hand (docker ps -a, docker volume ls, docker network ls with --filter label=${CONTROL_PLANE_LABEL}=${this.owner})\n`,
    );
    return false;
  }
}

async function main(): Promise<number> {
  let options: Options | 'help';
  try {
    options = readOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`check-workspace-image: ${messageOf(error)}\n\n${USAGE}\n`);
    return 2;
  }
  if (options === 'help') {
    print(USAGE);
    return 0;
  }
  const check = new ImageCheck(options);
  const unreachable = await check.engineError();
  if (unreachable !== undefined) {
    process.stderr.write(`check-workspace-image: cannot reach the Docker Engine: ${unreachable}\n`);
    return 2;
  }
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)
    process.once(signal, () => {
      print(`interrupted: ending the step, then removing what the check made`);
      interruptedBy = code;
      interrupt(new Error('interrupted'));
    });
  const passed = await check.run();
  return interruptedBy ?? (passed ? 0 : 1);
}

// Explicit: a losing wait's timer (Promise.any in the drive step) must not hold the process up.
process.exit(await main());
