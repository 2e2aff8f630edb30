import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChangeFeed } from '../src/db/changes.ts';
import type { WorkspaceRuntime } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import { OUTPUT_LIMIT, type RunStore } from '../src/store/runs.ts';

/** How long new output waits to be kept with what follows it: one write per run per interval at most. */
const FLUSH_INTERVAL_MS = 50;

/** The most of the container's output (bytes) one kept chunk is made of. */
const MAX_CHUNK = 16 * 1024;

/** What the output of a run that printed more than OUTPUT_LIMIT ends with. */
export const TRUNCATED_MARK = `\n[This run printed more than ${OUTPUT_LIMIT / 1024 / 1024} MiB: the rest of its output was not kept. Its last lines are kept with the run when it ends.]\n`;

export interface RunOutputCollectorOptions {
  runtime: WorkspaceRuntime;
  runs: RunStore;
  changes: ChangeFeed;
  /** Logger of `control.runs`. */
  log: Logger;
}

/** One run's output being followed. */
interface Follower {
  /** Settles once everything the container wrote (up to the limit) is kept, or following failed. */
  done: Promise<void>;
  stop(): void;
}

/**
 * Keeps the whole output of each run as it is written (its compile, its boot, its simulator), for
 * live views and for later: follows the run's container output on the engine from its start,
 * skips what an earlier follower already kept (`outputSourceBytes`), and appends it to the run in
 * chunks (RunStore.appendOutput), at most one write per run every FLUSH_INTERVAL_MS, publishing each
 * in this process (ChangeFeed.publishOutput). It reads no faster than it writes, so its memory stays
 * bounded, and stops at OUTPUT_LIMIT with TRUNCATED_MARK. The run controller starts a follower for
 * every active run with a container and waits for it before it records the run's end.
 */
export class RunOutputCollector {
  private readonly options: RunOutputCollectorOptions;
  private readonly followers = new Map<string, Follower>();

  constructor(options: RunOutputCollectorOptions) {
    this.options = options;
  }

  /**
   * Follows run `runId`'s output in container `containerId` unless it is followed already, or was
   * followed to its end (until `forget`); returns its follower's end. A follower that fails is
   * forgotten, so that the next call follows again from what was kept.
   */
  follow(runId: string, containerId: string): Promise<void> {
    const existing = this.followers.get(runId);
    if (existing) return existing.done;
    let stopped = false;
    let source: Source | undefined;
    const done = this.collect(runId, containerId, (stream) => {
      source = stream;
      if (stopped) stream.destroy();
    }).catch((error: unknown) => {
      this.followers.delete(runId);
      if (!stopped)
        this.options.log.warning({ runId, error: (error as Error).message }, 'following the output of a run failed; the next pass follows it again');
    });
    this.followers.set(runId, {
      done,
      stop: () => {
        stopped = true;
        source?.destroy();
      },
    });
    return done;
  }

  /** The run has ended and its container is gone: nothing more to follow. */
  forget(runId: string): void {
    this.followers.delete(runId);
  }

  /** Stops every follower (the control plane is stopping); what they read is kept. */
  async stop(): Promise<void> {
    const all = [...this.followers.values()];
    for (const follower of all) follower.stop();
    await Promise.all(all.map((follower) => follower.done));
    this.followers.clear();
  }

  private async collect(runId: string, containerId: string, opened: (stream: Source) => void): Promise<void> {
    const { runtime, runs, changes } = this.options;
    // Read now, not when the caller read it: an earlier follower may have kept more since.
    const run = await runs.get(runId);
    if (!run || run.outputTruncated) return;
    const stream = (await runtime.followOutput(containerId)) as Source;
    opened(stream);
    const decoder = new StringDecoder('utf8');
    let skip = run.outputSourceBytes;
    // Bytes read and not yet kept; what is recorded as read is only what was kept (and decoded).
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let sourceBytes = run.outputSourceBytes;
    let offset = run.outputLength;
    let ended = false;
    let failure: Error | undefined;
    let wake: (() => void) | undefined;
    stream.on('data', (data: Buffer) => {
      let chunk = data;
      if (skip > 0) {
        const skipped = Math.min(skip, chunk.length);
        skip -= skipped;
        chunk = chunk.subarray(skipped);
      }
      if (chunk.length === 0) return;
      pending.push(chunk);
      pendingBytes += chunk.length;
      // Read no faster than it is kept.
      if (pendingBytes >= MAX_CHUNK) stream.pause();
      wake?.();
    });
    stream.once('end', () => ((ended = true), wake?.()));
    stream.once('close', () => ((ended = true), wake?.()));
    stream.once('error', (error: Error) => ((failure = error), (ended = true), wake?.()));
    try {
      for (;;) {
        if (pendingBytes === 0 && !ended) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        if (failure) throw failure;
        const all = Buffer.concat(pending);
        const taken = all.subarray(0, MAX_CHUNK);
        pending = taken.length < all.length ? [all.subarray(taken.length)] : [];
        pendingBytes = all.length - taken.length;
        sourceBytes += taken.length;
        let text = decoder.write(taken);
        if (ended && pendingBytes === 0) text += decoder.end();
        const truncated = offset + text.length >= OUTPUT_LIMIT;
        if (truncated) text = `${text.slice(0, OUTPUT_LIMIT - offset)}${TRUNCATED_MARK}`;
        if (taken.length > 0 || text !== '') {
          if (!(await runs.appendOutput(run.id, offset, text, { sourceBytes, truncated }))) throw new Error("another writer moved this run's output on");
          if (text !== '') changes.publishOutput({ runId: run.id, offset, text });
          offset += text.length;
        }
        if (truncated || (ended && pendingBytes === 0)) return;
        if (stream.isPaused() && pendingBytes < MAX_CHUNK) stream.resume();
        // What comes in the next interval is kept with one write.
        if (!ended) await sleep(FLUSH_INTERVAL_MS);
      }
    } finally {
      stream.destroy();
    }
  }
}

/** The container output stream a follower reads. */
type Source = NodeJS.ReadableStream & { destroy(): void };
