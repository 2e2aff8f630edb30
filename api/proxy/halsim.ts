/**
 * The HALSim relay: the Driver Station in a student's browser drives the robot of the workspace's
 * run through WPILib's HALSim WebSocket ("Robot Hardware Interface WebSockets API", served by the
 * robot at `ws://<its container>:HALSIM_PORT/wpilibws`), at `<editor address>/.cp/halsim/wpilibws`.
 *
 * Admission is the proxy's, exactly as for `.cp/nt4/` (index.ts: the session, the Origin, the owner
 * rule, the run, the tunnel bounds; revocation through Tunnels). What passes is not piped: the
 * browser's WebSocket ends here (the `ws` package) and this relay opens a WebSocket of its own to
 * the robot, over a connection Upstreams verified, with no header of the browser's. Then:
 * - each message of the browser is checked (validateMessage): text, at most 4 KiB, a JSON object of
 *   type DriverStation or Joystick holding only the keys a driver sets, each of its type and range.
 *   Anything else closes the browser's connection (1008 with the reason; 1009 for a frame over
 *   4 KiB, refused by `ws` at its header; 1007 for text that is no UTF-8) and disables the robot;
 *   what passes is sent on re-serialised, so the robot parses exactly what was checked;
 * - at most DRIVER_RATE messages a second pass per driver (a bucket of as many); the rest are dropped
 *   and counted;
 * - the robot's messages reach the browser unchanged (at most 64 KiB each); while the browser does
 *   not take them, the robot is not read;
 * - watchdog: a driver silent for WATCHDOG_MS (the Driver Station sends at least every 100 ms) has
 *   its robot disabled, once per silence; a driver whose connection ends, for whatever reason, has
 *   its robot disabled before the connection to the robot is closed; a new driver starts disabled;
 * - one driver per workspace on this process: a new connection takes over, the previous one is
 *   closed with 4001, and its connection to the robot is closed (and waited for, END_GRACE_MS at
 *   most) before the new one is made, since a robot takes one client at a time. Another replica's
 *   driver holds the robot's one connection; a connection through this one is then refused by the
 *   robot, and the browser is told so (1013).
 */
import type http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { ErrorObject } from 'ajv';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import { HALSIM_URI } from '../../src/docker/runtime.ts';
import { InternalError } from '../../src/errors.ts';
import { Fold } from '../../src/fold.ts';
import type { Logger } from '../../src/log.ts';
import type { Metrics } from '../../src/metrics.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { refuseUpgrade } from '../responses.ts';
import { RESERVED_PREFIX } from './host.ts';
import { observeEditor, type ProxiedPath } from './http.ts';
import type { DriverPresence, PresenceTracker } from './presence.ts';
import { UnverifiedUpstreamError, type Upstreams } from './upstreams.ts';
import { END_GRACE_MS, KEEPALIVE_MS, type Tunnel, type TunnelOwner, type Tunnels, type TunnelTarget } from './websocket.ts';

/** Where, under an editor's address, its run's robot's HALSim WebSocket is. */
const HALSIM_PATH = `${RESERVED_PREFIX}halsim/wpilibws`;

/** Whether a request target (its path; a query is ignored) is the HALSim WebSocket. */
export const isHalsimTarget = (target: string): boolean => target.split('?', 1)[0] === HALSIM_PATH;

/** The largest message a browser may send (a Driver Station's are a few hundred bytes). */
const MAX_DRIVER_MESSAGE_BYTES = 4 * 1024;

/** The largest message a robot may send (its state of every device, on connection, is a few KiB). */
const MAX_ROBOT_MESSAGE_BYTES = 64 * 1024;

/** Messages a second a driver may send on average, and in a burst (a Driver Station sends 50–60). */
const DRIVER_RATE = 100;

/**
 * How long a driver may say nothing before its robot is disabled: a network lost disables the robot
 * within 500 ms (the robot's own 20 ms loop included; bench/ds-disable.ts), and the Driver Station's
 * heartbeat (every 50 ms) may miss seven beats first.
 */
const WATCHDOG_MS = 400;

/** What disables a robot: HALSim's DriverStation message, made visible to robot code at once. */
const DISABLE_MESSAGE = JSON.stringify({ type: 'DriverStation', device: '', data: { '>enabled': false, '>new_data': true } });

/** How a driver's connection is closed by the relay: the browser's close code and reason (at most 123 bytes). */
interface CloseFrame {
  code: number;
  reason: string;
}

/** The browser's close frames the Driver Station relies on (docs/security.md). */
const CLOSES = {
  takenOver: { code: 4001, reason: 'Another tab took over driving' },
  /** The robot refused this connection: it has a driver already (through another replica). */
  robotBusy: { code: 1013, reason: 'The robot already has a driver (another tab, through another server): close it and try again.' },
  robotEnded: { code: 1001, reason: 'The robot program ended (the run stopped or restarted).' },
  runGone: { code: 1001, reason: 'The simulator of this run is not running any more: press Run again.' },
  robotTooLarge: { code: 1011, reason: 'The robot sent a message over 64 KiB; its connection was closed.' },
  robotUnreachable: { code: 1011, reason: 'The robot did not answer on its HALSim port.' },
  revoked: { code: 1008, reason: 'No longer allowed to drive this robot (signed out, or the workspace stopped or changed hands).' },
} as const satisfies Record<string, CloseFrame>;

/** Data of a DriverStation message a driver may set. */
const DRIVER_STATION_DATA = {
  '>enabled': { type: 'boolean' },
  '>autonomous': { type: 'boolean' },
  '>test': { type: 'boolean' },
  '>estop': { type: 'boolean' },
  '>fms': { type: 'boolean' },
  '>ds': { type: 'boolean' },
  '>station': { type: 'string', enum: ['red1', 'red2', 'red3', 'blue1', 'blue2', 'blue3'] },
  // Seconds left in the match period, -1 outside a match (WPILib's); an hour is past any period.
  '>match_time': { type: 'number', minimum: -1, maximum: 3600 },
  // The HAL keeps 64 bytes of it.
  '>game_data': { type: 'string', maxLength: 64 },
  '>new_data': { type: 'boolean' },
};

/** Data of a Joystick message a driver may set: a Driver Station's six joysticks' 12 axes, 32 buttons and 12 POVs at most (the HAL's). */
const JOYSTICK_DATA = {
  '>axes': { type: 'array', maxItems: 12, items: { type: 'number', minimum: -1, maximum: 1 } },
  '>buttons': { type: 'array', maxItems: 32, items: { type: 'boolean' } },
  // Degrees, or -1 when not pressed.
  '>povs': { type: 'array', maxItems: 12, items: { type: 'integer', minimum: -1, maximum: 359 } },
};

/** What a driver may send: one HALSim message, `{type, device, data}`, of these two types only. */
const DRIVER_MESSAGE = {
  type: 'object',
  discriminator: { propertyName: 'type' },
  oneOf: [
    {
      type: 'object',
      required: ['type', 'device', 'data'],
      additionalProperties: false,
      properties: {
        type: { type: 'string', const: 'DriverStation' },
        device: { type: 'string', const: '' },
        data: { type: 'object', additionalProperties: false, properties: DRIVER_STATION_DATA },
      },
    },
    {
      type: 'object',
      required: ['type', 'device', 'data'],
      additionalProperties: false,
      properties: {
        type: { type: 'string', const: 'Joystick' },
        device: { type: 'string', enum: ['0', '1', '2', '3', '4', '5'] },
        data: { type: 'object', additionalProperties: false, properties: JOYSTICK_DATA },
      },
    },
  ],
};

/** A message of a driver, checked: what to send the robot (as checked, serialised again), or why it is refused. */
export type Checked = { message: string } | { refused: string };

/** Checks one message of a driver (a WebSocket message and whether it was binary): see the file comment. */
export type MessageCheck = (data: RawData, isBinary: boolean) => Checked;

let loaded: Promise<MessageCheck> | undefined;

/** The message check, compiled at its first use (ajv takes a twentieth of a second to load, which the server's start does not wait for). */
export function messageCheck(): Promise<MessageCheck> {
  loaded ??= import('ajv').then(({ Ajv }) => {
    const validate = new Ajv({ strict: true, strictNumbers: true, discriminator: true, allErrors: false }).compile(DRIVER_MESSAGE);
    return (data, isBinary) => {
      if (isBinary) return { refused: 'HALSim messages are JSON text; a binary frame was sent.' };
      let parsed: unknown;
      try {
        parsed = JSON.parse(String(data));
      } catch {
        return { refused: 'A HALSim message must be JSON; this was not.' };
      }
      if (!validate(parsed)) return { refused: explain(validate.errors?.[0]) };
      return { message: JSON.stringify(parsed) };
    };
  });
  return loaded;
}

/** The reason a browser is given for a message refused by the check (`error`: ajv's first). */
function explain(error: ErrorObject | undefined): string {
  if (!error) return 'Not a HALSim message.';
  const where = error.instancePath === '' ? 'the message' : error.instancePath.slice(1);
  if (error.keyword === 'discriminator') return 'type must be DriverStation or Joystick.';
  if (error.keyword === 'additionalProperties') return `${where} may not hold "${String(error.params.additionalProperty)}".`;
  return `${where} ${error.message ?? 'is not valid'}.`;
}

/** Cuts a close reason to the 123 bytes a close frame holds (whole characters). */
function closeReason(text: string): string {
  let reason = text;
  while (Buffer.byteLength(reason) > 123) reason = reason.slice(0, -1);
  return reason;
}

/** Starts `socket`'s closing handshake with `code` and `reason`, and cuts it when it has not ended END_GRACE_MS later. */
function closeWithin(socket: WebSocket, code: number, reason: string): void {
  socket.close(code, reason);
  const cut = setTimeout(() => socket.terminate(), END_GRACE_MS);
  socket.once('close', () => clearTimeout(cut));
}

/** `rate` tokens a second, and as many at most: a message passes while there is one to take. */
class TokenBucket {
  private tokens: number;
  private at = performance.now();
  private readonly rate: number;

  constructor(rate: number) {
    this.rate = rate;
    this.tokens = rate;
  }

  take(now = performance.now()): boolean {
    this.tokens = Math.min(this.rate, this.tokens + ((now - this.at) * this.rate) / 1000);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}

/** What the relay needs of the proxy. */
export interface HalsimRelayDeps {
  metrics: Metrics;
  log: Logger;
  /** Verified connections to the robot (its run's live container, at HALSIM_PORT). */
  upstreams: Upstreams;
  /** Where a driver's connection counts as a tunnel (the bounds, revocation) and its sockets are ended on shutdown. */
  tunnels: Pick<Tunnels, 'hold' | 'track'>;
  /** How long the robot may take to answer the WebSocket handshake. */
  answerTimeoutMs: number;
  /** Told of each driver and of the robot's state it sets, for the class view (none: not told). */
  presence?: Pick<PresenceTracker, 'driverConnected'>;
  /**
   * How long a driver may say nothing before its robot is disabled (default WATCHDOG_MS). Only tests
   * give another: a page test on a busy machine, whose browser may stall longer than that.
   */
  watchdogMs?: number;
}

/** While a browser holds this much the relay has not sent it yet, the robot is not read. */
const BROWSER_BACKLOG_BYTES = 256 * 1024;

/** While the robot holds this much unsent, a driver's messages are dropped. */
const ROBOT_BACKLOG_BYTES = 64 * 1024;

/** The HALSim relay (see the file comment). */
export class HalsimRelay {
  private readonly deps: HalsimRelayDeps;
  private readonly server = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    maxPayload: MAX_DRIVER_MESSAGE_BYTES,
    perMessageDeflate: false,
  });
  /** The driver of each workspace on this process. */
  private readonly drivers = new Map<string, Driver>();
  /** One log line a minute per workspace and kind (a flood of refused messages is one line). */
  readonly fold = new Fold();

  constructor(deps: HalsimRelayDeps) {
    this.deps = deps;
  }

  /**
   * Takes an admitted upgrade to `target` (the robot of the run of `workspace`) for `owner`: it
   * counts as a tunnel from now on; the browser's WebSocket is accepted, the workspace's previous
   * driver on this process is handed over from, and the connection to the robot is made.
   */
  async open(
    req: http.IncomingMessage,
    socket: Duplex,
    head: Buffer,
    workspace: WorkspaceRecord,
    path: ProxiedPath,
    owner: TunnelOwner,
    target: TunnelTarget,
  ): Promise<void> {
    let driver: Driver | undefined;
    const tunnel: Tunnel = {
      user: owner.user,
      workspaceId: workspace.id,
      slug: path.slug,
      sessionId: owner.sessionId,
      admit: owner.admit,
      close: () => (driver ? driver.end(CLOSES.revoked) : socket.destroy()),
    };
    this.deps.tunnels.hold(tunnel, socket);
    let check: MessageCheck;
    try {
      check = await messageCheck();
    } catch (error) {
      this.deps.log.error({ error }, 'loading the HALSim message check failed');
      return refuseUpgrade(socket, InternalError());
    }
    if (socket.destroyed) return;
    (socket as Partial<net.Socket>).setKeepAlive?.(true, KEEPALIVE_MS);
    this.server.handleUpgrade(req, socket, head, (browser) => {
      const previous = this.drivers.get(workspace.id);
      const opened = new Driver(this.deps, this, browser, check, workspace, target, previous?.released, this.deps.presence?.driverConnected(workspace.id));
      driver = opened;
      this.drivers.set(workspace.id, opened);
      this.deps.metrics.halsimDrivers.inc();
      browser.once('close', () => {
        this.deps.metrics.halsimDrivers.dec();
        if (this.drivers.get(workspace.id) === opened) this.drivers.delete(workspace.id);
      });
      void (async () => {
        if (previous) {
          previous.end(CLOSES.takenOver);
          await previous.released;
        }
        await opened.connect();
      })();
    });
  }
}

/** One driver: a browser's WebSocket and the relay's to its robot. */
class Driver {
  /** Settles once neither this driver nor the one it took over from (nor its, ...) holds a connection to the robot (closed, failed, or never made). */
  readonly released: Promise<void>;
  private release!: () => void;
  private readonly deps: HalsimRelayDeps;
  private readonly relay: HalsimRelay;
  private readonly browser: WebSocket;
  private readonly check: MessageCheck;
  private readonly workspace: WorkspaceRecord;
  private readonly target: TunnelTarget;
  private readonly bucket = new TokenBucket(DRIVER_RATE);
  /** Fires the watchdog's time (WATCHDOG_MS unless the deps say) after the driver's last message (refreshed by each). */
  private readonly watchdog: NodeJS.Timeout;
  private robot: WebSocket | undefined;
  /** Set once the robot's WebSocket opened, and once it sent its first message (its state: it took this driver). */
  private robotOpened = false;
  private robotHeard = false;
  private robotError: NodeJS.ErrnoException | undefined;
  /** The robot's answer when it refused the handshake (an HTTP status). */
  private refusedWith: number | undefined;
  /** The robot was disabled since the driver's last message: the watchdog has nothing to do. */
  private silent = true;
  private ended = false;
  /** What the class view is told of this driver. */
  private readonly presence: DriverPresence | undefined;

  /** `before`: the released of the driver this one takes over from, if any; `presence`: what to tell the class view. */
  constructor(
    deps: HalsimRelayDeps,
    relay: HalsimRelay,
    browser: WebSocket,
    check: MessageCheck,
    workspace: WorkspaceRecord,
    target: TunnelTarget,
    before: Promise<void> | undefined,
    presence: DriverPresence | undefined,
  ) {
    this.deps = deps;
    this.presence = presence;
    this.relay = relay;
    this.browser = browser;
    this.check = check;
    this.workspace = workspace;
    this.target = target;
    const own = new Promise<void>((resolve) => (this.release = resolve));
    this.released = before ? Promise.all([own, before]).then(() => undefined) : own;
    this.watchdog = setTimeout(() => this.silence(), deps.watchdogMs ?? WATCHDOG_MS);
    browser.on('message', (data, isBinary) => this.fromDriver(data, isBinary));
    // What the browser sent broke the protocol (`ws` has closed with its code already: 1009 for a frame
    // over 4 KiB, 1007 for text that is no UTF-8, 1002): refused. Any other error is the connection's.
    browser.on('error', (error: NodeJS.ErrnoException) => (error.code?.startsWith('WS_ERR_') ? this.refuse(error.message) : this.end()));
    browser.on('close', () => this.end());
  }

  /** Connects to the robot (unless the driver left meanwhile), with a connection Upstreams verified. */
  async connect(): Promise<void> {
    if (this.ended) return this.release();
    const started = performance.now();
    let socket: net.Socket;
    try {
      socket = await this.deps.upstreams.connect(this.target.serving, 'halsim', this.target.endpoint);
    } catch (error) {
      observeEditor(this.deps.metrics, (error as NodeJS.ErrnoException).code === 'ETIMEDOUT' ? 'timeout' : 'error', started, 'halsim');
      this.release();
      if (this.ended) return;
      return this.end(error instanceof UnverifiedUpstreamError ? CLOSES.runGone : this.unreachable(error as Error));
    }
    observeEditor(this.deps.metrics, 'ok', started, 'halsim');
    this.deps.tunnels.track(socket);
    if (this.ended) {
      socket.destroy();
      return this.release();
    }
    socket.setKeepAlive(true, KEEPALIVE_MS);
    const address = socket.remoteFamily === 'IPv6' ? `[${socket.remoteAddress}]` : socket.remoteAddress;
    const robot = new WebSocket(`ws://${address}:${socket.remotePort}${HALSIM_URI}`, {
      createConnection: () => socket,
      maxPayload: MAX_ROBOT_MESSAGE_BYTES,
      perMessageDeflate: false,
      followRedirects: false,
      handshakeTimeout: this.deps.answerTimeoutMs,
    });
    this.robot = robot;
    robot.on('unexpected-response', (_request, answer) => {
      this.refusedWith = answer.statusCode;
      robot.terminate();
    });
    robot.on('open', () => {
      this.robotOpened = true;
      this.disable('connected');
    });
    robot.on('message', (data, isBinary) => this.fromRobot(data, isBinary));
    robot.on('error', (error) => (this.robotError = error));
    robot.on('close', () => {
      this.release();
      if (!this.ended) this.end(this.robotEnded());
    });
  }

  /**
   * Ends the driver once: the robot is disabled and its connection closed (in that order), and the
   * browser's connection is closed with `close` (none: the browser closed it). Either side that
   * does not finish its closing handshake within END_GRACE_MS is cut.
   */
  end(close?: CloseFrame): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.watchdog);
    const robot = this.robot;
    if (robot?.readyState === WebSocket.OPEN) {
      this.disable('ended');
      closeWithin(robot, 1000, 'The driver left');
    } else if (robot) robot.terminate();
    else this.release();
    this.presence?.gone();
    if (close && this.browser.readyState === WebSocket.OPEN) closeWithin(this.browser, close.code, closeReason(close.reason));
  }

  /** One message of the driver: refused (the connection ends), dropped, or sent to the robot. */
  private fromDriver(data: RawData, isBinary: boolean): void {
    if (this.ended) return;
    const checked = this.check(data, isBinary);
    if ('refused' in checked) return this.refuse(checked.refused);
    this.silent = false;
    this.watchdog.refresh();
    const { metrics } = this.deps;
    if (!this.bucket.take()) {
      metrics.halsimMessages.inc({ direction: 'to_robot', outcome: 'dropped_rate' });
      return this.note('rate', `dropped HALSim messages of ${this.workspace.slug}'s driver past ${DRIVER_RATE} a second`);
    }
    const robot = this.robot;
    const ready = robot?.readyState === WebSocket.OPEN && robot.bufferedAmount <= ROBOT_BACKLOG_BYTES;
    if (ready) {
      robot.send(checked.message);
      this.presence?.relayed(checked.message);
    }
    metrics.halsimMessages.inc({ direction: 'to_robot', outcome: ready ? 'relayed' : 'dropped_robot' });
  }

  /** One message of the robot, passed on unchanged; while the browser does not take them, the robot is not read. */
  private fromRobot(data: RawData, isBinary: boolean): void {
    this.robotHeard = true;
    if (this.browser.readyState !== WebSocket.OPEN) return;
    const robot = this.robot!;
    this.browser.send(data as Buffer, { binary: isBinary }, () => {
      if (robot.isPaused && this.browser.bufferedAmount <= BROWSER_BACKLOG_BYTES / 2) robot.resume();
    });
    this.deps.metrics.halsimMessages.inc({ direction: 'to_browser', outcome: 'relayed' });
    if (this.browser.bufferedAmount > BROWSER_BACKLOG_BYTES) robot.pause();
  }

  /** Refuses what the driver sent: counted, logged (folded), the browser's connection closed with 1008 and the robot disabled. */
  private refuse(reason: string): void {
    if (this.ended) return;
    this.deps.metrics.halsimMessages.inc({ direction: 'to_robot', outcome: 'rejected' });
    this.note('refused', `closed the HALSim connection of ${this.workspace.slug}'s driver and disabled its robot: ${reason}`, { reason });
    this.end({ code: 1008, reason });
  }

  /** The driver said nothing for the watchdog's time: its robot is disabled (once per silence). */
  private silence(): void {
    if (this.silent || this.ended || this.robot?.readyState !== WebSocket.OPEN) return;
    this.disable('silence');
  }

  /** Sends the robot the disable message (it is open). */
  private disable(reason: 'connected' | 'silence' | 'ended'): void {
    this.robot!.send(DISABLE_MESSAGE);
    this.presence?.disabled();
    this.silent = true;
    this.deps.metrics.halsimDisables.inc({ reason });
  }

  /** Why the robot's connection ended, as the browser is told. */
  private robotEnded(): CloseFrame {
    if (this.robotError?.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') return CLOSES.robotTooLarge;
    // A robot takes one client: one that refuses the handshake (409) or closes before it sent its state has another.
    if (this.refusedWith === 409 || (this.robotOpened && !this.robotHeard)) {
      this.note('busy', `the robot of ${this.workspace.slug}'s run refused a driver: it has one already (through another replica)`, {}, 'info');
      return CLOSES.robotBusy;
    }
    if (this.robotOpened) return CLOSES.robotEnded;
    return this.unreachable(this.robotError ?? new Error(`it answered ${this.refusedWith ?? 'nothing'}`));
  }

  /** The robot could not be reached (its port closed, a timeout, a refused handshake): logged (folded), and what the browser is told. */
  private unreachable(error: Error): CloseFrame {
    const detail = this.refusedWith === undefined ? error.message : `it answered HTTP ${this.refusedWith}`;
    this.note('unreachable', `could not connect ${this.workspace.slug}'s driver to the robot's HALSim WebSocket: ${detail}`, { error: detail });
    return CLOSES.robotUnreachable;
  }

  /** A log line about this driver, at most one a minute per workspace and `kind` (the next says how many were folded). */
  private note(kind: string, line: string, fields: Record<string, unknown> = {}, level: 'info' | 'warning' = 'warning'): void {
    const repeats = this.relay.fold.take(`${kind}:${this.workspace.id}`);
    if (repeats === undefined) return;
    this.deps.log[level]({ workspaceId: this.workspace.id, runId: this.target.serving.runId, ...fields, repeats }, line);
  }
}
