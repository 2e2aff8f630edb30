/**
 * The worker thread of ownInThread (owner-thread.ts): takes the embedded database's lock and serves
 * it, then tells the thread that started it where (`ready`), or that another process holds it
 * (`held`, and ends), or why it could not (`failed`, and ends). It passes on the notifications
 * of the channels it was given and its log lines (JSON, for that thread's logger), and on the
 * message `close` stops serving and ends.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { createRootLogger } from '../log.ts';
import { serve, tryLock } from './embedded.ts';
import type { ThreadData, ThreadMessage } from './owner-thread.ts';

const options = workerData as ThreadData;
const port = parentPort!;
const tell = (message: ThreadMessage) => port.postMessage(message);
const sink = { write: (line: string) => tell({ type: 'log', line }) };
const log = createRootLogger({ level: 'trace', format: 'json', colour: false, sinks: { out: sink, err: sink } });
const dataDir = path.join(options.dataDir, 'pgdata');

try {
  await mkdir(dataDir, { recursive: true });
  const release = await tryLock(dataDir, { ...options, log });
  if (!release) {
    tell({ type: 'held' });
    port.close();
  } else {
    const served = await serve(dataDir, release, { ...options, log }).catch(async (error: unknown) => {
      await release().catch(() => undefined);
      throw error;
    });
    served.onNotification((channel, payload) => tell({ type: 'notification', channel, payload }));
    tell({ type: 'ready', url: served.url });
    port.once('message', () => void served.close().finally(() => port.close()));
  }
} catch (error) {
  tell({ type: 'failed', message: (error as Error).message });
  port.close();
}
