/**
 * Preloaded into the server that bench/proxy.ts measures (`node --import bench/proxy-probe.ts
 * bin/server.ts`, started by the benchmark with an IPC channel): answers the benchmark's questions
 * about the process and nothing else. `memory`: process.memoryUsage() after a forced GC (with
 * --expose-gc). `loop-reset` and `loop`: the event loop's delay (perf_hooks.monitorEventLoopDelay)
 * from `loop-reset` to `loop`, in milliseconds, and the garbage collections' pauses meanwhile (count,
 * total and longest). The server ends when the benchmark does.
 *
 * The delay is sampled only between the two, every 10 ms. Sampled always at 1 ms, its timer woke the
 * server 1,000 times a second: with no load the control plane used 32 ms of CPU per second with it
 * and 8 ms without (the floor: 0–1 ms), and every run counted the difference against the control
 * plane (about 48 µs of each request at 500 requests/s).
 */
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

const RESOLUTION_MS = 10;
const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
/** A sample in milliseconds, as a delay: the histogram records the whole interval between samples, the resolution included. */
const ms = (nanoseconds: number) => Math.max(0, nanoseconds / 1e6 - RESOLUTION_MS);
/** Garbage collections between `loop-reset` and `loop`: their pauses (ms), all and the longest. */
let collections = { total: 0, max: 0, count: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries())
    collections = { total: collections.total + entry.duration, max: Math.max(collections.max, entry.duration), count: collections.count + 1 };
}).observe({ entryTypes: ['gc'] });

process.on('message', (message: { type: string }) => {
  if (message.type === 'memory') {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc) for (let i = 0; i < 3; i++) gc();
    process.send!({ type: 'memory', gc: Boolean(gc), ...process.memoryUsage() });
  } else if (message.type === 'loop-reset') {
    delay.reset();
    delay.enable();
    collections = { total: 0, max: 0, count: 0 };
    process.send!({ type: 'loop-reset' });
  } else if (message.type === 'loop') {
    delay.disable();
    process.send!({ type: 'loop', p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max), mean: ms(delay.mean), gc: collections });
  }
});
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
