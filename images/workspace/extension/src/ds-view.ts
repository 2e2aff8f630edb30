/**
 * The messages between the Driver Station's page (webview/driver-station.ts, in the webview's
 * frame) and the extension (driver-station.ts, in the extension host, which holds the connection to
 * the robot). The page only shows and asks; every rule is applied in the extension (ds-state.ts).
 */
import type { ChooserView, FieldView } from './dashboard.ts';
import type { GraphSettings, GraphTopic, SampleBatch } from './graphs.ts';
import type { KeyMap, XboxState } from './ds-input.ts';
import type { DsState, Mode, RobotDsState } from './ds-state.ts';

/** What the page shows of the Driver Station. */
export interface StateMessage {
  type: 'state';
  ds: DsState;
  robot: RobotDsState | null;
  /** Why the connection is as it is (the control plane's close reason), or null. */
  detail: string | null;
  /** Why Enable would be refused now, or null. */
  refusal: string | null;
  /** A run is building or running (Run would be refused). */
  runActive: boolean;
  keys: KeyMap;
  /** What of the student's key setting could not be used. */
  keyProblems: string[];
}

/** The robot's choosers, fields and graphable topics, from NetworkTables (sent when they change, at most DASHBOARD_MS apart). */
export interface DashboardMessage {
  type: 'dashboard';
  /** NetworkTables is connected (otherwise what is shown are the last values of the last run). */
  live: boolean;
  choosers: ChooserView[];
  fields: FieldView[];
  /** Every numeric and boolean topic: what the student may graph. */
  graphable: GraphTopic[];
  /** The samples of the graphed topics received since the last message. */
  samples: SampleBatch[];
}

/** The student's graphs as remembered (sent when the page is ready). */
export interface GraphsMessage {
  type: 'graphs';
  settings: GraphSettings;
}

/** Something the student asked for went wrong (a chooser's pick not published, say). */
export interface NoticeMessage {
  type: 'notice';
  text: string;
}

export type ToPage = StateMessage | DashboardMessage | GraphsMessage | NoticeMessage;

export type FromPage =
  | { type: 'ready' }
  | { type: 'enable' }
  | { type: 'disable' }
  | { type: 'mode'; mode: Mode }
  | { type: 'estop' }
  | { type: 'driveFromHere' }
  | { type: 'run' }
  /** Joystick 0 as the keyboard and pad make it; `live`: an input is in use (the page focused, or a gamepad). */
  | { type: 'input'; input: XboxState; live: boolean }
  /** The gamepad that was being used is gone: disable. */
  | { type: 'padLost'; id: string }
  | { type: 'choose'; table: string; value: string }
  /** The student changed the graphs: remembered, and the graphed topics' samples sent from now on. */
  | { type: 'graphs'; settings: GraphSettings }
  | { type: 'keys' };
