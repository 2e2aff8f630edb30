/**
 * Who is at each workspace now, as this replica's proxy sees it, for the class view: the owner's
 * editor WebSockets (websocket.ts), the owner's workspace pages (a page that polled its workspace
 * lately: `pagePresence`), the NetworkTables tunnels to its run's simulator, and the Driver Station
 * connected through the HALSim relay (halsim.ts) with the robot's state as it was last set. Counted
 * in memory and written (PresenceStore.write) at most once every PRESENCE_FLUSH_MS, only the
 * workspaces whose presence changed since the last write: a Driver Station's 50 messages a second
 * write nothing while its robot's state stays the same. A failed write keeps its changes for the
 * next; stopping clears this replica's rows.
 */
import type { Middleware } from 'koa';
import type { PresenceEntry, PresenceStore } from '../../src/store/presence.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import type { RobotMode } from '../../src/wire/vocabulary.ts';

/** How often what changed is written (a change reaches the class view within this, plus its refresh). */
export const PRESENCE_FLUSH_MS = 300;

/** How often the workspace page polls its workspace while it is shown (api/pages/workspace-page.ts, and the editor's extension). */
export const PAGE_POLL_MS = 2000;

/** A page counts as open for two of its polls after each: one poll late or lost does not make its student go offline. */
export const PAGE_PRESENT_MS = 2 * PAGE_POLL_MS;

/** The robot's state as its driver set it: HALSim's DriverStation flags. */
export interface RobotFlags {
  enabled: boolean;
  autonomous: boolean;
  test: boolean;
}

/** A robot as a driver starts it (the relay disables it first; WPILib's robot starts in teleop). */
export const INITIAL_FLAGS: RobotFlags = { enabled: false, autonomous: false, test: false };

/**
 * The robot's flags after the relay sent it `message` (a HALSim message as the relay checked it):
 * a DriverStation message sets those of `>enabled`, `>autonomous` and `>test` it holds (an
 * emergency stop, `>estop`, disables); any other message leaves them.
 */
export function flagsAfter(flags: RobotFlags, message: string): RobotFlags {
  // Most of what a driver sends is joysticks: only a DriverStation message is read.
  if (!message.includes('"DriverStation"')) return flags;
  const parsed = JSON.parse(message) as { type: string; data: Record<string, unknown> };
  if (parsed.type !== 'DriverStation') return flags;
  const { data } = parsed;
  const next = { ...flags };
  if (typeof data['>enabled'] === 'boolean') next.enabled = data['>enabled'];
  if (typeof data['>autonomous'] === 'boolean') next.autonomous = data['>autonomous'];
  if (typeof data['>test'] === 'boolean') next.test = data['>test'];
  if (data['>estop'] === true) next.enabled = false;
  return next;
}

/** The mode of a robot with these flags, as WPILib's robot loop picks it: autonomous, else test, else teleop. */
export function modeOf(flags: RobotFlags): RobotMode {
  return flags.autonomous ? 'autonomous' : flags.test ? 'test' : 'teleop';
}

/** One Driver Station connected through the relay, as the relay tells the tracker of it. */
export interface DriverPresence {
  /** The relay sent the robot this message of the driver's (as checked). */
  relayed(message: string): void;
  /** The relay disabled the robot itself (a new driver, a silent one, one that left or was taken over from). */
  disabled(): void;
  /** The driver's connection ended. */
  gone(): void;
}

/** What is counted of one workspace on this replica. */
interface Counted {
  editors: number;
  ntClients: number;
  /** Until when (epoch ms) a page of its owner counts as open. */
  pageUntil: number;
  /** Its drivers on this replica, the newest last (a takeover overlaps the old one's end). */
  drivers: { flags: RobotFlags }[];
}

/** What an absent workspace is. */
const NOTHING: Omit<PresenceEntry, 'workspaceId'> = { editors: 0, pages: 0, ntClients: 0, driver: false, robotEnabled: false, robotMode: null };

/** The presence this replica's proxy sees (see the file comment). */
export class PresenceTracker {
  private readonly store: Pick<PresenceStore, 'write' | 'clear'>;
  private readonly serverId: string;
  private readonly intervalMs: number;
  private readonly onError: (error: unknown) => void;
  private readonly counted = new Map<string, Counted>();
  /** What was last written of each workspace (absent: nothing). */
  private readonly written = new Map<string, Omit<PresenceEntry, 'workspaceId'>>();
  /** Workspaces whose presence may have changed since the last write. */
  private dirty = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private stopped = false;

  /** Writes replica `serverId`'s presence through `store` every `intervalMs` once started; errors of those writes go to `onError`. */
  constructor(options: { store: Pick<PresenceStore, 'write' | 'clear'>; serverId: string; intervalMs?: number; onError: (error: unknown) => void }) {
    this.store = options.store;
    this.serverId = options.serverId;
    this.intervalMs = options.intervalMs ?? PRESENCE_FLUSH_MS;
    this.onError = options.onError;
  }

  /**
   * A WebSocket tunnel was opened to `workspace` for `userId`: its editor's (counted when `userId`
   * is its owner's: a coach looking does not make the student online) or its simulator's
   * NetworkTables (anyone's). Returns what to call when it closes (once; later calls do nothing).
   */
  tunnelOpened(workspace: Pick<WorkspaceRecord, 'id' | 'userId'>, userId: string, upstream: 'vscode' | 'nt4' | 'halsim'): () => void {
    const field = upstream === 'vscode' ? (workspace.userId === userId ? 'editors' : undefined) : upstream === 'nt4' ? 'ntClients' : undefined;
    if (!field) return () => undefined;
    this.of(workspace.id)[field]++;
    this.dirty.add(workspace.id);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      this.of(workspace.id)[field]--;
      this.dirty.add(workspace.id);
    };
  }

  /** A page of the workspace's owner polled it: it counts as open for PAGE_PRESENT_MS. */
  pageSeen(workspaceId: string): void {
    const counted = this.of(workspaceId);
    if (counted.pageUntil <= Date.now()) this.dirty.add(workspaceId);
    counted.pageUntil = Date.now() + PAGE_PRESENT_MS;
  }

  /** A Driver Station connected to the workspace's robot through the relay (its robot as the relay starts it: disabled). */
  driverConnected(workspaceId: string): DriverPresence {
    const driver = { flags: INITIAL_FLAGS };
    this.of(workspaceId).drivers.push(driver);
    this.dirty.add(workspaceId);
    // Only a change of enabled or of the mode is one: the same state sent again writes nothing.
    const set = (next: RobotFlags) => {
      const changed = next.enabled !== driver.flags.enabled || modeOf(next) !== modeOf(driver.flags);
      driver.flags = next;
      if (changed) this.dirty.add(workspaceId);
    };
    return {
      relayed: (message) => set(flagsAfter(driver.flags, message)),
      disabled: () => set({ ...driver.flags, enabled: false }),
      gone: () => {
        const drivers = this.of(workspaceId).drivers;
        const at = drivers.indexOf(driver);
        if (at === -1) return;
        drivers.splice(at, 1);
        this.dirty.add(workspaceId);
      },
    };
  }

  /**
   * Writes everything at the next write, not only what changed: this server's rows were lost (its
   * `servers` row was cleared by another server while this one was paused, and they went with it).
   */
  rewrite(): void {
    this.written.clear();
    for (const id of this.counted.keys()) this.dirty.add(id);
  }

  /** Writes what changed since the last write (nothing when nothing did); one write at a time. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  /** Writes every PRESENCE_FLUSH_MS until stopped. */
  start(): void {
    this.timer = setInterval(() => void this.flush().catch(this.onError), this.intervalMs);
    this.timer.unref();
  }

  /** Stops writing (what changes after is not written) and removes this replica's rows. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.flushing?.catch(() => undefined);
    await this.store.clear(this.serverId);
  }

  private async write(): Promise<void> {
    if (this.stopped) return;
    const now = Date.now();
    // A page not polled lately is closed: its workspace may have changed without a call.
    for (const [id, counted] of this.counted) if (counted.pageUntil !== 0 && counted.pageUntil <= now) this.dirty.add(id);
    if (this.dirty.size === 0) return;
    const batch = this.dirty;
    this.dirty = new Set();
    const entries: PresenceEntry[] = [];
    for (const id of batch) {
      const entry = this.entryOf(id, now);
      const last = this.written.get(id) ?? NOTHING;
      if (!same(entry, last)) entries.push({ workspaceId: id, ...entry });
    }
    if (entries.length === 0) return;
    try {
      await this.store.write(this.serverId, entries);
    } catch (error) {
      for (const id of batch) this.dirty.add(id);
      throw error;
    }
    for (const { workspaceId, ...entry } of entries) {
      if (same(entry, NOTHING)) this.written.delete(workspaceId);
      else this.written.set(workspaceId, entry);
    }
  }

  /** What is counted of a workspace now (and forgets it once it is nothing). */
  private entryOf(id: string, now: number): Omit<PresenceEntry, 'workspaceId'> {
    const counted = this.counted.get(id);
    if (!counted) return NOTHING;
    if (counted.pageUntil <= now) counted.pageUntil = 0;
    const driver = counted.drivers.at(-1)?.flags;
    const entry = {
      editors: counted.editors,
      pages: counted.pageUntil > now ? 1 : 0,
      ntClients: counted.ntClients,
      driver: driver !== undefined,
      robotEnabled: driver?.enabled ?? false,
      robotMode: driver ? modeOf(driver) : null,
    };
    if (same(entry, NOTHING)) this.counted.delete(id);
    return entry;
  }

  private of(id: string): Counted {
    let counted = this.counted.get(id);
    if (!counted) this.counted.set(id, (counted = { editors: 0, ntClients: 0, pageUntil: 0, drivers: [] }));
    return counted;
  }
}

/** Whether two entries say the same. */
function same(a: Omit<PresenceEntry, 'workspaceId'>, b: Omit<PresenceEntry, 'workspaceId'>): boolean {
  return (
    a.editors === b.editors &&
    a.pages === b.pages &&
    a.ntClients === b.ntClients &&
    a.driver === b.driver &&
    a.robotEnabled === b.robotEnabled &&
    a.robotMode === b.robotMode
  );
}

/**
 * The Koa middleware that counts the workspace page open: an answered poll of its workspace
 * (`GET /u/<slug>/api/workspace`, every PAGE_POLL_MS while the page is shown) by the workspace's
 * owner, after the student API's gate found the workspace.
 */
export function pagePresence(tracker: PresenceTracker): Middleware<{ user?: { id: string }; workspace?: WorkspaceRecord }> {
  return async (ctx, next) => {
    await next();
    const { user, workspace } = ctx.state;
    if (ctx.method === 'GET' && ctx.status === 200 && workspace && user?.id === workspace.userId && ctx.path === `/u/${workspace.slug}/api/workspace`)
      tracker.pageSeen(workspace.id);
  };
}
