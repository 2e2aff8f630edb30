/**
 * Swarm placement (src/docker/placement.ts), branch by branch, from facts alone: where a new home
 * goes, what reserves memory, which claims still count, when an editor fits on its home's node,
 * which nodes can be used, and where a restore's volume goes. The same decisions on a real swarm:
 * test/integration/swarm.test.ts.
 */
import { besideHome, checkRoom, chooseHome, CLAIM_MS, reservedByNode, spentClaims, usableNode, type PlacementNode } from '../../src/docker/placement.ts';
import { NoRoomError } from '../../src/docker/runtime.ts';

const GIB = 1024 ** 3;
const EDITOR = 2 * GIB;

/** A ready, active, reachable node with 8 GiB, changed by `facts`. */
function node(name: string, facts: Partial<PlacementNode> = {}): PlacementNode {
  return { id: `id-${name}`, name, ready: true, active: true, reachable: true, memoryBytes: 8 * GIB, ...facts };
}

const reserved = (entries: Record<string, number> = {}) => new Map(Object.entries(entries).map(([name, bytes]) => [`id-${name}`, bytes]));

describe('a new home (chooseHome)', () => {
  it('goes to the node with the most memory unreserved, so workspaces spread', () => {
    const nodes = [node('a'), node('b'), node('c')];
    expect(chooseHome(nodes, reserved({ a: 4 * GIB, b: 2 * GIB, c: 6 * GIB }), EDITOR).name).toBe('b');
  });

  it('breaks a tie by the node name', () => {
    expect(chooseHome([node('b'), node('a')], reserved(), EDITOR).name).toBe('a');
  });

  it.each([
    ['down', { ready: false }],
    ['paused or drained', { active: false }],
    ['unreachable', { reachable: false }],
  ])('never goes to a node that is %s, however much room it has', (_what, facts) => {
    const nodes = [node('big', { ...facts, memoryBytes: 64 * GIB }), node('small')];
    expect(chooseHome(nodes, reserved(), EDITOR).name).toBe('small');
  });

  it('waits with NoRoomError when no usable node has room for one more editor, saying so', () => {
    const nodes = [node('a'), node('b', { active: false })];
    const choose = () => chooseHome(nodes, reserved({ a: 7 * GIB }), EDITOR);
    expect(choose).toThrow(NoRoomError);
    expect(choose).toThrow('no node of the swarm has 2.0 GiB of memory unreserved for another editor (CODE_MEMORY_LIMIT; 1 usable nodes)');
  });

  it('takes a node whose room is exactly one editor', () => {
    expect(chooseHome([node('a')], reserved({ a: 6 * GIB }), EDITOR).name).toBe('a');
  });

  it('waits for a node when none is ready, active and reachable', () => {
    expect(() => chooseHome([node('a', { ready: false }), node('b', { reachable: false })], reserved(), EDITOR)).toThrow(
      "Waiting for a node: none of the swarm's 2 nodes is ready, active and reachable.",
    );
  });
});

describe('what reserves memory (reservedByNode)', () => {
  it('counts editors scaled up on the node they are pinned to, and each claim, not stopped or unpinned editors', () => {
    const editors = [
      { workspaceId: 'w1', node: 'id-a', scaledUp: true, reservedMemoryBytes: EDITOR },
      { workspaceId: 'w2', node: 'id-a', scaledUp: false, reservedMemoryBytes: EDITOR },
      { workspaceId: 'w3', node: undefined, scaledUp: true, reservedMemoryBytes: EDITOR },
      { workspaceId: 'w4', node: 'id-b', scaledUp: true, reservedMemoryBytes: GIB },
    ];
    const claims = [
      { node: 'id-b', at: 0 },
      { node: 'id-c', at: 0 },
    ];
    expect(reservedByNode(editors, claims, EDITOR)).toEqual(
      new Map([
        ['id-a', EDITOR],
        ['id-b', GIB + EDITOR],
        ['id-c', EDITOR],
      ]),
    );
  });
});

describe('which claims stop counting (spentClaims)', () => {
  const now = 1_000_000;
  const claims = new Map([
    ['seen', { node: 'id-a', at: now - 1000 }],
    ['waiting', { node: 'id-a', at: now - 1000 }],
    ['expired', { node: 'id-a', at: now - CLAIM_MS - 1 }],
  ]);

  it('drops a claim once a service of its workspace is scaled up (its editor reserves now) or once CLAIM_MS has passed; keeps the others', () => {
    const services = [
      { workspaceId: 'seen', node: 'id-a', scaledUp: true, reservedMemoryBytes: EDITOR },
      { workspaceId: 'waiting', node: 'id-a', scaledUp: false, reservedMemoryBytes: EDITOR },
    ];
    expect(spentClaims(claims, services, now).toSorted()).toEqual(['expired', 'seen']);
  });

  it('keeps a claim exactly CLAIM_MS old', () => {
    expect(spentClaims(new Map([['w', { node: 'id-a', at: now - CLAIM_MS }]]), [], now)).toEqual([]);
  });
});

describe('an editor on its home node (checkRoom)', () => {
  it('fits when the node has an editor’s memory unreserved', () => {
    expect(() => checkRoom(node('a'), reserved({ a: 6 * GIB }), false, EDITOR, 'ada')).not.toThrow();
  });

  it('waits with NoRoomError naming the node and the figures when it does not', () => {
    const check = () => checkRoom(node('a'), reserved({ a: 7 * GIB }), false, EDITOR, 'ada');
    expect(check).toThrow(NoRoomError);
    expect(check).toThrow(
      'Waiting for room on node a, where the home of ada is: it has 1.0 GiB of memory unreserved and an editor reserves 2.0 GiB (CODE_MEMORY_LIMIT).',
    );
  });

  it('sets its own claim there aside: the placement that made its home does not keep it out', () => {
    expect(() => checkRoom(node('a'), reserved({ a: 8 * GIB }), true, EDITOR, 'ada')).not.toThrow();
    expect(() => checkRoom(node('a'), reserved({ a: 8 * GIB }), false, EDITOR, 'ada')).toThrow(NoRoomError);
  });

  it('says no memory rather than a negative figure on an overcommitted node', () => {
    expect(() => checkRoom(node('a'), reserved({ a: 10 * GIB }), false, EDITOR, 'ada')).toThrow('it has 0 MiB of memory unreserved');
  });
});

describe('the node a home is on (usableNode)', () => {
  it('is used while it is ready and reachable, paused or drained included (what is there stays)', () => {
    const paused = node('a', { active: false });
    expect(usableNode([paused], 'id-a', 'the home of ada')).toBe(paused);
  });

  it.each([
    ['has left the swarm', [], 'the home of ada is on a node that has left the swarm (id-a)'],
    ['is down', [node('a', { ready: false })], 'the home of ada is on node a, which is down'],
    ['does not answer', [node('a', { reachable: false })], 'the home of ada is on node a, whose engine is not in SWARM_ENGINES or does not answer'],
  ])('is an error, never another node, when it %s', (_what, nodes, message) => {
    expect(() => usableNode(nodes, 'id-a', 'the home of ada')).toThrow(message);
  });
});

describe("a restore's new volume (besideHome)", () => {
  it("goes beside the workspace's home when that node is ready, active and reachable", () => {
    expect(besideHome([node('a'), node('b')], 'id-b')?.name).toBe('b');
  });

  it.each([
    ['no home', [node('a')], undefined],
    ['a home on a paused node', [node('a', { active: false })], 'id-a'],
    ['a home on a down node', [node('a', { ready: false })], 'id-a'],
    ['a home on an unreachable node', [node('a', { reachable: false })], 'id-a'],
    ['a home on a node that left', [node('a')], 'id-gone'],
  ])('goes where a new home would (undefined) with %s', (_what, nodes, home) => {
    expect(besideHome(nodes, home)).toBeUndefined();
  });
});
