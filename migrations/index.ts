import { CreateUsersAndWorkspaces1795276466000 } from './1795276466000-CreateUsersAndWorkspaces.ts';
import { CreateRuns1795276467000 } from './1795276467000-CreateRuns.ts';
import { CreateSettings1795276468000 } from './1795276468000-CreateSettings.ts';
import { CreateAuditLog1795276469000 } from './1795276469000-CreateAuditLog.ts';
import { CreateSessions1795276470000 } from './1795276470000-CreateSessions.ts';
import { TuneAuditActorFilter1795277300000 } from './1795277300000-TuneAuditActorFilter.ts';
import { AddObservedEndpoints1795278354000 } from './1795278354000-AddObservedEndpoints.ts';
import { AddHomeVolume1795425410000 } from './1795425410000-AddHomeVolume.ts';
import { CreateSignInLinks1795440000000 } from './1795440000000-CreateSignInLinks.ts';
import { CreateRunOutput1795570522000 } from './1795570522000-CreateRunOutput.ts';
import { AddRunStoppedBy1795600000000 } from './1795600000000-AddRunStoppedBy.ts';
import { AddRetiredVolumes1795700000000 } from './1795700000000-AddRetiredVolumes.ts';
import { CreateServers1795710000000 } from './1795710000000-CreateServers.ts';
import { AddStoppedBy1795720000000 } from './1795720000000-AddStoppedBy.ts';
import { CreateWorkspaceStats1795730000000 } from './1795730000000-CreateWorkspaceStats.ts';
import { CreateLeaderLease1795740000000 } from './1795740000000-CreateLeaderLease.ts';
import { CreateHandoffCodes1795750000000 } from './1795750000000-CreateHandoffCodes.ts';
import { CreateRateLimits1795760000000 } from './1795760000000-CreateRateLimits.ts';
import { CreateCapacityRefusals1795770000000 } from './1795770000000-CreateCapacityRefusals.ts';
import { CreateLeaderCounters1795780000000 } from './1795780000000-CreateLeaderCounters.ts';
import { CreateScheduledBackups1795790000000 } from './1795790000000-CreateScheduledBackups.ts';
import { AddHomeRecovery1795810000000 } from './1795810000000-AddHomeRecovery.ts';
import { CreateSwarmNodes1795820000000 } from './1795820000000-CreateSwarmNodes.ts';
import { AddRefusalRepeats1795840000000 } from './1795840000000-AddRefusalRepeats.ts';
import { AddServerPidNamespace1795800000000 } from './1795800000000-AddServerPidNamespace.ts';
import { CreateHomeDiskUsage1795860000000 } from './1795860000000-CreateHomeDiskUsage.ts';
import { CreateWorkspaceImports1795880000000 } from './1795880000000-CreateWorkspaceImports.ts';
import { AddServerStopping1795900000000 } from './1795900000000-AddServerStopping.ts';
import { WidenRunStoppedBy1795965600000 } from './1795965600000-WidenRunStoppedBy.ts';
import { CreateHelpRequests1795978960000 } from './1795978960000-CreateHelpRequests.ts';
import { CreateWorkspacePresence1795990000000 } from './1795990000000-CreateWorkspacePresence.ts';
import { AddRunProblems1795991000000 } from './1795991000000-AddRunProblems.ts';
import { CreateWorkspaceUptime1795992000000 } from './1795992000000-CreateWorkspaceUptime.ts';
import { CreateWorkspaceLooks1795993000000 } from './1795993000000-CreateWorkspaceLooks.ts';
import { CreateLessons1795994000000 } from './1795994000000-CreateLessons.ts';
import { CreateJoinCodes1795995000000 } from './1795995000000-CreateJoinCodes.ts';
import { AddServerDrainSaid1795996000000 } from './1795996000000-AddServerDrainSaid.ts';

/** Every migration, oldest first. Registered explicitly; a landed migration is never edited. */
export const MIGRATIONS = [
  CreateUsersAndWorkspaces1795276466000,
  CreateRuns1795276467000,
  CreateSettings1795276468000,
  CreateAuditLog1795276469000,
  CreateSessions1795276470000,
  TuneAuditActorFilter1795277300000,
  AddObservedEndpoints1795278354000,
  AddHomeVolume1795425410000,
  CreateSignInLinks1795440000000,
  CreateRunOutput1795570522000,
  AddRunStoppedBy1795600000000,
  AddRetiredVolumes1795700000000,
  CreateServers1795710000000,
  AddStoppedBy1795720000000,
  CreateWorkspaceStats1795730000000,
  CreateLeaderLease1795740000000,
  CreateHandoffCodes1795750000000,
  CreateRateLimits1795760000000,
  CreateCapacityRefusals1795770000000,
  CreateLeaderCounters1795780000000,
  CreateScheduledBackups1795790000000,
  AddServerPidNamespace1795800000000,
  AddHomeRecovery1795810000000,
  CreateSwarmNodes1795820000000,
  AddRefusalRepeats1795840000000,
  CreateHomeDiskUsage1795860000000,
  CreateWorkspaceImports1795880000000,
  AddServerStopping1795900000000,
  WidenRunStoppedBy1795965600000,
  CreateHelpRequests1795978960000,
  CreateWorkspacePresence1795990000000,
  AddRunProblems1795991000000,
  CreateWorkspaceUptime1795992000000,
  CreateWorkspaceLooks1795993000000,
  CreateLessons1795994000000,
  CreateJoinCodes1795995000000,
  AddServerDrainSaid1795996000000,
];
