/**
 * The Driver Station's side that holds the connection to the robot, wherever its page is shown: the
 * editor's panel (driver-station.ts, in the extension host) and the workspace page's own Driver
 * Station (webview/standalone.ts, in the control plane's page at `<editor>/.cp/driver-station`).
 * The page (webview/driver-station.ts) shows and asks; the connection to the robot (halsim.ts) and
 * every rule (ds-state.ts) live here, and the robot is told the truth every 50 ms however slow
 * the page is. Opened, it connects while a run runs and never enables by itself; closed, the
 * connection is closed (the robot is disabled).
 *
 * What differs between the two places is the host's (DriverStationHost): how a message reaches the
 * page, where the student's keys and graphs are kept, how a run is started.
 */
import { isActive, type RunView } from './classroom.ts';
import { choosers, fields } from './dashboard.ts';
import { keyMap } from './ds-input.ts';
import { enableRefusal } from './ds-state.ts';
import type { FromPage, ToPage } from './ds-view.ts';
import { graphable, graphSettings, plotted, type GraphSettings, type SampleBatch } from './graphs.ts';
import { DriverStationLink, type LinkUpdate } from './halsim.ts';
import type { Telemetry } from './telemetry.ts';

/** The most often the page gets the robot's choosers and field. */
const DASHBOARD_MS = 50;

/** Where the Driver Station is shown: what the core needs of it. */
export interface DriverStationHost {
  /** Sends `message` to the page (it may arrive later: as a message between frames does). */
  post(message: ToPage): void;
  /** The student's key setting as it is now (ds-input.ts keyMap reads it; anything else gives the defaults). */
  keySetting(): unknown;
  /** The student's graphs as remembered (graphs.ts graphSettings reads them). */
  rememberedGraphs(): unknown;
  /** Remembers the student's graphs. */
  rememberGraphs(settings: GraphSettings): void;
  /** Starts a run (the page's Run). */
  run(): void;
  /** Shows where the student changes the keys. */
  changeKeys(): void;
  /** The connection's state changed (undefined: closed). */
  changed(update: LinkUpdate | undefined): void;
}

export class DriverStationCore {
  private readonly halsimUrl: string;
  private readonly telemetry: Telemetry;
  private readonly host: DriverStationHost;
  private link: DriverStationLink | undefined;
  private last: LinkUpdate | undefined;
  private run: RunView | null = null;
  private readonly subscriptions: { dispose(): void }[];
  private dashboardTimer: ReturnType<typeof setTimeout> | undefined;
  private graphs: GraphSettings;
  /** The graphed topics' samples not yet sent to the page (sent with the next dashboard, DASHBOARD_MS at most). */
  private readonly samples = new Map<string, SampleBatch>();
  private wasConnected = false;

  /** `editorBase`: the editor's address (ending in a slash); the HALSim WebSocket is under it. */
  constructor(editorBase: string, telemetry: Telemetry, host: DriverStationHost) {
    this.halsimUrl = new URL('.cp/halsim/wpilibws', editorBase).href.replace(/^http/, 'ws');
    this.telemetry = telemetry;
    this.host = host;
    this.graphs = graphSettings(host.rememberedGraphs());
    this.subscriptions = [
      telemetry.onValue((name, type, value) => this.graphs.topics.includes(name) && this.sample(name, plotted(type, value))),
      telemetry.onChange(() => {
        // The robot gone: a gap in every graph.
        if (this.wasConnected && !telemetry.connected) for (const name of this.graphs.topics) this.sample(name, null);
        this.wasConnected = telemetry.connected;
        this.scheduleDashboard();
      }),
    ];
  }

  /** The state of the connection to the robot (undefined while the Driver Station is closed or has not heard yet). */
  get state(): LinkUpdate | undefined {
    return this.last;
  }

  /** Whether the Driver Station is open (a page shows it). */
  get isOpen(): boolean {
    return this.link !== undefined;
  }

  /** A page shows the Driver Station: connected while a run runs, disabled. */
  open(): void {
    if (this.link) return;
    const link = new DriverStationLink(this.halsimUrl, (update) => {
      if (this.link !== link) return;
      this.last = update;
      this.postState();
      this.host.changed(update);
    });
    this.link = link;
    link.setRun(this.run?.status === 'running' ? this.run.id : null);
  }

  /** No page shows it any more: the connection is closed (the robot disabled). */
  close(): void {
    this.link?.dispose();
    this.link = undefined;
    this.last = undefined;
    clearTimeout(this.dashboardTimer);
    this.dashboardTimer = undefined;
    this.samples.clear();
    this.host.changed(undefined);
  }

  /** The workspace's run as last seen: the Driver Station connects while it runs. */
  setRun(run: RunView | null | undefined): void {
    this.run = run ?? null;
    this.link?.setRun(run?.status === 'running' ? run.id : null);
  }

  /** The student's key setting changed: the page shows the new keys. */
  keysChanged(): void {
    this.postState();
  }

  /** What the page asks for. */
  onPage(message: FromPage): void {
    const link = this.link;
    if (!link) return;
    switch (message.type) {
      case 'ready':
        this.host.post({ type: 'graphs', settings: this.graphs });
        this.sampleNow(this.graphs.topics);
        this.postState();
        this.postDashboard();
        return;
      case 'graphs': {
        const before = this.graphs.topics;
        this.graphs = graphSettings(message.settings);
        this.host.rememberGraphs(this.graphs);
        for (const name of this.samples.keys()) if (!this.graphs.topics.includes(name)) this.samples.delete(name);
        // A topic just picked starts at its value now.
        this.sampleNow(this.graphs.topics.filter((name) => !before.includes(name)));
        return this.postDashboard();
      }
      case 'enable':
        return link.enable();
      case 'disable':
        return link.disable();
      case 'mode':
        return link.setMode(message.mode);
      case 'estop':
        return link.estop();
      case 'driveFromHere':
        return link.driveFromHere();
      case 'run':
        return this.host.run();
      case 'input':
        return link.setInput(message.input, message.live);
      case 'padLost':
        link.disable();
        return this.host.post({ type: 'notice', text: `The gamepad "${message.id}" was unplugged: the robot is disabled.` });
      case 'choose':
        return void this.telemetry.publishString(`${message.table}/selected`, message.value).catch((error: unknown) => {
          this.host.post({ type: 'notice', text: `Your pick was not sent: ${error instanceof Error ? error.message : String(error)}` });
        });
      case 'keys':
        return this.host.changeKeys();
    }
  }

  private postState(): void {
    const update = this.last;
    if (!update || !this.link) return;
    const { keys, problems } = keyMap(this.host.keySetting());
    this.host.post({
      type: 'state',
      ds: update.state,
      robot: update.robot,
      detail: update.detail,
      refusal: enableRefusal(update.state),
      runActive: isActive(this.run),
      keys,
      keyProblems: problems,
    });
  }

  private scheduleDashboard(): void {
    if (!this.link) return;
    this.dashboardTimer ??= setTimeout(() => {
      this.dashboardTimer = undefined;
      this.postDashboard();
    }, DASHBOARD_MS);
  }

  private postDashboard(): void {
    // The robot now running's own values; none running, the last ones (shown as such).
    const live = this.telemetry.connected;
    const values = live ? this.telemetry.current : new Map([...this.telemetry.values].map(([name, topic]) => [name, topic.value]));
    const samples = [...this.samples.values()];
    this.samples.clear();
    this.host.post({ type: 'dashboard', live, choosers: choosers(values), fields: fields(values), graphable: graphable(this.telemetry.values), samples });
  }

  /** A graphed topic's value received now (null: none, a gap); kept for the page only while it is open. */
  private sample(name: string, value: number | null): void {
    if (!this.link) return;
    let batch = this.samples.get(name);
    if (!batch) this.samples.set(name, (batch = { name, times: [], values: [] }));
    batch.times.push(Date.now());
    batch.values.push(value);
  }

  /** The robot's values now of `names`, as their graphs' first samples (those it has: NetworkTables sends a value again only when it changes). */
  private sampleNow(names: string[]): void {
    if (!this.telemetry.connected) return;
    for (const name of names) {
      const topic = this.telemetry.values.get(name);
      if (topic && this.telemetry.current.has(name)) this.sample(name, plotted(topic.type, topic.value));
    }
  }

  dispose(): void {
    this.close();
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}
