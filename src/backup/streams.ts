/** Stream plumbing shared by writing, reading and restoring backups. */
import type { EventEmitter } from 'node:events';
import type tar from 'tar-stream';

/** What tar-stream's extract yields: an entry's header and its data (Buffers). */
export type TarEntry = AsyncIterable<unknown> & { header: tar.Header; resume(): unknown };

/** A header as tar-stream's pack takes it: a name, the rest defaulted. */
export type PackHeader = Parameters<tar.Pack['entry']>[0];

/** Where one entry's data goes: each write resolves once the destination can take more. */
export interface EntrySink {
  write(chunk: Buffer): Promise<void>;
  /** Ends the entry; resolves once the archive has taken it whole. */
  end(): Promise<void>;
}

/** Adds an entry to `pack` and returns its sink (a destroyed pack fails its writes rather than leaving them waiting). */
export function packEntry(pack: tar.Pack, header: PackHeader): EntrySink {
  let settle: (error?: unknown) => void = () => undefined;
  const done = new Promise<void>((resolve, reject) => (settle = (error) => (error ? reject(error) : resolve())));
  // A failure before end() is awaited surfaces through write(); end() still reports it.
  done.catch(() => undefined);
  const sink = pack.entry(header, (error) => settle(error));
  // The entry fails when the pack does: that reaches write() and end(), and an unheard 'error' would throw.
  sink.on('error', () => undefined);
  return {
    write: async (chunk) => {
      if (!sink.write(chunk)) await drained(sink);
    },
    end: async () => {
      sink.end(undefined);
      await done;
    },
  };
}

/** Resolves when `stream` emits drain; rejects when it errors or closes first, or already has. */
function drained(stream: EventEmitter & { destroyed?: boolean; destroying?: boolean }): Promise<void> {
  // A destroyed stream (Node's `destroyed`, streamx's `destroying` too) will never drain, and may have closed already.
  if (stream.destroyed || stream.destroying) return Promise.reject(closedEarly());
  return new Promise((resolve, reject) => {
    const finish = (error?: unknown) => {
      stream.off('drain', onDrain);
      stream.off('error', onError);
      stream.off('close', onClose);
      if (error) reject(error);
      else resolve();
    };
    const onDrain = () => finish();
    const onError = (error: unknown) => finish(error);
    const onClose = () => finish(closedEarly());
    stream.on('drain', onDrain);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}

const closedEarly = () => new Error('the stream closed before it could take more data');

/** The error `promise` rejects with, or undefined once it resolves: never itself a rejection, so it can wait unobserved. */
export function outcome(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error ?? new Error('failed'),
  );
}

/**
 * Records the first error any of `streams` emits. When one stage of a pipeline fails, the others
 * fail after it with echoes (a premature close, a destroyed sink): the first is the cause to report.
 */
export function firstError(streams: EventEmitter[]): { readonly error: unknown } {
  const seen: { error: unknown } = { error: undefined };
  for (const stream of streams) stream.on('error', (error: unknown) => void (seen.error ??= error));
  return seen;
}
