/**
 * A run's output as server-sent events, live: what is kept so far (from a given offset), then each
 * new piece as the run output collector keeps it, then an `end` event once the run has ended and
 * all of its output was sent. Each `output` event carries `{offset, text}` and has the offset after
 * it as its id, so a browser's EventSource that reconnects (a dropped connection, a restarted
 * control plane) resumes where it was with `Last-Event-ID`.
 *
 * Bounded (OutputStreamLimits, docs/security.md): each user and each run may hold so many streams
 * open on a replica (past that a new one is refused, 429 with Retry-After); a stream holds at most
 * about its buffer (OUTPUT_STREAM_BUFFER) for its reader, and reads more from the database only
 * once the reader took it; a reader that leaves a full buffer untaken for OUTPUT_STREAM_STALL_SECONDS
 * is cut (its connection closed), and resumes from the last whole event it got.
 */
import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import type { OutputStreamLimits } from '../../src/config.ts';
import type { ChangeFeed, RunOutputEvent } from '../../src/db/changes.ts';
import { TooManyError } from '../../src/errors.ts';
import { Fold } from '../../src/fold.ts';
import type { Logger } from '../../src/log.ts';
import type { Metrics } from '../../src/metrics.ts';
import type { SurfaceStore } from '../../src/store/index.ts';
import { isTerminal, type RunRecord } from '../../src/store/runs.ts';
import { presentRunEnd } from '../../src/wire/presenters.ts';

/** How often an idle stream sends a comment, so that proxies and browsers keep it open. */
const HEARTBEAT_MS = 15_000;

/** What a refused reader is told to wait before trying again (seconds). */
const REFUSED_RETRY_AFTER_SECONDS = 10;

/** Who reads a stream opened with the admin bearer token (no user): one reader for the bounds. */
const TOKEN_READER = 'admin token';

/** What the output streams' bounds count and say. */
export interface OutputHubOptions {
  limits: OutputStreamLimits;
  metrics: Metrics;
  /** Logger of `control.runs`: a bound hit and a cut, once a minute per user or run (folded). */
  log: Logger;
}

/**
 * What streams of run output hear of new output: one subscription to the feed, handed out by run.
 * The leader's collector hands its pieces to its own process with their text; the other replicas
 * hear the `output` signal, an event with no text that ends where the kept output now ends (their
 * streams read the rest from the database).
 */
export class RunOutputHub {
  /** The bounds every stream of this replica is held to. */
  readonly limits: OutputStreamLimits;
  private readonly options: OutputHubOptions;
  private readonly listeners = new Map<string, Set<(event: RunOutputEvent) => void>>();
  /** The open streams, ended on shutdown (their readers resume on another replica from where they were). */
  private readonly streams = new Set<PassThrough>();
  /** Open streams by reader (a user id) and by run. */
  private readonly byReader = new Map<string, number>();
  private readonly byRun = new Map<string, number>();
  /** One log line a minute per bound hit (per reader, per run) and per reader cut. */
  private readonly fold = new Fold();
  private readonly unsubscribe: () => void;
  private readonly unsubscribeSignal: () => void;

  constructor(changes: ChangeFeed, options: OutputHubOptions) {
    this.options = options;
    this.limits = options.limits;
    const tell = (event: RunOutputEvent) => {
      for (const listener of this.listeners.get(event.runId) ?? []) listener(event);
    };
    this.unsubscribe = changes.subscribeOutput(tell);
    this.unsubscribeSignal = changes.subscribeSignal('output', (payload) => {
      const [runId, end] = payload.split(' ');
      if (runId && Number.isSafeInteger(Number(end))) tell({ runId, offset: Number(end), text: '' });
    });
  }

  /** Calls `listener` with each new piece of the run's output; returns the unsubscribe function. */
  listen(runId: string, listener: (event: RunOutputEvent) => void): () => void {
    const set = this.listeners.get(runId) ?? new Set();
    set.add(listener);
    this.listeners.set(runId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(runId);
    };
  }

  /**
   * Takes a place for a new stream of `runId` read by `reader` (a user id), given back when `stream`
   * closes (and kept until then, to end it with endStreams). Past a bound (the reader's open streams,
   * then the run's) throws 429 instead: `too_many_output_streams` or `run_output_streams_full`, with
   * Retry-After; counted, and logged once a minute per reader or run.
   */
  admit(reader: string, runId: string): (stream: PassThrough) => void {
    const { limits, metrics, log } = this.options;
    const bound = (this.byReader.get(reader) ?? 0) >= limits.perUser ? 'user' : (this.byRun.get(runId) ?? 0) >= limits.perRun ? 'run' : undefined;
    if (bound !== undefined) {
      metrics.runOutputStreamRefusals.inc({ bound });
      const repeats = this.fold.take(bound === 'user' ? `user ${reader}` : `run ${runId}`);
      if (repeats !== undefined) {
        const line =
          bound === 'user'
            ? `refused an output stream: its reader has ${limits.perUser} open (OUTPUT_STREAMS_PER_USER)`
            : `refused an output stream: its run has ${limits.perRun} open (OUTPUT_STREAMS_PER_RUN)`;
        log.warning({ userId: reader, runId, bound, repeats }, line);
      }
      throw bound === 'user'
        ? TooManyError(
            'too_many_output_streams',
            `You have ${limits.perUser} run output streams open, the most one may have: close another tab or window showing a run, then try again.`,
            REFUSED_RETRY_AFTER_SECONDS,
          )
        : TooManyError(
            'run_output_streams_full',
            `This run has ${limits.perRun} output streams open, the most one run may have; try again in a moment.`,
            REFUSED_RETRY_AFTER_SECONDS,
          );
    }
    const change = (counts: Map<string, number>, key: string, by: number) => {
      const count = (counts.get(key) ?? 0) + by;
      if (count > 0) counts.set(key, count);
      else counts.delete(key);
    };
    change(this.byReader, reader, 1);
    change(this.byRun, runId, 1);
    metrics.runOutputStreams.inc();
    return (stream) => {
      this.streams.add(stream);
      stream.once('close', () => {
        this.streams.delete(stream);
        change(this.byReader, reader, -1);
        change(this.byRun, runId, -1);
        metrics.runOutputStreams.dec();
      });
    };
  }

  /** Counts a stream cut because `reader` left its full buffer untaken, and logs it once a minute per reader. */
  cutOff(reader: string, runId: string): void {
    this.options.metrics.runOutputStreamCuts.inc();
    const repeats = this.fold.take(`cut ${reader}`);
    if (repeats !== undefined)
      this.options.log.warning(
        { userId: reader, runId, repeats },
        `cut an output stream: its reader left a full buffer untaken for ${this.limits.stallMs / 1000} s (OUTPUT_STREAM_STALL_SECONDS); it resumes from its last event`,
      );
  }

  /** Ends every open stream (a shutdown: EventSource and the editor resume elsewhere from their last offset). */
  endStreams(): void {
    for (const stream of this.streams) stream.end();
  }

  close(): void {
    this.endStreams();
    this.unsubscribe();
    this.unsubscribeSignal();
    this.listeners.clear();
  }
}

export interface OutputStreamDeps {
  runs: SurfaceStore['runs'];
  changes: ChangeFeed;
  hub: RunOutputHub;
  /** The run's end as its `end` event says it. */
  presentEnd: (run: RunRecord) => unknown;
}

/** The output streams' deps out of an operation's: the store's runs and feed, the hub, the wire's run end (presentRunEnd). */
export function outputStreamDeps(deps: { store: SurfaceStore; outputHub: RunOutputHub }): OutputStreamDeps {
  return { runs: deps.store.runs, changes: deps.store.changes, hub: deps.outputHub, presentEnd: presentRunEnd };
}

/**
 * The event stream of `run`'s output from character `from` on (see the file comment). It ends by
 * itself after the `end` event; the caller's socket closing ends it too. It holds about
 * `hub.limits.bufferBytes` for its reader at most (half written, half ready to be read): once that is
 * full it waits for the reader, and calls `cut` when the reader took none of it for
 * `hub.limits.stallMs` (the caller closes the connection).
 */
export function runOutputStream(deps: OutputStreamDeps, run: RunRecord, from: number, cut: () => void): PassThrough {
  const { bufferBytes, stallMs } = deps.hub.limits;
  const stream = new PassThrough({ highWaterMark: Math.floor(bufferBytes / 2) });
  let sent = Math.max(0, Math.min(from, run.status.outputLength));
  let current: RunRecord = run;
  let busy = false;
  let again = false;
  let closed = false;
  /** The buffer is full: nothing more is read or written until the reader takes some ('drain'). */
  let waiting = false;
  let stall: NodeJS.Timeout | undefined;

  /**
   * Writes an event of output. When that fills the buffer, the stream waits: for the reader to take
   * some ('drain'), then it catches up; or, after stallMs with none taken, for the cut.
   */
  const send = (text: string) => {
    if (text === '') return;
    const ok = stream.write(`id: ${sent + text.length}\nevent: output\ndata: ${JSON.stringify({ offset: sent, text })}\n\n`);
    sent += text.length;
    if (ok || waiting) return;
    waiting = true;
    stall = setTimeout(cut, stallMs);
    stream.once('drain', () => {
      waiting = false;
      clearTimeout(stall);
      void catchUp();
    });
  };

  /**
   * Reads the run again, sends what is kept past `sent`, then the end when the run has ended and
   * nothing is left (a run's output is whole before it is recorded as ended). Never two at once.
   */
  const catchUp = async () => {
    if (busy || waiting) return void (again = true);
    busy = true;
    try {
      do {
        again = false;
        const fresh = await deps.runs.get(run.id);
        if (!fresh) return void stream.destroy();
        current = fresh;
        for (;;) {
          // At most what the buffer's written half holds: what is not sent now is read again later.
          const chunks = await deps.runs.outputFrom(current.id, sent, stream.writableHighWaterMark);
          if (closed || chunks.length === 0) break;
          for (const chunk of chunks) {
            send(chunk.text.slice(Math.max(0, sent - chunk.offset)));
            // The buffer is full: the rest is read again once the reader has taken some.
            if (waiting) return;
          }
        }
        if (closed) return;
        if (isTerminal(current.status.phase) && sent >= current.status.outputLength) {
          stream.end(`event: end\ndata: ${JSON.stringify(deps.presentEnd(current))}\n\n`);
          return finish();
        }
      } while (again);
    } catch {
      // The database failed: the client reconnects (EventSource does) and resumes from its last id.
      stream.destroy();
    } finally {
      busy = false;
    }
  };

  const stopListening = deps.hub.listen(run.id, (event) => {
    // Contiguous and the reader keeping up: sent as it came, without a read.
    if (!busy && !waiting && event.offset === sent && stream.writableLength === 0) send(event.text);
    else if (event.offset + event.text.length > sent) void catchUp();
  });
  // A run's end is announced as a status change of its workspace.
  const stopFollowing = deps.changes.subscribe((change) => {
    if (change.kind === 'status' && change.id === run.workspaceId) void catchUp();
  });
  // Only when nothing waits for the reader: a reader that takes nothing gets nothing more.
  const heartbeat = setInterval(() => stream.writableLength === 0 && stream.write(': still here\n\n'), HEARTBEAT_MS);
  heartbeat.unref();
  const finish = () => {
    closed = true;
    clearInterval(heartbeat);
    clearTimeout(stall);
    stopListening();
    stopFollowing();
  };
  stream.once('close', finish);
  stream.write(': connected\n\n');
  void catchUp();
  return stream;
}

/**
 * Answers `ctx` with `run`'s output as an event stream (runOutputStream), from a reconnect's
 * Last-Event-ID, else `from`, else the start; or 429 when its reader (the signed-in user, `userId`;
 * the admin bearer token, none, counts as one) or the run has as many streams open as allowed (RunOutputHub.admit).
 * A cut closes the connection: the reader resumes from the last whole event it got.
 */
export function answerOutputStream(ctx: Context, deps: OutputStreamDeps, run: RunRecord, from: number | undefined, userId: string | undefined): void {
  const reader = userId ?? TOKEN_READER;
  const keep = deps.hub.admit(reader, run.id);
  const resume = Number(ctx.get('last-event-id'));
  ctx.req.socket.setTimeout(0);
  ctx.set('Cache-Control', 'no-store');
  ctx.set('X-Accel-Buffering', 'no');
  ctx.type = 'text/event-stream';
  const start = ctx.get('last-event-id') !== '' && Number.isSafeInteger(resume) && resume >= 0 ? resume : (from ?? 0);
  const stream = runOutputStream(deps, run, start, () => {
    deps.hub.cutOff(reader, run.id);
    // What the stream and the socket hold for this reader goes with the connection.
    ctx.res.destroy();
    stream.destroy();
  });
  keep(stream);
  ctx.body = stream;
}

/** Answers `ctx` with `run`'s whole kept output as a text file to download, named after the workspace and the run's start. */
export async function answerOutputFile(ctx: Context, runs: SurfaceStore['runs'], run: RunRecord, slug: string): Promise<void> {
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Content-Disposition', `attachment; filename="run-${slug}-${run.status.queuedAt.toISOString().replaceAll(':', '')}.txt"`);
  ctx.type = 'text/plain; charset=utf-8';
  ctx.body = await runs.outputText(run.id);
}
