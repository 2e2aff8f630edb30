// @lane alone
import { execFileSync, spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import type { DataSource } from 'typeorm';
import { names } from '../../src/docker/runtime.ts';
import { createHarness, docker, eventually, inspectByName, removeEverything, type Harness } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';

let db: { url: string; dataSource: DataSource };
let harness: Harness;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await harness?.stop();
  await removeEverything(harness.controlPlaneId);
  await db.dataSource.destroy();
});

/** Stops the Docker daemon (its containers stop with it) and starts it again as provisioning does. */
async function restartDockerDaemon(): Promise<void> {
  const pid = Number(execFileSync('pgrep', ['-o', '-x', 'dockerd']).toString().trim());
  process.kill(pid, 'SIGTERM');
  await eventually(
    'dockerd exited',
    async () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    },
    30_000,
  );
  const log = openSync('/var/log/dockerd.log', 'a');
  spawn('dockerd', [], { detached: true, stdio: ['ignore', log, log] }).unref();
  await eventually('dockerd answers', async () => String(await docker.ping()) === 'OK', 30_000);
}

describe('a Docker daemon restart', () => {
  it('is followed by a reconnect and a full resync that converges the workspaces again', async () => {
    harness = createHarness(db.dataSource);
    await harness.controller.start();
    const { workspace } = await harness.store.users.create({ email: `daemon-${harness.controlPlaneId}@school.test` });
    await harness.store.workspaces.open(workspace.id);
    const before = await eventually('running', async () => {
      const info = await inspectByName(names.code(workspace.slug));
      return info?.State.Running ? info : undefined;
    });
    await restartDockerDaemon();
    const after = await eventually(
      'running again',
      async () => {
        const info = await inspectByName(names.code(workspace.slug));
        return info?.State.Running && info.State.StartedAt !== before.State.StartedAt ? info : undefined;
      },
      30_000,
    );
    expect(after.Id).toBe(before.Id);
    expect(harness.records).toContainEqual(expect.objectContaining({ level: 'warning', message: 'Docker events stream lost, reconnecting' }));
  }, 90_000);
});
