/**
 * Every operation of the HTTP API, in the order the OpenAPI document lists them: each resource's
 * operations are declared in its own file under api/resources/. Routes, validation and the
 * document are made from this list (api/operation.ts, api/openapi.ts).
 */
import type { AnyOperation } from './operation.ts';
import * as allowlist from './resources/allowlist.ts';
import * as audit from './resources/audit.ts';
import * as backups from './resources/backups.ts';
import * as classView from './resources/class.ts';
import * as config from './resources/config.ts';
import * as events from './resources/events.ts';
import * as help from './resources/help.ts';
import * as joinCodes from './resources/join-codes.ts';
import * as links from './resources/links.ts';
import * as lessons from './resources/lessons.ts';
import * as looks from './resources/looks.ts';
import * as nodes from './resources/nodes.ts';
import * as runs from './resources/runs.ts';
import * as service from './resources/service.ts';
import * as student from './resources/student.ts';
import * as usage from './resources/usage.ts';
import * as users from './resources/users.ts';
import * as workspaces from './resources/workspaces.ts';

export const OPERATIONS: AnyOperation[] = [
  // Service
  service.health,
  service.readiness,
  service.metrics,
  service.openApi,
  service.me,
  // Admin: the spec's endpoints
  workspaces.status,
  config.cap,
  config.setCap,
  audit.list,
  workspaces.stopContainers,
  workspaces.restartCode,
  // Admin: the panel's
  workspaces.overview,
  workspaces.list,
  workspaces.bulkStop,
  workspaces.refusals,
  events.stream,
  users.list,
  users.promote,
  users.demote,
  users.remove,
  links.create,
  allowlist.list,
  allowlist.add,
  allowlist.remove,
  backups.list,
  backups.download,
  backups.create,
  backups.restore,
  runs.list,
  runs.one,
  runs.output,
  runs.outputFile,
  runs.stop,
  nodes.list,
  help.queue,
  help.take,
  help.resolve,
  classView.view,
  usage.report,
  usage.csvFile,
  looks.begin,
  looks.keep,
  looks.end,
  looks.files,
  looks.file,
  looks.field,
  looks.accept,
  looks.decline,
  lessons.list,
  lessons.create,
  lessons.addVersion,
  lessons.createFromGit,
  lessons.addVersionFromGit,
  lessons.one,
  lessons.handout,
  lessons.reset,
  lessons.collect,
  lessons.collection,
  lessons.archive,
  joinCodes.setting,
  joinCodes.list,
  joinCodes.open,
  joinCodes.close,
  // Student
  student.getWorkspace,
  student.openWorkspace,
  student.keepWorkspace,
  student.stopWorkspace,
  student.startRun,
  student.listRuns,
  student.getRun,
  student.runOutput,
  student.runOutputFile,
  student.stopRun,
  student.restartRun,
  student.resetWorkspace,
  student.startImport,
  student.latestImport,
  student.simStatus,
  help.raise,
  help.mine,
  help.withdraw,
];
