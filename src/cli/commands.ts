/**
 * Every command of `bin/cli`, by id (topics separated by `:` here and by a space on the command
 * line): oclif's explicit discovery, so nothing is searched for on disk and no build is needed.
 */
import AllowlistAdd from './commands/allowlist/add.ts';
import AllowlistList from './commands/allowlist/list.ts';
import AllowlistRemove from './commands/allowlist/remove.ts';
import AuditPrune from './commands/audit-prune.ts';
import AuditList from './commands/audit/list.ts';
import Backup from './commands/backup.ts';
import BackupsList from './commands/backups/list.ts';
import CapGet from './commands/cap/get.ts';
import CapSet from './commands/cap/set.ts';
import HelpList from './commands/help/list.ts';
import JoinCodesClose from './commands/join-codes/close.ts';
import JoinCodesList from './commands/join-codes/list.ts';
import JoinCodesOpen from './commands/join-codes/open.ts';
import LessonsCollect from './commands/lessons/collect.ts';
import LessonsCreate from './commands/lessons/create.ts';
import LessonsDownload from './commands/lessons/download.ts';
import LessonsHandout from './commands/lessons/handout.ts';
import LessonsList from './commands/lessons/list.ts';
import LessonsReset from './commands/lessons/reset.ts';
import LessonsShow from './commands/lessons/show.ts';
import LessonsUpdate from './commands/lessons/update.ts';
import Usage from './commands/usage.ts';
import NodesDrain from './commands/nodes/drain.ts';
import NodesList from './commands/nodes/list.ts';
import NodesUndrain from './commands/nodes/undrain.ts';
import Restore from './commands/restore.ts';
import SetupLink from './commands/setup-link.ts';
import Status from './commands/status.ts';
import UsersDelete from './commands/users/delete.ts';
import UsersDemote from './commands/users/demote.ts';
import UsersList from './commands/users/list.ts';
import UsersPromote from './commands/users/promote.ts';
import UsersSignInLink from './commands/users/sign-in-link.ts';
import WorkspacesRestart from './commands/workspaces/restart.ts';
import WorkspacesStop from './commands/workspaces/stop.ts';

export const COMMANDS = {
  'allowlist:list': AllowlistList,
  'allowlist:add': AllowlistAdd,
  'allowlist:remove': AllowlistRemove,
  'users:list': UsersList,
  'users:promote': UsersPromote,
  'users:demote': UsersDemote,
  'users:delete': UsersDelete,
  'users:sign-in-link': UsersSignInLink,
  'setup-link': SetupLink,
  status: Status,
  'workspaces:stop': WorkspacesStop,
  'workspaces:restart': WorkspacesRestart,
  'cap:get': CapGet,
  'cap:set': CapSet,
  'audit:list': AuditList,
  'audit-prune': AuditPrune,
  backup: Backup,
  restore: Restore,
  'backups:list': BackupsList,
  'nodes:list': NodesList,
  'nodes:drain': NodesDrain,
  'nodes:undrain': NodesUndrain,
  'help:list': HelpList,
  'join-codes:list': JoinCodesList,
  'join-codes:open': JoinCodesOpen,
  'join-codes:close': JoinCodesClose,
  'lessons:list': LessonsList,
  'lessons:create': LessonsCreate,
  'lessons:update': LessonsUpdate,
  'lessons:show': LessonsShow,
  'lessons:handout': LessonsHandout,
  'lessons:reset': LessonsReset,
  'lessons:collect': LessonsCollect,
  'lessons:download': LessonsDownload,
  usage: Usage,
};
