/**
 * The robot's field as a coach's look shows it: the control plane reads the run's NetworkTables 4
 * itself, over a connection Upstreams verified to reach that run's own simulator (never through the
 * student's editor, session or origin), and keeps what Field2d tables need (dashboard.ts `fields`:
 * each table's `.type`, its objects' poses).
 *
 * One reader per run, shared by every coach looking at it, opened at the first read and closed when
 * nobody read it for IDLE_MS. A reader that could not reach the simulator (it was still
 * starting) is opened again at a read RETRY_MS later. The simulator runs student code, so it is read
 * as hostile: a frame over MAX_FRAME_BYTES, more than MAX_BYTES_PER_SECOND or more than
 * MAX_FRAMES_PER_SECOND (an NT4 server batches its values: a robot sends tens a second) ends the reader
 * (`too_much`, for IDLE_MS before it is opened again); past MAX_TOPICS announced topics the rest are
 * ignored; only short strings and numeric arrays (at most MAX_NUMBERS numbers) are kept; a field is
 * made of at most MAX_TABLES tables; at most MAX_READERS readers are open per process (the least
 * recently read goes first).
 */
import type net from 'node:net';
import { decodeMulti } from '@msgpack/msgpack';
import WebSocket from 'ws';
import { fields, type FieldView } from '../../images/workspace/extension/src/dashboard.ts';
import type { Upstreams } from './upstreams.ts';

export const IDLE_MS = 30_000;
export const RETRY_MS = 5000;
export const MAX_FRAME_BYTES = 1024 * 1024;
export const MAX_BYTES_PER_SECOND = 2 * 1024 * 1024;
export const MAX_FRAMES_PER_SECOND = 2000;
export const MAX_TOPICS = 10_000;
export const MAX_NUMBERS = 3 * 1000;
export const MAX_TABLES = 4;
export const MAX_READERS = 100;
/** How long the first read waits for the connection (and its first values). */
const FIRST_READ_MS = 3000;
/** How long a string value may be to be kept (a table's `.type`). */
const MAX_TEXT = 64;
/** NetworkTables 4's subprotocols, newest first. */
const PROTOCOLS = ['v4.1.networktables.first.wpi.edu', 'networktables.first.wpi.edu'];

/** Where a run's field reading is: opening, live, or ended (the simulator could not be reached, or sent too much). */
export type FieldState = 'connecting' | 'live' | 'unreachable' | 'too_much';

export interface FieldReading {
  state: FieldState;
  fields: FieldView[];
}

/** The run whose simulator is read: its ids and where its NetworkTables are recorded to be. */
export interface FieldTarget {
  workspaceId: string;
  runId: string;
  simEndpoint: string;
}

/** One run's reader: its connection and what it kept. */
class Reader {
  state: FieldState = 'connecting';
  readAt = Date.now();
  /** When it ended (unreachable or too much). */
  endedAt: number | undefined;
  /** Topic ids to names, as announced. */
  private readonly topics = new Map<number, string>();
  /** Kept values by topic name. */
  private readonly values = new Map<string, unknown>();
  private socket: WebSocket | undefined;
  private closed = false;
  /** Bytes and frames received in the second that began at `windowStart`. */
  private windowBytes = 0;
  private windowFrames = 0;
  private windowStart = 0;
  /** Settles when the first values came or the reader ended. */
  readonly ready: Promise<void>;
  private settle: () => void = () => undefined;

  constructor(target: FieldTarget, upstreams: Pick<Upstreams, 'connect'>) {
    this.ready = new Promise((resolve) => (this.settle = resolve));
    const socket = new WebSocket(`ws://${target.simEndpoint}/nt/classroom-coach`, PROTOCOLS, {
      maxPayload: MAX_FRAME_BYTES,
      handshakeTimeout: FIRST_READ_MS,
      perMessageDeflate: false,
      // Only to the run's own simulator: the recorded address checked against its live container.
      createConnection: ((_options: unknown, done: (error: Error | null, socket?: unknown) => void) => {
        void (async () => {
          let connected: net.Socket;
          try {
            connected = await upstreams.connect({ workspaceId: target.workspaceId, runId: target.runId }, 'nt4', target.simEndpoint);
          } catch (error) {
            return done(error as Error);
          }
          if (!this.closed) return done(null, connected);
          connected.destroy();
          done(new Error('closed'));
        })();
        return undefined;
      }) as never,
    });
    this.socket = socket;
    socket.on('open', () => {
      this.state = 'live';
      socket.send(JSON.stringify([{ method: 'subscribe', params: { topics: [''], subuid: 1, options: { prefix: true, periodic: 0.1 } } }]));
    });
    socket.on('message', (data: Buffer, binary: boolean) => this.receive(data, binary));
    socket.on('error', (error: Error & { code?: string }) => this.end(error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 'too_much' : 'unreachable'));
    socket.on('close', () => this.end('unreachable'));
  }

  /** What the simulator's fields are now. */
  reading(): FieldReading {
    this.readAt = Date.now();
    if (this.state !== 'live') return { state: this.state, fields: [] };
    const tables: string[] = [];
    for (const [name, value] of this.values) if (name.endsWith('/.type') && value === 'Field2d') tables.push(name.slice(0, -'/.type'.length));
    const chosen = tables.toSorted().slice(0, MAX_TABLES);
    const kept = new Map<string, unknown>();
    for (const [name, value] of this.values) if (chosen.some((table) => name.startsWith(`${table}/`))) kept.set(name, value);
    return { state: 'live', fields: fields(kept) };
  }

  /** Ends the connection; a reader that ended is let go by its owner when next read (or idle). */
  close(): void {
    this.closed = true;
    this.socket?.terminate();
    this.socket = undefined;
  }

  private end(state: 'unreachable' | 'too_much'): void {
    if (this.endedAt === undefined) {
      this.state = state;
      this.endedAt = Date.now();
    }
    this.close();
    this.settle();
  }

  private receive(data: Buffer, binary: boolean): void {
    const now = Date.now();
    if (now - this.windowStart >= 1000) {
      this.windowStart = now;
      this.windowBytes = 0;
      this.windowFrames = 0;
    }
    this.windowBytes += data.length;
    this.windowFrames += 1;
    if (this.windowBytes > MAX_BYTES_PER_SECOND || this.windowFrames > MAX_FRAMES_PER_SECOND) return this.end('too_much');
    try {
      if (binary) this.record(data);
      else this.control(data.toString('utf8'));
    } catch {
      // A frame that is not NetworkTables: ignored, as a dashboard ignores it.
    }
  }

  /** Announcements (`[{method:'announce', params:{name, id}}]`) and their ends. */
  private control(text: string): void {
    const messages: unknown = JSON.parse(text);
    if (!Array.isArray(messages)) return;
    for (const message of messages as { method?: unknown; params?: { name?: unknown; id?: unknown } }[]) {
      const { name, id } = message?.params ?? {};
      if (typeof id !== 'number') continue;
      if (message.method === 'announce' && typeof name === 'string' && name.length <= 1024 && (this.topics.size < MAX_TOPICS || this.topics.has(id))) {
        this.topics.set(id, name);
      } else if (message.method === 'unannounce') {
        const known = this.topics.get(id);
        this.topics.delete(id);
        if (known !== undefined) this.values.delete(known);
      }
    }
  }

  /** Value messages (`[id, time, type, value]`, one after another); time synchronisation (id -1) is ignored. */
  private record(data: Buffer): void {
    // A frame is at most MAX_FRAME_BYTES: what it decodes to is bounded by it.
    for (const message of decodeMulti(data)) {
      if (!Array.isArray(message) || message.length !== 4) continue;
      const name = this.topics.get(message[0] as number);
      if (name === undefined) continue;
      const value: unknown = message[3];
      const kept =
        typeof value === 'string'
          ? value.length <= MAX_TEXT
          : Array.isArray(value) && value.length <= MAX_NUMBERS && value.every((each) => typeof each === 'number');
      if (kept) this.values.set(name, value);
      else this.values.delete(name);
    }
    this.settle();
  }
}

/** The readers of this process, by run (see the file comment). */
export class RobotFields {
  private readonly readers = new Map<string, Reader>();
  private readonly sweep: NodeJS.Timeout;
  private readonly upstreams: Pick<Upstreams, 'connect'>;
  private readonly idleMs: number;
  private readonly retryMs: number;

  /** `idleMs` and `retryMs` (IDLE_MS and RETRY_MS by default) are shorter in tests. */
  constructor(upstreams: Pick<Upstreams, 'connect'>, timing: { idleMs?: number; retryMs?: number } = {}) {
    this.upstreams = upstreams;
    this.idleMs = timing.idleMs ?? IDLE_MS;
    this.retryMs = timing.retryMs ?? RETRY_MS;
    this.sweep = setInterval(() => this.letGoIdle(), this.idleMs / 3).unref();
  }

  /** The run's fields now, opening its reader at the first read (which waits for the connection, up to FIRST_READ_MS). */
  async read(target: FieldTarget): Promise<FieldReading> {
    let reader = this.readers.get(target.runId);
    // An ended reader says why for a while (RETRY_MS, or IDLE_MS after too much), then is opened again.
    if (reader?.endedAt !== undefined && Date.now() - reader.endedAt > (reader.state === 'too_much' ? this.idleMs : this.retryMs)) {
      this.readers.delete(target.runId);
      reader = undefined;
    }
    if (reader) {
      // The map is in the order of the last read: the first is the least recently read.
      this.readers.delete(target.runId);
      this.readers.set(target.runId, reader);
    } else {
      if (this.readers.size >= MAX_READERS) {
        const [runId, oldest] = this.readers.entries().next().value!;
        oldest.close();
        this.readers.delete(runId);
      }
      reader = new Reader(target, this.upstreams);
      this.readers.set(target.runId, reader);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([reader.ready, new Promise((resolve) => (timer = setTimeout(resolve, FIRST_READ_MS)))]);
      clearTimeout(timer);
    }
    return reader.reading();
  }

  /** Closes the reader of a run that ended (a later read of it opens none: the run is not running). */
  forget(runId: string): void {
    this.readers.get(runId)?.close();
    this.readers.delete(runId);
  }

  /** Closes every reader (the server stops). */
  close(): void {
    clearInterval(this.sweep);
    for (const reader of this.readers.values()) reader.close();
    this.readers.clear();
  }

  /** How many readers are open (for tests and metrics). */
  get size(): number {
    return this.readers.size;
  }

  private letGoIdle(): void {
    const now = Date.now();
    for (const [runId, reader] of this.readers) {
      if (now - reader.readAt <= this.idleMs) continue;
      reader.close();
      this.readers.delete(runId);
    }
  }
}
