// Bundles the classroom extension for VS Code's web worker extension host: src/extension.ts and
// what it imports (ntcore-ts-client, with this folder's nt4-socket.ts in place of isomorphic-ws)
// into dist/extension.js (CommonJS, `vscode` left to the host), then writes the extension's folder
// (package.json, dist/, README.md) to the directory given, ready to be copied into code-server's
// built-in extensions. esbuild-wasm: no native binary to install. Run with the packages of this
// folder's package.json resolvable (its node_modules, or the project's).
//
//   node build.mjs <out-dir>
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild-wasm';

const here = import.meta.dirname;
const out = path.resolve(process.argv[2] ?? path.join(here, 'out'));
rmSync(out, { recursive: true, force: true });
mkdirSync(path.join(out, 'dist'), { recursive: true });
await build({
  entryPoints: [path.join(here, 'src/extension.ts')],
  bundle: true,
  format: 'cjs',
  platform: 'browser',
  target: 'es2022',
  outfile: path.join(out, 'dist/extension.js'),
  external: ['vscode'],
  alias: { 'isomorphic-ws': path.join(here, 'src/nt4-socket.ts') },
  // The library logs every reconnect attempt to the console: kept (it is the developer tools' console), but smaller.
  minify: true,
  legalComments: 'eof',
  logLevel: 'warning',
});
for (const file of ['package.json', 'README.md']) cpSync(path.join(here, file), path.join(out, file));
console.log(`classroom extension: ${out}`);
