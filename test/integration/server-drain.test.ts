/**
 * The servers table's answers to a rolling upgrade (ServerStore.draining and drainSaid) on the real
 * PostgreSQL: while a replica stops, the older ones that a newer one outlives drain; the stopping
 * one waits until each of them that a balancer checks has told it so (GET /readyz asked since).
 */
import type { Store } from '../../src/store/index.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { testStore } from '../helpers/store.ts';

const db = useTestDatabase();
let store: Store;

/** Three replicas registered in this order (started_at), as a rolling upgrade has them: a and b old, c new. */
const server = (n: number, name: string) => ({
  id: `00000000-0000-4000-8000-00000000000${n}`,
  publicUrl: `http://${name}.test`,
  hostname: name,
  pid: n,
  pidNamespace: 'pid:[1]',
});
const [a, b, c] = [server(1, 'a'), server(2, 'b'), server(3, 'c')];

beforeEach(async () => {
  store = testStore(db.dataSource);
  await db.dataSource.query('DELETE FROM servers');
  for (const each of [a, b, c]) await store.servers.heartbeat(each);
});

it('drains the old replicas while one stops and a newer one runs; the newest never', async () => {
  expect([await store.servers.draining(a.id), await store.servers.draining(b.id), await store.servers.draining(c.id)]).toEqual([false, false, false]);
  await store.servers.markStopping(a.id);
  expect([await store.servers.draining(b.id), await store.servers.draining(c.id)]).toEqual([true, false]);
});

it('drains the stopping replica itself, alone or not', async () => {
  await store.servers.markStopping(c.id);
  // c takes nothing new while it finishes; b, the newest of the others, takes the new connections.
  expect([await store.servers.draining(a.id), await store.servers.draining(b.id), await store.servers.draining(c.id)]).toEqual([true, false, true]);
  await db.dataSource.query('DELETE FROM servers WHERE id <> $1', [c.id]);
  expect(await store.servers.draining(c.id)).toBe(true);
});

it('says a stop is noticed at once when no balancer checks the replicas it drains', async () => {
  await store.servers.markStopping(a.id);
  expect(await store.servers.drainSaid(a.id)).toBe(true);
});

it('waits for a checked replica to answer "draining" after the stop began', async () => {
  // A balancer checks b (and c): ready before the stop.
  expect(await store.servers.draining(b.id)).toBe(false);
  expect(await store.servers.draining(c.id)).toBe(false);
  await store.servers.markStopping(a.id);
  expect(await store.servers.drainSaid(a.id)).toBe(false);
  // The newest answering its check changes nothing: it does not drain.
  expect(await store.servers.draining(c.id)).toBe(false);
  expect(await store.servers.drainSaid(a.id)).toBe(false);
  expect(await store.servers.draining(b.id)).toBe(true);
  expect(await store.servers.drainSaid(a.id)).toBe(true);
});

it('does not count a "draining" said for an earlier stop', async () => {
  // b, checked by a balancer, said it drained a minute ago (another replica's stop).
  await db.dataSource.query(`UPDATE servers SET checked_at = now(), drain_said_at = now() - interval '1 minute' WHERE id = $1`, [b.id]);
  await store.servers.markStopping(a.id);
  expect(await store.servers.drainSaid(a.id)).toBe(false);
  expect(await store.servers.draining(b.id)).toBe(true);
  expect(await store.servers.drainSaid(a.id)).toBe(true);
});

it('waits for the stopping replica\'s own check to answer "draining"', async () => {
  // A balancer checks b, the newest once c stops: b does not drain, nothing is waited for.
  expect(await store.servers.draining(b.id)).toBe(false);
  await store.servers.markStopping(c.id);
  expect(await store.servers.draining(b.id)).toBe(false);
  expect(await store.servers.drainSaid(c.id)).toBe(true);
  // Once it checks c too, c's own answer is waited for.
  await db.dataSource.query(`UPDATE servers SET checked_at = now() WHERE id = $1`, [c.id]);
  expect(await store.servers.drainSaid(c.id)).toBe(false);
  expect(await store.servers.draining(c.id)).toBe(true);
  expect(await store.servers.drainSaid(c.id)).toBe(true);
});
