import { jest } from '@jest/globals';
import Docker from 'dockerode';
import type { DataSource } from 'typeorm';
import { StatsSampler } from '../../controllers/stats-sampler.ts';
import { categoryLogger } from '../../src/log.ts';
import { SYSTEM_ACTOR } from '../../src/store/audit.ts';
import { captureLogger, createHarness, eventually, removeEverything, type Harness } from '../helpers/controllers.ts';
import { openTestDatabase } from '../helpers/db.ts';

let db: { url: string; dataSource: DataSource };
let harness: Harness;

beforeAll(async () => {
  db = await openTestDatabase();
  harness = createHarness(db.dataSource);
  await harness.controller.start();
});
afterAll(async () => {
  await harness.stop();
  await removeEverything(harness.controlPlaneId);
  await db.dataSource.destroy();
});

/** The value of a gauge series for one workspace, or undefined when the series does not exist. */
async function series(name: 'containerCpuPercent' | 'containerMemoryPercent', workspaceId: string): Promise<number | undefined> {
  const metric = await harness.metrics[name].get();
  return metric.values.find((value) => value.labels.workspace_id === workspaceId)?.value;
}

describe('the stats sampler', () => {
  it('sets CPU and memory percent per running workspace from one-shot stats, and removes the series when it stops', async () => {
    const { workspace } = await harness.store.users.create({ email: `stats-${Date.now().toString(36)}@school.test` });
    await harness.store.workspaces.open(workspace.id);
    await eventually('running', async () => (await harness.store.workspaces.get(workspace.id))?.status.observedState === 'running');
    const sampler = new StatsSampler({
      runtime: harness.runtime,
      store: harness.store,
      metrics: harness.metrics,
      log: categoryLogger(captureLogger().root, 'containers'),
    });

    // One-shot stats (milliseconds per container, where plain stream=false waits 1-2 s for a second
    // sample): seen on the real Docker call, which the spy only watches and passes through.
    const calls = jest.spyOn(Docker.Container.prototype, 'stats');
    try {
      await sampler.sample();
      expect(calls).toHaveBeenCalledWith({ stream: false, 'one-shot': true });
    } finally {
      calls.mockRestore();
    }
    const memory = await series('containerMemoryPercent', workspace.id);
    expect(memory).toBeGreaterThan(0);
    expect(memory).toBeLessThan(100);
    // CPU needs two consecutive samples of our own.
    expect(await series('containerCpuPercent', workspace.id)).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await sampler.sample();
    const cpu = await series('containerCpuPercent', workspace.id);
    expect(cpu).toBeGreaterThanOrEqual(0);
    expect(cpu).toBeLessThanOrEqual(200);
    expect((await harness.metrics.activeWorkspaces.get()).values[0]?.value).toBe(1);

    await harness.store.workspaces.stop(SYSTEM_ACTOR, workspace.id, 'coach');
    await eventually('stopped', async () => (await harness.store.workspaces.get(workspace.id))?.status.observedState === 'stopped');
    await sampler.sample();
    expect(await series('containerMemoryPercent', workspace.id)).toBeUndefined();
    expect(await series('containerCpuPercent', workspace.id)).toBeUndefined();
    expect((await harness.metrics.activeWorkspaces.get()).values[0]?.value).toBe(0);
  });
});
