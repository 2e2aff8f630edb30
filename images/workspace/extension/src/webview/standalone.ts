/**
 * The workspace page's Driver Station (the control plane serves this page, bundled, at
 * `<editor>/.cp/driver-station`; the workspace page shows it in a frame when the student opens it,
 * or in a tab of its own when the editor is on another origin: host mode): the same page (driver-station.ts) and the same core (ds-core.ts) as the editor's panel, with
 * no editor around them. The core runs here, in the page: it reaches the robot's HALSim and
 * NetworkTables under the editor's address, with the browser's own credentials for it, as the
 * editor's extension does.
 *
 * What the editor gives the panel and this page cannot have: the student's key setting (the
 * standard keys apply here), the extension's memory (the graphs are kept in this browser's
 * localStorage), the run's state as it changes (looked at every POLL_MS), timers that run while
 * its tab is hidden (the robot is disabled when the tab is hidden). Closing the page (the
 * frame removed, the tab closed) closes the connection, and the control plane disables the robot.
 */
import { Classroom } from '../classroom.ts';
import { DriverStationCore } from '../ds-core.ts';
import type { FromPage, ToPage } from '../ds-view.ts';
import { setNt4Base } from '../nt4-socket.ts';
import { Telemetry } from '../telemetry.ts';
import { startPage } from './driver-station.ts';

/** How often the workspace's run is looked at (as the extension does). */
const POLL_MS = 2000;
/** Where the student's graphs are kept in this browser. */
const GRAPHS_KEY = 'classroom.driverStation.graphs';

// The page is `<editor>/.cp/driver-station`.
const base = new URL('../', location.href).href;
setNt4Base(base);
const classroom = new Classroom(base);
const telemetry = new Telemetry();
let receive: ((message: ToPage) => void) | undefined;
/** A message to the page, after what runs now (as a message between frames arrives). */
const deliver = (message: ToPage) => queueMicrotask(() => receive?.(message));
const notice = (text: string) => deliver({ type: 'notice', text });

const core = new DriverStationCore(base, telemetry, {
  post: deliver,
  keySetting: () => undefined,
  rememberedGraphs: () => {
    try {
      return JSON.parse(localStorage.getItem(GRAPHS_KEY) ?? 'null') as unknown;
    } catch {
      return null;
    }
  },
  rememberGraphs: (settings) => {
    try {
      localStorage.setItem(GRAPHS_KEY, JSON.stringify(settings));
    } catch {
      // Storage refused (full, or off in this browser): the graphs are kept for as long as the page is open.
    }
  },
  run: () => {
    classroom.run().then(
      () => refresh(),
      (error: unknown) => notice(error instanceof Error ? error.message : String(error)),
    );
  },
  changeKeys: () => notice('The keys are changed in the editor (its Driver Station\'s "Change the keys…"); this page uses the standard keys.'),
  changed: () => undefined,
});

async function refresh(): Promise<void> {
  try {
    const run = (await classroom.workspace()).run;
    if (run?.status === 'running') telemetry.connect();
    core.setRun(run);
  } catch {
    // Not answered (signed out, the control plane restarting): looked at again at the next poll.
  }
}

// Hidden (another tab in front, the window minimised), a page's timers run once a second at most:
// its heartbeat would stop and start, and the robot with it. So it is disabled, and the student told.
document.addEventListener('visibilitychange', () => {
  if (!document.hidden || !core.state?.state.enabled) return;
  core.onPage({ type: 'disable' });
  notice('Disabled: this tab was hidden, and a hidden tab cannot keep your robot going. Enable it again.');
});

core.open();
startPage({
  send: (message: FromPage) => queueMicrotask(() => core.onPage(message)),
  listen: (receiver) => (receive = receiver),
});
void refresh();
setInterval(() => void refresh(), POLL_MS);
// Framed by the workspace page, which sizes the frame to the page: only a height is said.
if (parent !== window)
  new ResizeObserver(() => parent.postMessage({ driverStationHeight: Math.ceil(document.body.getBoundingClientRect().height) }, '*')).observe(document.body);
