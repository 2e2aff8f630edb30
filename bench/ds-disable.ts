/**
 * A driver connection that goes away disables the robot (issue 40: "tab closed, network lost ...
 * within 500 ms"), as a deployment runs it: the control plane (bin/server.ts, every part, a student
 * signed in through OpenID Connect: bench/deployed.ts) with the real workspace image, the student's
 * run started with Run. Each sample is a new tab (a Chromium page on the editor's address, with the
 * student's cookie and the editor's Origin) connected to the control plane's HALSim relay
 * (`<editor>/.cp/halsim/wpilibws`) as the Driver Station connects, keeping the robot enabled in
 * teleop with the Driver Station's heartbeat (its message made by the Driver Station's own code:
 * bench/deployed.ts's installDriver, as driver-input.ts drives); once the robot is seen enabled, a
 * random 0–100 ms later (any phase of the heartbeat and of the robot's 20 ms loops), the tab's
 * connection goes away:
 *
 * - tab closed: `page.close()`;
 * - network lost: the tab's connection reaches the control plane through a TCP forwarder in this
 *   process (the page's WebSocket to `ws://127.0.0.1:<forwarder>/u/<slug>/.cp/halsim/wpilibws`,
 *   with the same cookie and Origin), which is cut: nothing more goes on either way, nothing is
 *   closed, as when a network goes. The relay hears nothing more: its watchdog (WATCHDOG_MS, 400 ms
 *   after the driver's last message) disables the robot. The forwarder tells the moment of the cut
 *   and of the last bytes of the tab it let through. (Chromium's offline emulation,
 *   `context.setOffline(true)`, silences an open WebSocket too, both ways, closing nothing: checked
 *   against a plain `ws` server, whatever Playwright's issue #4910 of 2021 says; but the moment it
 *   takes effect is known only to within its call, which took up to 200 ms on a busy machine.)
 *
 * The robot's side is observed on its own NetworkTables (a second client, straight at the
 * container, from this process: its HALSim takes one client only): `/classroom/mode`, the mode the
 * robot program itself is in, published by its TimedRobot loop when the mode changes (to
 * `disabled`, before disabledInit). Each sample is the time from the connection taken away (the call
 * of page.close; the cut) to that value's arrival, both on this process's clock; for the network
 * lost, also from the last bytes of the tab through.
 * ROUNDS (3) rounds of SAMPLES (10) tabs each way, alternating, after a warm-up of WARMUP (2) each.
 * The relay's own count of the disables it sent (halsim_robot_disables_total: `ended` for a tab
 * closed, `silence` for the watchdog) is checked at each sample and printed.
 *
 * What the figure holds: Chromium closing the tab and its connection, or the silence; the relay's
 * disable (for the watchdog: 400 ms after the last heartbeat that got through, which was sent 0–50 ms
 * (HEARTBEAT_MS) before the cut, so 350–400 ms after the cut, plus its timer's lateness); the robot's
 * HALSim thread taking it (its outputs are off from then); then two waits the figure adds to that
 * moment: the robot program's next 20 ms loop (when the program itself is disabled) and the
 * stand-in's NetworkTables thread's next 20 ms send; the way to this process (under a
 * millisecond). Target: p95 < 500 ms each way.
 *
 * Needs the provisioned PostgreSQL, Docker Engine, Chromium and the real workspace image
 * (`classroom-workspace:latest`). Everything it makes is removed at the end.
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/ds-disable.ts
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser } from 'playwright-core';
import {
  connectDriver,
  driverSetup,
  editorOriginPage,
  installDriver,
  ROBOT_WORKSPACE_ENV,
  startDeployed,
  startRobotRun,
  type Deployed,
  type DriverSetup,
  type RobotRun,
} from './deployed.ts';
import { benchScope, loadAverage, percentile } from './lib.ts';
import { launchBrowser } from '../test/helpers/browser.ts';
import { Nt4Client } from '../test/helpers/robot-protocols.ts';

const DATABASE = 'cp_bench_ds_disable';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SAMPLES = Number(process.env.SAMPLES ?? 10);
const WARMUP = 2;
const TARGET_MS = 500;
/** How long the robot may take to be seen enabled, or disabled, before the benchmark fails. */
const BOUND_MS = 5000;
/** The robot program's mode, as the stand-in publishes it. */
const MODE = '/classroom/mode';
const METRICS_TOKEN = randomBytes(24).toString('hex');

/** How the tab's connection goes away, and the relay's reason for the disable that follows. */
const CASES = {
  closed: { title: 'tab closed (page.close())', reason: 'ended' },
  lost: { title: 'network lost (the connection cut)', reason: 'silence' },
} as const;
type Case = keyof typeof CASES;

/**
 * A loopback TCP forwarder to the control plane: `cut()` stops every open connection's bytes both
 * ways and closes nothing, `drop()` then ends the connections it cut.
 */
class Forwarder {
  private readonly server = net.createServer((client) => this.accept(client));
  private readonly links = new Set<{ client: net.Socket; upstream: net.Socket; cut: boolean; last: number }>();
  private readonly target: number;
  port = 0;

  /** Forwards to the control plane on loopback port `target`. */
  constructor(target: number) {
    this.target = target;
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  /** `url` (a WebSocket of the control plane) through the forwarder. */
  through(url: string): string {
    const through = new URL(url);
    through.port = String(this.port);
    return through.toString();
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect(this.target, '127.0.0.1');
    const link = { client, upstream, cut: false, last: NaN };
    this.links.add(link);
    const end = () => {
      this.links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) socket.on('close', end).on('error', end);
    client.on('data', (chunk) => {
      if (link.cut) return;
      link.last = performance.now();
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!link.cut) client.write(chunk);
    });
  }

  /** Cuts every open connection: when (performance.now()), and when the last bytes of a client went on before. */
  cut(): { at: number; last: number } {
    const at = performance.now();
    let last = -Infinity;
    for (const link of this.links) {
      link.cut = true;
      last = Math.max(last, link.last);
    }
    return { at, last };
  }

  /** Ends the connections that were cut. */
  drop(): void {
    for (const link of this.links) if (link.cut) link.client.destroy();
  }

  async close(): Promise<void> {
    for (const link of this.links) link.client.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Everything a sample needs. */
interface Bench {
  browser: Browser;
  deployed: Deployed;
  run: RobotRun;
  setup: DriverSetup;
  observer: Nt4Client;
  forwarder: Forwarder;
  cleanups: (() => Promise<unknown>)[];
}

/**
 * One sample's figures (ms): the connection taken away to the robot disabled, the last bytes of the
 * tab through to it (the network lost), and whether the relay counted its disable of the case's reason.
 */
interface Sample {
  disabled: number;
  sinceLast: number;
  counted: boolean;
}

/** The relay's count of the disables it sent for `reason` (halsim_robot_disables_total). */
async function relayDisables(origin: string, reason: string): Promise<number> {
  const answer = await fetch(`${origin}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  if (answer.status !== 200) throw new Error(`/metrics answered ${answer.status}`);
  const line = (await answer.text()).split('\n').find((each) => each.startsWith(`halsim_robot_disables_total{reason="${reason}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

/** One sample (see the file comment): a new tab drives the robot, then its connection goes away as `how` says. */
async function sample({ browser, deployed, run, setup, observer, forwarder, cleanups }: Bench, how: Case): Promise<Sample> {
  const page = await editorOriginPage(browser, deployed, cleanups);
  await page.evaluate(installDriver, setup);
  await connectDriver(page, how === 'closed' ? run.halsim.proxied : forwarder.through(run.halsim.proxied));
  await observer.until<string>(MODE, (mode) => mode === 'teleop', BOUND_MS);
  await sleep(Math.random() * 100);
  const before = await relayDisables(deployed.origin, CASES[how].reason);
  const disabled = observer.until<string>(MODE, (mode) => mode === 'disabled', BOUND_MS).then(() => performance.now());
  // Never left unhandled while the close below is awaited: awaited (and thrown) after it.
  disabled.catch(() => undefined);
  let from = performance.now();
  let last = NaN;
  if (how === 'closed') await page.close();
  else ({ at: from, last } = forwarder.cut());
  const at = await disabled;
  const counted = (await relayDisables(deployed.origin, CASES[how].reason)) === before + 1;
  forwarder.drop();
  await page.context().close();
  return { disabled: at - from, sinceLast: at - last, counted };
}

async function main(): Promise<void> {
  const { cleanups, cleanup, controlPlaneId } = benchScope(20);
  try {
    console.log(`load average at the start: ${loadAverage()} (${os.cpus().length} CPUs)`);
    const deployed = await startDeployed(
      { database: { kind: 'postgres', name: DATABASE }, controlPlaneId, env: { ...ROBOT_WORKSPACE_ENV, METRICS_TOKEN } },
      cleanups,
    );
    const run = await startRobotRun(deployed, cleanups);
    const browser = await launchBrowser({ full: true });
    cleanups.push(() => browser.close());
    const observer = await Nt4Client.connect(`${run.nt4.direct}/nt/bench-ds-disable`);
    cleanups.push(async () => observer.close());
    const forwarder = await new Forwarder(deployed.port).listen();
    cleanups.push(() => forwarder.close());
    const bench: Bench = { browser, deployed, run, setup: driverSetup(run.runId), observer, forwarder, cleanups };
    for (const how of ['closed', 'lost'] as const) for (let i = 0; i < WARMUP; i++) await sample(bench, how);
    const samples: Record<Case, Sample[]> = { closed: [], lost: [] };
    for (let round = 0; round < ROUNDS; round++) {
      const order: Case[] = round % 2 === 0 ? ['closed', 'lost'] : ['lost', 'closed'];
      for (const how of order) for (let i = 0; i < SAMPLES; i++) samples[how].push(await sample(bench, how));
    }
    const p = (values: number[], at: number) => percentile(values, at).toFixed(1);
    console.log(
      `\nthe tab's connection to .cp/halsim taken away → the robot program's mode 'disabled' (${MODE} on its NT4, straight), ${ROUNDS * SAMPLES} tabs each:`,
    );
    const targets: string[] = [];
    const figures = (values: number[]) => `p50 ${p(values, 50)} p95 ${p(values, 95)} max ${Math.max(...values).toFixed(1)} ms`;
    for (const how of ['closed', 'lost'] as const) {
      const { title, reason } = CASES[how];
      const disabled = samples[how].map((each) => each.disabled);
      const counted = samples[how].filter((each) => each.counted).length;
      const sinceLast = how === 'lost' ? `; from the last bytes of the tab through ${figures(samples[how].map((each) => each.sinceLast))}` : '';
      console.log(`  ${title.padEnd(34)} ${figures(disabled)}${sinceLast}; the relay's '${reason}' disable counted ${counted} of ${disabled.length}`);
      const p95 = percentile(disabled, 95);
      targets.push(
        `${title.replace(/ \(.*/, '')} ${p95.toFixed(1)} ms, ${p95 < TARGET_MS ? `met (${(TARGET_MS - p95).toFixed(1)} ms to spare)` : `missed (by ${(p95 - TARGET_MS).toFixed(1)} ms)`}`,
      );
    }
    console.log(`  target p95 < ${TARGET_MS} ms: ${targets.join('; ')}`);
    console.log(`load average at the end: ${loadAverage()}`);
  } finally {
    await cleanup();
  }
}

await main();
