/**
 * The Simulator view: every NetworkTables topic the running simulator publishes, with its live
 * value (the robot's pose, its mode, its SmartDashboard values, the time), from the extension's
 * NetworkTables client (telemetry.ts). Shown while a run is running; the values refresh a few
 * times a second, whatever rate the simulator publishes at.
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

export class SimulatorView implements vscode.TreeDataProvider<string>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<string | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly telemetry: Telemetry;
  private readonly listening: vscode.Disposable;
  private connected = false;
  private refresh: ReturnType<typeof setTimeout> | undefined;
  private message = 'No simulator: press Run.';

  constructor(telemetry: Telemetry) {
    this.telemetry = telemetry;
    let linked = telemetry.connected;
    this.listening = telemetry.onChange(() => {
      // The connection's own changes (a value does not say the run still runs: refresh does).
      if (telemetry.connected !== linked) {
        linked = telemetry.connected;
        this.connected = linked;
        if (!linked) this.message = 'Waiting for the simulator…';
      }
      this.schedule();
    });
  }

  /** Subscribes to every topic of the running simulator (once; the client reconnects by itself). */
  connect(): void {
    this.message = 'Connecting to the simulator…';
    this.telemetry.connect();
    this.schedule();
  }

  /** No run any more: what was shown stays, marked as the last values. */
  disconnected(reason: string): void {
    this.message = reason;
    this.connected = false;
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
      const item = new vscode.TreeItem(this.message);
      item.iconPath = new vscode.ThemeIcon('info');
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
    if (parent !== undefined) return [];
    const names = [...this.telemetry.values.keys()].filter((name) => !name.includes('/.')).toSorted();
    return this.connected && names.length > 0 ? names : ['', ...names];
  }

  dispose(): void {
    this.listening.dispose();
    this.changed.dispose();
  }
}
