import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import { once } from 'node:events';
import path from 'node:path';
import readline from 'node:readline';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { PROJECT_ROOT } from '../../src/config.ts';
import { watchControlPlane } from './contract.ts';

/** One JSON log record of the server process. */
export type LogRecord = Record<string, unknown> & { level: string; message: string; category: string };

/** A control-plane process started by a test. */
export interface ServerProcess {
  proc: ChildProcess;
  /** Base URL, e.g. http://127.0.0.1:43121 (set once it listens). */
  url: string;
  /** Every JSON log record so far, from stdout and stderr. */
  records: LogRecord[];
  /** Raw stdout and stderr text so far. */
  stdout: string[];
  stderr: string[];
  /** Resolves with the record matching `predicate`, waiting up to `timeoutMs`. */
  waitForLog(predicate: (record: LogRecord) => boolean, timeoutMs?: number): Promise<LogRecord>;
  /** Resolves with the exit code once the process exits. */
  exited: Promise<number | null>;
  /** Sends a signal and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Spawns `node bin/server.ts` (the real server) with JSON logs on a free loopback port and the given
 * environment. Does not wait; use `listening()` or waitForLog.
 */
export function spawnServer(env: Record<string, string | undefined>): ServerProcess {
  const proc = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin/server.ts')], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'test',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'debug',
      // Its own label scope: a test server never takes anyone else's containers for orphans.
      CONTROL_PLANE_ID: `test-${randomBytes(4).toString('hex')}`,
      // Its own data directory (session secret, allowlist), never the project's data/.
      DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'cp-server-')),
      // No scheduled backups of the homes a test makes (test/integration/backup-schedule.test.ts tests them).
      BACKUP_INTERVAL_HOURS: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const records: LogRecord[] = [];
  const waiters: { predicate: (record: LogRecord) => boolean; resolve: (record: LogRecord) => void }[] = [];
  const server: ServerProcess = {
    proc,
    url: '',
    records,
    stdout: [],
    stderr: [],
    // 'close', not 'exit': by then its output has been read to the end (stdio may outlive 'exit').
    exited: once(proc, 'close').then(([code]) => code as number | null),
    waitForLog(predicate, timeoutMs = 20_000) {
      const found = records.find(predicate);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no matching log record within ${timeoutMs} ms; got:\n${[...server.stdout, ...server.stderr].join('\n')}`)),
          timeoutMs,
        );
        waiters.push({ predicate, resolve: (record) => (clearTimeout(timer), resolve(record)) });
      });
    },
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return server.exited;
    },
  };
  const collect = (stream: NodeJS.ReadableStream, lines: string[]) => {
    readline.createInterface({ input: stream }).on('line', (line) => {
      lines.push(line);
      let record: LogRecord;
      try {
        record = JSON.parse(line) as LogRecord;
      } catch {
        return;
      }
      records.push(record);
      for (const waiter of [...waiters]) {
        if (waiter.predicate(record)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(record);
        }
      }
    });
  };
  collect(proc.stdout!, server.stdout);
  collect(proc.stderr!, server.stderr);
  return server;
}

/** Spawns the server and waits until it listens; sets `url`. */
export async function startServer(env: Record<string, string | undefined>, timeoutMs = 30_000): Promise<ServerProcess> {
  const server = spawnServer(env);
  let listening: LogRecord;
  try {
    listening = await server.waitForLog((record) => record.message.startsWith('listening on'), timeoutMs);
  } catch (error) {
    // Not handed to the caller, so nothing else would stop it.
    server.proc.kill('SIGKILL');
    throw error;
  }
  server.url = `http://127.0.0.1:${String(listening.port)}`;
  const unwatch = watchControlPlane(server.url);
  server.proc.once('exit', unwatch);
  return server;
}

/** A loopback port that was free a moment ago (for a server whose URL must be known in advance). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
