/**
 * The Driver Station's link to the robot: WPILib's HALSim WebSocket (halsim_ws_server's protocol),
 * reached through the control plane at `<editor>/.cp/halsim/wpilibws`, from the extension host (the
 * browser's web worker, on the editor's origin, with the student's own credentials, like the
 * NetworkTables client). It holds the Driver Station's state (ds-state.ts) and keeps the robot told:
 *
 * - on every change (enable, disable, mode, estop) at once, and as a heartbeat: a `DriverStation`
 *   message with the whole state and `>new_data` at least every HEARTBEAT_MS (the control plane
 *   disables the robot after 400 ms without a message);
 * - joystick 0 (an Xbox controller: ds-input.ts) every INPUT_MS while an input is live (the Driver
 *   Station focused, or a gamepad in use) and once when it changes otherwise, each followed by the
 *   `DriverStation` message whose `>new_data` makes it visible to robot code: 2 messages per 25 ms,
 *   80 a second, within the control plane's 100 a second with room for the student's own clicks;
 * - connected only while a run is running (`setRun`); a connection lost is retried, and starts
 *   disabled (nothing here ever enables but `enable`); closed with 4001 ("Another tab took over
 *   driving"), it stays closed until `driveFromHere`.
 *
 * No VS Code here: the same class runs in Node's tests (its global WebSocket).
 */
import {
  disable,
  driverStationMessage,
  enable,
  estop,
  INITIAL,
  joystickMessage,
  robotDsState,
  setLink,
  setMode,
  setRun,
  type DsState,
  type HalSimMessage,
  type Mode,
  type RobotDsState,
} from './ds-state.ts';
import { NEUTRAL, sameInput, type XboxState } from './ds-input.ts';

/** The longest the robot goes without a DriverStation message from here. */
export const HEARTBEAT_MS = 50;
/** How often joystick 0 is sent while an input is live (40 a second). */
export const INPUT_MS = 25;
/** Waits before connecting again after a lost connection (the last repeats). */
const RETRY_MS = [250, 500, 1000, 2000];
/** The close code of the control plane when another tab of the workspace takes over driving. */
export const TAKEN_OVER = 4001;

/** What the Driver Station is told after each change. */
export interface LinkUpdate {
  state: DsState;
  /** The robot's own report of its Driver Station state (null until it sent one on this connection). */
  robot: RobotDsState | null;
  /** Why the connection is as it is, for the student (the close reason), or null. */
  detail: string | null;
}

export class DriverStationLink {
  private readonly url: string;
  private readonly onUpdate: (update: LinkUpdate) => void;
  private state: DsState = INITIAL;
  private robot: RobotDsState | null = null;
  private detail: string | null = null;
  private socket: WebSocket | undefined;
  private retry: ReturnType<typeof setTimeout> | undefined;
  private retries = 0;
  private ticker: ReturnType<typeof setInterval> | undefined;
  private input: XboxState = NEUTRAL;
  private inputLive = false;
  private sentInput: XboxState | null = null;
  private lastDsAt = 0;
  private disposed = false;

  /** `url`: the HALSim WebSocket's address (ws: or wss:). */
  constructor(url: string, onUpdate: (update: LinkUpdate) => void) {
    this.url = url;
    this.onUpdate = onUpdate;
  }

  get current(): DsState {
    return this.state;
  }

  /** The running run (null: none): connects while one runs, closes when none does. */
  setRun(runId: string | null): void {
    const another = runId !== this.state.runId;
    this.change(setRun(this.state, runId, Date.now()));
    // Another run is another robot: a connection to the last one goes.
    if (another) this.close();
    if (this.state.link === 'taken-over') return;
    if (runId === null) this.change(setLink(this.state, 'no-run', Date.now()), null);
    else if (!this.socket && !this.retry) this.connect();
  }

  enable(): void {
    this.change(enable(this.state, Date.now()));
  }

  disable(): void {
    this.change(disable(this.state, Date.now()));
  }

  setMode(mode: Mode): void {
    this.change(setMode(this.state, mode, Date.now()));
  }

  estop(): void {
    this.change(estop(this.state, Date.now()));
  }

  /** After another tab took over: drive from here again (that tab is closed in turn, and the robot starts disabled). */
  driveFromHere(): void {
    if (this.state.link !== 'taken-over') return;
    this.change(setLink(this.state, this.state.runId === null ? 'no-run' : 'lost', Date.now()), null);
    if (this.state.runId !== null) this.connect();
  }

  /** Joystick 0 now; `live`: an input is in use (the Driver Station focused, a gamepad), sent continuously. */
  setInput(input: XboxState, live: boolean): void {
    this.input = input;
    this.inputLive = live;
  }

  dispose(): void {
    this.disposed = true;
    this.close();
  }

  private connect(): void {
    if (this.disposed || this.socket) return;
    clearTimeout(this.retry);
    this.retry = undefined;
    this.change(setLink(this.state, 'connecting', Date.now()));
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.addEventListener('open', () => {
      if (this.socket !== socket) return;
      this.retries = 0;
      this.robot = null;
      this.sentInput = null;
      this.change(setLink(this.state, 'connected', Date.now()), null);
      this.ticker = setInterval(() => this.tick(), INPUT_MS);
      this.tick();
    });
    socket.addEventListener('message', (event: MessageEvent) => {
      if (this.socket !== socket || typeof event.data !== 'string') return;
      const robot = robotDsState(event.data);
      if (!robot) return;
      this.robot = { ...this.robot, ...robot };
      this.update();
    });
    socket.addEventListener('close', (event: CloseEvent) => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      clearInterval(this.ticker);
      this.ticker = undefined;
      this.robot = null;
      if (event.code === TAKEN_OVER) return this.change(setLink(this.state, 'taken-over', Date.now()), event.reason || 'Another tab took over driving.');
      this.change(setLink(this.state, this.state.runId === null ? 'no-run' : 'lost', Date.now()), event.reason || null);
      if (this.state.runId !== null && !this.disposed) {
        const wait = RETRY_MS[Math.min(this.retries++, RETRY_MS.length - 1)]!;
        this.retry = setTimeout(() => {
          this.retry = undefined;
          this.connect();
        }, wait);
      }
    });
  }

  private close(): void {
    clearTimeout(this.retry);
    this.retry = undefined;
    clearInterval(this.ticker);
    this.ticker = undefined;
    const socket = this.socket;
    this.socket = undefined;
    this.robot = null;
    if (!socket) return;
    // Disabled first, then gone (the control plane and the robot disable it on the close too).
    if (socket.readyState === WebSocket.OPEN) this.send(socket, driverStationMessage(disable(this.state, Date.now())));
    socket.close(1000, 'Driver Station closed');
  }

  /** The heartbeat and the joystick (every INPUT_MS while connected). */
  private tick(): void {
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    const now = Date.now();
    const input = this.inputLive || this.sentInput === null || !sameInput(this.input, this.sentInput);
    if (input) {
      this.send(socket, joystickMessage(0, this.input));
      this.sentInput = this.input;
    }
    if (input || now - this.lastDsAt >= HEARTBEAT_MS) this.sendState(socket);
  }

  private sendState(socket: WebSocket): void {
    this.lastDsAt = Date.now();
    this.send(socket, driverStationMessage(this.state));
  }

  private send(socket: WebSocket, message: HalSimMessage): void {
    socket.send(JSON.stringify(message));
  }

  /** A new state (and why the link is as it is, when given): told to the robot at once when it changed what the robot sees, and to the page. */
  private change(next: DsState, detail?: string | null): void {
    const before = JSON.stringify(driverStationMessage(this.state));
    this.state = next;
    if (detail !== undefined) this.detail = detail;
    if (this.socket?.readyState === WebSocket.OPEN && JSON.stringify(driverStationMessage(next)) !== before) this.sendState(this.socket);
    this.update();
  }

  private update(): void {
    if (!this.disposed) this.onUpdate({ state: this.state, robot: this.robot, detail: this.detail });
  }
}
