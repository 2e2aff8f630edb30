/**
 * A run's output as server-sent events, live: what is kept so far (from a given offset), then each
 * new piece as the run output collector keeps it, then an `end` event once the run has ended and
 * all of its output was sent. Each `output` event carries `{offset, text}` and has the offset after
 * it as its id, so a browser's EventSource that reconnects (a dropped connection, a restarted
 * control plane) resumes where it was with `Last-Event-ID`. A slow reader never makes the server
 * hold output for it: what it has not taken is read again from the database when it has.
 */
import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import type { ChangeFeed, RunOutputEvent } from '../src/db/changes.ts';
import type { SurfaceStore } from '../src/store/index.ts';
import { isTerminal, type RunRecord } from '../src/store/runs.ts';

/** How often an idle stream sends a comment, so that proxies and browsers keep it open. */
const HEARTBEAT_MS = 15_000;

/**
 * What streams of run output hear of new output: one subscription to the feed, handed out by run.
 * The leader's collector hands its pieces to its own process with their text; the other replicas
 * hear the `output` signal, an event with no text that ends where the kept output now ends (their
 * streams read the rest from the database).
 */
export class RunOutputHub {
  private readonly listeners = new Map<string, Set<(event: RunOutputEvent) => void>>();
  /** The open streams, ended on shutdown (their readers resume on another replica from where they were). */
  private readonly streams = new Set<PassThrough>();
  private readonly unsubscribe: () => void;
  private readonly unsubscribeSignal: () => void;

  constructor(changes: ChangeFeed) {
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

  /** Keeps `stream` until it closes, to end it with endStreams. */
  track(stream: PassThrough): void {
    this.streams.add(stream);
    stream.once('close', () => this.streams.delete(stream));
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

/**
 * The event stream of `run`'s output from character `from` on (see the file comment). It ends by
 * itself after the `end` event; the caller's socket closing ends it too.
 */
export function runOutputStream(deps: OutputStreamDeps, run: RunRecord, from: number): PassThrough {
  const stream = new PassThrough();
  deps.hub.track(stream);
  let sent = Math.max(0, Math.min(from, run.outputLength));
  let current: RunRecord = run;
  let busy = false;
  let again = false;
  let closed = false;

  const send = (text: string) => {
    if (text === '') return true;
    const ok = stream.write(`id: ${sent + text.length}\nevent: output\ndata: ${JSON.stringify({ offset: sent, text })}\n\n`);
    sent += text.length;
    return ok;
  };

  /**
   * Reads the run again, sends what is kept past `sent`, then the end when the run has ended and
   * nothing is left (a run's output is whole before it is recorded as ended). Never two at once.
   */
  const catchUp = async () => {
    if (busy) return void (again = true);
    busy = true;
    try {
      do {
        again = false;
        const fresh = await deps.runs.get(run.id);
        if (!fresh) return void stream.destroy();
        current = fresh;
        for (;;) {
          const chunks = await deps.runs.outputFrom(current.id, sent);
          if (closed || chunks.length === 0) break;
          let ok = true;
          for (const chunk of chunks) ok = send(chunk.text.slice(Math.max(0, sent - chunk.offset))) && ok;
          // The reader is behind: go on once it has taken what it has.
          if (!ok) return void stream.once('drain', () => void catchUp());
        }
        if (closed) return;
        if (isTerminal(current.status) && sent >= current.outputLength) {
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
    if (!busy && event.offset === sent && stream.writableLength === 0) send(event.text);
    else if (event.offset + event.text.length > sent) void catchUp();
  });
  // A run's end is announced as a status change of its workspace.
  const stopFollowing = deps.changes.subscribe((change) => {
    if (change.kind === 'status' && change.id === run.workspaceId) void catchUp();
  });
  const heartbeat = setInterval(() => stream.write(': still here\n\n'), HEARTBEAT_MS);
  heartbeat.unref();
  const finish = () => {
    closed = true;
    clearInterval(heartbeat);
    stopListening();
    stopFollowing();
  };
  stream.once('close', finish);
  stream.write(': connected\n\n');
  void catchUp();
  return stream;
}

/** The query of an output stream: `from`, the offset to start at (a reconnect's Last-Event-ID wins). */
export interface OutputQuery {
  from?: number;
}

export const outputQuerySchema = {
  type: 'object',
  properties: { from: { type: 'integer', minimum: 0, maximum: 100_000_000 } },
  additionalProperties: false,
};

/** Answers `ctx` with `run`'s output as an event stream (runOutputStream), from a reconnect's Last-Event-ID, else `from`, else the start. */
export function answerOutputStream(ctx: Context, deps: OutputStreamDeps, run: RunRecord, from: number | undefined): void {
  const resume = Number(ctx.get('last-event-id'));
  ctx.req.socket.setTimeout(0);
  ctx.set('Cache-Control', 'no-store');
  ctx.set('X-Accel-Buffering', 'no');
  ctx.type = 'text/event-stream';
  ctx.body = runOutputStream(deps, run, ctx.get('last-event-id') !== '' && Number.isSafeInteger(resume) && resume >= 0 ? resume : (from ?? 0));
}

/** Answers `ctx` with `run`'s whole kept output as a text file to download, named after the workspace and the run's start. */
export async function answerOutputFile(ctx: Context, runs: SurfaceStore['runs'], run: RunRecord, slug: string): Promise<void> {
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Content-Disposition', `attachment; filename="run-${slug}-${run.queuedAt.toISOString().replaceAll(':', '')}.txt"`);
  ctx.type = 'text/plain; charset=utf-8';
  ctx.body = await runs.outputText(run.id);
}
