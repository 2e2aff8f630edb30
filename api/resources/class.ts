/**
 * The class view: every student at a glance, for the coach teaching them (the panel's Class page,
 * which reads it again at each `workspaces`, `runs`, `status`, `help` or `users` change it hears).
 * The store computes the class in one query (src/store/class-view.ts); what only the proxy sees
 * (online, the robot, NetworkTables) comes from the presence every replica records.
 */
import { presentClassView } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

export const view = operation({
  method: 'get',
  path: '/admin/class',
  summary:
    'Every student (role `user`), by name: online now, their workspace, last activity, the run in progress, how their last run ended (compile errors counted), their robot, NetworkTables, and their open help request.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.ClassView, 'The class.') },
  handle: async (_input, { store }) => {
    const readAt = new Date();
    const [students, seen] = await Promise.all([store.classView.students(), store.presence.ofLiveServers()]);
    return { status: 200, body: presentClassView(students, seen, readAt) };
  },
});
