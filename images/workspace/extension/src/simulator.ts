/**
 * The Simulator view: every NetworkTables topic the running simulator publishes, with its live
 * value (the robot's pose, its mode, its SmartDashboard values, the time), through ntcore-ts-client
 * over the control plane (nt4-socket.ts). Shown while a run is running; the values refresh a few
 * times a second, whatever rate the simulator publishes at.
 */
import { NetworkTables } from 'ntcore-ts-client';
import * as vscode from 'vscode';

/** How often the view redraws at most. */
const REFRESH_MS = 200;

interface TopicValue {
  type: string;
  value: unknown;
}

/** A topic's value as one short line: numbers with up to 3 decimals, arrays in brackets. */
export function formatValue(value: unknown): string {
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : value.toFixed(3);
  if (Array.isArray(value)) return `[${value.map(formatValue).join(', ')}]`;
  if (typeof value === 'string') return JSON.stringify(value);
  return String(value);
}

export class SimulatorView implements vscode.TreeDataProvider<string> {
  private readonly changed = new vscode.EventEmitter<string | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly values = new Map<string, TopicValue>();
  private nt: NetworkTables | undefined;
  private connected = false;
  private refresh: ReturnType<typeof setTimeout> | undefined;
  private message = 'No simulator: press Run.';

  /** Subscribes to every topic of the running simulator (once; the client reconnects by itself). */
  connect(): void {
    this.message = 'Connecting to the simulator…';
    if (!this.nt) {
      // The host and port are placeholders: nt4-socket.ts rewrites the address.
      this.nt = NetworkTables.getInstanceByURI('classroom-simulator', 5810);
      this.nt.addRobotConnectionListener((connected) => {
        this.connected = connected;
        if (!connected) this.message = 'Waiting for the simulator…';
        this.schedule();
      }, true);
      this.nt.createPrefixTopic('/').subscribe((value, params) => {
        this.values.set(params.name, { type: params.type, value });
        this.schedule();
      });
    }
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
    const topic = this.values.get(name)!;
    const item = new vscode.TreeItem(name);
    item.description = formatValue(topic.value);
    item.tooltip = `${name} (${topic.type}): ${formatValue(topic.value)}`;
    item.iconPath = new vscode.ThemeIcon(name.endsWith('/Robot') ? 'location' : 'symbol-variable');
    return item;
  }

  getChildren(parent?: string): string[] {
    if (parent !== undefined) return [];
    const names = [...this.values.keys()].filter((name) => !name.includes('/.')).toSorted();
    return this.connected && names.length > 0 ? names : ['', ...names];
  }
}
