/**
 * The Driver Station's graphs: any numeric or boolean NetworkTables topic of the robot that the
 * student picks, plotted against time (the page draws them with uPlot: webview/graphs.ts). Pure:
 * which topics can be plotted, what is kept of each (a ring of samples, bounded), what a time
 * window shows of it, and the student's picks as they are remembered.
 *
 * A sample is a value and the time it reached the extension (`Date.now()`, in the browser: the page
 * shares the clock). NetworkTables sends a value when it changes, so a value holds until the next:
 * the graphs are step lines, the last value held up to the window's end. A sample without a value
 * (`null`: the connection to the robot ended) is a gap.
 */

/** The NetworkTables 4 types a graph plots (booleans as 0 and 1). */
const PLOTTED_TYPES = new Set(['double', 'float', 'int', 'boolean']);

/** The time windows the student picks from, in seconds (the page's buttons: 10 s, 30 s, 2 min). */
export const WINDOWS = [10, 30, 120] as const;
export type WindowSeconds = (typeof WINDOWS)[number];

/** The robot's loop rate: a topic changes at most this often a second (TimedRobot's 20 ms). */
export const ROBOT_HZ = 50;

/** The samples kept of each topic: the largest window at the robot's rate (2 min at 50 a second: 6000, 96 KB). */
export const SAMPLES_KEPT = Math.max(...WINDOWS) * ROBOT_HZ;

/** The most topics graphed at once (memory: MAX_GRAPHS rings of SAMPLES_KEPT in the page). */
export const MAX_GRAPHS = 8;

/** A topic that can be graphed. */
export interface GraphTopic {
  name: string;
  /** Its NetworkTables type: "double", "float", "int" or "boolean". */
  type: string;
}

/** What the student picked, remembered for the workspace. */
export interface GraphSettings {
  /** The topics graphed, in the order picked (at most MAX_GRAPHS). */
  topics: string[];
  windowSeconds: WindowSeconds;
}

export const DEFAULT_GRAPHS: GraphSettings = { topics: [], windowSeconds: 30 };

/** New samples of one topic, in time order (`values[i]` null: no value from `times[i]` on, a gap). */
export interface SampleBatch {
  name: string;
  times: number[];
  values: (number | null)[];
}

/** A topic's value as a graph plots it: a finite number, a boolean as 1 or 0; null for anything else. */
export function plotted(type: string, value: unknown): number | null {
  if (!PLOTTED_TYPES.has(type)) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The topics that can be graphed, by name: numeric and boolean ones, not a table's own metadata (a part of the name starting with "."). */
export function graphable(topics: ReadonlyMap<string, { type: string }>): GraphTopic[] {
  const found: GraphTopic[] = [];
  for (const [name, { type }] of topics) if (PLOTTED_TYPES.has(type) && !name.split('/').some((part) => part.startsWith('.'))) found.push({ name, type });
  return found.toSorted((a, b) => a.name.localeCompare(b.name));
}

/** The picks as given (stored, or from the page), made valid: at most MAX_GRAPHS distinct topic names, a window of WINDOWS; anything else the default. */
export function graphSettings(given: unknown): GraphSettings {
  if (typeof given !== 'object' || given === null) return DEFAULT_GRAPHS;
  const { topics, windowSeconds } = given as Record<string, unknown>;
  return {
    topics: Array.isArray(topics)
      ? [...new Set(topics.filter((topic): topic is string => typeof topic === 'string' && topic.startsWith('/')))].slice(0, MAX_GRAPHS)
      : [],
    windowSeconds: WINDOWS.find((seconds) => seconds === windowSeconds) ?? DEFAULT_GRAPHS.windowSeconds,
  };
}

/** The last `capacity` samples of one topic (the oldest overwritten), times in milliseconds, in the order received. */
export class SampleRing {
  private readonly times: Float64Array;
  /** NaN: no value (a gap). */
  private readonly values: Float64Array;
  /** Where the oldest sample is, and how many are kept. */
  private start = 0;
  private count = 0;
  private received = 0;

  readonly capacity: number;

  constructor(capacity: number = SAMPLES_KEPT) {
    this.capacity = capacity;
    this.times = new Float64Array(capacity);
    this.values = new Float64Array(capacity);
  }

  /** How many samples are kept. */
  get size(): number {
    return this.count;
  }

  /** How many samples were ever pushed. */
  get total(): number {
    return this.received;
  }

  /** Adds a sample (a time not before the last one's). */
  push(time: number, value: number | null): void {
    const at = (this.start + this.count) % this.capacity;
    this.times[at] = time;
    this.values[at] = value ?? Number.NaN;
    if (this.count < this.capacity) this.count++;
    else this.start = (this.start + 1) % this.capacity;
    this.received++;
  }

  /** The `index`th sample kept, oldest first. */
  private time(index: number): number {
    return this.times[(this.start + index) % this.capacity]!;
  }

  private value(index: number): number | null {
    const value = this.values[(this.start + index) % this.capacity]!;
    return Number.isNaN(value) ? null : value;
  }

  /** The latest sample, if any. */
  latest(): { time: number; value: number | null } | undefined {
    return this.count === 0 ? undefined : { time: this.time(this.count - 1), value: this.value(this.count - 1) };
  }

  /**
   * What the window from `to - seconds` to `to` (milliseconds) shows, as a step line's points:
   * x in seconds before `to` (-seconds..0), y the value (null: a gap). The value holding when the
   * window starts (the last sample before it) is drawn from its start; the last value is held to its
   * end; a value ending in a gap is held to the gap.
   */
  window(seconds: number, to: number): [number[], (number | null)[]] {
    const from = to - seconds * 1000;
    const xs: number[] = [];
    const ys: (number | null)[] = [];
    const add = (time: number, value: number | null) => {
      xs.push((time - to) / 1000);
      ys.push(value);
    };
    // The first sample after `from` (binary search: the times are in order).
    let low = 0;
    let high = this.count;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.time(middle) <= from) low = middle + 1;
      else high = middle;
    }
    let held = low > 0 ? this.value(low - 1) : null;
    if (held !== null) add(from, held);
    for (let index = low; index < this.count && this.time(index) <= to; index++) {
      const value = this.value(index);
      if (value === null && held !== null) add(this.time(index), held);
      add(this.time(index), value);
      held = value;
    }
    if (held !== null && (xs.length === 0 || xs.at(-1)! < 0)) add(to, held);
    return [xs, ys];
  }
}
