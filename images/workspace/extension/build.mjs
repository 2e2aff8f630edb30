// Bundles the classroom extension for VS Code's web worker extension host: src/extension.ts and
// what it imports (ntcore-ts-client, with this folder's nt4-socket.ts in place of isomorphic-ws)
// into dist/extension.js (CommonJS, `vscode` left to the host), with the Driver Station page's own
// script (src/webview/in-editor.ts and driver-station.ts, bundled first, with uPlot for its graphs) in it as
// DRIVER_STATION_SCRIPT and uPlot's style sheet as UPLOT_STYLE, to be put inline in the page (no
// file for the webview to load: its Content-Security-Policy lets in only what carries its nonce),
// then writes the extension's folder (package.json, dist/, README.md) to the directory given, ready
// to be copied into code-server's built-in extensions. esbuild-wasm: no native binary to install. Run with the packages of this
// folder's package.json resolvable (its node_modules, or the project's).
//
//   node build.mjs <out-dir>
import { cpSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { build } from 'esbuild-wasm';

const here = import.meta.dirname;
const out = path.resolve(process.argv[2] ?? path.join(here, 'out'));
rmSync(out, { recursive: true, force: true });
mkdirSync(path.join(out, 'dist'), { recursive: true });
const page = await build({
  entryPoints: [path.join(here, 'src/webview/in-editor.ts')],
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'es2022',
  write: false,
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
});
const script = page.outputFiles[0].text;
// Inline in the page: it must not end its own <script> element.
if (/<\/script/i.test(script)) throw new Error('the Driver Station page script contains "</script": it cannot be put inline');
const uplotStyle = readFileSync(createRequire(import.meta.url).resolve('uplot/dist/uPlot.min.css'), 'utf8');
if (/<\/style/i.test(uplotStyle)) throw new Error('uPlot\'s style sheet contains "</style": it cannot be put inline');
await build({
  entryPoints: [path.join(here, 'src/extension.ts')],
  define: { DRIVER_STATION_SCRIPT: JSON.stringify(script), UPLOT_STYLE: JSON.stringify(uplotStyle) },
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
