/**
 * One vocabulary (issue 42): each enumeration of states, of who stopped and of roles is written once
 * (src/wire/vocabulary.ts), and every place the contract shows one (the answers' schemas and the
 * query strings that ajv checks, as the OpenAPI document gives them) has exactly its words. The store's
 * records and the panel's labels take the same words as types, which tsc holds.
 */
import { openApiDocument } from '../../api/openapi.ts';
import {
  ACTIVE_RUN_STATUSES,
  DESIRED_STATES,
  HELP_STATES,
  OBSERVED_STATES,
  ROLES,
  RUN_DESIRED_STATES,
  RUN_STATUSES,
  RUN_STOPPED_BY,
  STOPPED_BY,
} from '../../src/wire/vocabulary.ts';

interface Node {
  enum?: string[];
  anyOf?: Node[];
  properties?: Record<string, Node>;
  items?: Node;
}
interface Document {
  paths: Record<string, Record<string, { parameters?: { name: string; in: string; schema: Node }[] }>>;
  components: { schemas: Record<string, Node> };
}

const document = () => openApiDocument() as unknown as Document;

/** A schema without its `null` alternative (a nullable field is `anyOf: [schema, null]`). */
const nonNull = (node: Node): Node => node.anyOf?.find((alternative) => alternative.enum ?? alternative.properties) ?? node;

/** The object a field holds: itself, or its items when it is a list. */
const object = (node: Node): Node => {
  const value = nonNull(node);
  return value.items ? nonNull(value.items) : value;
};

/** The words a component's field allows: `Run`, `status`; `WorkspaceRow`, `activeRun`, `status`. */
function fieldWords(schema: string, ...path: string[]): string[] | undefined {
  let node = document().components.schemas[schema]!;
  for (const key of path) node = object(node).properties![key]!;
  return nonNull(node).enum;
}

/** The words a query parameter of a GET allows. */
const queryWords = (path: string, name: string) =>
  document().paths[path]!.get!.parameters!.find((parameter) => parameter.name === name && parameter.in === 'query')!.schema.enum;

it.each([
  ['GET /admin/workspaces?observed=', () => queryWords('/admin/workspaces', 'observed'), OBSERVED_STATES],
  ['GET /admin/workspaces?desired=', () => queryWords('/admin/workspaces', 'desired'), DESIRED_STATES],
  ['GET /admin/runs?status=', () => queryWords('/admin/runs', 'status'), RUN_STATUSES],
  ['StudentWorkspace.desiredState', () => fieldWords('StudentWorkspace', 'desiredState'), DESIRED_STATES],
  ['StudentWorkspace.observedState', () => fieldWords('StudentWorkspace', 'observedState'), OBSERVED_STATES],
  ['StudentWorkspace.stopped.by', () => fieldWords('StudentWorkspace', 'stopped', 'by'), STOPPED_BY],
  ['WorkspaceChange.desiredState', () => fieldWords('WorkspaceChange', 'desiredState'), DESIRED_STATES],
  ['WorkspaceChange.observedState', () => fieldWords('WorkspaceChange', 'observedState'), OBSERVED_STATES],
  ['WorkspaceRow.desiredState', () => fieldWords('WorkspaceRow', 'desiredState'), DESIRED_STATES],
  ['WorkspaceRow.observedState', () => fieldWords('WorkspaceRow', 'observedState'), OBSERVED_STATES],
  ['WorkspaceRow.activeRun.status', () => fieldWords('WorkspaceRow', 'activeRun', 'status'), ACTIVE_RUN_STATUSES],
  ['Status.workspaces[].desiredState', () => fieldWords('Status', 'workspaces', 'desiredState'), DESIRED_STATES],
  ['Status.workspaces[].observedState', () => fieldWords('Status', 'workspaces', 'observedState'), OBSERVED_STATES],
  ['Run.status', () => fieldWords('Run', 'status'), RUN_STATUSES],
  ['Run.desiredState', () => fieldWords('Run', 'desiredState'), RUN_DESIRED_STATES],
  ['Run.stoppedBy', () => fieldWords('Run', 'stoppedBy'), RUN_STOPPED_BY],
  ['ClassRun.status', () => fieldWords('ClassRun', 'status'), RUN_STATUSES],
  ['ClassRun.desiredState', () => fieldWords('ClassRun', 'desiredState'), RUN_DESIRED_STATES],
  ['ClassRun.stoppedBy', () => fieldWords('ClassRun', 'stoppedBy'), RUN_STOPPED_BY],
  ['User.role', () => fieldWords('User', 'role'), ROLES],
  ['StudentHelp.state', () => fieldWords('StudentHelp', 'state'), HELP_STATES],
  ['HelpRequest.state', () => fieldWords('HelpRequest', 'state'), HELP_STATES],
])("%s has the vocabulary's words, no more and no fewer", (_where, words, vocabulary) => {
  expect(words()).toEqual([...vocabulary]);
});
