/** The nodes workspaces run on (a swarm; on one engine, none): their state, availability, room and workspaces. */
import { presentNode } from '../../src/wire/presenters.ts';
import * as Wire from '../../src/wire/schemas.ts';
import { json, operation } from '../operation.ts';

export const list = operation({
  method: 'get',
  path: '/admin/nodes',
  summary: 'The nodes workspaces run on (a swarm), as the leader last saw them; none on a single engine.',
  auth: 'admin',
  tag: 'admin',
  noStore: true,
  responses: { 200: json(Wire.NodeList, 'The nodes.') },
  handle: async (_input, { store }) => ({ status: 200, body: { nodes: (await store.nodes.list()).map(presentNode) } }),
});
