/**
 * The workspace network and image, one job of the workspace controller
 * (controllers/workspace-environment.ts): made sure of before the first container, looked for at
 * start, each said once; over the real store and the in-memory runtime, as
 * test/unit/workspace-reconcile.test.ts does the code container.
 */
import { TerminalError } from '../../controllers/workqueue.ts';
import { ImageMissingError, names } from '../../src/docker/runtime.ts';
import { useTestDatabase } from '../helpers/db.ts';
import { controller, records, runtime, status, TEMPLATE, useWorkspaceFixture, workspace } from '../helpers/workspace-fixture.ts';

useWorkspaceFixture(useTestDatabase());

describe('the workspace network and image', () => {
  it('makes a missing network isolated before the first container, once, and says so', async () => {
    const subject = controller({ template: { ...TEMPLATE, network: 'classroom-workspaces' } });
    const first = await workspace('running');
    const second = await workspace('running');
    await subject.reconcile(first.id);
    await subject.reconcile(second.id);
    expect(runtime.actions.filter((action) => action.includes('network'))).toEqual(['create network classroom-workspaces']);
    expect(runtime.actions.indexOf('create network classroom-workspaces')).toBeLessThan(runtime.actions.indexOf(`create ${names.code(first.slug)}`));
    expect(records.filter((record) => record.network === 'classroom-workspaces')).toEqual([
      expect.objectContaining({ level: 'info', message: 'created the workspace network (containers on it cannot reach each other)' }),
    ]);
  });

  it('warns once when workspaces on the configured network can reach each other', async () => {
    const subject = controller();
    await subject.reconcile((await workspace('running')).id);
    await subject.reconcile((await workspace('running')).id);
    expect(records.filter((record) => record.level === 'warning')).toEqual([
      expect.objectContaining({ network: 'bridge', message: expect.stringContaining("workspaces on the network bridge can reach each other's editors") }),
    ]);
  });

  it('warns once, naming the commands to run, when the firewall rules that keep workspaces from link-local addresses could not be written', async () => {
    runtime.firewall = {
      applied: false,
      reason: 'Permission denied (you must be root)',
      commands: ['iptables -S CLASSROOM-LINK-LOCAL 2>/dev/null || iptables -N CLASSROOM-LINK-LOCAL'],
    };
    const subject = controller({ template: { ...TEMPLATE, network: 'classroom-workspaces' } });
    await subject.reconcile((await workspace('running')).id);
    await subject.reconcile((await workspace('running')).id);
    expect(records.filter((record) => record.level === 'warning')).toEqual([
      expect.objectContaining({
        network: 'classroom-workspaces',
        reason: 'Permission denied (you must be root)',
        message: expect.stringContaining('run these as root on the host: iptables -S CLASSROOM-LINK-LOCAL 2>/dev/null || iptables -N CLASSROOM-LINK-LOCAL'),
      }),
    ]);
  });

  it('says in the page and once in the log how to get a missing workspace image, a terminal failure that creates nothing again until the image is there', async () => {
    runtime.missingImages.add(TEMPLATE.image);
    const subject = controller();
    const first = await workspace('running');
    const failure = await subject.reconcile(first.id).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TerminalError);
    expect((failure as Error).cause).toBeInstanceOf(ImageMissingError);
    // Looked at again (a resync): the image is still missing, so nothing is tried.
    const tried = runtime.actions.length;
    await expect(subject.reconcile(first.id)).resolves.toBeUndefined();
    expect(runtime.actions.slice(tried)).toEqual([]);
    const message = `The workspace image ${TEMPLATE.image} is not on this server: the operator builds it (bash scripts/build-workspace-image.sh makes classroom-workspace:latest) or pulls it.`;
    expect(await status(first.id)).toMatchObject({ observedState: 'failed', statusMessage: message });
    expect(records.filter((record) => record.level === 'error')).toEqual([expect.objectContaining({ image: TEMPLATE.image, message })]);
    // The operator builds it: the next look starts the workspace.
    runtime.missingImages.delete(TEMPLATE.image);
    await subject.reconcile(first.id);
    expect(runtime.actions.slice(tried)).toEqual([`create ${names.code(first.slug)}`, `start ${names.code(first.slug)}`]);
    expect((await status(first.id)).observedState).toBe('running');
  });

  it('says at start, in one line, that the workspace image is missing', async () => {
    runtime.missingImages.add(TEMPLATE.image);
    const subject = controller();
    await subject.start();
    try {
      expect(records.filter((record) => record.level === 'error')).toEqual([
        expect.objectContaining({ image: TEMPLATE.image, message: expect.stringContaining('is not on this server') }),
      ]);
    } finally {
      await subject.stop();
    }
  });
});
