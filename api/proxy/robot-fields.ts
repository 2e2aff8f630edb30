/**
 * The robot's field as a coach's look shows it: the control plane reads the run's NetworkTables 4
 * itself, over a connection Upstreams verified to reach that run's own simulator (never through the
 * student's editor, session or origin), and keeps what Field2d tables need (dashboard.ts `fields`:
 * each table's `.type`, its objects' poses).
 *
 * What it asks for is narrow: the topics' names alone (`topicsonly`), then the values of every
 * `<table>/.type` and of the objects of the tables whose type is Field2d, named one by one (asked
 * again, at most every SUBSCRIBE_MS, when the list changes). So a robot's other telemetry never
 * comes.
 *
 * One reader per run, shared by every coach looking at it, opened at the first read and closed when
 * nobody read it for IDLE_MS. A reader that could not reach the simulator (it was still starting)
 * is opened again at a read RETRY_MS later. The simulator runs student code, so what it sends is
 * read as hostile (docs/security.md, "The robot's field in a look"):
 * - a frame over MAX_FRAME_BYTES is refused before it is read whole; more than the rates (token
 *   buckets: VALUE_BYTES_PER_SECOND of values, TEXT_BYTES_PER_10S of names, FRAMES_PER_SECOND)
 *   ends the reader (`too_much`, for IDLE_MS before it is opened again);
 * - values are read by nt4-values.ts, which builds only what is kept;
 * - past MAX_TOPICS names the rest are ignored; only `.type` strings and the objects of Field2d
 *   tables (arrays of at most MAX_NUMBERS numbers, MAX_KEPT_NUMBERS in all) are kept;
 * - an answer holds at most MAX_TABLES tables of MAX_OBJECTS objects, MAX_POSES poses in all;
 * - at most MAX_READERS readers are open per process (the least recently read goes first).
 */
import type net from 'node:net';
import WebSocket from 'ws';
import { fields, type FieldView } from '../../images/workspace/extension/src/dashboard.ts';
import type { Logger } from '../../src/log.ts';
import { nt4Values } from './nt4-values.ts';
import type { Upstreams } from './upstreams.ts';

export const IDLE_MS = 30_000;
export const RETRY_MS = 5000;
export const MAX_FRAME_BYTES = 1024 * 1024;
export const VALUE_BYTES_PER_SECOND = 512 * 1024;
export const TEXT_BYTES_PER_10S = 2 * 1024 * 1024;
export const FRAMES_PER_SECOND = 1000;
export const MAX_TOPICS = 10_000;
export const MAX_NUMBERS = 3 * 1000;
export const MAX_KEPT_NUMBERS = 30_000;
export const MAX_TABLES = 4;
export const MAX_OBJECTS = 32;
export const MAX_POSES = 5000;
export const MAX_READERS = 20;
/** How long the first read waits for the connection (and its first values). */
const FIRST_READ_MS = 3000;
/** The least time between two subscriptions of values (the list of names changes as they are announced). */
const SUBSCRIBE_MS = 200;
/** How long a string value may be to be kept (a table's `.type`). */
const MAX_TEXT = 64;
/** NetworkTables 4's subprotocols, newest first. */
const PROTOCOLS = ['v4.1.networktables.first.wpi.edu', 'networktables.first.wpi.edu'];
/** The subscription of names, and the one of values (asked again under a new id when its names change). */
const NAMES_SUBSCRIPTION = 1;

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

/** A rate: `rate` a second on average, at most `burst` at once. */
class TokenBucket {
  private tokens: number;
  private at = performance.now();
  private readonly rate: number;
  private readonly burst: number;
  constructor(rate: number, burst: number) {
    this.rate = rate;
    this.burst = burst;
    this.tokens = burst;
  }

  /** Takes `n`; false when that is more than is left. */
  take(n: number): boolean {
    const now = performance.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.rate);
    this.at = now;
    this.tokens -= n;
    return this.tokens >= 0;
  }
}

const parentOf = (name: string) => name.slice(0, Math.max(0, name.lastIndexOf('/')));
const TYPE = '/.type';

/** One run's reader: its connection and what it kept. */
class Reader {
  state: FieldState = 'connecting';
  readAt = Date.now();
  /** When it ended (unreachable or too much). */
  endedAt: number | undefined;
  /** Topic ids to names, as announced. */
  private readonly topics = new Map<number, string>();
  /** `.type` values by table, and the Field2d objects' numbers by topic name. */
  private readonly types = new Map<string, string>();
  private readonly objects = new Map<string, number[]>();
  private keptNumbers = 0;
  private socket: WebSocket | undefined;
  private closed = false;
  private readonly valueBytes = new TokenBucket(VALUE_BYTES_PER_SECOND, VALUE_BYTES_PER_SECOND);
  private readonly textBytes = new TokenBucket(TEXT_BYTES_PER_10S / 10, TEXT_BYTES_PER_10S);
  private readonly frames = new TokenBucket(FRAMES_PER_SECOND, FRAMES_PER_SECOND);
  /** The names the values are asked for now, and the id of that subscription. */
  private subscribed = '';
  private subuid = NAMES_SUBSCRIPTION;
  private subscribeTimer: NodeJS.Timeout | undefined;
  /** Settles when the first values came or the reader ended. */
  readonly ready: Promise<void>;
  private settle: () => void = () => undefined;
  private readonly onTooMuch: () => void;

  constructor(target: FieldTarget, upstreams: Pick<Upstreams, 'connect'>, onTooMuch: () => void) {
    this.onTooMuch = onTooMuch;
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
      this.send([{ method: 'subscribe', params: { topics: [''], subuid: NAMES_SUBSCRIPTION, options: { prefix: true, topicsonly: true } } }]);
    });
    socket.on('message', (data: Buffer, binary: boolean) => this.receive(data, binary));
    socket.on('error', (error: Error & { code?: string }) => this.end(error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 'too_much' : 'unreachable'));
    socket.on('close', () => this.end('unreachable'));
  }

  /** What the simulator's fields are now (see the file comment for the bounds). */
  reading(): FieldReading {
    this.readAt = Date.now();
    if (this.state !== 'live') return { state: this.state, fields: [] };
    const tables = [...this.types].filter(([, type]) => type === 'Field2d').map(([table]) => table);
    const chosen = tables.toSorted().slice(0, MAX_TABLES);
    const kept = new Map<string, unknown>();
    for (const table of chosen) kept.set(`${table}${TYPE}`, 'Field2d');
    for (const [name, numbers] of this.objects) if (chosen.includes(parentOf(name))) kept.set(name, numbers);
    let poses = MAX_POSES;
    const views = fields(kept).map((view) => ({
      ...view,
      objects: view.objects.slice(0, MAX_OBJECTS).flatMap((object) => {
        const shown = object.poses.slice(0, poses);
        poses -= shown.length;
        return shown.length > 0 ? [{ ...object, poses: shown }] : [];
      }),
    }));
    return { state: 'live', fields: views };
  }

  /** Ends the connection; a reader that ended is let go by its owner when next read (or idle). */
  close(): void {
    this.closed = true;
    clearTimeout(this.subscribeTimer);
    this.socket?.terminate();
    this.socket = undefined;
  }

  private end(state: 'unreachable' | 'too_much'): void {
    if (this.endedAt === undefined) {
      this.state = state;
      this.endedAt = Date.now();
      if (state === 'too_much') this.onTooMuch();
    }
    this.close();
    this.settle();
  }

  private send(messages: unknown[]): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(messages));
  }

  private receive(data: Buffer, binary: boolean): void {
    if (this.closed) return;
    if (!this.frames.take(1) || !(binary ? this.valueBytes : this.textBytes).take(data.length)) return this.end('too_much');
    if (binary) this.record(data);
    else this.control(data.toString('utf8'));
  }

  /** Announcements (`[{method:'announce', params:{name, id}}]`) and their ends; a frame that is not JSON is ignored. */
  private control(text: string): void {
    let messages: unknown;
    try {
      messages = JSON.parse(text);
    } catch {
      return;
    }
    if (!Array.isArray(messages)) return;
    for (const message of messages as ({ method?: unknown; params?: { name?: unknown; id?: unknown } } | null)[]) {
      const { name, id } = message?.params ?? {};
      if (typeof id !== 'number') continue;
      if (message!.method === 'announce' && typeof name === 'string' && name.length <= 1024 && !this.topics.has(id) && this.topics.size < MAX_TOPICS) {
        this.topics.set(id, name);
      } else if (message!.method === 'unannounce' && this.topics.has(id)) {
        const known = this.topics.get(id)!;
        this.topics.delete(id);
        this.forget(known);
      }
    }
    this.resubscribe();
  }

  /** Values (nt4-values.ts): a table's `.type`, and the objects of the tables whose type is Field2d. */
  private record(data: Buffer): void {
    let typesChanged = false;
    for (const { id, value } of nt4Values(data, { maxText: MAX_TEXT, maxItems: MAX_NUMBERS })) {
      const name = this.topics.get(id);
      if (name === undefined) continue;
      if (name.endsWith(TYPE)) {
        const table = name.slice(0, -TYPE.length);
        if (typeof value === 'string') {
          typesChanged ||= this.types.get(table) !== value;
          this.types.set(table, value);
        } else typesChanged ||= this.types.delete(table);
        continue;
      }
      this.forget(name);
      if (!Array.isArray(value) || this.types.get(parentOf(name)) !== 'Field2d' || this.keptNumbers + value.length > MAX_KEPT_NUMBERS) continue;
      this.objects.set(name, value);
      this.keptNumbers += value.length;
    }
    if (typesChanged) this.resubscribe();
    this.settle();
  }

  private forget(name: string): void {
    const old = this.objects.get(name);
    if (!old) return;
    this.objects.delete(name);
    this.keptNumbers -= old.length;
  }

  /** Asks for the values of every `.type` and of the Field2d tables' objects, once the list changed (at most every SUBSCRIBE_MS). */
  private resubscribe(): void {
    if (this.subscribeTimer || this.closed) return;
    this.subscribeTimer = setTimeout(() => {
      this.subscribeTimer = undefined;
      const wanted: string[] = [];
      for (const name of this.topics.values()) {
        if (name.endsWith(TYPE) || this.types.get(parentOf(name)) === 'Field2d') wanted.push(name);
      }
      const list = wanted.toSorted();
      // A robot with no table at all: nothing to wait for.
      if (list.length === 0) this.settle();
      const key = list.join('\n');
      if (key === this.subscribed) return;
      const previous = this.subuid;
      this.subuid += 1;
      this.subscribed = key;
      this.send([
        ...(previous === NAMES_SUBSCRIPTION ? [] : [{ method: 'unsubscribe', params: { subuid: previous } }]),
        { method: 'subscribe', params: { topics: list, subuid: this.subuid, options: { periodic: 0.1 } } },
      ]);
    }, SUBSCRIBE_MS);
  }
}

/** The readers of this process, by run (see the file comment). */
export class RobotFields {
  private readonly readers = new Map<string, Reader>();
  private readonly sweep: NodeJS.Timeout;
  private readonly upstreams: Pick<Upstreams, 'connect'>;
  private readonly log: Logger | undefined;
  private readonly idleMs: number;
  private readonly retryMs: number;

  /** `idleMs` and `retryMs` (IDLE_MS and RETRY_MS by default) are shorter in tests; `log` hears of a simulator that sent too much. */
  constructor(upstreams: Pick<Upstreams, 'connect'>, options: { idleMs?: number; retryMs?: number; log?: Logger } = {}) {
    this.upstreams = upstreams;
    this.log = options.log;
    this.idleMs = options.idleMs ?? IDLE_MS;
    this.retryMs = options.retryMs ?? RETRY_MS;
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
      reader = new Reader(target, this.upstreams, () =>
        this.log?.warning(
          { workspaceId: target.workspaceId, runId: target.runId },
          "stopped reading a run's NetworkTables for a coach's look: its simulator sent more than a look reads",
        ),
      );
      this.readers.set(target.runId, reader);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([reader.ready, new Promise((resolve) => (timer = setTimeout(resolve, FIRST_READ_MS)))]);
      clearTimeout(timer);
    }
    return reader.reading();
  }

  /** Closes every reader (the server stops). */
  close(): void {
    clearInterval(this.sweep);
    for (const reader of this.readers.values()) reader.close();
    this.readers.clear();
  }

  /** How many readers are open (for tests). */
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
