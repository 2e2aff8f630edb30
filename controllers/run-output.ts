import { StringDecoder } from 'node:string_decoder';
import type { ChangeFeed } from '../src/db/changes.ts';
import { detached } from '../src/caller.ts';
import { storableText } from '../src/db/text.ts';
import { engineAway, type RuntimeEnvironment, type RuntimeWorkloads } from '../src/docker/runtime.ts';
import type { Logger } from '../src/log.ts';
import { OUTPUT_LIMIT, type OutputPiece, type RunStore } from '../src/store/runs.ts';

/** How long new output waits to be kept with what follows it: one write for all runs per interval at most. */
const FLUSH_INTERVAL_MS = 50;

/** The most of a container's output (bytes) one kept piece is made of. */
const MAX_CHUNK = 16 * 1024;

/** What the output of a run that printed more than OUTPUT_LIMIT ends with. */
export const TRUNCATED_MARK = `\n[This run printed more than ${OUTPUT_LIMIT / 1024 / 1024} MiB: the rest of its output was not kept. Its last lines are kept with the run when it ends.]\n`;

export interface RunOutputCollectorOptions {
  /** A run's output, and whether the engine answers. */
  runtime: Pick<RuntimeWorkloads, 'followOutput'> & Pick<RuntimeEnvironment, 'reachability'>;
  runs: RunStore;
  changes: ChangeFeed;
  /** Logger of `control.runs`. */
  log: Logger;
}

/** The container output stream a follower reads. */
type Source = NodeJS.ReadableStream & { destroy(): void; isPaused(): boolean };

/** One run's output being followed. */
interface Follower {
  runId: string;
  /** Resolves once everything the container wrote (up to the limit) is kept (true), or following failed or was stopped (false). */
  done: Promise<boolean>;
  settle(failure?: Error): void;
  /** Set once the stream is open (collect). */
  source?: Source;
  decoder: StringDecoder;
  /** Where the run's kept output ends (characters) and how many bytes of the container's output it was read from. */
  offset: number;
  sourceBytes: number;
  /** Bytes read and not yet kept. */
  pending: Buffer[];
  pendingBytes: number;
  /** The stream ended (what is pending is the last of it), or failed. */
  ended: boolean;
  failure?: Error;
  /** Asked to stop (the control plane is stopping). */
  stopped: boolean;
  /** Its end is settled: nothing more is read or kept. */
  settled: boolean;
}

/**
 * Keeps the whole output of each run as it is written (its compile, its boot, its simulator), for
 * live views and for later: follows the run's container output on the engine from its start,
 * skips what an earlier follower already kept (`outputSourceBytes`), and appends what every run
 * wrote since the last write in one statement (RunStore.appendOutput; any bytes: decoded as UTF-8,
 * then as storableText makes them, so that no run's output fails the write), at most one write every
 * FLUSH_INTERVAL_MS whatever the number of runs, publishing each piece in this process
 * (ChangeFeed.publishOutput). A follower reads no faster than its output is kept, so memory stays
 * bounded, and stops at OUTPUT_LIMIT with TRUNCATED_MARK. The run controller starts a follower for
 * every active run with a container and waits for it before it records the run's end.
 */
export class RunOutputCollector {
  private readonly options: RunOutputCollectorOptions;
  private readonly followers = new Map<string, Follower>();
  /** A write is under way, or waiting for its interval. */
  private flushing = false;
  private lastFlush = 0;

  constructor(options: RunOutputCollectorOptions) {
    this.options = options;
  }

  /**
   * Follows run `runId`'s output in container `containerId` unless it is followed already, or was
   * followed to its end (until `forget`); resolves with whether the whole output is kept. A follower
   * that fails (false) is forgotten, so that the next call follows again from what was kept.
   */
  follow(runId: string, containerId: string): Promise<boolean> {
    const existing = this.followers.get(runId);
    if (existing) return existing.done;
    let settle!: (failure?: Error) => void;
    const done = new Promise<void>((resolve, reject) => (settle = (failure) => (failure ? reject(failure) : resolve())));
    const follower: Follower = {
      runId,
      done: done.then(
        () => !follower.stopped,
        (error: unknown) => {
          if (this.followers.get(runId) === follower) this.followers.delete(runId);
          if (!follower.stopped)
            this.options.log[engineAway(this.options.runtime, error) ? 'debug' : 'warning'](
              { runId, error: (error as Error).message },
              'following the output of a run failed; the next pass follows it again',
            );
          return false;
        },
      ),
      settle: (failure) => {
        follower.settled = true;
        follower.source?.destroy();
        settle(failure);
      },
      decoder: new StringDecoder('utf8'),
      offset: 0,
      sourceBytes: 0,
      pending: [],
      pendingBytes: 0,
      ended: false,
      stopped: false,
      settled: false,
    };
    this.followers.set(runId, follower);
    // Its own work, not the reconcile's that started it: what it read is kept after the run controller's queue stops (see stop).
    detached(() => this.open(follower, containerId)).catch((error: unknown) => follower.settle(error as Error));
    return follower.done;
  }

  /** The run has ended and its container is gone: nothing more to follow. */
  forget(runId: string): void {
    this.followers.delete(runId);
  }

  /** Stops following run `runId` now, what was read kept, and forgets it: nothing of it is written after this resolves. */
  async abandon(runId: string): Promise<void> {
    const follower = this.followers.get(runId);
    if (!follower) return;
    follower.stopped = true;
    follower.source?.destroy();
    if (!follower.source) follower.settle();
    await follower.done;
    this.followers.delete(runId);
  }

  /** Stops every follower (the control plane is stopping); what they read is kept. */
  async stop(): Promise<void> {
    const all = [...this.followers.values()];
    for (const follower of all) {
      follower.stopped = true;
      follower.source?.destroy();
    }
    await Promise.all(all.map((follower) => follower.done));
    this.followers.clear();
  }

  /** Reads where the run's kept output ends (now: an earlier follower may have kept more), then follows the container from there. */
  private async open(follower: Follower, containerId: string): Promise<void> {
    const run = await this.options.runs.get(follower.runId);
    if (!run || run.status.outputTruncated) return follower.settle();
    follower.offset = run.status.outputLength;
    follower.sourceBytes = run.status.outputSourceBytes;
    const stream = (await this.options.runtime.followOutput(containerId)) as Source;
    follower.source = stream;
    if (follower.stopped || follower.settled) stream.destroy();
    let skip = run.status.outputSourceBytes;
    stream.on('data', (data: Buffer) => {
      let chunk = data;
      if (skip > 0) {
        const skipped = Math.min(skip, chunk.length);
        skip -= skipped;
        chunk = chunk.subarray(skipped);
      }
      if (chunk.length === 0) return;
      follower.pending.push(chunk);
      follower.pendingBytes += chunk.length;
      // Read no faster than it is kept.
      if (follower.pendingBytes >= MAX_CHUNK) stream.pause();
      this.schedule();
    });
    const end = () => ((follower.ended = true), this.schedule());
    stream.once('end', end);
    stream.once('close', end);
    stream.once('error', (error: Error) => ((follower.failure ??= error), end()));
  }

  /** A write soon: at once after a quiet interval, else FLUSH_INTERVAL_MS after the last began. */
  private schedule(): void {
    if (this.flushing) return;
    this.flushing = true;
    const wait = Math.max(0, this.lastFlush + FLUSH_INTERVAL_MS - Date.now());
    setTimeout(() => void this.flush(), wait);
  }

  /** Keeps what every follower read since the last write, in one statement, then publishes it. */
  private async flush(): Promise<void> {
    this.lastFlush = Date.now();
    const pieces: { follower: Follower; piece: OutputPiece; last: boolean }[] = [];
    for (const follower of this.followers.values()) {
      if (follower.settled) continue;
      if (follower.failure) {
        follower.settle(follower.failure);
        continue;
      }
      if (follower.pendingBytes === 0 && !follower.ended) continue;
      const all = Buffer.concat(follower.pending);
      const taken = all.subarray(0, MAX_CHUNK);
      follower.pending = taken.length < all.length ? [all.subarray(taken.length)] : [];
      follower.pendingBytes = all.length - taken.length;
      const finishing = follower.ended && follower.pendingBytes === 0;
      let text = follower.decoder.write(taken);
      if (finishing) text += follower.decoder.end();
      const truncated = follower.offset + text.length >= OUTPUT_LIMIT;
      if (truncated) text = `${text.slice(0, OUTPUT_LIMIT - follower.offset)}${TRUNCATED_MARK}`;
      // Any bytes: invalid UTF-8 is U+FFFD once decoded; NUL, and a surrogate the cut above split, become it here
      // (one code unit for one), so that what is published is what is kept.
      text = storableText(text);
      const piece = { runId: follower.runId, offset: follower.offset, text, sourceBytes: follower.sourceBytes + taken.length, truncated };
      if (taken.length > 0 || text !== '') pieces.push({ follower, piece, last: truncated || finishing });
      else if (finishing) follower.settle();
    }
    try {
      const kept = await this.options.runs.appendOutput(pieces.map(({ piece }) => piece));
      for (const { follower, piece, last } of pieces) {
        if (!kept.has(piece.runId)) {
          follower.settle(new Error("another writer moved this run's output on"));
          continue;
        }
        if (piece.text !== '') this.options.changes.publishOutput({ runId: piece.runId, offset: piece.offset, text: piece.text });
        follower.offset += piece.text.length;
        follower.sourceBytes = piece.sourceBytes;
        if (last) follower.settle();
        else if (follower.source?.isPaused() && follower.pendingBytes < MAX_CHUNK) follower.source.resume();
      }
    } catch (error) {
      // Nothing of this write was kept: these followers stop, and the next pass follows again from what was.
      for (const { follower } of pieces) follower.settle(error as Error);
    } finally {
      this.flushing = false;
      const waiting = (follower: Follower) => !follower.settled && (follower.pendingBytes > 0 || follower.ended);
      if ([...this.followers.values()].some(waiting)) this.schedule();
    }
  }
}
