import type { DataSource } from 'typeorm';
import type { AllowlistFile } from '../allowlist/allowlist-file.ts';
import type { ChangeFeed } from '../db/changes.ts';
import { AllowlistStore } from './allowlist.ts';
import { AuditStore } from './audit.ts';
import { ClassViewStore } from './class-view.ts';
import { LookStore } from './looks.ts';
import { LessonStore } from './lessons.ts';
import { UsageStore } from './usage.ts';
import { HandoffStore } from './handoffs.ts';
import { HelpStore } from './help.ts';
import { ImportStore } from './imports.ts';
import { JoinCodeStore } from './join-codes.ts';
import { LeaderCounterStore } from './leader-counters.ts';
import { LeaseStore, type Fence } from './leases.ts';
import { RateLimitStore } from './rate-limits.ts';
import { RefusalStore } from './refusals.ts';
import { mutator } from './mutation.ts';
import { PresenceStore } from './presence.ts';
import { RunStore } from './runs.ts';
import { ServerStore } from './servers.ts';
import { SessionStore } from './sessions.ts';
import { NodeStore } from './nodes.ts';
import { ScheduledBackupStore } from './scheduled-backups.ts';
import { SignInLinkStore } from './sign-in-links.ts';
import { SettingsStore } from './settings.ts';
import { UserStore } from './users.ts';
import { WorkspaceListStore } from './workspace-list.ts';
import { WorkspaceStore } from './workspaces.ts';

export interface StoreOptions {
  db: DataSource;
  /** Where mutations announce what they changed (NOTIFY in their transaction, publish after commit). */
  changes: ChangeFeed;
  /** MAX_ACTIVE_CONTAINERS, in force while no runtime override is stored. */
  environmentCap: number;
  /** The allowlist file that `allowlist` edits. */
  allowlistFile: AllowlistFile;
  /**
   * A leader's store: every write through it (desired or observed state) checks this lease's term
   * in its transaction, so a leader that lost its lease changes nothing (see leases.ts).
   */
  fence?: Fence;
}

/** The one store every caller (API, controllers, CLI) reads and changes state through. */
export interface Store {
  workspaces: WorkspaceStore;
  /** The admin's views of the class (a page of workspaces, the overview's counts), computed by PostgreSQL, and the stats behind them. */
  workspaceList: WorkspaceListStore;
  runs: RunStore;
  users: UserStore;
  settings: SettingsStore;
  allowlist: AllowlistStore;
  audit: AuditStore;
  sessions: SessionStore;
  /** One-time links: the first-run setup link and operators' sign-in links. */
  links: SignInLinkStore;
  /** The control-plane processes that run now (the CLI asks whether one will act, and where it is). */
  servers: ServerStore;
  /** The reconciler's lease: which replica leads, under which term. */
  leases: LeaseStore;
  /** Host mode's one-time hand-over codes (any replica redeems what any issued). */
  handoffs: HandoffStore;
  /** The rate limits' counters, shared by every replica. */
  rateLimits: RateLimitStore;
  /** Students refused at the cap in the last hour (the coach's panel), from every replica. */
  refusals: RefusalStore;
  /** What the leader found (orphans), for every replica's panel. */
  leaderCounters: LeaderCounterStore;
  /** The stored backups the schedule made, for its next pass and its pruning. */
  scheduledBackups: ScheduledBackupStore;
  /** The swarm nodes an operator asked to drain. */
  nodes: NodeStore;
  /** Imports of teams' projects into workspaces: their progress and how they ended, for every replica. */
  imports: ImportStore;
  /** The help queue: students' raised hands, taken and resolved by coaches. */
  help: HelpStore;
  /** Who is at each workspace now (editors, pages, NetworkTables, a Driver Station), as each replica's proxy sees it. */
  presence: PresenceStore;
  /** The class view's read: every student with their workspace, run in progress, last result and help request. */
  classView: ClassViewStore;
  /** The usage report: per student, the hours their workspace ran, their runs and failed builds, when last seen. */
  usage: UsageStore;
  /** Coaches' read-only looks at students' workspaces: who looks where now. */
  looks: LookStore;
  /** Join codes and their guests (JOIN_CODES=on). */
  joinCodes: JoinCodeStore;
  /** Lessons handed out to students' homes and collected from them. */
  lessons: LessonStore;
  /** The change feed the store announces to (and callers subscribe to). */
  changes: ChangeFeed;
  /** Resolves when the database answers a trivial query (a function of its own: it may be passed around). */
  ping: () => Promise<void>;
}

/** The writes only controllers make: the observed half of workspaces and runs, and the finalizer. */
interface ControllerWrites {
  workspaces: 'writeStatus' | 'finalizeDeleted' | 'forgetRetired' | 'moveHome';
  workspaceList: 'recordStats' | 'recordHomeDisk';
  runs: 'recordSimEndpoint' | 'markReady' | 'finish' | 'appendOutput';
  nodes: 'record';
}

/**
 * The store as the HTTP surface (api/) and the CLI get it: every read and every desired-state
 * change, none of the controllers' writes (calling one there fails tsc).
 */
export type SurfaceStore = Omit<Store, 'workspaces' | 'workspaceList' | 'runs' | 'nodes'> & {
  nodes: Omit<NodeStore, ControllerWrites['nodes']>;
  workspaces: Omit<WorkspaceStore, ControllerWrites['workspaces']>;
  workspaceList: Omit<WorkspaceListStore, ControllerWrites['workspaceList']>;
  runs: Omit<RunStore, ControllerWrites['runs']>;
};

/**
 * Creates the store: one part per noun, all of whose desired-state changes go through one mutation
 * helper (transaction, audit entry, NOTIFY, publish after commit; see mutation.ts).
 */
export function createStore(options: StoreOptions): Store {
  const { db, changes } = options;
  const { fence } = options;
  const mutate = mutator(db, changes, fence);
  const rateLimits = new RateLimitStore(db);
  return {
    workspaces: new WorkspaceStore(db, mutate, changes, options.environmentCap, fence),
    workspaceList: new WorkspaceListStore(db, options.environmentCap, fence),
    runs: new RunStore(db, mutate, changes, fence),
    users: new UserStore(db, mutate),
    settings: new SettingsStore(db, mutate, options.environmentCap),
    allowlist: new AllowlistStore(options.allowlistFile, mutate),
    audit: new AuditStore(db, mutate),
    sessions: new SessionStore(db),
    links: new SignInLinkStore(db, mutate),
    servers: new ServerStore(db),
    leases: new LeaseStore(db),
    handoffs: new HandoffStore(db),
    rateLimits,
    refusals: new RefusalStore(db, changes),
    leaderCounters: new LeaderCounterStore(db, fence),
    scheduledBackups: new ScheduledBackupStore(db, fence),
    nodes: new NodeStore(db, mutate, fence),
    imports: new ImportStore(db),
    help: new HelpStore(db, mutate, rateLimits),
    presence: new PresenceStore(db, changes),
    classView: new ClassViewStore(db),
    usage: new UsageStore(db),
    looks: new LookStore(db, mutate, rateLimits),
    joinCodes: new JoinCodeStore(db, mutate, rateLimits),
    lessons: new LessonStore(db, mutate),
    changes,
    ping: async () => void (await db.query('SELECT 1')),
  };
}
