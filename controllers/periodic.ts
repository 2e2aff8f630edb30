import type { Logger } from '../src/log.ts';
import { FencedOutError } from '../src/store/leases.ts';

/**
 * Runs `task` every `intervalMs` (optionally once at start), never two at a time; a failure is
 * passed to `onError` and the next tick runs as usual. `stop()` waits for a running task.
 */
export class Periodic {
  private readonly task: () => Promise<unknown>;
  private readonly onError: (error: unknown) => void;
  private readonly intervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(task: () => Promise<unknown>, intervalMs: number, onError: (error: unknown) => void) {
    this.task = task;
    this.intervalMs = intervalMs;
    this.onError = onError;
  }

  start(options: { immediately?: boolean } = {}): void {
    if (options.immediately) void this.tick();
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  private tick(): Promise<void> {
    this.running ??= this.task()
      .then(() => undefined, this.onError)
      .finally(() => (this.running = undefined));
    return this.running;
  }
}

/**
 * Runs `task` every `intervalMs` ± 10 % (jitter, so that replicas and controllers do not resync in
 * step), each run after the previous one finished. Returns the function that stops it.
 */
export function everyWithJitter(task: () => Promise<unknown>, intervalMs: number): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = () => {
    timer = setTimeout(() => void task().finally(() => !stopped && schedule()), intervalMs * (0.9 + Math.random() * 0.2));
    timer.unref();
  };
  schedule();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/**
 * A leader-only pass's `onError` (Periodic): a pass cut short because this replica stopped leading
 * (a FencedOutError: a step-down, ordinary or not) is expected, said at info with no stack; so is one
 * that met a failure `saidElsewhere` (the engine found unreachable, which its reachability says
 * once), at debug; anything else is `<what> failed` at error level.
 */
export function passFailed(log: Logger, what: string, saidElsewhere: (error: unknown) => boolean = () => false): (error: unknown) => void {
  return (error) => {
    if (error instanceof FencedOutError) log.info({ term: error.term, why: error.message }, `${what} stopped: this replica no longer leads`);
    else if (saidElsewhere(error)) log.debug({ error: (error as Error).message }, `${what} failed`);
    else log.error({ error }, `${what} failed`);
  };
}
