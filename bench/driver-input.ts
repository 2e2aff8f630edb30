/**
 * Driver input to the robot program (issue 40), as a deployment runs it: the control plane
 * (bin/server.ts, every part, a student signed in through OpenID Connect: bench/deployed.ts) with
 * the real workspace image, the student's run started with Run, its stand-in robot driven over
 * WPILib's HALSim WebSocket from a real Chromium page on the editor's address, with the student's
 * cookie and the editor's Origin, as the editor's Driver Station connects:
 *
 * - through the control plane's relay (`<editor>/.cp/halsim/wpilibws`), against the same page
 *   straight at the robot's container (`ws://<container>:HALSIMWS_PORT/wpilibws`), one after the
 *   other (a robot takes one HALSim client at a time), ROUNDS (4) rounds alternating, after a
 *   warm-up round each;
 * - each sample: a key press dispatched by Playwright's keyboard (W down, then W up: the Driver
 *   Station's default key for the left stick forward, its message made by the Driver Station's own
 *   code), which the page's keydown/keyup listener sends as the Driver Station does (joystick 0's
 *   state, then the DriverStation message whose `>new_data` makes it visible to robot code), to the
 *   robot's echo of joystick 0's `>axes` holding the new value, received back in the page: the
 *   event's own time stamp to the echo's arrival, PRESSES (100) per round, one in flight, a random
 *   0–40 ms between them (so that presses fall anywhere in the robot's 20 ms periods). The page
 *   keeps the robot enabled in teleop with the Driver Station's heartbeat meanwhile.
 *
 * What the figure holds: the way in; the robot's wait for its HALSim thread's next 20 ms send (the
 * echo is sent by that thread, of the joystick state the robot program reads at its next 20 ms
 * loop); the way back. The robot program reads the input at its own next loop, a wait of the same
 * 0–20 ms: "event → robot program reads it" is the round trip less the way back, so the round trip
 * is its upper bound (in distribution: both waits are uniform over one 20 ms period). Not in it:
 * the editor's Driver Station sends its input on a tick of INPUT_MS (25 ms), which adds 0–25 ms
 * before the message leaves the page: printed last, each sample with every wait of that tick (its
 * phase has nothing to do with the key press). Target: p95 < 50 ms through the control plane.
 *
 * Needs the provisioned PostgreSQL, Docker Engine, Chromium and the real workspace image
 * (`classroom-workspace:latest`). Everything it makes is removed at the end.
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/driver-input.ts
 */
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Page } from 'playwright-core';
import { connectDriver, driverSetup, editorOriginPage, installDriver, ROBOT_WORKSPACE_ENV, startDeployed, startRobotRun, type PageDriver } from './deployed.ts';
import { benchScope, loadAverage, percentile } from './lib.ts';
import { DEFAULT_KEYS } from '../images/workspace/extension/src/ds-input.ts';
import { INPUT_MS } from '../images/workspace/extension/src/halsim.ts';
import { launchBrowser } from '../test/helpers/browser.ts';

const DATABASE = 'cp_bench_driver_input';
const ROUNDS = Number(process.env.ROUNDS ?? 4);
const PRESSES = Number(process.env.PRESSES ?? 100);
const WARMUP = 20;
/** The key: the Driver Station's for the left stick forward. */
const KEY = DEFAULT_KEYS.leftStickUp;
/** How long an echo may take before the round fails. */
const ECHO_BOUND_MS = 5000;

/** One round: `presses` key events (down, up, ...) on a new connection to `url`; each event to its echo (ms). */
async function round(page: Page, url: string, presses: number): Promise<number[]> {
  await connectDriver(page, url);
  const before = await page.evaluate(() => (window as unknown as { driver: PageDriver }).driver.samples.length);
  for (let i = 0; i < presses; i++) {
    await (i % 2 === 0 ? page.keyboard.down(KEY) : page.keyboard.up(KEY));
    await page.evaluate(([count, ms]) => (window as unknown as { driver: PageDriver }).driver.echoed(count, ms), [before + i + 1, ECHO_BOUND_MS] as const);
    await sleep(Math.random() * 40);
  }
  if (presses % 2 === 1) await page.keyboard.up(KEY);
  const samples = await page.evaluate((from) => (window as unknown as { driver: PageDriver }).driver.samples.slice(from), before);
  await page.evaluate(() => (window as unknown as { driver: PageDriver }).driver.close());
  return samples;
}

async function main(): Promise<void> {
  const { cleanups, cleanup, controlPlaneId } = benchScope(20);
  try {
    console.log(`load average at the start: ${loadAverage()} (${os.cpus().length} CPUs)`);
    const deployed = await startDeployed({ database: { kind: 'postgres', name: DATABASE }, controlPlaneId, env: ROBOT_WORKSPACE_ENV }, cleanups);
    const run = await startRobotRun(deployed, cleanups);
    const browser = await launchBrowser({ full: true });
    cleanups.push(() => browser.close());
    const page = await editorOriginPage(browser, deployed, cleanups);
    await page.evaluate(installDriver, driverSetup(run.runId, KEY));
    const paths = { direct: run.halsim.direct, proxied: run.halsim.proxied };
    const samples: Record<keyof typeof paths, number[]> = { direct: [], proxied: [] };
    for (const via of ['direct', 'proxied'] as const) await round(page, paths[via], WARMUP);
    for (let i = 0; i < ROUNDS; i++) {
      const order: (keyof typeof paths)[] = i % 2 === 0 ? ['direct', 'proxied'] : ['proxied', 'direct'];
      for (const via of order) samples[via].push(...(await round(page, paths[via], PRESSES)));
    }
    const p = (values: number[], at: number) => percentile(values, at).toFixed(1);
    const line = (values: number[]) => `p50 ${p(values, 50)} p95 ${p(values, 95)} p99 ${p(values, 99)} ms (${values.length} presses)`;
    console.log(`\nkey event in the page → the robot's echo of joystick 0's axes, back in the page (upper bound of event → robot program reads it):`);
    console.log(`  direct to the robot (${paths.direct})   ${line(samples.direct)}`);
    console.log(`  through the control plane (.cp/halsim)  ${line(samples.proxied)}`);
    console.log(
      `  added by the control plane: p50 ${(percentile(samples.proxied, 50) - percentile(samples.direct, 50)).toFixed(1)} ms, p95 ${(percentile(samples.proxied, 95) - percentile(samples.direct, 95)).toFixed(1)} ms`,
    );
    // The Driver Station sends what a key press changed at its next tick, whose phase has nothing to do with the press:
    // each sample with every wait of a tick, 0.5, 1.5, ... ms up to INPUT_MS.
    const ticked = samples.proxied.flatMap((value) => Array.from({ length: INPUT_MS }, (_, wait) => value + wait + 0.5));
    console.log(
      `  with the editor's Driver Station's input tick (${INPUT_MS} ms, its wait uniform) through the control plane: ${line(ticked).replace(/ \(.*/, '')} (target p95 < 50 ms)`,
    );
    console.log(`load average at the end: ${loadAverage()}`);
  } finally {
    await cleanup();
  }
}

await main();
