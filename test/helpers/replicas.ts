/**
 * Two real server processes on one database (issue 23), and the scenario that both the plain and
 * the pooled tests go through: one leads, a workspace runs; the leader paused (SIGSTOP) past its
 * lease, the other takes over under term 2 and converges a second workspace; woken (SIGCONT), the
 * old leader steps down by its own clock.
 */
import type Docker from 'dockerode';
import type { DataSource } from 'typeorm';
import { names } from '../../src/docker/runtime.ts';
import { LeaseStore, RECONCILER_LEASE } from '../../src/store/leases.ts';
import type { Store } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { createHarness, eventually, inspectByName } from './controllers.ts';
import { startServer, type LogRecord, type ServerProcess } from './server.ts';

/** The log record of a replica taking the lease under `term`. */
export const leading = (term: number) => (record: LogRecord) => record.message === `leading: took the reconciler lease (term ${term})`;

export interface PausedLeaderScenario {
  /** The first leader (paused, then woken: it follows now) and the one that took over. */
  a: ServerProcess;
  b: ServerProcess;
  store: Store;
  leases: LeaseStore;
  /** The workspace opened under term 1, as it ran then, and the one opened under term 2. */
  first: WorkspaceRecord;
  running: Docker.ContainerInspectInfo;
  second: WorkspaceRecord;
}

/** Runs the scenario of the file comment with servers of `env()`, each pushed onto `servers` (the caller stops them). */
export async function pausedLeaderHandsOver(
  db: DataSource,
  controlPlaneId: string,
  env: () => Record<string, string>,
  servers: ServerProcess[],
): Promise<PausedLeaderScenario> {
  const a = await startServer(env());
  servers.push(a);
  await a.waitForLog(leading(1));
  const b = await startServer(env());
  servers.push(b);
  await b.waitForLog((record) => record.message.startsWith('another replica leads: following'));
  const { store } = createHarness(db, { controlPlaneId });
  const leases = new LeaseStore(db);

  const first = (await store.users.create({ email: `first-${controlPlaneId}@school.test` })).workspace;
  await store.workspaces.open(first.id);
  const running = await eventually('the first workspace running', async () => {
    const info = await inspectByName(names.code(first.slug));
    return info?.State.Running ? info : undefined;
  });

  // The leader paused past its lease: the follower takes over under term 2.
  a.proc.kill('SIGSTOP');
  await b.waitForLog(leading(2), 20_000);
  expect(await leases.get(RECONCILER_LEASE)).toEqual(expect.objectContaining({ term: 2 }));
  // The new leader converges what is asked meanwhile.
  const second = (await store.users.create({ email: `second-${controlPlaneId}@school.test` })).workspace;
  await store.workspaces.open(second.id);
  await eventually('the second workspace running', async () => (await inspectByName(names.code(second.slug)))?.State.Running === true, 30_000);

  // Woken, the old leader steps down by its own clock.
  a.proc.kill('SIGCONT');
  await a.waitForLog((record) => record.message === 'stopped leading (term 1): no renewal within the renew deadline');
  return { a, b, store, leases, first, running, second };
}
