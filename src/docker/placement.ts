/**
 * Where a swarm puts a workspace, decided from facts alone (no engine is asked here: the swarm
 * runtime, src/docker/swarm-runtime.ts, gathers the facts and carries the decision out):
 *
 * - a new home goes to the ready, active, reachable node with the most memory left unreserved
 *   (ties: by name), so workspaces spread; none with room for one editor: NoRoomError;
 * - memory is reserved by every editor scaled up on its node, and by each placement's claim until
 *   its editor is seen reserving (or CLAIM_MS passes), so placements made one after the other see
 *   each other before their editors exist;
 * - a workspace then stays on its home's node (sticky): its editor starts there when it fits (its
 *   own claim aside), else waits with NoRoomError; a node that has left, is down, or whose engine
 *   does not answer is an error, never an empty home elsewhere;
 * - a restore's new volume goes beside the home when that node is usable and active, else where a
 *   new home would go (a home moved off a paused or lost node).
 */
import { NoRoomError } from './runtime.ts';

/** How long a placement's memory counts against its node before its editor is seen reserving it. */
export const CLAIM_MS = 120_000;

/** A swarm node as placement sees it. */
export interface PlacementNode {
  id: string;
  name: string;
  /** Status `ready` (else down, or unknown). */
  ready: boolean;
  /** Availability `active` (else paused or drained: nothing new is placed there). */
  active: boolean;
  /** Whether the control plane reaches its engine (SWARM_ENGINES names it and it has answered). */
  reachable: boolean;
  memoryBytes: number;
}

/** A managed service as placement counts it. */
export interface PlacedService {
  workspaceId: string | undefined;
  /** The node it is pinned to; undefined when it has no pin. */
  node: string | undefined;
  /** Whether it is scaled up (it runs, or is on its way). */
  scaledUp: boolean;
  /** The memory it reserves on its node. */
  reservedMemoryBytes: number;
}

/** Memory a placement promised on a node, before its editor reserves it. */
export interface Claim {
  node: string;
  /** When it was made (ms since epoch). */
  at: number;
}

/** The workspaces whose claims no longer count at `now`: their editor reserves now (a service of theirs is scaled up), or CLAIM_MS has passed. */
export function spentClaims(claims: ReadonlyMap<string, Claim>, services: readonly PlacedService[], now: number): string[] {
  const reserving = new Set(services.filter((service) => service.scaledUp).map((service) => service.workspaceId));
  return [...claims].filter(([workspaceId, claim]) => reserving.has(workspaceId) || now - claim.at > CLAIM_MS).map(([workspaceId]) => workspaceId);
}

/** Memory reserved on each node (node id → bytes): editors scaled up where they are pinned, and `claimBytes` for each claim. */
export function reservedByNode(editors: readonly PlacedService[], claims: Iterable<Claim>, claimBytes: number): Map<string, number> {
  const reserved = new Map<string, number>();
  const add = (node: string, bytes: number) => reserved.set(node, (reserved.get(node) ?? 0) + bytes);
  for (const editor of editors) if (editor.node && editor.scaledUp) add(editor.node, editor.reservedMemoryBytes);
  for (const claim of claims) add(claim.node, claimBytes);
  return reserved;
}

/** The node for a new home: ready, active, reachable, with `need` bytes unreserved, the most of them (ties: by name); NoRoomError when none. */
export function chooseHome<N extends PlacementNode>(nodes: readonly N[], reserved: ReadonlyMap<string, number>, need: number): N {
  const candidates = nodes
    .filter((node) => node.ready && node.active && node.reachable)
    .map((node) => ({ node, free: node.memoryBytes - (reserved.get(node.id) ?? 0) }))
    .filter((candidate) => candidate.free >= need)
    .toSorted((a, b) => b.free - a.free || a.node.name.localeCompare(b.node.name));
  const chosen = candidates[0]?.node;
  if (!chosen) throw new NoRoomError(noRoomMessage(nodes, need));
  return chosen;
}

/**
 * Whether an editor reserving `need` fits on its home's node now, the workspace's own claim there
 * (`ownClaim`) aside: nothing when it does, NoRoomError (saying the node and the figures) when not.
 */
export function checkRoom(node: PlacementNode, reserved: ReadonlyMap<string, number>, ownClaim: boolean, need: number, slug: string): void {
  const free = node.memoryBytes - ((reserved.get(node.id) ?? 0) - (ownClaim ? need : 0));
  if (free >= need) return;
  throw new NoRoomError(
    `Waiting for room on node ${node.name}, where the home of ${slug} is: it has ${formatBytes(Math.max(0, free))} of memory unreserved and an editor reserves ${formatBytes(need)} (CODE_MEMORY_LIMIT). It starts once another workspace there stops.`,
  );
}

/** The node of this id when it can be used (ready and reachable; paused or drained is no matter: what is there stays), else an error that says why (`what`: what is there). */
export function usableNode<N extends PlacementNode>(nodes: readonly N[], id: string, what: string): N {
  const node = nodes.find((candidate) => candidate.id === id);
  if (!node) throw new Error(`${what} is on a node that has left the swarm (${id})`);
  if (!node.ready) throw new Error(`${what} is on node ${node.name}, which is down`);
  if (!node.reachable) throw new Error(`${what} is on node ${node.name}, whose engine is not in SWARM_ENGINES or does not answer`);
  return node;
}

/** Where a restore's new volume goes when the workspace's home is on `home`: that node when it is ready, active and reachable; undefined: where a new home would go (chooseHome). */
export function besideHome<N extends PlacementNode>(nodes: readonly N[], home: string | undefined): N | undefined {
  if (!home) return undefined;
  return nodes.find((candidate) => candidate.id === home && candidate.ready && candidate.active && candidate.reachable);
}

function formatBytes(bytes: number): string {
  const mib = bytes / 1024 / 1024;
  return mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${Math.round(mib)} MiB`;
}

function noRoomMessage(nodes: readonly PlacementNode[], need: number): string {
  const usable = nodes.filter((node) => node.ready && node.active && node.reachable);
  if (usable.length === 0) return `Waiting for a node: none of the swarm's ${nodes.length} nodes is ready, active and reachable.`;
  return `Waiting for room: no node of the swarm has ${formatBytes(need)} of memory unreserved for another editor (CODE_MEMORY_LIMIT; ${usable.length} usable nodes). It starts once a workspace stops or a node is added.`;
}
