import Docker from 'dockerode';

describe('the Docker Engine', () => {
  it('answers through dockerode on the local socket with an API that has one-shot stats (1.41+)', async () => {
    const docker = new Docker();
    expect(String(await docker.ping())).toBe('OK');
    const version = await docker.version();
    const [major, minor] = version.ApiVersion.split('.').map(Number);
    expect(major! * 1000 + minor!).toBeGreaterThanOrEqual(1041);
  });
});
