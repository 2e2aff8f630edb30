/**
 * The running simulator's NetworkTables 4, one client for the whole extension (ntcore-ts-client over
 * the control plane: nt4-socket.ts): every topic and its latest value, for the Simulator view and the
 * Driver Station (its choosers, fields and graphs), and what the Driver Station publishes (a chooser's pick).
 */
import { NetworkTables, NetworkTablesTypeInfos, type NetworkTablesTopic } from 'ntcore-ts-client';

/** How many times (50 ms apart) a publication's answer is looked for after the first announcement. */
const PUBLISHER_LOOKS = 40;
/**
 * How often the robot sends a changed value, in seconds: every change of its 20 ms loop, for the
 * graphs (NetworkTables 4's default is 0.1 s: WPILib's server would send a fifth of them).
 */
const PERIODIC_SECONDS = 0.02;

/** A topic's type (NT4's name: "double", "string[]", ...) and latest value. */
export interface TopicValue {
  type: string;
  value: unknown;
}

export class Telemetry {
  private nt: NetworkTables | undefined;
  private readonly topics = new Map<string, TopicValue>();
  /** The values received on the current connection (what the robot now running says). */
  private readonly fresh = new Map<string, unknown>();
  private readonly listeners = new Set<() => void>();
  private readonly valueListeners = new Set<(name: string, type: string, value: unknown) => void>();
  /**
   * The topics published from here, each with its publication on the connection (`connection`) it
   * was made on: one at a time (a second would be refused), and made again on a new connection.
   */
  private readonly publishers = new Map<string, { topic: NetworkTablesTopic<string>; published: Promise<unknown> | null; connection: number }>();
  private isConnected = false;
  /** Counts the connections made (a new run's simulator is a new connection). */
  private connections = 0;

  /** Every topic announced with a value so far (kept across reconnects: the last values of the last run). */
  get values(): ReadonlyMap<string, TopicValue> {
    return this.topics;
  }

  /** The values the simulator connected now has sent (empty while none is). */
  get current(): ReadonlyMap<string, unknown> {
    return this.fresh;
  }

  get connected(): boolean {
    return this.isConnected;
  }

  /** Subscribes to every topic of the running simulator (once; the client reconnects by itself). */
  connect(): void {
    if (this.nt) return;
    // The host and port are placeholders: nt4-socket.ts rewrites the address.
    this.nt = NetworkTables.getInstanceByURI('classroom-simulator', 5810);
    this.nt.addRobotConnectionListener((connected) => {
      if (connected && !this.isConnected) this.connections++;
      // Cleared when the connection goes (the client may tell of a new one after its first values).
      if (!connected) this.fresh.clear();
      this.isConnected = connected;
      this.changed();
    }, true);
    this.nt.createPrefixTopic('/').subscribe(
      (value, params) => {
        this.topics.set(params.name, { type: params.type, value });
        this.fresh.set(params.name, value);
        for (const listener of this.valueListeners) listener(params.name, params.type, value);
        this.changed();
      },
      { periodic: PERIODIC_SECONDS },
    );
  }

  /** Calls `listener` after each change (a value, the connection). */
  onChange(listener: () => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** Calls `listener` with each value received, as it is received (before the listeners of onChange). */
  onValue(listener: (name: string, type: string, value: unknown) => void): { dispose(): void } {
    this.valueListeners.add(listener);
    return { dispose: () => this.valueListeners.delete(listener) };
  }

  /**
   * Publishes a string topic's value (a chooser's `selected`), as a dashboard does: published once
   * per connection, then its value set. (The client's own publishing again after a reconnect reuses
   * the publication's id, which it then refuses itself: a new connection gets a new publication.)
   */
  async publishString(name: string, value: string): Promise<void> {
    if (!this.nt) throw new Error('The simulator is not running.');
    let publisher = this.publishers.get(name);
    if (!publisher) {
      publisher = { topic: this.nt.createTopic<string>(name, NetworkTablesTypeInfos.kString), published: null, connection: this.connections };
      this.publishers.set(name, publisher);
    }
    const { topic } = publisher;
    if (publisher.connection !== this.connections) Object.assign(publisher, { published: null, connection: this.connections });
    publisher.published ??= topic.publish();
    try {
      await publisher.published;
      // The client takes any announcement of the name as the answer, and marks itself the publisher
      // only on the one with its pubuid: a server that announced the new topic to the client's
      // subscription first sends that one just after.
      for (let look = 0; !topic.publisher && look < PUBLISHER_LOOKS; look++) await new Promise((resolve) => setTimeout(resolve, 50));
      if (!topic.publisher) throw new Error(`the simulator did not take ${name}`);
    } catch (error) {
      // Not announced back in time (the simulator did not answer): the next pick publishes again.
      publisher.published = null;
      throw error;
    }
    topic.setValue(value);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
