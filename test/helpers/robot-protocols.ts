/**
 * Clients of a robot program's two protocols, for tests that speak to a simulator straight (the
 * workspace image's stand-in, or any image honouring the image contract): WPILib's HALSim
 * WebSocket ("Robot Hardware Interface WebSockets API": the Driver Station and joysticks in, the
 * robot's devices out) and NetworkTables 4 (what dashboards read; a chooser's pick published back).
 * Both keep everything they were sent and wait on what they receive, never on a clock: a wait
 * fails after its bound with what was received.
 */
import { decodeMulti, encode } from '@msgpack/msgpack';
import WebSocket from 'ws';

/** One HALSim message: {"type","device","data"}. */
export interface HalSimMessage {
  type: string;
  device: string;
  data: Record<string, unknown>;
}

/**
 * Resolves once `socket` is open (with 0), or with the HTTP status that refused the upgrade. Its
 * listeners must be on before: a server that speaks first may have its messages in the same read as
 * the handshake's answer, emitted before an `await` of this resolves.
 */
function opened(socket: WebSocket): Promise<number> {
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(0));
    socket.once('unexpected-response', (_request, answer) => resolve(answer.statusCode ?? 1));
    socket.once('error', reject);
  });
}

/** Resolves once `check` holds, checked now and on every `event` of `socket`; rejects after `ms` with `describe()`. */
export function waitOn(socket: WebSocket, event: 'message' | 'close', what: string, check: () => boolean, describe: () => string, ms: number): Promise<void> {
  if (check()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (error?: Error) => {
      clearTimeout(timer);
      socket.off(event, listener);
      if (error) reject(error);
      else resolve();
    };
    const listener = () => {
      if (check()) done();
    };
    const timer = setTimeout(() => done(new Error(`${what}: not within ${ms} ms; ${describe()}`)), ms);
    socket.on(event, listener);
  });
}

/** A HALSim client: the Driver Station's side of the robot's HALSim WebSocket. */
export class HalSimClient {
  /** Every message the robot sent, oldest first. */
  readonly received: HalSimMessage[] = [];
  /** The close code and reason once the connection closed. */
  closed?: { code: number; reason: string };
  /** The connection's errors (a peer that closes while a message is still being sent, say). */
  readonly errors: Error[] = [];
  readonly socket: WebSocket;

  private constructor(socket: WebSocket) {
    this.socket = socket;
    socket.on('error', (error: Error) => this.errors.push(error));
    socket.on('message', (data: Buffer, binary: boolean) => {
      if (!binary) this.received.push(JSON.parse(data.toString()) as HalSimMessage);
    });
    socket.on('close', (code: number, reason: Buffer) => {
      this.closed = { code, reason: reason.toString() };
    });
  }

  /** Connects to `url` (ws://host:port/wpilibws): the client, or the HTTP status that refused it. */
  static async connect(url: string): Promise<HalSimClient | number> {
    const client = new HalSimClient(new WebSocket(url));
    const refused = await opened(client.socket);
    return refused === 0 ? client : refused;
  }

  /** A device's state as the robot told it so far (its messages' data merged, later over earlier). */
  state(type: string, device: string): Record<string, unknown> {
    return Object.assign({}, ...this.received.filter((message) => message.type === type && message.device === device).map((message) => message.data)) as Record<
      string,
      unknown
    >;
  }

  /** Resolves once `check` holds of what the robot said (checked on each of its messages). */
  until(what: string, check: (client: HalSimClient) => boolean, ms = 15_000): Promise<void> {
    return waitOn(
      this.socket,
      'message',
      what,
      () => check(this),
      () => `the robot said: ${JSON.stringify(this.received.slice(-12))}`,
      ms,
    );
  }

  /** Sends a message as it is. */
  send(message: HalSimMessage | string): void {
    this.socket.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** Sends a DriverStation message (device ""). */
  driverStation(data: Record<string, unknown>): void {
    this.send({ type: 'DriverStation', device: '', data });
  }

  /** Sends a Joystick message for `port`. */
  joystick(port: number, data: Record<string, unknown>): void {
    this.send({ type: 'Joystick', device: String(port), data });
  }

  /** Enables the robot in teleop with joystick 0's axes `axes` (an Xbox controller: left Y is axis 1, right X axis 4), all visible at once (">new_data"). */
  driveTeleop(axes: number[]): void {
    this.driverStation({ '>enabled': true, '>autonomous': false, '>test': false, '>ds': true });
    this.joystick(0, { '>axes': axes, '>buttons': Array.from({ length: 10 }, () => false), '>povs': [-1] });
    this.driverStation({ '>new_data': true });
  }

  /** Resolves with the close code once the connection closed. */
  async whenClosed(ms = 15_000): Promise<number> {
    await waitOn(
      this.socket,
      'close',
      'the HALSim connection to close',
      () => this.closed !== undefined,
      () => 'still open',
      ms,
    );
    return this.closed!.code;
  }

  /** Closes the connection (a normal close) and waits until it is closed. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.socket.close(1000);
    await this.whenClosed();
  }
}

/** A NetworkTables 4 client subscribed to everything, keeping each topic's latest value. */
export class Nt4Client {
  /** Topic names by id, as announced. */
  readonly topics = new Map<number, string>();
  /** Every announcement received, in order: the topic's name, and the pubuid when it answers a publish of this client's. */
  readonly announcements: { name: string; pubuid?: number }[] = [];
  /** Latest value by topic name. */
  readonly values = new Map<string, unknown>();
  private nextPubuid = 1;
  readonly socket: WebSocket;

  private constructor(socket: WebSocket) {
    this.socket = socket;
    socket.on('error', () => undefined);
    socket.on('message', (data: Buffer, binary: boolean) => {
      if (!binary) {
        for (const { method, params } of JSON.parse(data.toString()) as { method: string; params: { name: string; id: number; pubuid?: number } }[]) {
          if (method === 'announce') {
            this.topics.set(params.id, params.name);
            this.announcements.push({ name: params.name, ...(params.pubuid !== undefined && { pubuid: params.pubuid }) });
          }
          if (method === 'unannounce') this.topics.delete(params.id);
        }
        return;
      }
      for (const [id, , , value] of decodeMulti(data) as Iterable<[number, number, number, unknown]>) {
        const name = this.topics.get(id);
        if (name !== undefined) this.values.set(name, value);
      }
    });
  }

  /** Connects to `url` (ws://host:port/nt/<client name>) and subscribes to every topic. */
  static async connect(url: string): Promise<Nt4Client> {
    const client = new Nt4Client(new WebSocket(url, ['v4.1.networktables.first.wpi.edu']));
    const refused = await opened(client.socket);
    if (refused !== 0) throw new Error(`NetworkTables at ${url} refused: ${refused}`);
    client.socket.send(JSON.stringify([{ method: 'subscribe', params: { topics: [''], subuid: 1, options: { prefix: true } } }]));
    return client;
  }

  /** Resolves with a topic's value once `check` holds of it (checked on each message). */
  async until<T>(name: string, check: (value: T) => boolean, ms = 15_000): Promise<T> {
    const holds = () => this.values.has(name) && check(this.values.get(name) as T);
    await waitOn(this.socket, 'message', `${name} as expected`, holds, () => `${name} is ${JSON.stringify(this.values.get(name))}`, ms);
    return this.values.get(name) as T;
  }

  /** Publishes `value` to the string topic `name` (as a dashboard picks a chooser's option). */
  publishString(name: string, value: string): void {
    const pubuid = this.nextPubuid++;
    this.socket.send(JSON.stringify([{ method: 'publish', params: { name, pubuid, type: 'string', properties: {} } }]));
    this.socket.send(encode([pubuid, 0, 4, value]));
  }

  close(): void {
    this.socket.close();
  }
}
