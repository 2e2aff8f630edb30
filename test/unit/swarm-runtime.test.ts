import { bridgeName, fromRegistry, WORKSPACE_BRIDGE_PREFIX } from '../../src/docker/swarm-runtime.ts';
import { loadConfig } from '../../src/config.ts';

describe('the swarm runtime, what needs no swarm', () => {
  it('pulls only images named with a registry (host:port, a domain, localhost), never a bare local one', () => {
    expect(fromRegistry('10.0.0.1:5000/classroom-workspace@sha256:' + 'a'.repeat(64))).toBe(true);
    expect(fromRegistry('registry.school.org/classroom-workspace:2026-11')).toBe(true);
    expect(fromRegistry('localhost/classroom-workspace:latest')).toBe(true);
    expect(fromRegistry('classroom-workspace:latest')).toBe(false);
    expect(fromRegistry('library/classroom-workspace:latest')).toBe(false);
  });

  it('names the workspace bridge on every node within the 15 characters of an interface name, with the prefix the node firewall matches', () => {
    for (const network of ['classroom-workspaces', 'a', 'x'.repeat(200)]) {
      expect(bridgeName(network)).toMatch(new RegExp(`^${WORKSPACE_BRIDGE_PREFIX}[0-9a-f]{10}$`));
      expect(bridgeName(network).length).toBeLessThanOrEqual(15);
    }
    expect(bridgeName('one')).not.toBe(bridgeName('two'));
  });

  it('takes a workspace image pinned by digest in a registry', () => {
    const image = `10.0.0.1:5000/classroom-workspace@sha256:${'0'.repeat(64)}`;
    expect(loadConfig({ WORKSPACE_IMAGE: image }).workspaceImage).toBe(image);
  });
});
