/**
 * scripts/build-wpilib-image.sh, the FRC image built from WPILib's Linux installer archive, against
 * real Docker: no real archive can be had on these machines, so the archive is the test fixture's
 * (test/fixtures/wpilib-archive/make-archive.sh: WPILib's layout, stand-in contents: its "Gradle"
 * runs the image's classroom-gradle, its JDK links to the image's). Built offline FROM the workspace
 * image, the result passes the image contract's check end to end, lists the Java and WPILib
 * extensions in code-server, has the Gradle init script, the Gradle and language-server JVM bounds
 * where Gradle and code-server read them, and runs a project's wrapper from the installer's Gradle
 * distribution where a WPILib project's wrapper looks for it. A file that is not WPILib's archive
 * fails with one line saying why, and builds nothing. The images it builds carry a tag of this
 * run and are removed afterwards; containers are removed with --rm.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { engineClient } from '../../src/docker/docker-runtime.ts';

const projectRoot = path.resolve(import.meta.dirname, '../..');
const BUILD = path.join(projectRoot, 'scripts/build-wpilib-image.sh');
const MAKE_ARCHIVE = path.join(projectRoot, 'test/fixtures/wpilib-archive/make-archive.sh');
const TAG = `classroom-wpilib:test-${process.pid}`;
const NO_TEMPLATE_TAG = `classroom-wpilib:no-template-${process.pid}`;
/** The tag the builds of refused files are given: never made unless a refusal breaks. */
const REFUSED_TAG = `classroom-wpilib:refused-${process.pid}`;
const VERSION = '2025.0.0-fixture';
const BUILTIN_EXTENSIONS = '/usr/local/lib/code-server/lib/vscode/extensions';
const run = promisify(execFile);
const docker = engineClient();
let dir: string;
let archive: string;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end with the environment of a plain shell plus `env`: its exit code and output. */
function runToEnd(command: string, args: string[], env: Record<string, string> = {}): Promise<Result> {
  const child = spawn(command, args, { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The fixture archive in `out` (make-archive.sh with `args`): its path. */
async function makeArchive(out: string, ...args: string[]): Promise<string> {
  const made = await runToEnd('bash', [MAKE_ARCHIVE, out, VERSION, ...args]);
  if (made.code !== 0) throw new Error(`make-archive.sh failed (${made.code}): ${made.stderr}`);
  return made.stdout.trim();
}

/** build-wpilib-image.sh on `file`, tagging TAG (or `tag`). */
const build = (file: string, tag = TAG) => runToEnd('bash', [BUILD, file], { WPILIB_IMAGE_TAG: tag });

/** Runs `script` with sh in a throwaway container of the built image (uid 1000, no network). */
async function inImage(script: string): Promise<Result> {
  return runToEnd('docker', ['run', '--rm', '--network', 'none', '--init', TAG, 'sh', '-c', script]);
}

const tagExists = (tag: string) =>
  docker
    .getImage(tag)
    .inspect()
    .then(
      () => true,
      () => false,
    );

beforeAll(async () => {
  // The base image, as provisioning builds it (a no-op when it is up to date).
  await run('bash', [path.join(projectRoot, 'scripts/build-workspace-image.sh')], { maxBuffer: 16 * 1024 * 1024 });
  dir = await mkdtemp(path.join(tmpdir(), 'wpilib-image-'));
  archive = await makeArchive(dir);
  const built = await build(archive);
  if (built.code !== 0) throw new Error(`build-wpilib-image.sh failed (${built.code}):\n${built.stdout}${built.stderr}`);
}, 30 * 60_000);

afterAll(async () => {
  for (const tag of [TAG, NO_TEMPLATE_TAG, REFUSED_TAG])
    await docker
      .getImage(tag)
      .remove()
      .catch(() => undefined);
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('builds the image offline from the archive, and does nothing when built again', async () => {
  const { Config } = await docker.getImage(TAG).inspect();
  expect(Config.Labels?.['service.workspace-image-hash']).toMatch(/^[0-9a-f]{16}$/);
  expect(Config.Labels?.['org.opencontainers.image.version']).toBe(VERSION);
  expect(Config.User).toBe('1000:1000');
  expect(Config.Env).toEqual(
    expect.arrayContaining([
      'WPILIB_HOME=/opt/wpilib/2025',
      'JAVA_HOME=/opt/wpilib/2025/jdk',
      'GRADLE_USER_HOME=/opt/wpilib/gradle-user-home',
      'GRADLE_OPTS=-Xmx64m -XX:+UseSerialGC',
    ]),
  );
  const again = await build(archive);
  expect(again).toEqual({ code: 0, stdout: '', stderr: '' });
});

test('passes the workspace image contract check end to end (a run on the fixture Gradle, NT4, HALSim driving)', async () => {
  const check = await runToEnd('bash', [path.join(projectRoot, 'scripts/check-workspace-image.sh'), '--build-timeout', '3m', TAG]);
  // The steps that did not pass, each with its lines (why, the run's last output); on a failure the whole report too.
  const notPassed = check.stdout.split(/\n(?=\S)/).filter((step) => /^(FAILED|skip) /.test(step));
  const report = check.code === 0 ? undefined : check.stdout;
  expect({ code: check.code, stderr: check.stderr, notPassed, report }).toEqual({ code: 0, stderr: '', notPassed: [], report: undefined });
  expect(check.stdout).toContain(`\nPASSED: ${TAG} meets the workspace image contract (14 steps)\n`);
}, 360_000);

test("lists the Java extensions and WPILib's in code-server, not the C++ one", async () => {
  const listed = await inImage(`HOME=/tmp code-server --extensions-dir ${BUILTIN_EXTENSIONS} --list-extensions --show-versions 2>/dev/null`);
  expect(listed.code).toBe(0);
  const names = listed.stdout.split('\n');
  expect(names).toEqual(expect.arrayContaining(['redhat.java@1.40.0', 'vscjava.vscode-java-debug@0.58.0', `wpilibsuite.vscode-wpilib@${VERSION}`]));
  expect(names.filter((name) => name.startsWith('ms-vscode.cpptools'))).toEqual([]);
});

test('has the Gradle init script, the JVM bounds and ~/wpilib where Gradle and code-server read them', async () => {
  const shown = await inImage(
    'cat "$GRADLE_USER_HOME/init.d/classroom-sim.gradle"; echo ---; cat "$GRADLE_USER_HOME/gradle.properties"; echo ---; cat /etc/skel/.local/share/code-server/Machine/settings.json; echo ---; readlink /etc/skel/wpilib; ls -A /home/student',
  );
  expect(shown.code).toBe(0);
  const [initScript, properties = '', machine = '', rest = ''] = shown.stdout.split('---\n');
  expect(initScript).toBe(await readFile(path.join(projectRoot, 'images/wpilib/classroom-sim.init.gradle'), 'utf8'));
  expect(properties).toMatch(/^org\.gradle\.jvmargs=.*-Xmx384m/m);
  expect(properties).toMatch(/^org\.gradle\.daemon=false$/m);
  expect((JSON.parse(machine) as Record<string, string>)['java.jdt.ls.vmargs']).toContain('-Xmx512m');
  expect(rest).toBe('/opt/wpilib\n');
});

test("runs a project's wrapper on the installer's Gradle distribution, where the wrapper of a WPILib project and of any other looks", async () => {
  const built = await inImage(
    'cd /tmp && cp -R /usr/local/share/classroom/starter p && cd p && grep -c "^This workspace has real WPILib" README.md && ./gradlew build && ' +
      'sed -i "s|^distributionPath=.*|distributionPath=wrapper/dists|" gradle/wrapper/gradle-wrapper.properties && ./gradlew build',
  );
  expect({ code: built.code, stderr: built.stderr }).toEqual({ code: 0, stderr: '' });
  const lines = built.stdout.split('\n');
  // The starter's README says what ./gradlew is here.
  expect(lines[0]).toBe('1');
  expect(
    lines.filter((line) => line === 'stand-in Gradle (test fixture): GRADLE_USER_HOME /opt/wpilib/gradle-user-home, init.d: classroom-sim.gradle'),
  ).toHaveLength(2);
  expect(lines.filter((line) => line === 'BUILD SUCCESSFUL')).toHaveLength(2);
}, 120_000);

test("makes the starter from the offline one, its gradlew on the installed Gradle, when WPILib's extension has no template", async () => {
  const file = await makeArchive(await mkdtemp(path.join(dir, 'no-template-')), '--no-template');
  const built = await build(file, NO_TEMPLATE_TAG);
  expect({ code: built.code, stderr: built.stderr }).toEqual({ code: 0, stderr: '' });
  expect(built.stdout).toContain('starter from the offline starter');
  const ran = await runToEnd('docker', [
    'run',
    '--rm',
    '--network',
    'none',
    NO_TEMPLATE_TAG,
    'sh',
    '-c',
    'cd /tmp && cp -R /usr/local/share/classroom/starter p && cd p && cat gradlew && ./gradlew build',
  ]);
  expect({ code: ran.code, stderr: ran.stderr }).toEqual({ code: 0, stderr: '' });
  expect(ran.stdout).toContain('exec "$GRADLE_USER_HOME/permwrapper/dists/gradle-8.11-bin/');
  expect(ran.stdout).toContain('\nstand-in Gradle (test fixture): GRADLE_USER_HOME /opt/wpilib/gradle-user-home, init.d: classroom-sim.gradle\n');
  expect(ran.stdout).toMatch(/\nBUILD SUCCESSFUL\n$/);
}, 180_000);

describe("a file that is not WPILib's archive", () => {
  /** What a build of `file` says and leaves: its exit code, stderr, and whether its tag exists. */
  const refusal = async (file: string) => {
    const result = await build(file, REFUSED_TAG);
    return { code: result.code, stderr: result.stderr, tagged: await tagExists(REFUSED_TAG) };
  };
  const refused = (line: string) => ({ code: 1, stderr: `build-wpilib-image: ${line}\n`, tagged: false });

  test('is refused by its name', async () => {
    const file = path.join(dir, 'robot-code.tar.gz');
    await writeFile(file, '');
    expect(await refusal(file)).toEqual(
      refused(
        "robot-code.tar.gz is not WPILib's Linux installer archive: expected a file named WPILib_Linux-<version>.tar.gz (from https://github.com/wpilibsuite/allwpilib/releases)",
      ),
    );
  });

  test('is refused when it is not gzip-compressed', async () => {
    const file = path.join(dir, 'WPILib_Linux-2025.3.2.tar.gz');
    await writeFile(file, 'not an archive\n');
    expect(await refusal(file)).toEqual(refused("WPILib_Linux-2025.3.2.tar.gz is not WPILib's Linux installer archive: it is not gzip-compressed"));
  });

  test("is refused when it has no installer's artifacts", async () => {
    const other = await mkdtemp(path.join(dir, 'other-'));
    const file = path.join(other, 'WPILib_Linux-2025.3.2.tar.gz');
    await run('tar', ['-czf', file, '-C', projectRoot, 'images/wpilib']);
    expect(await refusal(file)).toEqual(
      refused(
        "WPILib_Linux-2025.3.2.tar.gz is not WPILib's Linux installer archive: it has no WPILib_Linux-2025.3.2/WPILib_Linux-2025.3.2-artifacts.tar.gz (the installer's artifacts)",
      ),
    );
  });

  test('is refused when its artifacts lack the Maven repository', async () => {
    const file = await makeArchive(await mkdtemp(path.join(dir, 'no-maven-')), '--omit', 'maven');
    expect(await refusal(file)).toEqual(refused(`WPILib_Linux-${VERSION}.tar.gz is not a complete WPILib installer archive: its artifacts have no maven`));
  }, 120_000);
});
