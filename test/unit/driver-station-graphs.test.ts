/**
 * The Driver Station's graphs (images/workspace/extension/src/graphs.ts): which NetworkTables topics
 * can be graphed, the student's picks made valid, the bounded ring of samples kept per topic, and
 * what a time window (following the robot, or paused) shows of it.
 */
import {
  DEFAULT_GRAPHS,
  graphable,
  graphSettings,
  MAX_GRAPHS,
  plotted,
  ROBOT_HZ,
  SAMPLES_KEPT,
  SampleRing,
  WINDOWS,
} from '../../images/workspace/extension/src/graphs.ts';

describe('plotted', () => {
  it('plots numbers as they are and booleans as 1 and 0, and nothing else', () => {
    expect(plotted('double', 1.5)).toBe(1.5);
    expect(plotted('int', -3)).toBe(-3);
    expect(plotted('float', 0.25)).toBe(0.25);
    expect(plotted('boolean', true)).toBe(1);
    expect(plotted('boolean', false)).toBe(0);
    expect(plotted('double', Number.NaN)).toBeNull();
    expect(plotted('double', null)).toBeNull();
    expect(plotted('string', '3')).toBeNull();
    expect(plotted('double[]', [1, 2, 3])).toBeNull();
  });
});

describe('graphable', () => {
  it("lists the numeric and boolean topics by name, not a table's metadata", () => {
    const topics = new Map(
      Object.entries({
        '/SmartDashboard/Speed': { type: 'double' },
        '/SmartDashboard/Has note': { type: 'boolean' },
        '/SmartDashboard/Auto choices/.controllable': { type: 'boolean' },
        '/SmartDashboard/Auto choices/active': { type: 'string' },
        '/SmartDashboard/Field/Robot': { type: 'double[]' },
        '/.schema/x': { type: 'int' },
        '/classroom/time': { type: 'double' },
        '/Arm/Encoder': { type: 'int' },
      }),
    );
    expect(graphable(topics)).toEqual([
      { name: '/Arm/Encoder', type: 'int' },
      { name: '/classroom/time', type: 'double' },
      { name: '/SmartDashboard/Has note', type: 'boolean' },
      { name: '/SmartDashboard/Speed', type: 'double' },
    ]);
  });
});

describe('graphSettings', () => {
  it('keeps valid picks, drops what is not a topic name or repeated, keeps at most MAX_GRAPHS, and a window of WINDOWS', () => {
    const names = Array.from({ length: MAX_GRAPHS + 3 }, (_, index) => `/SmartDashboard/Value ${index}`);
    expect(graphSettings({ topics: ['/a', 7, 'b', '/a', '/b'], windowSeconds: 10 })).toEqual({ topics: ['/a', '/b'], windowSeconds: 10 });
    expect(graphSettings({ topics: names, windowSeconds: 120 })).toEqual({ topics: names.slice(0, MAX_GRAPHS), windowSeconds: 120 });
    expect(graphSettings({ topics: ['/a'], windowSeconds: 45 })).toEqual({ topics: ['/a'], windowSeconds: DEFAULT_GRAPHS.windowSeconds });
    expect(graphSettings({ topics: '/a' })).toEqual({ topics: [], windowSeconds: DEFAULT_GRAPHS.windowSeconds });
    for (const nothing of [undefined, null, 'x', 3]) expect(graphSettings(nothing)).toEqual(DEFAULT_GRAPHS);
  });
});

describe('SampleRing', () => {
  it("keeps, by default, the largest window's samples at the robot's rate: 2 minutes of 50 a second", () => {
    expect(Math.max(...WINDOWS)).toBe(120);
    expect(SAMPLES_KEPT).toBe(120 * ROBOT_HZ);
    const ring = new SampleRing();
    // Three minutes of a value changing every 20 ms.
    const start = 1_000_000;
    const count = 180 * ROBOT_HZ;
    for (let index = 0; index < count; index++) ring.push(start + index * 20, index);
    expect(ring.size).toBe(SAMPLES_KEPT);
    expect(ring.total).toBe(count);
    const end = start + (count - 1) * 20;
    expect(ring.latest()).toEqual({ time: end, value: count - 1 });
    // The 2-minute window is (but for its first 20 ms) all there: its last SAMPLES_KEPT samples.
    const [xs, ys] = ring.window(120, end);
    expect(xs.length).toBe(SAMPLES_KEPT);
    expect(xs[0]).toBeCloseTo(-119.98, 6);
    expect(ys[0]).toBe(count - SAMPLES_KEPT);
    expect(xs.at(-1)).toBe(0);
    expect(ys.at(-1)).toBe(count - 1);
  });

  it('overwrites the oldest sample when full', () => {
    const ring = new SampleRing(3);
    for (const [time, value] of [
      [1000, 1],
      [2000, 2],
      [3000, 3],
      [4000, 4],
      [5000, 5],
    ] as const)
      ring.push(time, value);
    expect(ring.size).toBe(3);
    expect(ring.total).toBe(5);
    // What was overwritten is gone: the window starts with the oldest kept.
    expect(ring.window(10, 5000)).toEqual([
      [-2, -1, 0],
      [3, 4, 5],
    ]);
  });

  it('shows a window as a step line: the value holding at its start, each sample, the last value held to its end', () => {
    const ring = new SampleRing(100);
    ring.push(1000, 1);
    ring.push(5000, 2);
    ring.push(8000, 3);
    // 10 s up to 12 s: from 2 s (1 holding since 1 s), 2 at 5 s, 3 at 8 s, held to 12 s.
    expect(ring.window(10, 12_000)).toEqual([
      [-10, -7, -4, 0],
      [1, 2, 3, 3],
    ]);
    // A window before any sample shows nothing; one after every sample, the last value across it.
    expect(ring.window(10, 500)).toEqual([[], []]);
    expect(ring.window(10, 60_000)).toEqual([
      [-10, 0],
      [3, 3],
    ]);
  });

  it('shows a window that ends in the past (paused) as it was then, whatever came after', () => {
    const ring = new SampleRing(100);
    ring.push(1000, 0);
    ring.push(2000, 1);
    const paused = 3000;
    const before = ring.window(10, paused);
    ring.push(4000, 5);
    ring.push(5000, 6);
    expect(ring.window(10, paused)).toEqual(before);
    expect(before).toEqual([
      [-2, -1, 0],
      [0, 1, 1],
    ]);
    // Resumed: up to now.
    expect(ring.window(10, 6000)[1].at(-1)).toBe(6);
  });

  it('draws a gap where the robot went away (a sample without a value), the value held up to it', () => {
    const ring = new SampleRing(100);
    ring.push(1000, 2);
    ring.push(3000, null);
    ring.push(6000, 4);
    expect(ring.latest()).toEqual({ time: 6000, value: 4 });
    expect(ring.window(10, 8000)).toEqual([
      [-7, -5, -5, -2, 0],
      [2, 2, null, 4, 4],
    ]);
    // Still gone at the window's end: nothing held after the gap.
    expect(ring.window(10, 4000)).toEqual([
      [-3, -1, -1],
      [2, 2, null],
    ]);
  });
});
