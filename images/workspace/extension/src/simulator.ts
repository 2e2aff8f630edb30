/**
 * The Simulator view: every NetworkTables topic the running simulator publishes, with its live
 * value (the robot's pose, its mode, its SmartDashboard values, the time), from the extension's
 * NetworkTables client (telemetry.ts). Live while a run is running; the values refresh a few times a
 * second, whatever rate the simulator publishes at. With no run running, the last run's values stay,
 * under a "Last run's values" row that says when that run stopped (they are not the robot's now).
 */
import * as vscode from 'vscode';
import type { Telemetry } from './telemetry.ts';

/** How often the view redraws at most. */
const REFRESH_MS = 200;

/** A topic's value as one short line: numbers with up to 3 decimals, arrays in brackets. */
export function formatValue(value: unknown): string {
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : value.toFixed(3);
  if (Array.isArray(value)) return `[${value.map(formatValue).join(', ')}]`;
  if (typeof value === 'string') return JSON.stringify(value);
  return String(value);
}

/** The tree's element of the "Last run's values" row (no topic name is empty or starts with a NUL). */
const LAST_RUN = '\u0000last-run';

/** A time as the editor states it ("10:42"). */
const clock = (date: Date) => date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

export class SimulatorView implements vscode.TreeDataProvider<string>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<string | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly telemetry: Telemetry;
  private readonly listening: vscode.Disposable;
  /** A run is running (the extension's look at the workspace says so). */
  private running = false;
  /** When the values shown stopped being live (the run they came from was seen ended). */
  private endedAt: Date | undefined;
  private refresh: ReturnType<typeof setTimeout> | undefined;
  private message = 'No simulator: press Run.';

  constructor(telemetry: Telemetry) {
    this.telemetry = telemetry;
    this.listening = telemetry.onChange(() => this.schedule());
  }

  /** The run is running: subscribes to every topic of its simulator (once; the client reconnects by itself). */
  connect(): void {
    this.running = true;
    this.telemetry.connect();
    this.schedule();
  }

  /** No run running (`reason` says what to do): what was shown stays, marked as the last run's values. */
  disconnected(reason: string): void {
    if (this.running) this.endedAt = new Date();
    this.running = false;
    this.message = reason;
    this.schedule();
  }

  private schedule(): void {
    this.refresh ??= setTimeout(() => {
      this.refresh = undefined;
      this.changed.fire(undefined);
    }, REFRESH_MS);
  }

  getTreeItem(name: string): vscode.TreeItem {
    if (name === '') {
      const waiting = this.telemetry.connected ? "Waiting for the robot's values…" : 'Connecting to the simulator…';
      const item = new vscode.TreeItem(this.running ? waiting : this.message);
      item.iconPath = new vscode.ThemeIcon('info');
      return item;
    }
    if (name === LAST_RUN) {
      const item = new vscode.TreeItem("Last run's values", vscode.TreeItemCollapsibleState.Expanded);
      item.description = this.endedAt ? `stopped at ${clock(this.endedAt)}` : 'not live';
      item.tooltip = "What the simulator published last, before its run ended: not the robot's values now. Run again for live values.";
      item.accessibilityInformation = { label: `Last run's values, ${item.description}` };
      item.iconPath = new vscode.ThemeIcon('history');
      return item;
    }
    const topic = this.telemetry.values.get(name)!;
    const item = new vscode.TreeItem(name);
    item.description = formatValue(topic.value);
    item.tooltip = `${name} (${topic.type}): ${formatValue(topic.value)}`;
    item.iconPath = new vscode.ThemeIcon(name.endsWith('/Robot') ? 'location' : 'symbol-variable');
    return item;
  }

  getChildren(parent?: string): string[] {
    const shown = (names: Iterable<string>) => [...names].filter((name) => !name.includes('/.')).toSorted();
    // The last run's: every value kept (the robot now running has sent none of them yet, or none runs).
    if (parent === LAST_RUN) return shown(this.telemetry.values.keys());
    if (parent !== undefined) return [];
    // Live: what the robot now running has sent.
    const live = this.running && this.telemetry.connected ? shown(this.telemetry.current.keys()) : [];
    if (live.length > 0) return live;
    return shown(this.telemetry.values.keys()).length > 0 ? ['', LAST_RUN] : [''];
  }

  dispose(): void {
    this.listening.dispose();
    this.changed.dispose();
  }
}
