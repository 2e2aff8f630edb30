/**
 * Telemetry to the screen (issue 40), as a deployment runs it: the control plane (bin/server.ts,
 * every part, a student signed in through OpenID Connect: bench/deployed.ts) with the real
 * workspace image, the student's run started with Run, its stand-in robot driving in a circle, so
 * that its Field2d pose (`/SmartDashboard/Field/Robot`) changes at every 20 ms loop:
 *
 * - To the page's code: a real Chromium page on the editor's address (the student's cookie, the
 *   editor's Origin) holds two NetworkTables clients at once, each ntcore-ts-client as the editor's
 *   extension uses it (bundled here with esbuild, every topic subscribed): one through the control
 *   plane (`<editor>/.cp/nt4`, with the extension's own nt4-socket.ts), one straight at the robot's
 *   container (`ws://<container>:NT4_PORT`). For MEASURE_SECONDS (20) each pose value's time stamp
 *   (the robot's NetworkTables time when it sent the value) to the callback of the page's code
 *   that receives it, the robot's clock put on the page's by NT4's own time synchronisation (best of
 *   CLOCK_PINGS round trips straight to the robot, before and after: the error is at most half that
 *   round trip, and the two tell the drift); p50, p95, p99 of each, and of each value's arrival
 *   through the control plane less its arrival straight.
 * - To the drawing: the editor's Driver Station (images/workspace/extension) open in the workbench
 *   (a second page), driving the robot from the keyboard (W and the left arrow held: a circle), its
 *   field's pose text (`#pose`) observed: each change to the next animation frame after it
 *   (requestAnimationFrame, the frame that paints it), matched to the latest value the robot sent
 *   with that pose (as the Driver Station writes it) before it, from that value's time stamp.
 *
 * The time stamp is when the stand-in's NetworkTables thread sent the value; the robot program put it
 * up to 20 ms before (that thread sends every 20 ms), which the figures leave out: add 20 ms for the
 * bound from the robot program's put. Target: p95 < 150 ms.
 *
 * Needs the provisioned PostgreSQL, Docker Engine, Chromium and the real workspace image
 * (`classroom-workspace:latest`). Everything it makes is removed at the end.
 * Run: PATH=$PWD/node_modules/.bin:$PATH node bench/telemetry.ts
 */
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { build } from 'esbuild-wasm';
import type { decodeMulti, encode } from '@msgpack/msgpack';
import type { NetworkTables } from 'ntcore-ts-client';
import type { Browser, Frame, Page } from 'playwright-core';
import { editorOriginPage, ROBOT_WORKSPACE_ENV, startDeployed, startRobotRun, type Deployed } from './deployed.ts';
import { benchScope, loadAverage, browserCookies, percentile } from './lib.ts';
import { poseText } from '../images/workspace/extension/src/dashboard.ts';
import type { setNt4Base } from '../images/workspace/extension/src/nt4-socket.ts';
import { launchBrowser, openFromExplorer, waitForWorkbench, withPage } from '../test/helpers/browser.ts';
import { HalSimClient } from '../test/helpers/robot-protocols.ts';

const DATABASE = 'cp_bench_telemetry';
const MEASURE_SECONDS = Number(process.env.MEASURE_SECONDS ?? 20);
const CLOCK_PINGS = 100;
const POSE = '/SmartDashboard/Field/Robot';
const ROOT = path.join(import.meta.dirname, '..');
const NT4_SOCKET = path.join(ROOT, 'images/workspace/extension/src/nt4-socket.ts');

/** What the page's scripts define. */
interface PageGlobals {
  ProxiedNt: { NetworkTables: typeof NetworkTables; setNt4Base: typeof setNt4Base };
  DirectNt: { NetworkTables: typeof NetworkTables; encode: typeof encode; decodeMulti: typeof decodeMulti };
  telemetry: PageTelemetry;
}
/** One pose value as the page's code received it: when (the page's clock), its time stamp (the robot's, µs), the pose. */
interface Received {
  at: number;
  server: number;
  pose: number[];
}
/** The page's side (window.telemetry). */
interface PageTelemetry {
  records: Record<Via, Received[]>;
  /** Pose values received so far, measured or not. */
  seen: Record<Via, number>;
  measuring: boolean;
  /** The robot's NetworkTables time less the page's (ms), from the fastest of `pings` time-sync round trips straight to `url`, and that round trip. */
  clock(url: string, pings: number): Promise<{ offset: number; rtt: number }>;
}
type Via = 'direct' | 'proxied';

/** Bundles `contents` (an entry's source, resolved from the project) for the page as the global `globalName`. */
async function bundle(contents: string, globalName: string, alias: Record<string, string> = {}): Promise<string> {
  const result = await build({
    stdin: { contents, resolveDir: ROOT, loader: 'ts' },
    bundle: true,
    format: 'iife',
    globalName,
    platform: 'browser',
    target: 'es2022',
    write: false,
    alias,
    logLevel: 'warning',
  });
  return result.outputFiles[0]!.text;
}

/** Runs in the page: both NetworkTables clients, subscribed as the extension subscribes (every topic), recording the pose's values. */
function install({ editorBase, direct, pose }: { editorBase: string; direct: { host: string; port: number }; pose: string }): void {
  const page = window as unknown as PageGlobals;
  const records: Record<Via, Received[]> = { direct: [], proxied: [] };
  const seen: Record<Via, number> = { direct: 0, proxied: 0 };
  page.ProxiedNt.setNt4Base(editorBase);
  const clients: Record<Via, NetworkTables> = {
    // As the extension: the host and port are placeholders, nt4-socket.ts puts the address.
    proxied: page.ProxiedNt.NetworkTables.getInstanceByURI('classroom-simulator', 5810),
    direct: page.DirectNt.NetworkTables.getInstanceByURI(direct.host, direct.port),
  };
  const telemetry: PageTelemetry = {
    records,
    seen,
    measuring: false,
    clock: (url, pings) =>
      new Promise((resolve, reject) => {
        const { encode, decodeMulti } = page.DirectNt;
        const socket = new WebSocket(url, ['v4.1.networktables.first.wpi.edu']);
        socket.binaryType = 'arraybuffer';
        let best = { offset: NaN, rtt: Infinity };
        let sent = 0;
        let count = 0;
        const ping = () => {
          sent = performance.now();
          socket.send(encode([-1, 0, 2, Math.round(sent * 1000)]));
        };
        socket.addEventListener('open', ping);
        socket.addEventListener('error', () => reject(new Error(`${url}: the time-sync connection failed`)));
        socket.addEventListener('message', (event: MessageEvent) => {
          if (!(event.data instanceof ArrayBuffer)) return;
          for (const message of decodeMulti(new Uint8Array(event.data)) as Iterable<unknown[]>) {
            if (message[0] !== -1) continue;
            const now = performance.now();
            if (now - sent < best.rtt) best = { offset: Number(message[1]) / 1000 - (sent + now) / 2, rtt: now - sent };
            if (++count === pings) {
              socket.close();
              return resolve(best);
            }
            ping();
          }
        });
      }),
  };
  for (const via of ['direct', 'proxied'] as const) {
    const topic = clients[via].createPrefixTopic('/');
    topic.subscribe((value, params) => {
      if (params.name !== pose) return;
      seen[via]++;
      if (telemetry.measuring) records[via].push({ at: performance.now(), server: topic.lastChangedTime ?? NaN, pose: value as number[] });
    });
  }
  page.telemetry = telemetry;
}

/** Per value: arrival less its time stamp put on the page's clock (ms). */
const latencies = (records: Received[], offset: number) => records.map((record) => record.at - (record.server / 1000 - offset));

/** The Driver Station's page: the frame of the editor's webview that holds it. */
async function driverStationFrame(page: Page): Promise<Frame> {
  for (const until = Date.now() + 60_000; Date.now() < until; await sleep(200)) {
    for (const frame of page.frames())
      if (
        (await frame
          .locator('#ds')
          .count()
          .catch(() => 0)) > 0
      )
        return frame;
  }
  throw new Error('the Driver Station did not open within 60 s');
}

/**
 * The drawing: the Driver Station in the editor drives the robot (Enable, W and the left arrow
 * held) for MEASURE_SECONDS while `bench` (the page of the first part, still connected straight)
 * records the robot's values; each change of the field's pose text to the animation frame after it,
 * from the time stamp of the first value with that pose (ms).
 */
async function drawing(browser: Browser, deployed: Deployed, bench: Page, offset: number): Promise<number[]> {
  return withPage(
    browser,
    async (editor) => {
      await editor.setViewportSize({ width: 1500, height: 900 });
      await editor.context().addCookies(browserCookies(deployed.cookie, deployed.origin));
      await editor.goto(`${deployed.origin}/u/${deployed.slug}/?folder=/home/student`, { waitUntil: 'commit' });
      await waitForWorkbench(editor);
      // As a student has it (and as the e2e test opens it): the code open, the Driver Station beside it.
      await openFromExplorer(editor, 'src/main/java/frc/robot/Robot.java');
      await editor.getByRole('tab', { name: /Robot\.java/ }).waitFor();
      await editor.locator('.statusbar-item', { hasText: 'Driver Station' }).first().click();
      const ds = await driverStationFrame(editor);
      try {
        await ds.locator('#tile-comms.ok').waitFor({ timeout: 60_000 });
        await ds.locator('#tile-code.ok').waitFor();
        await ds.locator('#enable').click();
        await ds.locator('#robot-state').getByText('Teleoperated Enabled').waitFor({ timeout: 30_000 });
      } catch (error) {
        await editor.screenshot({ path: path.join(os.tmpdir(), 'telemetry-driver-station.png') });
        throw error;
      }
      await ds.evaluate(() => {
        const pose = document.getElementById('pose')!;
        const drawn: { at: number; text: string }[] = [];
        (window as unknown as { drawn: typeof drawn }).drawn = drawn;
        let last = pose.textContent;
        // A change only: the page may write the same pose again (no new value), which is no drawing of a new one.
        new MutationObserver(() => {
          const text = pose.textContent ?? '';
          if (text === last) return;
          last = text;
          requestAnimationFrame(() => drawn.push({ at: performance.timeOrigin + performance.now(), text }));
        }).observe(pose, { childList: true, characterData: true, subtree: true });
      });
      await editor.keyboard.down('KeyW');
      await editor.keyboard.down('ArrowLeft');
      await sleep(2000);
      const benchOrigin = await bench.evaluate(() => performance.timeOrigin);
      await bench.evaluate(() => ((window as unknown as PageGlobals).telemetry.measuring = true));
      const from = await ds.evaluate(() => (window as unknown as { drawn: unknown[] }).drawn.length);
      await sleep(MEASURE_SECONDS * 1000);
      const drawn = await ds.evaluate((start) => (window as unknown as { drawn: { at: number; text: string }[] }).drawn.slice(start), from);
      await bench.evaluate(() => ((window as unknown as PageGlobals).telemetry.measuring = false));
      await editor.keyboard.up('ArrowLeft');
      await editor.keyboard.up('KeyW');
      const values = await bench.evaluate(() => (window as unknown as PageGlobals).telemetry.records.direct.splice(0));
      // Each pose as the Driver Station writes it, with the time stamps (on the wall clock both pages share) of the values that had it.
      // The robot circles in place: a pose comes round again every lap, so a drawing is matched to the latest value with its pose before it.
      const stamps = new Map<string, number[]>();
      for (const value of values) {
        const text = `Robot: ${poseText({ x: value.pose[0]!, y: value.pose[1]!, degrees: value.pose[2]! })}`;
        stamps.set(text, [...(stamps.get(text) ?? []), benchOrigin + value.server / 1000 - offset]);
      }
      return drawn.flatMap(({ at, text }) => {
        const stamp = (stamps.get(text) ?? []).findLast((each) => each <= at);
        return stamp === undefined ? [] : [at - stamp];
      });
    },
    { serviceWorkers: 'allow' },
  );
}

async function main(): Promise<void> {
  const { cleanups, cleanup, controlPlaneId } = benchScope(20);
  try {
    console.log(`load average at the start: ${loadAverage()} (${os.cpus().length} CPUs)`);
    const [proxiedNt, directNt] = await Promise.all([
      bundle(`export { NetworkTables } from 'ntcore-ts-client'; export { setNt4Base } from ${JSON.stringify(NT4_SOCKET)};`, 'ProxiedNt', {
        'isomorphic-ws': NT4_SOCKET,
      }),
      bundle(`export { NetworkTables } from 'ntcore-ts-client'; export { decodeMulti, encode } from '@msgpack/msgpack';`, 'DirectNt'),
    ]);
    const deployed = await startDeployed({ database: { kind: 'postgres', name: DATABASE }, controlPlaneId, env: ROBOT_WORKSPACE_ENV }, cleanups);
    const run = await startRobotRun(deployed, cleanups);
    const browser = await launchBrowser({ full: true });
    cleanups.push(() => browser.close());
    const page = await editorOriginPage(browser, deployed, cleanups);
    await page.addScriptTag({ content: proxiedNt });
    await page.addScriptTag({ content: directNt });
    const direct = new URL(run.nt4.direct);
    await page.evaluate(install, {
      editorBase: `${deployed.origin}/u/${deployed.slug}/`,
      direct: { host: direct.hostname, port: Number(direct.port) },
      pose: POSE,
    });

    // The robot enabled in teleop, in a circle (left stick forward, right stick right), straight at its HALSim: this driver is not measured.
    const driver = await HalSimClient.connect(run.halsim.direct);
    if (typeof driver === 'number') throw new Error(`the robot's HALSim refused: ${driver}`);
    driver.driveTeleop([0, -0.6, 0, 0, 0.5, 0]);
    await page.waitForFunction(
      () => {
        const { seen } = (window as unknown as PageGlobals).telemetry;
        return seen.direct > 50 && seen.proxied > 50;
      },
      undefined,
      { timeout: 60_000 },
    );
    const sync = () =>
      page.evaluate(([url, pings]) => (window as unknown as PageGlobals).telemetry.clock(url, pings), [
        `${run.nt4.direct}/nt/bench-clock`,
        CLOCK_PINGS,
      ] as const);
    const before = await sync();
    await page.evaluate(() => ((window as unknown as PageGlobals).telemetry.measuring = true));
    await sleep(MEASURE_SECONDS * 1000);
    await page.evaluate(() => ((window as unknown as PageGlobals).telemetry.measuring = false));
    const after = await sync();
    const records = await page.evaluate(() => (window as unknown as PageGlobals).telemetry.records);
    await page.evaluate(() => ((window as unknown as PageGlobals).telemetry.records.direct.length = 0));
    await driver.close();
    const offset = (before.offset + after.offset) / 2;
    const straight = latencies(records.direct, offset);
    const through = latencies(records.proxied, offset);
    const arrivals = new Map(records.direct.map((record) => [record.pose.join(','), record.at]));
    const added = records.proxied.flatMap((record) => {
      const at = arrivals.get(record.pose.join(','));
      return at === undefined ? [] : [record.at - at];
    });
    const p = (values: number[], at: number) => percentile(values, at).toFixed(1);
    const line = (values: number[]) => `p50 ${p(values, 50)} p95 ${p(values, 95)} p99 ${p(values, 99)} ms (${values.length} values)`;
    console.log(`\nthe robot's pose (${POSE}, a new value every 20 ms) → the page's code receiving it (ntcore-ts-client), both at once, ${MEASURE_SECONDS} s:`);
    console.log(
      `  clock: time-sync round trip ${before.rtt.toFixed(2)} / ${after.rtt.toFixed(2)} ms before / after (error at most half); drift ${(after.offset - before.offset).toFixed(2)} ms`,
    );
    console.log(`  direct to the robot (${run.nt4.direct})  ${line(straight)}`);
    console.log(`  through the control plane (.cp/nt4)     ${line(through)}`);
    console.log(`  the same value through the control plane less straight: ${line(added)}`);
    console.log(
      `  from the robot program's put: up to 20 ms more (the stand-in sends every 20 ms): p95 at most ${(percentile(through, 95) + 20).toFixed(1)} ms (target < 150 ms)`,
    );

    const drawn = await drawing(browser, deployed, page, offset);
    console.log(`\nthe same to the editor's Driver Station drawing it (the field's pose, the animation frame after it changed), ${MEASURE_SECONDS} s:`);
    console.log(`  through the control plane (the editor's own NetworkTables client)  ${line(drawn)}`);
    console.log(`load average at the end: ${loadAverage()}`);
  } finally {
    await cleanup();
  }
}

await main();
