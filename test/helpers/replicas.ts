/**
 * Real server processes on one database (issue 23): the scenario that both the plain and the
 * pooled tests go through (one leads, a workspace runs; the leader paused (SIGSTOP) past its lease,
 * the other takes over under term 2 and converges a second workspace; woken (SIGCONT), the old
 * leader steps down by its own clock), and the HAProxy balancer in front of replicas as
 * compose.replicas.yaml runs it (the host's network, the shipped deploy/haproxy.cfg).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import type { DataSource } from 'typeorm';
import { names } from '../../src/docker/runtime.ts';
import { LeaseStore, RECONCILER_LEASE } from '../../src/store/leases.ts';
import type { Store } from '../../src/store/index.ts';
import type { WorkspaceRecord } from '../../src/store/workspaces.ts';
import { TEST_SESSION_SECRET } from './app.ts';
import { ok, ROOT } from './compose.ts';
import { createHarness, docker, eventually, inspectByName, TEST_ENV } from './controllers.ts';
import { freePort, startServer, type LogRecord, type ServerProcess } from './server.ts';

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

/** The local base image of the balancer: Debian's haproxy 2.6. */
const HAPROXY_IMAGE = 'classroom-base/haproxy:2.6';

/** A place of deploy/haproxy.cfg where a replica may run (its servers a, b and c). */
export type Place = 'a' | 'b' | 'c';

/** HAProxy in front of replicas on this host's loopback, with the shipped deploy/haproxy.cfg. */
export interface Balancer {
  /** Where students reach the replicas through it: `http://127.0.0.1:<its port>`. */
  url: string;
  /** The loopback port of each of its places, a first: where a replica there listens. */
  ports: number[];
  /** Runs its container (once). */
  start(): Promise<void>;
  /** Waits until it answers GET /healthz (through a replica up behind it). */
  answering(): Promise<void>;
  /** Its log so far, as `docker logs` shows it (a request a line, and each server's state changes). */
  log(): Promise<string>;
  /** How many times it has said that its server `place` is up or down (its log, as `docker logs` shows it). */
  said(place: Place, state: 'UP' | 'DOWN'): Promise<number>;
  /** Waits until it has taken server `place` (said it is up) more than `before` times. */
  took(place: Place, before: number): Promise<void>;
  /** Removes its container, if it was started. */
  remove(): Promise<void>;
}

/**
 * Builds (does not start) the balancer of control plane `controlPlaneId` (its container is named
 * `<id>-lb`): a free loopback port for it and for each of its first `places` places (two: a and b;
 * three: the upgrade's third place c too; a place not given keeps the configuration's default
 * port). `apiTimeout` is its LB_API_TIMEOUT (the configuration's default when not given).
 */
export async function createBalancer(controlPlaneId: string, options: { places: 2 | 3; apiTimeout?: string }): Promise<Balancer> {
  const port = await freePort();
  const ports: number[] = [];
  for (let index = 0; index < options.places; index++) ports.push(await freePort());
  const url = `http://127.0.0.1:${port}`;
  let container: Docker.Container | undefined;
  const log = async () => (container ? await ok('docker', ['logs', container.id], { timeoutMs: 10_000 }).catch(() => '') : '');
  const said = async (place: Place, state: 'UP' | 'DOWN') => {
    const logs = await log();
    return logs.split('\n').filter((line) => line.includes(`Server replicas/${place} is ${state}`)).length;
  };
  return {
    url,
    ports,
    async start() {
      if (container) throw new Error(`the balancer of ${controlPlaneId} is started already`);
      container = await docker.createContainer({
        Image: HAPROXY_IMAGE,
        name: `${controlPlaneId}-lb`,
        Env: [
          'LB_HOST=127.0.0.1',
          `LB_PORT=${port}`,
          ...ports.map((placePort, index) => `CONTROL_${'ABC'[index]}_PORT=${placePort}`),
          ...(options.apiTimeout ? [`LB_API_TIMEOUT=${options.apiTimeout}`] : []),
        ],
        HostConfig: { NetworkMode: 'host', Binds: [`${path.join(ROOT, 'deploy/haproxy.cfg')}:/usr/local/etc/haproxy/haproxy.cfg:ro`] },
      });
      await container.start();
    },
    log,
    answering: async () => {
      await eventually('the balancer to answer', async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200, 30_000);
    },
    said,
    took: async (place, before) => {
      await eventually(`the balancer to take ${place}`, async () => (await said(place, 'UP')) > before, 30_000);
    },
    remove: async () => {
      if (container) await container.remove({ force: true });
    },
  };
}

/**
 * The settings of replicas of control plane `controlPlaneId` on the database at `databaseUrl`
 * behind `balancer`, each on the port it is given: the test settings with `env` on top, one session
 * secret and one data directory for all (its allowlist admits school.test), info logs; students
 * reach them at the balancer's URL, whose forwarding headers they trust.
 */
export function replicaEnv(
  balancer: Pick<Balancer, 'url'>,
  shared: { databaseUrl: string; controlPlaneId: string; env?: Record<string, string> },
): (port: number) => Record<string, string> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cp-replicas-'));
  writeFileSync(path.join(dataDir, 'allowlist.json'), JSON.stringify({ entries: ['school.test'] }));
  return (port) => ({
    ...TEST_ENV,
    ...shared.env,
    DATABASE_URL: shared.databaseUrl,
    PORT: String(port),
    PUBLIC_URL: balancer.url,
    TRUST_PROXY: 'true',
    CONTROL_PLANE_ID: shared.controlPlaneId,
    SESSION_SECRET: TEST_SESSION_SECRET,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
  });
}
