/**
 * Preloaded into the server that bench/proxy.ts measures (`node --import bench/proxy-probe.ts
 * bin/server.ts`, started by the benchmark with an IPC channel): answers the benchmark's questions
 * about the process and nothing else. `memory`: process.memoryUsage() after a forced GC (with
 * --expose-gc). `loop-reset` and `loop`: the event loop's delay (perf_hooks.monitorEventLoopDelay,
 * 1 ms resolution) since the last reset, in milliseconds. The server ends when the benchmark does.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';

const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
const ms = (nanoseconds: number) => nanoseconds / 1e6;

process.on('message', (message: { type: string }) => {
  if (message.type === 'memory') {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc) for (let i = 0; i < 3; i++) gc();
    process.send!({ type: 'memory', gc: Boolean(gc), ...process.memoryUsage() });
  } else if (message.type === 'loop-reset') {
    delay.reset();
    process.send!({ type: 'loop-reset' });
  } else if (message.type === 'loop') {
    process.send!({ type: 'loop', p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max), mean: ms(delay.mean) });
  }
});
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
