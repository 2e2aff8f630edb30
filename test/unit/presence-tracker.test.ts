/**
 * Issue 43: the class view's presence as the proxy counts it (api/proxy/presence.ts): the robot's
 * state read from what the HALSim relay sends (flagsAfter, modeOf), and the tracker's writes: only
 * what changed since the last write, the owner's editors only, a page for PAGE_PRESENT_MS after its
 * poll, a failed write kept for the next, everything again once the rows were lost, and this
 * replica's rows cleared at stop. The store here records the writes (the real one, on PostgreSQL,
 * is test/integration/presence.test.ts).
 */
import { jest } from '@jest/globals';
import { flagsAfter, INITIAL_FLAGS, modeOf, PAGE_PRESENT_MS, PresenceTracker } from '../../api/proxy/presence.ts';
import type { PresenceEntry } from '../../src/store/presence.ts';

const station = (data: Record<string, unknown>) => JSON.stringify({ type: 'DriverStation', device: '', data });

describe("the robot's state", () => {
  it('is set by the DriverStation keys a message holds, kept by those it lacks, and by Joystick messages', () => {
    const enabled = flagsAfter(INITIAL_FLAGS, station({ '>enabled': true, '>autonomous': true, '>test': false }));
    expect(enabled).toEqual({ enabled: true, autonomous: true, test: false });
    expect(flagsAfter(enabled, station({ '>new_data': true }))).toEqual(enabled);
    expect(flagsAfter(enabled, JSON.stringify({ type: 'Joystick', device: '0', data: { '>axes': [1] } }))).toEqual(enabled);
    expect(flagsAfter(enabled, station({ '>estop': true }))).toEqual({ ...enabled, enabled: false });
  });

  it("has WPILib's mode: autonomous, else test, else teleop", () => {
    expect(modeOf(INITIAL_FLAGS)).toBe('teleop');
    expect(modeOf({ enabled: true, autonomous: false, test: true })).toBe('test');
    expect(modeOf({ enabled: true, autonomous: true, test: true })).toBe('autonomous');
  });
});

/** A tracker over a store that records its writes (and fails them while `failing`). */
function tracked(): { tracker: PresenceTracker; writes: PresenceEntry[][]; clears: string[]; failing: { now: boolean } } {
  const writes: PresenceEntry[][] = [];
  const clears: string[] = [];
  const failing = { now: false };
  const tracker = new PresenceTracker({
    serverId: 'server',
    onError: () => undefined,
    store: {
      write: async (_server, entries) => {
        if (failing.now) throw new Error('the database is away');
        writes.push([...entries]);
      },
      clear: async (server) => void clears.push(server),
    },
  });
  return { tracker, writes, clears, failing };
}

const ws = { id: 'w1', userId: 'ada' };
const NONE = { editors: 0, pages: 0, ntClients: 0, driver: false, robotEnabled: false, robotMode: null };

describe('the tracker', () => {
  it("writes only what changed since the last write: a Driver Station's same state over many writes is written once", async () => {
    const { tracker, writes } = tracked();
    const driver = tracker.driverConnected('w1');
    await tracker.flush();
    expect(writes).toEqual([[{ workspaceId: 'w1', ...NONE, driver: true, robotMode: 'teleop' }]]);
    for (let round = 0; round < 5; round++) {
      for (let message = 0; message < 10; message++) driver.relayed(station({ '>enabled': true, '>autonomous': true }));
      await tracker.flush();
    }
    expect(writes.slice(1)).toEqual([[{ workspaceId: 'w1', ...NONE, driver: true, robotEnabled: true, robotMode: 'autonomous' }]]);
    // The relay's own disable, then the driver gone: the row goes.
    driver.disabled();
    await tracker.flush();
    driver.gone();
    await tracker.flush();
    expect(writes.slice(2)).toEqual([[{ workspaceId: 'w1', ...NONE, driver: true, robotMode: 'autonomous' }], [{ workspaceId: 'w1', ...NONE }]]);
  });

  it("counts the owner's editors only, anyone's NetworkTables clients, each once however often it is closed", async () => {
    const { tracker, writes } = tracked();
    const coachEditor = tracker.tunnelOpened(ws, 'coach', 'vscode');
    const coachNt = tracker.tunnelOpened(ws, 'coach', 'nt4');
    const adaEditor = tracker.tunnelOpened(ws, 'ada', 'vscode');
    await tracker.flush();
    expect(writes).toEqual([[{ workspaceId: 'w1', ...NONE, editors: 1, ntClients: 1 }]]);
    adaEditor();
    adaEditor();
    coachEditor();
    coachNt();
    await tracker.flush();
    expect(writes.slice(1)).toEqual([[{ workspaceId: 'w1', ...NONE }]]);
  });

  it('counts a page for PAGE_PRESENT_MS after its last poll', async () => {
    jest.useFakeTimers({ now: Date.now() });
    try {
      const { tracker, writes } = tracked();
      tracker.pageSeen('w1');
      await tracker.flush();
      jest.advanceTimersByTime(PAGE_PRESENT_MS - 1);
      tracker.pageSeen('w1');
      await tracker.flush();
      jest.advanceTimersByTime(PAGE_PRESENT_MS - 1);
      await tracker.flush();
      expect(writes).toEqual([[{ workspaceId: 'w1', ...NONE, pages: 1 }]]);
      jest.advanceTimersByTime(1);
      await tracker.flush();
      expect(writes.slice(1)).toEqual([[{ workspaceId: 'w1', ...NONE }]]);
    } finally {
      jest.useRealTimers();
    }
  });

  it('keeps what a failed write held for the next, writes everything again once the rows were lost, and clears them at stop', async () => {
    const { tracker, writes, clears, failing } = tracked();
    tracker.tunnelOpened(ws, 'ada', 'vscode');
    failing.now = true;
    await expect(tracker.flush()).rejects.toThrow('the database is away');
    failing.now = false;
    await tracker.flush();
    await tracker.flush();
    expect(writes).toEqual([[{ workspaceId: 'w1', ...NONE, editors: 1 }]]);
    tracker.rewrite();
    await tracker.flush();
    expect(writes.slice(1)).toEqual([[{ workspaceId: 'w1', ...NONE, editors: 1 }]]);
    await tracker.stop();
    expect(clears).toEqual(['server']);
    tracker.tunnelOpened(ws, 'ada', 'vscode');
    await tracker.flush();
    expect(writes).toHaveLength(2);
  });
});
