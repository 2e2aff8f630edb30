/**
 * The layer rules (docs/architecture.md) hold by lint (.oxlintrc.json), not by review: a planted crossing of
 * each fails oxlint with the project's own configuration, and the same imports where they belong
 * pass. The files are planted in a scratch tree that mirrors the project's folders.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config.ts';

let scratch: string;

beforeAll(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'layers-'));
  copyFileSync(path.join(PROJECT_ROOT, '.oxlintrc.json'), path.join(scratch, '.oxlintrc.json'));
  // What the planted imports name (empty modules: the rule is about the import, not what it gets).
  for (const file of [
    'api/app.ts',
    'controllers/idle-sweep.ts',
    'src/docker/docker-runtime.ts',
    'src/docker/runtime.ts',
    'src/docker/runtimes.ts',
    'src/docker/informer.ts',
    'src/docker/swarm-runtime.ts',
    'src/store/index.ts',
    'bin/control-plane.ts',
  ]) {
    mkdirSync(path.dirname(path.join(scratch, file)), { recursive: true });
    writeFileSync(path.join(scratch, file), 'export const x = 1;\n');
  }
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** oxlint's findings (rule names) on one planted file at `file` holding `source`. */
function lint(file: string, source: string): Promise<string[]> {
  mkdirSync(path.dirname(path.join(scratch, file)), { recursive: true });
  writeFileSync(path.join(scratch, file), source);
  return new Promise((resolve) => {
    execFile(path.join(PROJECT_ROOT, 'node_modules/.bin/oxlint'), ['--format', 'json', file], { cwd: scratch }, (_error, stdout) => {
      const { diagnostics } = JSON.parse(stdout) as { diagnostics: { code: string }[] };
      rmSync(path.join(scratch, file));
      resolve(diagnostics.map((diagnostic) => diagnostic.code).filter((code) => /restricted-imports|process-env/.test(code)));
    });
  });
}

const RESTRICTED = 'eslint(no-restricted-imports)';

it.each([
  ['api/ importing the Docker Engine client', 'api/planted.ts', "import Docker from 'dockerode';\nexport const planted = Docker;\n"],
  ['api/ importing the Docker runtime', 'api/planted.ts', "import { x } from '../src/docker/docker-runtime.ts';\nexport const planted = x;\n"],
  ['api/ importing a controller', 'api/planted.ts', "import { x } from '../controllers/idle-sweep.ts';\nexport const planted = x;\n"],
  ['a controller importing api/', 'controllers/planted.ts', "import { x } from '../api/app.ts';\nexport const planted = x;\n"],
  ['src/ importing api/', 'src/planted.ts', "import { x } from '../api/app.ts';\nexport const planted = x;\n"],
  ['src/ importing a controller', 'src/planted.ts', "import { x } from '../controllers/idle-sweep.ts';\nexport const planted = x;\n"],
  ['src/ importing the composition root', 'src/planted.ts', "import { x } from '../bin/control-plane.ts';\nexport const planted = x;\n"],
  ['the CLI importing the Docker runtime', 'src/cli/planted.ts', "import { x } from '../docker/docker-runtime.ts';\nexport const planted = x;\n"],
  ['api/ importing the informer, not the port', 'api/planted.ts', "import { x } from '../src/docker/informer.ts';\nexport const planted = x;\n"],
  ['a controller importing the swarm runtime', 'controllers/planted.ts', "import { x } from '../src/docker/swarm-runtime.ts';\nexport const planted = x;\n"],
  ['the CLI importing what makes runtimes', 'src/cli/planted.ts', "const planted = () => import('../docker/runtimes.ts');\nexport default planted;\n"],
  [
    'the composition root importing the informer, not the entry',
    'bin/planted.ts',
    "import { x } from '../src/docker/informer.ts';\nexport const planted = x;\n",
  ],
  ['the composition root importing the Docker runtime', 'bin/planted.ts', "import { x } from '../src/docker/docker-runtime.ts';\nexport const planted = x;\n"],
])('fails lint: %s', async (_what, file, source) => {
  expect(await lint(file, source)).toEqual([RESTRICTED]);
});

it.each([
  ['api/', 'api/planted.ts'],
  ['a controller', 'controllers/planted.ts'],
  ['the store', 'src/store/planted.ts'],
])('fails lint: %s reading the environment', async (_what, file) => {
  expect(await lint(file, 'export const planted = process.env.HOME;\n')).toEqual(['node(no-process-env)']);
});

it.each([
  [
    'the composition root wiring everything',
    'bin/planted.ts',
    "import { x } from '../api/app.ts';\nimport { x as y } from '../controllers/idle-sweep.ts';\nimport { x as z } from '../src/docker/runtimes.ts';\nimport { x as w } from '../src/docker/runtime.ts';\nexport const planted = [x, y, z, w];\n",
  ],
  ['api/ importing the runtime port', 'api/planted.ts', "import { x } from '../src/docker/runtime.ts';\nexport const planted = x;\n"],
  ['a controller importing the runtime port', 'controllers/planted.ts', "import { x } from '../src/docker/runtime.ts';\nexport const planted = x;\n"],
  ['src/ importing the runtime port', 'src/cli/planted.ts', "import { x } from '../docker/runtime.ts';\nexport const planted = x;\n"],
  [
    'src/docker using its own modules',
    'src/docker/planted.ts',
    "import { x } from './informer.ts';\nimport { x as y } from './swarm-runtime.ts';\nexport const planted = [x, y];\n",
  ],
  ['src/docker using the engine client', 'src/docker/planted.ts', "import Docker from 'dockerode';\nexport const planted = Docker;\n"],
  ['api/ using the store', 'api/planted.ts', "import { x } from '../src/store/index.ts';\nexport const planted = x;\n"],
  ['the configuration reading the environment', 'src/config.ts', 'export const planted = process.env.HOME;\n'],
])('passes lint: %s', async (_what, file, source) => {
  expect(await lint(file, source)).toEqual([]);
});
